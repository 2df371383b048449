#include "sim/import/byte_source.h"

#include <isa-l/igzip_lib.h>
#include <zlib.h>

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <deque>
#include <limits>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "sim/base/status.h"
#include "sim/base/str_cat.h"

namespace gpusim {

using str_internal::Cat;

namespace {

std::atomic<int64_t> input_file_opens{0};

// A reader's own offset in an InputFd (pread(2): sources never share one).
class FdCursor {
 public:
  explicit FdCursor(std::shared_ptr<const InputFd> file) : file_(std::move(file)) {}
  // Bytes read (0 at the end), or -1 with errno set.
  ssize_t Read(char* buf, size_t n) {
    while (true) {
      const ssize_t got = pread(file_->fd(), buf, n, pos_);
      if (got < 0 && errno == EINTR) continue;
      if (got > 0) pos_ += got;
      return got;
    }
  }
  // As fread(3): fills `buf` but at the end or an error (-1, errno set).
  ssize_t ReadFull(char* buf, size_t n) {
    size_t done = 0;
    while (done < n) {
      const ssize_t got = Read(buf + done, n - done);
      if (got < 0) return -1;
      if (got == 0) break;
      done += static_cast<size_t>(got);
    }
    return static_cast<ssize_t>(done);
  }
  // Whether no byte follows (a read error counts as more to read).
  bool AtEnd() const {
    char c;
    ssize_t got;
    do {
      got = pread(file_->fd(), &c, 1, pos_);
    } while (got < 0 && errno == EINTR);
    return got == 0;
  }
  const InputFd& file() const { return *file_; }

 private:
  std::shared_ptr<const InputFd> file_;
  off_t pos_ = 0;
};

// A plain (not gzip) file, as it is.
class PlainFileSource : public ByteSource {
 public:
  explicit PlainFileSource(std::shared_ptr<const InputFd> file) : cursor_(std::move(file)) {}
  absl::StatusOr<size_t> Read(char* buf, size_t n) override {
    const ssize_t got = cursor_.Read(buf, std::min<size_t>(n, std::numeric_limits<int>::max()));
    if (got < 0) {  // the file system failed, not the data (exit 3)
      return absl::UnavailableError(
          Cat(cursor_.file().path(), ": read error: ", std::strerror(errno), " after ", delivered_, " bytes"));
    }
    delivered_ += got;
    return static_cast<size_t>(got);
  }
  bool decompressed() const override { return false; }

 private:
  FdCursor cursor_;
  int64_t delivered_ = 0;
};

// gzip after ISA-L gave up (Note [Decompressing with ISA-L]) goes through
// zlib's gzFile, which also handles concatenated members., which reads
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
  // gzerror() texts start with the name zlib has for the file ("<fd:4>:
  // incorrect data check", gzdopen's); the error already names the path.
  static std::string StripPath(const char* msg) {
    std::string_view m(msg);
    const size_t colon = m.find(">: ");
    if (m.substr(0, 4) == "<fd:" && colon != std::string_view::npos) m.remove_prefix(colon + 3);
    return std::string(m);
  }

  std::string path_;
  gzFile f_;
  bool gzip_;
  int64_t delivered_ = 0;
};

// Note [Decompressing with ISA-L]
// zlib's inflate was a third of a streamed replay's CPU time (perf of
// `gpusim replay` on the 1 M-event trace of bench/replay_stream_benchmark.cc
// once the parse was one pass: 36%, crc32 7% of it). ISA-L's igzip inflates
// the same file in about a third of zlib's time (user CPU for the 262 MB of
// that trace: 0.09-0.12 s, zlib in-process ~0.34 s), so gzip input is
// decompressed with isal_inflate (crc_flag ISAL_GZIP: it reads the header
// and checks the trailer's CRC and length). zlib stays the reference for
// everything but a clean single-member file: at any error, truncation, a
// second member or bytes after the first, the source reopens the file with
// zlib, decompresses again the bytes already delivered (both decoders give
// the same bytes for a valid stream) and goes on with zlib from there, so
// the errors, their byte counts and the handling of concatenated members
// are zlib's, as before.
class IsalGzipSource : public ByteSource {
 public:
  explicit IsalGzipSource(std::shared_ptr<const InputFd> file)
      : path_(file->path()), cursor_(std::move(file)), in_(kInput) {
    state_ = std::make_unique<inflate_state>();
    isal_inflate_init(state_.get());
    state_->crc_flag = ISAL_GZIP;
  }

  absl::StatusOr<size_t> Read(char* buf, size_t n) override {
    if (zlib_ != nullptr) return zlib_->Read(buf, n);
    while (true) {
      if (state_->block_state == ISAL_BLOCK_FINISH) {
        // The member ended: the end of the file, or zlib's to read on.
        if (state_->avail_in > 0 || !AtEof()) return SwitchToZlib(buf, n);
        return size_t{0};
      }
      if (state_->avail_in == 0 && !eof_) {
        const ssize_t got = cursor_.ReadFull(in_.data(), in_.size());
        if (got < 0) return SwitchToZlib(buf, n);
        eof_ = static_cast<size_t>(got) < in_.size();
        state_->next_in = reinterpret_cast<uint8_t*>(in_.data());
        state_->avail_in = static_cast<uint32_t>(got);
      }
      const uint32_t want = static_cast<uint32_t>(std::min<size_t>(n, std::numeric_limits<uint32_t>::max()));
      state_->next_out = reinterpret_cast<uint8_t*>(buf);
      state_->avail_out = want;
      const uint32_t in_before = state_->avail_in;
      const int ret = isal_inflate(state_.get());
      if (ret != ISAL_DECOMP_OK && ret != ISAL_END_INPUT && ret != ISAL_OUT_OVERFLOW) return SwitchToZlib(buf, n);
      const size_t produced = want - state_->avail_out;
      if (produced > 0) {
        delivered_ += static_cast<int64_t>(produced);
        return produced;
      }
      if (state_->block_state == ISAL_BLOCK_FINISH) continue;
      // Truncated, or no progress at all: zlib's to say.
      if ((state_->avail_in == 0 && eof_) || (state_->avail_in == in_before && in_before > 0)) {
        return SwitchToZlib(buf, n);
      }
    }
  }
  bool decompressed() const override { return true; }

 private:
  static constexpr size_t kInput = 1 << 20;

  bool AtEof() {
    if (!eof_) {
      if (!cursor_.AtEnd()) return false;
      eof_ = true;
    }
    return true;
  }

  // Reads the file again with zlib past the bytes delivered so far, through
  // a duplicate of the one descriptor (no source but this reads its offset).
  absl::StatusOr<size_t> SwitchToZlib(char* buf, size_t n) {
    const int fd = dup(cursor_.file().fd());
    gzFile g = fd < 0 || lseek(fd, 0, SEEK_SET) != 0 ? nullptr : gzdopen(fd, "rb");
    if (g == nullptr) {
      const int err = errno;
      if (fd >= 0) close(fd);
      return absl::UnavailableError(Cat(path_, ": cannot reopen: ", std::strerror(err)));
    }
    gzbuffer(g, 1 << 18);
    zlib_ = std::make_unique<GzFileSource>(path_, g, /*gzip=*/true);
    std::vector<char> scratch(1 << 16);
    int64_t skipped = 0;
    while (skipped < delivered_) {
      const size_t want = static_cast<size_t>(std::min<int64_t>(delivered_ - skipped, static_cast<int64_t>(scratch.size())));
      absl::StatusOr<size_t> got = zlib_->Read(scratch.data(), want);
      if (!got.ok()) return got.status();
      if (*got == 0) {
        return absl::DataLossError(Cat(path_, ": gzip: unexpected end of file after ", skipped,
                                       " decompressed bytes (truncated or corrupt .gz file?)"));
      }
      skipped += static_cast<int64_t>(*got);
    }
    return zlib_->Read(buf, n);
  }

  std::string path_;
  FdCursor cursor_;
  std::vector<char> in_;
  std::unique_ptr<inflate_state> state_;
  bool eof_ = false;
  int64_t delivered_ = 0;
  std::unique_ptr<GzFileSource> zlib_;
};

// Note [Decompressing ahead]
// zlib's inflate (and its CRC) of a Kineto trace is about a quarter of the
// CPU time of replaying it as it is parsed (perf of `gpusim replay` on the
// synthetic 1 M-event trace of bench/replay_stream_benchmark.cc: 26%). A
// gzip source therefore decompresses on a thread of its own, up to
// kAheadChunks chunks of kAheadChunk bytes ahead of the reader, so that on a
// machine with a second core the two overlap. The bytes, and any error
// (after exactly the bytes before it), are what the inner source delivers,
// in its order; memory is bounded by the chunks.
class ReadAheadSource : public ByteSource {
 public:
  explicit ReadAheadSource(std::unique_ptr<ByteSource> inner)
      : inner_(std::move(inner)), decompressed_(inner_->decompressed()) {
    worker_ = std::thread([this] { Work(); });
  }
  ~ReadAheadSource() override {
    {
      std::lock_guard<std::mutex> l(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    worker_.join();
  }

  absl::StatusOr<size_t> Read(char* buf, size_t n) override {
    while (pos_ == current_.data.size()) {
      if (done_) return current_.status.ok() ? absl::StatusOr<size_t>(size_t{0}) : current_.status;
      NextChunk(std::move(current_.data));
      if (!current_.status.ok() && current_.data.size() == kBlockHeadroom) return current_.status;
    }
    const size_t k = std::min(n, current_.data.size() - pos_);
    std::memcpy(buf, current_.data.data() + pos_, k);
    pos_ += k;
    return k;
  }

  absl::StatusOr<bool> SwapBlock(std::string* block, size_t* begin) override {
    // Whatever Read() left of the current chunk comes first.
    if (pos_ < current_.data.size()) {
      std::swap(*block, current_.data);
      *begin = pos_;
      pos_ = current_.data.size();
      return true;
    }
    if (done_) {
      if (!current_.status.ok()) return current_.status;
      block->resize(kBlockHeadroom);
      *begin = kBlockHeadroom;
      return true;
    }
    NextChunk(std::move(*block));
    if (!current_.status.ok() && current_.data.size() == kBlockHeadroom) return current_.status;
    std::swap(*block, current_.data);  // current_.data: empty, its bytes handed out
    *begin = kBlockHeadroom;
    pos_ = current_.data.size();
    return true;
  }
  bool decompressed() const override { return decompressed_; }

 private:
  static constexpr size_t kAheadChunk = 1 << 20;
  static constexpr size_t kAheadChunks = 4;
  struct Chunk {
    std::string data;
    absl::Status status;  // the inner source's error after `data`
    bool last = false;    // the end of input, or an error
  };

  // Makes the next ready chunk current; `spent` (a buffer read out) goes
  // back to the worker.
  void NextChunk(std::string spent) {
    std::unique_lock<std::mutex> l(mu_);
    cv_.wait(l, [&] { return !ready_.empty(); });
    Chunk next = std::move(ready_.front());
    ready_.pop_front();
    if (spent.capacity() >= kBlockHeadroom + kAheadChunk) free_.push_back(std::move(spent));
    l.unlock();
    cv_.notify_all();
    // A chunk that ends the input (0 bytes read, or an error) comes last.
    current_ = std::move(next);
    pos_ = kBlockHeadroom;
    done_ = current_.last;
  }

  void Work() {
    while (true) {
      Chunk c;
      {
        std::lock_guard<std::mutex> l(mu_);
        if (!free_.empty()) {
          c.data = std::move(free_.back());
          free_.pop_back();
        }
      }
      // The bytes go after kBlockHeadroom (SwapBlock's readers move unread
      // bytes there).
      c.data.resize(kBlockHeadroom + kAheadChunk);
      size_t n = 0;
      while (n < kAheadChunk) {
        absl::StatusOr<size_t> got = inner_->Read(c.data.data() + kBlockHeadroom + n, kAheadChunk - n);
        if (!got.ok()) {
          c.status = got.status();
          c.last = true;
          break;
        }
        if (*got == 0) {
          c.last = true;
          break;
        }
        n += *got;
      }
      c.data.resize(kBlockHeadroom + n);
      const bool last = c.last;
      std::unique_lock<std::mutex> l(mu_);
      cv_.wait(l, [&] { return stop_ || ready_.size() < kAheadChunks; });
      if (stop_) return;
      ready_.push_back(std::move(c));
      l.unlock();
      cv_.notify_all();
      if (last) return;
    }
  }

  std::unique_ptr<ByteSource> inner_;
  const bool decompressed_;
  // Reader side.
  Chunk current_;
  size_t pos_ = 0;
  bool done_ = false;
  // Shared.
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Chunk> ready_;
  std::vector<std::string> free_;  // buffers read out, to fill again
  bool stop_ = false;
  std::thread worker_;
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

absl::StatusOr<std::shared_ptr<const InputFd>> InputFd::Open(const std::string& path) {
  // O_NONBLOCK: a FIFO put in its place after a sniff's stat(2) does not
  // block the open (Note [Sniffing inputs]); no effect on a regular file.
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return absl::NotFoundError(Cat(path, ": cannot open: ", std::strerror(errno)));
  input_file_opens.fetch_add(1);
  return std::shared_ptr<const InputFd>(new InputFd(path, fd));
}

InputFd::~InputFd() { close(fd_); }

int64_t InputFileOpens() { return input_file_opens.load(); }

namespace {

// A plain or gzip source over `file`; gzip decompressed ahead on a thread
// of its own when `ahead`.
std::unique_ptr<ByteSource> SourceOver(std::shared_ptr<const InputFd> file, bool ahead) {
  unsigned char magic[2] = {0, 0};
  FdCursor peek(file);
  const bool gzip = peek.ReadFull(reinterpret_cast<char*>(magic), 2) == 2 && magic[0] == 0x1f && magic[1] == 0x8b;
  if (!gzip) return std::make_unique<PlainFileSource>(std::move(file));
  // Note [Decompressing with ISA-L]; Note [Decompressing ahead].
  auto isal = std::make_unique<IsalGzipSource>(std::move(file));
  if (!ahead) return isal;
  return std::make_unique<ReadAheadSource>(std::move(isal));
}

}  // namespace

absl::StatusOr<std::unique_ptr<ByteSource>> OpenByteSource(std::shared_ptr<const InputFd> file) {
  file->CountSource();
  return SourceOver(std::move(file), /*ahead=*/true);
}

absl::StatusOr<std::string> ReadContentHead(std::shared_ptr<const InputFd> file, size_t n) {
  std::unique_ptr<ByteSource> source = SourceOver(std::move(file), /*ahead=*/false);
  std::string head(n, '\0');
  size_t got_total = 0;
  while (got_total < n) {
    ASSIGN_OR_RETURN(size_t got, source->Read(head.data() + got_total, n - got_total));
    if (got == 0) break;
    got_total += got;
  }
  head.resize(got_total);
  return head;
}

absl::StatusOr<std::unique_ptr<ByteSource>> OpenByteSource(const std::string& path) {
  ASSIGN_OR_RETURN(std::shared_ptr<const InputFd> file, InputFd::Open(path));
  return OpenByteSource(std::move(file));
}

std::unique_ptr<ByteSource> StringByteSource(std::string data) {
  return std::make_unique<StringSource>(std::move(data));
}

ByteSourceStreambuf::int_type ByteSourceStreambuf::underflow() {
  if (gptr() < egptr()) return traits_type::to_int_type(*gptr());
  if (!status_.ok()) return traits_type::eof();
  absl::StatusOr<size_t> got = source_.Read(buf_.data(), buf_.size());
  if (!got.ok()) status_ = got.status();
  if (!got.ok() || *got == 0) return traits_type::eof();
  setg(buf_.data(), buf_.data(), buf_.data() + *got);
  return traits_type::to_int_type(*gptr());
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
