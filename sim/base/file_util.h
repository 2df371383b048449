// Files written whole or not at all: content goes to a temporary file in the
// same directory, which is renamed over the target only once complete.
#ifndef GPUSIM_SIM_BASE_FILE_UTIL_H_
#define GPUSIM_SIM_BASE_FILE_UTIL_H_

#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace gpusim {

absl::Status WriteFileAtomically(const std::string& path, std::string_view content);
absl::StatusOr<std::string> ReadFileToString(const std::string& path);

}  // namespace gpusim

#endif  // GPUSIM_SIM_BASE_FILE_UTIL_H_
