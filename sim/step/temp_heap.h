// The temporaries of a lowered step as the XLA temp heap packer takes them
// (sim/alloc/heap_planner.h): every buffer that is neither an entry argument
// nor an output, live from its alloc event to its free event. One function
// for PrepareStep, the heap-packing benchmarks and their tests.
#ifndef GPUSIM_SIM_STEP_TEMP_HEAP_H_
#define GPUSIM_SIM_STEP_TEMP_HEAP_H_

#include <vector>

#include "sim/alloc/heap_planner.h"
#include "sim/lower/lower.h"

namespace gpusim {

// In buffer order. A temp never freed is live to the last event (XLA's
// buffer assignment keeps it to the end of the computation).
std::vector<HeapBuffer> TempHeapBuffers(const LoweredStep& lowered);

}  // namespace gpusim

#endif  // GPUSIM_SIM_STEP_TEMP_HEAP_H_
