#include "sim/base/output_dir.h"

#include <dirent.h>
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
  return out;
}

OutputDir::~OutputDir() {
  if (!committed_) RemoveTemp();
}

void OutputDir::RemoveTemp() {
  for (const std::string& n : Entries(tmp_)) unlink((tmp_ + "/" + n).c_str());
  rmdir(tmp_.c_str());
}

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
  // Check every target first, so nothing is moved unless all can be.
  const std::vector<std::string> names = Entries(tmp_);
  for (const std::string& n : names) {
    mode_t mode = 0;
    RETURN_IF_ERROR(CheckReplaceableTarget(target_ + "/" + n, &mode));
    if (lstat((target_ + "/" + n).c_str(), &st) == 0) chmod((tmp_ + "/" + n).c_str(), mode);
  }
  for (const std::string& n : names) {
    if (std::rename((tmp_ + "/" + n).c_str(), (target_ + "/" + n).c_str()) != 0) {
      return absl::UnavailableError(
          absl::StrCat(target_, "/", n, ": cannot rename into place: ", std::strerror(errno)));
    }
  }
  RemoveTemp();
  committed_ = true;
  return absl::OkStatus();
}

}  // namespace gpusim
