// Where a recorded trace used by tests and benchmarks lives: shipped under
// traces/recorded/, else the shared collection beside the checkout.
#ifndef GPUSIM_SIM_IMPORT_TRACE_PATH_H_
#define GPUSIM_SIM_IMPORT_TRACE_PATH_H_

#include <string>

namespace gpusim {

// The path of recorded trace `name`, or "" when neither place has it.
std::string RecordedTracePath(const std::string& name);

}  // namespace gpusim

#endif  // GPUSIM_SIM_IMPORT_TRACE_PATH_H_
