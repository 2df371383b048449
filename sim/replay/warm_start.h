// Warm-start inference for recorded traces that carry every address and the
// total reserved (Kineto [memory] events): the caching allocator's segment
// set at the first event, reconstructed so that replay can start from it
// (Note [Warm start from recorded addresses] in warm_start.cc).
#ifndef GPUSIM_SIM_REPLAY_WARM_START_H_
#define GPUSIM_SIM_REPLAY_WARM_START_H_

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <utility>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "sim/alloc/allocator.h"
#include "sim/import/recorded_trace.h"
#include "sim/trace/trace.h"

namespace gpusim {

// A segment of the inferred start state.
struct InferredSegment {
  int64_t begin = 0, end = 0;
  bool small = false;
  bool untouched = false;  // the reserved bytes where no recorded block lies
  // Its end is a 2 MiB boundary where its blocks meet the next segment's:
  // a boundary chosen, not recorded (Note [Segment boundaries where blocks
  // meet]).
  bool joinable_end = false;
};

// What earlier passes of the warm replay found about the start state.
struct WarmCorrections {
  std::map<int64_t, int64_t> grown_ends;  // segment begin → end (Note [Growing inferred segments])
  std::set<int64_t> joined;               // chosen boundaries that are not segment boundaries
};

// The first alloc a warm replay placed elsewhere than its recorded address
// (Note [Departures from the recorded addresses]).
struct AddressDeparture {
  int64_t event = -1;     // the recorded memory event
  int64_t recorded = 0;   // its recorded address
  int64_t placed = 0;     // where the model placed it
  int64_t block = 0;      // the model's block
  int64_t free_end = 0;   // the end of the free block the model carved it from
  // The model's free bytes from the recorded address to the end of the free
  // block it lies in (0: it lies in no free block).
  int64_t recorded_free = 0;
};

struct WarmStart {
  bool applied = false;
  std::string why_not;          // when not applied: the fact that rules it out
  Bytes recorded_reserved;      // Total Reserved at the first event
  int64_t small_segments = 0;   // 2 MiB small-pool segments inferred
  int64_t large_segments = 0;   // large-pool segments inferred
  Bytes inferred_bytes;         // their total size
  Bytes untouched_bytes;        // reserved in segments no recorded address lies in
  int64_t restored_blocks = 0;  // blocks live at the start placed in them
  // What the data do not determine (each a sentence), empty when nothing.
  std::vector<std::string> undetermined;
  std::vector<InferredSegment> segments;  // ascending; the untouched one last
  Bytes spare_bytes;  // of untouched_bytes, what the bytes live before recording leave free
  int64_t grown_segments = 0;  // segments grown by Note [Growing inferred segments]
  int64_t passes = 1;          // replays run to reach the fixed point
  int64_t joined_boundaries = 0;  // chosen boundaries joined by Note [Departures from the recorded addresses]
};

// Note [Growing inferred segments]: after a warm replay placed a large-pool
// request of `recorded_block` bytes (Kineto's Bytes: the real block size) at
// its recorded address `addr` in a model block of `model_block` bytes, the
// inferred segment that must end later, and where: {segment begin, new end}.
// nullopt when the placement says nothing about the segment's end.
std::optional<std::pair<int64_t, int64_t>> SegmentGrowthFor(const WarmStart& w, int64_t addr, int64_t recorded_block,
                                                            int64_t model_block);

// Note [Departures from the recorded addresses]: what the first departure
// of a replay from the warm start `w` says about that start, added to
// `kept` (growths within *spare bytes, which shrink by them); whether
// anything was.
bool CorrectForDeparture(const WarmStart& w, const AddressDeparture& d, Bytes* spare, WarmCorrections* kept);

// The sentence WarmStart::undetermined carries for a departure no
// correction explains.
std::string DepartureUnexplained(const AddressDeparture& d);

// Note [Warm facts, not events]: what the warm-start inference reads from a
// recording, collected one memory event at a time (in recorded order) in
// memory bounded by the distinct blocks, not by the events: the first
// event's Total Reserved, the 2 MiB windows of small-pool blocks, the union
// of large-pool block ranges (with the largest block of each cluster), the
// live blocks, and the blocks freed but never allocated (live at the start).
// The whole-trace replay feeds it the imported events; the streamed one
// (sim/replay/replay_stream.cc) feeds it as the trace is parsed, so both
// infer from the same facts.
class WarmFactCollector {
 public:
  // `device`: the recorded device whose events count; `rounding`: the
  // allocator whose RoundedBlockSize gives a request's block (it must
  // outlive the collector).
  WarmFactCollector(int32_t device, const Allocator& rounding) : device_(device), rounding_(rounding) {}
  void Add(const RecordedMemoryEvent& m);

  // A block live at the start: freed in the recording, never allocated in it.
  struct StartBlock {
    int64_t address, size, requested;
  };
  struct Cluster {
    int64_t end = 0;
    int64_t largest = 0;  // the largest block in it
  };

 private:
  friend absl::StatusOr<WarmStart> RestoreWarmStart(const WarmFactCollector&, const std::vector<BufferId>&, Bytes,
                                                    BufferId, const WarmCorrections&, Allocator&,
                                                    absl::flat_hash_set<BufferId>*);
  int32_t device_;
  const Allocator& rounding_;
  std::string why_not_;  // the first fact that rules the inference out while reading
  bool have_reserved_ = false;
  Bytes recorded_reserved_;
  std::optional<std::pair<int64_t, int64_t>> straddle_;  // the first small block across a 2 MiB boundary
  std::map<int64_t, bool> small_windows_;                // 2 MiB window starts
  std::map<int64_t, Cluster> clusters_;                   // large-pool ranges, begin → end (overlapping merged)
  absl::flat_hash_map<int64_t, int64_t> live_;            // address → requested
  std::vector<StartBlock> start_blocks_;
};

// Restores into `a` (a caching allocator: Allocator::ModelsSegments) the
// segment set inferred from `facts` (the recording's memory events, Note
// [Warm facts, not events]) and the blocks live at its start: `head_ids`
// (the buffer ids of ToMemoryOps' head allocs — the blocks freed but never
// allocated in the recording — in order) at their recorded addresses, and
// `preexisting` (Trace::preexisting) as one block of buffer `preexisting_id`
// in the segment no address lies in. Buffers restored are added to
// `restored`. When the data rule the inference out, returns applied = false
// and why, and leaves `a` untouched. `kept` is what earlier passes found.
// REQUIRES: a.ModelsSegments().
absl::StatusOr<WarmStart> RestoreWarmStart(const WarmFactCollector& facts, const std::vector<BufferId>& head_ids,
                                           Bytes preexisting, BufferId preexisting_id,
                                           const WarmCorrections& kept, Allocator& a,
                                           absl::flat_hash_set<BufferId>* restored);

// ReplayResult::start_state of an applied warm start.
std::string WarmStartState(const WarmStart& ws);

}  // namespace gpusim

#endif  // GPUSIM_SIM_REPLAY_WARM_START_H_
