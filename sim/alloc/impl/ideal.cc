#include "sim/alloc/impl/ideal.h"

#include "sim/base/status.h"

namespace gpusim {

bool IdealAllocator::Alloc(BufferId id, Bytes size, StreamId) {
  GPUSIM_CHECK(!live_.contains(id));
  if (size > capacity_ - stats_.allocated) return false;  // no int64 overflow (Note [Huge requests])
  live_[id] = size;
  stats_.allocated += size;
  stats_.reserved = stats_.allocated;
  stats_.peak_allocated = Max(stats_.peak_allocated, stats_.allocated);
  stats_.peak_reserved = stats_.peak_allocated;
  stats_.largest_free_block = capacity_ - stats_.allocated;
  return true;
}

void IdealAllocator::Free(BufferId id) {
  auto it = live_.find(id);
  GPUSIM_CHECK(it != live_.end());
  stats_.allocated -= it->second;
  stats_.reserved = stats_.allocated;
  stats_.largest_free_block = capacity_ - stats_.allocated;
  live_.erase(it);
}

}  // namespace gpusim
