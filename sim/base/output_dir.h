// An output directory written as a whole: files go into a temporary
// directory beside the target (TARGET.tmp-XXXXXX, same file system), and
// Commit() renames it into place when the target does not exist yet, or
// moves each file into an existing target directory (each a rename, so it
// cannot fail part-way for lack of space). A failed or interrupted run
// (signal: sim/base/cleanup.h) leaves the target as it was and no temporary
// directory behind.
#ifndef GPUSIM_SIM_BASE_OUTPUT_DIR_H_
#define GPUSIM_SIM_BASE_OUTPUT_DIR_H_

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "sim/base/cleanup.h"

namespace gpusim {

class OutputDir {
 public:
  // Errors: PermissionDenied when `target` exists and is not a directory;
  // Unavailable when the temporary directory cannot be made. `flag` names
  // the option in messages ("--out").
  static absl::StatusOr<std::unique_ptr<OutputDir>> Begin(const std::string& target, const std::string& flag);
  ~OutputDir();  // removes the temporary directory unless committed

  // Where to write the files now.
  const std::string& path() const { return tmp_; }
  // Moves the files into `target`. Existing target files of the same name
  // must be regular files (they are replaced, keeping their mode).
  absl::Status Commit();

 private:
  OutputDir(std::string target, std::string flag) : target_(std::move(target)), flag_(std::move(flag)) {}
  void RemoveTemp();
  std::string target_, tmp_, flag_;
  std::optional<ScopedTempPath> dir_guard_;  // registered before the directory exists
  bool committed_ = false;
};

}  // namespace gpusim

#endif  // GPUSIM_SIM_BASE_OUTPUT_DIR_H_
