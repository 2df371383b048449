#include "sim/alloc/start_state.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "sim/base/status.h"

namespace gpusim {

// Note [One start state for every command]
// `gpusim replay` starts a recording from the state the real allocator held
// before the first event: a warm start inferred from the recorded addresses
// and Total Reserved (Note [Warm start from recorded addresses],
// sim/replay/warm_start.cc) with its grown segments, or a cold allocator
// holding the bytes live before recording (ReplayCore::Start). `gpusim viz`
// replays the same import through the engine (sim/engine Simulate), and
// started cold: on the V100 HTA trace it drew 6.39 GiB peak reserved where
// replay says the recorded 11.90 GiB. The state is carried as data instead
// — the segments and their blocks (Allocator::Segments, the snapshot's
// SegmentLayout vocabulary), restored with RestoreSegment — so the engine,
// the memory map and the memory snapshot all start from what the replay
// started from, and the blocks it already holds are not allocated again.
// Restoring is checked: allocated and reserved after it must be the
// captured segments' totals.

bool AllocatorStartState::Holds(BufferId id) const { return std::binary_search(held.begin(), held.end(), id); }

AllocatorStartState CaptureStartState(const Allocator& a, std::vector<BufferId> held, Bytes allocated_first,
                                      BufferId allocated_first_id) {
  AllocatorStartState s;
  if (a.ModelsSegments()) {
    s.segments = a.Segments();
  } else {
    s.allocated_first = allocated_first;
    s.allocated_first_id = allocated_first_id;
  }
  std::sort(held.begin(), held.end());
  held.erase(std::unique(held.begin(), held.end()), held.end());
  s.held = std::move(held);
  return s;
}

absl::StatusOr<std::unique_ptr<Allocator>> MakeStartedAllocator(const AllocatorSpec& spec, Bytes capacity,
                                                                const AllocatorStartState& start) {
  ASSIGN_OR_RETURN(std::unique_ptr<Allocator> a, MakeAllocator(spec, capacity));
  if (!start.segments.empty() && !a->ModelsSegments()) {
    return absl::InvalidArgumentError(absl::StrCat("allocator ", std::string(a->name()),
                                                   " does not model segments: it cannot start from the replay's "
                                                   "restored segments"));
  }
  int64_t reserved = 0, allocated = 0;
  for (const SegmentLayout& seg : start.segments) {
    RETURN_IF_ERROR(a->RestoreSegment(seg));
    reserved += seg.size;
    for (const SegmentLayout::Block& b : seg.blocks) {
      if (b.buffer >= 0) allocated += b.size;
    }
  }
  if (!start.segments.empty()) {
    const AllocatorUsage u = a->usage();
    if (u.reserved != Bytes(reserved) || u.allocated != Bytes(allocated)) {
      return absl::InternalError(absl::StrCat("allocator ", std::string(a->name()), ": the restored start state holds ",
                                              u.allocated.value(), " B allocated, ", u.reserved.value(),
                                              " B reserved; its segments say ", allocated, " B, ", reserved, " B"));
    }
  }
  if (start.allocated_first > Bytes(0) && !a->Alloc(start.allocated_first_id, start.allocated_first, 0)) {
    return absl::ResourceExhaustedError(absl::StrCat("allocator ", std::string(a->name()), ": the ",
                                                     start.allocated_first.value(),
                                                     " B live before recording do not fit in ", capacity.value(),
                                                     " B"));
  }
  if (!start.graph_pools.empty()) {
    return std::make_unique<GraphPoolAllocator>(std::move(a), spec, capacity, start.graph_pools);
  }
  return a;
}

}  // namespace gpusim
