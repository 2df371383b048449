#include "sim/base/file_util.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <vector>

#include "absl/strings/str_cat.h"

namespace gpusim {

absl::Status WriteFileAtomically(const std::string& path, std::string_view content) {
  std::string tmpl = path + ".tmp-XXXXXX";
  std::vector<char> buf(tmpl.begin(), tmpl.end());
  buf.push_back('\0');
  const int fd = mkstemp(buf.data());
  if (fd < 0) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": cannot create file: ", std::strerror(errno)));
  }
  const std::string tmp(buf.data());
  fchmod(fd, 0644);  // mkstemp creates 0600; results are ordinary files
  size_t off = 0;
  while (off < content.size()) {
    const ssize_t n = write(fd, content.data() + off, content.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = errno;
      close(fd);
      unlink(tmp.c_str());
      return absl::InternalError(absl::StrCat(path, ": write failed: ", std::strerror(err)));
    }
    off += static_cast<size_t>(n);
  }
  if (fsync(fd) != 0 || close(fd) != 0) {
    unlink(tmp.c_str());
    return absl::InternalError(absl::StrCat(path, ": cannot flush: ", std::strerror(errno)));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    unlink(tmp.c_str());
    return absl::InternalError(absl::StrCat(path, ": cannot rename into place: ", std::strerror(err)));
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

}  // namespace gpusim
