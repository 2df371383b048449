// The allocator state a replay starts from, as data: what `gpusim replay`
// restored before a recording's first event (a warm start inferred from
// Kineto addresses, the bytes live before recording), carried to the
// engine's replay of the same trace (`gpusim viz`, sim/step ReportFromTrace)
// so that both start from one state. Note [One start state for every
// command] in start_state.cc.
#ifndef GPUSIM_SIM_ALLOC_START_STATE_H_
#define GPUSIM_SIM_ALLOC_START_STATE_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "sim/alloc/allocator.h"
#include "sim/alloc/graph_pools.h"
#include "sim/base/units.h"
#include "sim/config/spec.h"

namespace gpusim {

struct AllocatorStartState {
  // Segments held before the first event (Allocator::Segments()), their
  // allocated blocks under the buffer ids of the trace they start.
  std::vector<SegmentLayout> segments;
  // Buffers whose alloc event those segments already hold: the replay skips
  // their first alloc (ascending).
  std::vector<BufferId> held;
  // Strategies without segments: one block of `allocated_first` bytes for
  // buffer `allocated_first_id`, allocated before the first event (bytes
  // live before recording); 0: none.
  Bytes allocated_first;
  BufferId allocated_first_id = -1;
  // The buffers the replay's CUDA graph private pools served (Note [CUDA
  // graph private pools]): a started allocator routes them there.
  GraphPoolMembers graph_pools;
  bool empty() const { return segments.empty() && allocated_first <= Bytes(0); }
  bool Holds(BufferId id) const;
};

// The state of `a` before a replay's first event; `held` as above.
AllocatorStartState CaptureStartState(const Allocator& a, std::vector<BufferId> held, Bytes allocated_first,
                                      BufferId allocated_first_id);

// `spec` at `capacity`, restored to `start` (a GraphPoolAllocator around it
// when start.graph_pools names any pool); an error (naming the strategy)
// when the strategy cannot hold that state or the restored totals are not
// the captured ones.
absl::StatusOr<std::unique_ptr<Allocator>> MakeStartedAllocator(const AllocatorSpec& spec, Bytes capacity,
                                                                const AllocatorStartState& start);

}  // namespace gpusim

#endif  // GPUSIM_SIM_ALLOC_START_STATE_H_
