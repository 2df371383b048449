// Where gpusim's data files are (device and model configs): beside an
// installed binary, or in the source tree it was built from.
//
//   <prefix>/bin/gpusim  ->  <prefix>/share/gpusim/configs/...
//
// `cmake --install` / `make install` lays that out (CMakeLists.txt). A
// binary run from its build tree has no share/gpusim beside it and uses the
// source tree compiled in (GPUSIM_SOURCE_DIR).
#ifndef GPUSIM_SIM_BASE_DATA_DIR_H_
#define GPUSIM_SIM_BASE_DATA_DIR_H_

#include <string>

namespace gpusim {

// The installed data directory (<dir of /proc/self/exe>/../share/gpusim)
// when it exists, else the source tree. No trailing slash.
const std::string& DataDir();

// Replaces DataDir() from here on: the Python package points it at the data
// it ships (python/gpusim/__init__.py), since its process is the interpreter.
// REQUIRES: no other thread reads DataDir() meanwhile.
void SetDataDir(const std::string& dir);

}  // namespace gpusim

#endif  // GPUSIM_SIM_BASE_DATA_DIR_H_
