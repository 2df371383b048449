#include "sim/base/data_dir.h"

#include <filesystem>
#include <system_error>

namespace gpusim {

namespace {

std::string* Dir() {
  static std::string* dir = [] {
    namespace fs = std::filesystem;
    std::error_code ec;
    const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
    if (!ec) {
      const fs::path share = exe.parent_path().parent_path() / "share" / "gpusim";
      if (fs::is_directory(share, ec)) return new std::string(share.string());
    }
    return new std::string(GPUSIM_SOURCE_DIR);
  }();
  return dir;
}

}  // namespace

const std::string& DataDir() { return *Dir(); }

void SetDataDir(const std::string& dir) { *Dir() = dir; }

}  // namespace gpusim
