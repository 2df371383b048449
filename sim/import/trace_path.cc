#include "sim/import/trace_path.h"

#include <sys/stat.h>

namespace gpusim {

std::string RecordedTracePath(const std::string& name) {
  for (const std::string& dir : {std::string(GPUSIM_SOURCE_DIR "/traces/recorded/"),
                                std::string(GPUSIM_SOURCE_DIR "/../shared/traces/")}) {
    struct stat st;
    if (stat((dir + name).c_str(), &st) == 0) return dir + name;
  }
  return "";
}

}  // namespace gpusim
