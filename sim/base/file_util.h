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

}  // namespace gpusim

#endif  // GPUSIM_SIM_BASE_FILE_UTIL_H_
