// See temp_heap.h.
#include "sim/step/temp_heap.h"

namespace gpusim {

std::vector<HeapBuffer> TempHeapBuffers(const LoweredStep& lowered) {
  std::vector<HeapBuffer> temps;
  const int64_t last = static_cast<int64_t>(lowered.trace.events.size()) - 1;
  for (const BufferInfo& b : lowered.buffers) {
    if (b.argument || b.output) continue;
    temps.push_back({b.id, b.bytes, b.alloc_event, b.free_event >= 0 ? b.free_event : last});
  }
  return temps;
}

}  // namespace gpusim
