// ByteSource: a forward-only stream of bytes for the importers, so that they
// read a file in bounded memory whether it is plain or gzip-compressed, and
// tests can feed them bytes from memory (the LevelDB Env idea, reduced to
// what importers need).
#ifndef GPUSIM_SIM_IMPORT_BYTE_SOURCE_H_
#define GPUSIM_SIM_IMPORT_BYTE_SOURCE_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <streambuf>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace gpusim {

class ByteSource {
 public:
  virtual ~ByteSource() = default;
  // Reads up to `n` bytes into `buf`; returns how many, 0 only at the end of
  // the input. An error (unreadable file, corrupt or truncated gzip) names
  // the source and how many bytes were delivered before it.
  // REQUIRES: n > 0.
  virtual absl::StatusOr<size_t> Read(char* buf, size_t n) = 0;
  // Zero-copy reading, for sources that hold their input in blocks (the
  // gzip read-ahead, Note [Decompressing ahead]): replaces *block with the
  // next block of input, whose bytes are (*block)[*begin, block->size()),
  // and may keep the storage of the *block it was given. *begin >=
  // kBlockHeadroom, so that a reader can move bytes it has not read yet in
  // front of them. No bytes (*begin == block->size()): the end of the input.
  // Returns false (and changes nothing) when the source has no blocks; a
  // reader then uses Read(). Errors as Read's.
  static constexpr size_t kBlockHeadroom = 1 << 16;
  virtual absl::StatusOr<bool> SwapBlock(std::string* /*block*/, size_t* /*begin*/) { return false; }
  // True when the bytes are decompressed from a gzip file: byte offsets in
  // error messages then count decompressed bytes.
  virtual bool decompressed() const = 0;
};

// A file opened once for reading (Note [One open per input],
// sim/import/input.h): every source made from it reads with pread(2) at
// offsets of its own, so a further pass over the file is a further source,
// never a further open, and every pass reads the file the first one read.
class InputFd {
 public:
  // open(2) of `path`, counted by InputFileOpens(). NotFound "PATH: cannot
  // open: REASON" when it fails.
  static absl::StatusOr<std::shared_ptr<const InputFd>> Open(const std::string& path);
  InputFd(const InputFd&) = delete;
  InputFd& operator=(const InputFd&) = delete;
  ~InputFd();
  const std::string& path() const { return path_; }
  int fd() const { return fd_; }
  // How many sources were made from it: the passes over its bytes.
  int64_t sources() const { return sources_.load(); }
  void CountSource() const { sources_.fetch_add(1); }

 private:
  InputFd(std::string path, int fd) : path_(std::move(path)), fd_(fd) {}
  std::string path_;
  int fd_;
  mutable std::atomic<int64_t> sources_{0};
};

// How many times this process opened an input file (InputFd::Open; the
// tests pin a command's opens with it, tests/input_opens_test.cc).
int64_t InputFileOpens();

// A source over `file` from its first byte. gzip input (detected by its
// magic bytes, not the name) is decompressed on the fly; anything else is
// read as is.
absl::StatusOr<std::unique_ptr<ByteSource>> OpenByteSource(std::shared_ptr<const InputFd> file);
// The first (up to) `n` bytes of `file`'s content, decompressed when it is
// gzip, with the errors a source gives for them; not counted as a source
// (it is the sniff, sim/import/input.h, not a pass).
absl::StatusOr<std::string> ReadContentHead(std::shared_ptr<const InputFd> file, size_t n);
// InputFd::Open(path), then the source above: for callers with a path alone.
absl::StatusOr<std::unique_ptr<ByteSource>> OpenByteSource(const std::string& path);

// Serves `data` (for tests and for callers that already hold the bytes).
std::unique_ptr<ByteSource> StringByteSource(std::string data);

// A std::istream's view of a source (line readers: sim/trace/trace_io.h's
// ReadTrace). A read error ends the stream; status() then holds it.
class ByteSourceStreambuf : public std::streambuf {
 public:
  explicit ByteSourceStreambuf(ByteSource& source) : source_(source), buf_(size_t{1} << 16, '\0') {}
  const absl::Status& status() const { return status_; }

 protected:
  int_type underflow() override;

 private:
  ByteSource& source_;
  std::string buf_;
  absl::Status status_;
};

// Reads a whole source into a string (small inputs only).
absl::StatusOr<std::string> ReadAll(ByteSource& source);

}  // namespace gpusim

#endif  // GPUSIM_SIM_IMPORT_BYTE_SOURCE_H_
