#include "sim/import/byte_source.h"

#include <zlib.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>

#include "sim/base/str_cat.h"

namespace gpusim {

using str_internal::Cat;

namespace {

// Plain files and gzip alike go through zlib's gzFile, which reads
// non-gzip input transparently (gzdirect) and handles concatenated members.
class GzFileSource : public ByteSource {
 public:
  GzFileSource(std::string path, gzFile f, bool gzip)
      : path_(std::move(path)), f_(f), gzip_(gzip) {}
  ~GzFileSource() override { gzclose(f_); }

  absl::StatusOr<size_t> Read(char* buf, size_t n) override {
    const unsigned want =
        static_cast<unsigned>(std::min<size_t>(n, std::numeric_limits<int>::max()));
    const int got = gzread(f_, buf, want);
    if (got < 0) {
      int errnum = 0;
      const char* msg = gzerror(f_, &errnum);
      std::string what = errnum == Z_ERRNO ? std::strerror(errno) : StripPath(msg);
      if (errnum == Z_ERRNO) {  // the file system failed, not the data (exit 3)
        return absl::UnavailableError(Cat(path_, ": read error: ", what, " after ", delivered_, " bytes"));
      }
      return absl::DataLossError(Cat(path_, ": ", gzip_ ? "gzip: " : "read: ", what,
                                     " after ", delivered_,
                                     gzip_ ? " decompressed bytes" : " bytes",
                                     gzip_ ? " (truncated or corrupt .gz file?)" : ""));
    }
    delivered_ += got;
    if (got == 0 && gzip_) {
      // gzread reports a stream cut short inside a member as Z_BUF_ERROR.
      int errnum = 0;
      const char* msg = gzerror(f_, &errnum);
      if (errnum != Z_OK) {
        return absl::DataLossError(Cat(path_, ": gzip: ", StripPath(msg), " after ", delivered_,
                                       " decompressed bytes (truncated .gz file?)"));
      }
    }
    return static_cast<size_t>(got);
  }
  bool decompressed() const override { return gzip_; }

 private:
  // gzerror() texts start with the path ("PATH: incorrect data check"); the
  // error already names it.
  std::string StripPath(const char* msg) const {
    std::string_view m(msg);
    if (m.size() > path_.size() + 2 && m.substr(0, path_.size()) == path_ &&
        m.substr(path_.size(), 2) == ": ") {
      m.remove_prefix(path_.size() + 2);
    }
    return std::string(m);
  }

  std::string path_;
  gzFile f_;
  bool gzip_;
  int64_t delivered_ = 0;
};

class StringSource : public ByteSource {
 public:
  explicit StringSource(std::string data) : data_(std::move(data)) {}
  absl::StatusOr<size_t> Read(char* buf, size_t n) override {
    const size_t k = std::min(n, data_.size() - pos_);
    std::memcpy(buf, data_.data() + pos_, k);
    pos_ += k;
    return k;
  }
  bool decompressed() const override { return false; }

 private:
  std::string data_;
  size_t pos_ = 0;
};

}  // namespace

absl::StatusOr<std::unique_ptr<ByteSource>> OpenByteSource(const std::string& path) {
  bool gzip = false;
  {
    FILE* f = std::fopen(path.c_str(), "rb");
    if (f == nullptr) {
      return absl::NotFoundError(Cat(path, ": cannot open: ", std::strerror(errno)));
    }
    unsigned char magic[2] = {0, 0};
    const size_t n = std::fread(magic, 1, 2, f);
    std::fclose(f);
    gzip = n == 2 && magic[0] == 0x1f && magic[1] == 0x8b;
  }
  gzFile g = gzopen(path.c_str(), "rb");
  if (g == nullptr) {
    return absl::NotFoundError(Cat(path, ": cannot open: ", std::strerror(errno)));
  }
  gzbuffer(g, 1 << 18);
  return std::unique_ptr<ByteSource>(new GzFileSource(path, g, gzip));
}

std::unique_ptr<ByteSource> StringByteSource(std::string data) {
  return std::make_unique<StringSource>(std::move(data));
}

absl::StatusOr<std::string> ReadAll(ByteSource& source) {
  std::string out;
  size_t n = 0;
  do {
    out.resize(n + (1 << 16));
    auto got = source.Read(out.data() + n, 1 << 16);
    if (!got.ok()) return got.status();
    n += *got;
    out.resize(n);
    if (*got == 0) break;
  } while (true);
  return out;
}

}  // namespace gpusim
