// Files written whole or not at all: content goes to a temporary file in the
// same directory, which is renamed over the target only once complete.
#ifndef GPUSIM_SIM_BASE_FILE_UTIL_H_
#define GPUSIM_SIM_BASE_FILE_UTIL_H_

#include <sys/types.h>

#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace gpusim {

// Errors: PermissionDenied when `path` exists and is not a regular file
// (never replaced); Unavailable for I/O errors (disk full, no such
// directory). A replaced file keeps its permission bits; a new one is 0644.
absl::Status WriteFileAtomically(const std::string& path, std::string_view content);

// OK when `path` does not exist or is a regular file (then *mode, if given,
// receives its permission bits); else the PermissionDenied error above.
absl::Status CheckReplaceableTarget(const std::string& path, mode_t* mode = nullptr);
absl::StatusOr<std::string> ReadFileToString(const std::string& path);

// Note [Sniffing inputs]
// Every command that takes "any input" (validate, replay, compare, viz,
// run's trace check) decides what a file is from its first kSniffBytes
// bytes (SniffInput, sim/import/input.h: Note [One sniffer, one open]),
// never by reading on to a newline (issue
// 27: `validate /dev/zero` read forever, `replay` of a 1 GB file with no
// newline read it whole before deciding). Only a regular file is an input:
// a directory, device, FIFO or socket is refused by stat(2) before it is
// opened (opening a FIFO blocks; a device never ends), exit 1 naming it.
// 64 KiB holds every header a reader looks for (a native trace's first
// line after comments, `HloModule`, a JSON document's first key, a pickle's
// protocol byte, a gzip magic).
inline constexpr size_t kSniffBytes = size_t{64} << 10;

// OK when `path` is a regular file (stat(2), nothing opened). Errors:
// NotFound when it cannot be stat'ed; InvalidArgument naming what it is
// (a directory, a FIFO, a device, a socket) otherwise.
absl::Status CheckRegularInput(const std::string& path);

// The first line of `prefix` that is neither blank nor a `#` comment,
// without its line end and leading blanks; "" when there is none in it.
std::string FirstContentLine(std::string_view prefix);

}  // namespace gpusim

#endif  // GPUSIM_SIM_BASE_FILE_UTIL_H_
