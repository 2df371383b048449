// An output directory written as a whole: files go into a temporary
// directory beside the target (TARGET.tmp-XXXXXX, same file system, mode
// 0777 less the umask), and Commit() renames it into place when the target
// does not exist yet, or exchanges it with an existing target directory in
// one renameat2(RENAME_EXCHANGE) and removes the previous files (Note
// [Replacing an output directory] in output_dir.cc). A failed or
// interrupted run (signal: sim/base/cleanup.h) leaves the target as it was
// and no temporary directory behind.
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
  // Errors: InvalidArgument for `/`, `.` or `..` (never replaced);
  // PermissionDenied when `target` exists and is not a directory;
  // Unavailable when the temporary directory cannot be made. `flag` names
  // the option in messages ("--out").
  static absl::StatusOr<std::unique_ptr<OutputDir>> Begin(const std::string& target, const std::string& flag);
  ~OutputDir();  // removes the temporary directory unless committed

  // Where to write the files now.
  const std::string& path() const { return tmp_; }
  // Puts the directory in place of `target`, whole. An existing target
  // must hold regular files only (else PermissionDenied, nothing moved);
  // they are removed, and a new file of the same name keeps the old one's
  // mode.
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
