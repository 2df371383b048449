#include "sim/base/file_util.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <optional>
#include <sstream>
#include <vector>

#include "absl/strings/str_cat.h"
#include "sim/base/cleanup.h"
#include "sim/base/status.h"

namespace gpusim {

absl::Status CheckReplaceableTarget(const std::string& path, mode_t* mode) {
  struct stat st;
  if (lstat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return absl::OkStatus();
    return absl::UnavailableError(absl::StrCat(path, ": cannot stat: ", std::strerror(errno)));
  }
  if (!S_ISREG(st.st_mode)) {
    const char* what = S_ISDIR(st.st_mode)   ? "a directory"
                       : S_ISLNK(st.st_mode) ? "a symbolic link"
                       : S_ISFIFO(st.st_mode) ? "a FIFO"
                       : S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode) ? "a device node"
                                                                     : "not a regular file";
    return absl::PermissionDeniedError(
        absl::StrCat(path, ": exists and is ", what, "; refusing to replace it (remove it or choose another path)"));
  }
  if (mode != nullptr) *mode = st.st_mode & 07777;
  return absl::OkStatus();
}

absl::Status WriteFileAtomically(const std::string& path, std::string_view content) {
  // Note [Replacing outputs]: only a regular file (or nothing) is replaced,
  // keeping its permission bits; a symlink, FIFO, device node or directory
  // at `path` is refused (exit 3), since rename(2) would silently replace
  // the link or node itself.
  mode_t mode = 0644;  // a new result is an ordinary file
  RETURN_IF_ERROR(CheckReplaceableTarget(path, &mode));
  std::optional<ScopedTempPath> cleanup;  // removed if a signal arrives before the rename
  const std::string tmp = CreateRegisteredTemp(path + ".tmp-", "", /*directory=*/false, cleanup);
  const int fd = tmp.empty() ? -1 : open(tmp.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    if (!tmp.empty()) unlink(tmp.c_str());
    return absl::UnavailableError(absl::StrCat(path, ": cannot create file: ", std::strerror(err)));
  }
  fchmod(fd, mode);
  size_t off = 0;
  while (off < content.size()) {
    const ssize_t n = write(fd, content.data() + off, content.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = n < 0 ? errno : ENOSPC;
      close(fd);
      unlink(tmp.c_str());
      return absl::UnavailableError(absl::StrCat(path, ": write failed: ", std::strerror(err)));
    }
    off += static_cast<size_t>(n);
  }
  if (fsync(fd) != 0 || close(fd) != 0) {
    const int err = errno;
    unlink(tmp.c_str());
    return absl::UnavailableError(absl::StrCat(path, ": cannot flush: ", std::strerror(err)));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    unlink(tmp.c_str());
    return absl::UnavailableError(absl::StrCat(path, ": cannot rename into place: ", std::strerror(err)));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> ReadFileToString(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot open: ", std::strerror(errno)));
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

absl::Status CheckRegularInput(const std::string& path) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0) {
    return absl::NotFoundError(absl::StrCat(path, ": cannot open: ", std::strerror(errno)));
  }
  if (!S_ISREG(st.st_mode)) {  // Note [Sniffing inputs]: refused before open(2)
    const char* what = S_ISDIR(st.st_mode)                            ? "a directory"
                       : S_ISFIFO(st.st_mode)                         ? "a FIFO"
                       : S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode) ? "a device"
                       : S_ISSOCK(st.st_mode)                         ? "a socket"
                                                                      : "not a regular file";
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": ", what, ", not a regular file; gpusim reads its inputs from regular files"));
  }
  return absl::OkStatus();
}

std::string FirstContentLine(std::string_view prefix) {
  size_t at = 0;
  while (at < prefix.size()) {
    size_t end = prefix.find('\n', at);
    if (end == std::string_view::npos) end = prefix.size();
    std::string_view line = prefix.substr(at, end - at);
    at = end + 1;
    const size_t b = line.find_first_not_of(" \t\r");
    if (b == std::string_view::npos || line[b] == '#') continue;
    line.remove_prefix(b);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    return std::string(line);
  }
  return "";
}

}  // namespace gpusim
