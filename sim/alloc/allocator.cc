#include "sim/alloc/allocator.h"

namespace gpusim {

std::string_view ActionName(AllocatorAction a) {
  switch (a) {
    case AllocatorAction::kAlloc: return "alloc";
    case AllocatorAction::kFree: return "free_completed";
    case AllocatorAction::kSegmentAlloc: return "segment_alloc";
    case AllocatorAction::kSegmentFree: return "segment_free";
    case AllocatorAction::kSegmentMap: return "segment_map";
    case AllocatorAction::kSegmentUnmap: return "segment_unmap";
    case AllocatorAction::kOom: return "oom";
  }
  return "?";
}

}  // namespace gpusim
