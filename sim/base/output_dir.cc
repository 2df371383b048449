#include "sim/base/output_dir.h"

#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string_view>

#include "absl/strings/str_cat.h"
#include "sim/base/file_util.h"
#include "sim/base/status.h"

namespace gpusim {
namespace {

// The names of the entries of `dir` (no . and ..), sorted.
std::vector<std::string> Entries(const std::string& dir) {
  std::vector<std::string> out;
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return out;
  while (const dirent* e = readdir(d)) {
    const std::string_view n = e->d_name;
    if (n != "." && n != "..") out.emplace_back(n);
  }
  closedir(d);
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

absl::StatusOr<std::unique_ptr<OutputDir>> OutputDir::Begin(const std::string& target, const std::string& flag) {
  std::string t = target;
  while (t.size() > 1 && t.back() == '/') t.pop_back();
  // The directory is replaced by a rename (Note [Replacing an output
  // directory]); the root, `.` and `..` cannot be, and writing into them
  // (issue 27: `--out /` wrote into /) is never what was meant.
  const size_t slash = t.rfind('/');
  const std::string last = slash == std::string::npos ? t : t.substr(slash + 1);
  char resolved[PATH_MAX];
  if (t.empty() || t == "/" || last == "." || last == ".." ||
      (realpath(t.c_str(), resolved) != nullptr && std::string_view(resolved) == "/")) {
    return absl::InvalidArgumentError(absl::StrCat(flag, " ", target, ": names ", t == "/" ? "the root directory" :
                                                   "a directory that cannot be replaced",
                                                   "; give a directory to create, or one of gpusim's to replace"));
  }
  struct stat st;
  if (lstat(t.c_str(), &st) == 0 && !S_ISDIR(st.st_mode)) {
    return absl::PermissionDeniedError(absl::StrCat(flag, " ", target, ": exists and is not a directory"));
  }
  auto out = std::unique_ptr<OutputDir>(new OutputDir(t, flag));
  out->tmp_ = CreateRegisteredTemp(t + ".tmp-", "", /*directory=*/true, out->dir_guard_);
  if (out->tmp_.empty()) {
    return absl::UnavailableError(
        absl::StrCat(flag, " ", target, ": cannot create a temporary directory beside it: ", std::strerror(errno)));
  }
  // mkdtemp makes it 0700; a new output directory gets the mode mkdir(1)
  // would give it, 0777 less the umask (issue 27).
  const mode_t mask = umask(0);
  umask(mask);
  chmod(out->tmp_.c_str(), 0777 & ~mask);
  return out;
}

OutputDir::~OutputDir() {
  if (!committed_) RemoveTemp();
}

void OutputDir::RemoveTemp() {
  for (const std::string& n : Entries(tmp_)) unlink((tmp_ + "/" + n).c_str());
  rmdir(tmp_.c_str());
}

// Note [Replacing an output directory]
// A new target is the temporary directory renamed into place. An existing
// one is replaced whole, never file by file (issue 27: a kill or a
// concurrent run left charts of one run beside result.json of another):
// renameat2(RENAME_EXCHANGE) swaps the two directories atomically, so a
// reader sees the old run's directory or the new one's, never a mixture,
// and concurrent runs leave whichever swapped last, whole. The old files
// (now in the temporary directory) are then removed. Only a directory that
// holds regular files alone (what gpusim writes) is replaced; anything else
// in it (a subdirectory, a link, a FIFO) is refused before anything moves,
// so no one's data is deleted. A file that had a counterpart in the old
// directory keeps that file's permission bits, and the directory its own.
// Where the file system cannot exchange (EINVAL, ENOSYS), the old directory
// is renamed aside (TARGET.old-XXXXXX), the new one into place, and the
// old one removed: for that instant TARGET does not exist, and a kill
// then leaves the previous run in TARGET.old-XXXXXX.
absl::Status OutputDir::Commit() {
  struct stat st;
  if (lstat(target_.c_str(), &st) != 0) {
    if (std::rename(tmp_.c_str(), target_.c_str()) != 0) {
      return absl::UnavailableError(
          absl::StrCat(flag_, " ", target_, ": cannot rename into place: ", std::strerror(errno)));
    }
    committed_ = true;
    return absl::OkStatus();
  }
  if (!S_ISDIR(st.st_mode)) {
    return absl::PermissionDeniedError(absl::StrCat(flag_, " ", target_, ": exists and is not a directory"));
  }
  const mode_t dir_mode = st.st_mode & 07777;
  for (const std::string& n : Entries(target_)) {
    struct stat e;
    if (lstat((target_ + "/" + n).c_str(), &e) != 0 || !S_ISREG(e.st_mode)) {
      return absl::PermissionDeniedError(absl::StrCat(
          flag_, " ", target_, ": holds '", n, "', which is not a regular file; an output directory is replaced "
          "whole, so it may hold only files (remove it, or choose another ", flag_, ")"));
    }
    struct stat fresh;
    if (lstat((tmp_ + "/" + n).c_str(), &fresh) == 0) chmod((tmp_ + "/" + n).c_str(), e.st_mode & 07777);
  }
  chmod(tmp_.c_str(), dir_mode);
  if (renameat2(AT_FDCWD, tmp_.c_str(), AT_FDCWD, target_.c_str(), RENAME_EXCHANGE) == 0) {
    RemoveTemp();  // the previous run's files, now at tmp_
    committed_ = true;
    return absl::OkStatus();
  }
  if (errno != EINVAL && errno != ENOSYS) {
    return absl::UnavailableError(
        absl::StrCat(flag_, " ", target_, ": cannot exchange with the new directory: ", std::strerror(errno)));
  }
  // Not registered for removal on a signal: until the new directory is in
  // place, the aside one is the only copy of the previous run.
  std::string aside = target_ + ".old-XXXXXX";
  if (mkdtemp(aside.data()) == nullptr || rmdir(aside.c_str()) != 0 ||
      std::rename(target_.c_str(), aside.c_str()) != 0) {
    return absl::UnavailableError(
        absl::StrCat(flag_, " ", target_, ": cannot move the previous directory aside: ", std::strerror(errno)));
  }
  if (std::rename(tmp_.c_str(), target_.c_str()) != 0) {
    const int err = errno;
    std::rename(aside.c_str(), target_.c_str());  // put the previous run back
    return absl::UnavailableError(
        absl::StrCat(flag_, " ", target_, ": cannot rename into place: ", std::strerror(err)));
  }
  committed_ = true;
  for (const std::string& n : Entries(aside)) unlink((aside + "/" + n).c_str());
  rmdir(aside.c_str());
  return absl::OkStatus();
}

}  // namespace gpusim
