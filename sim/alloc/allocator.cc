#include "sim/alloc/allocator.h"

#include <atomic>

#include "absl/strings/str_cat.h"
#include "sim/base/status.h"

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

absl::Status Allocator::RestoreSegment(const SegmentLayout& /*segment*/) {
  return absl::UnimplementedError(
      absl::StrCat("allocator '", std::string(name()), "' models no segments: it cannot start from a recorded segment state"));
}

void Allocator::SetNextSegmentAddress(uint64_t /*addr*/) { GPUSIM_CHECK(ModelsSegments()); }

void Allocator::ReleaseCache() { GPUSIM_CHECK(ModelsSegments()); }

namespace {
std::atomic<int64_t> memory_replays{0};
}  // namespace

void CountMemoryReplay() { memory_replays.fetch_add(1, std::memory_order_relaxed); }
int64_t MemoryReplays() { return memory_replays.load(std::memory_order_relaxed); }

}  // namespace gpusim
