// ByteSource: a forward-only stream of bytes for the importers, so that they
// read a file in bounded memory whether it is plain or gzip-compressed, and
// tests can feed them bytes from memory (the LevelDB Env idea, reduced to
// what importers need).
#ifndef GPUSIM_SIM_IMPORT_BYTE_SOURCE_H_
#define GPUSIM_SIM_IMPORT_BYTE_SOURCE_H_

#include <cstddef>
#include <memory>
#include <string>

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

// Opens `path` for reading. gzip input (detected by its magic bytes, not the
// name) is decompressed on the fly with zlib; anything else is read as is.
absl::StatusOr<std::unique_ptr<ByteSource>> OpenByteSource(const std::string& path);

// Serves `data` (for tests and for callers that already hold the bytes).
std::unique_ptr<ByteSource> StringByteSource(std::string data);

// Reads a whole source into a string (small inputs only).
absl::StatusOr<std::string> ReadAll(ByteSource& source);

}  // namespace gpusim

#endif  // GPUSIM_SIM_IMPORT_BYTE_SOURCE_H_
