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

// A range of an inferred segment where no recorded block ever lies (Note
// [Bytes live through the recording]).
struct StartGap {
  int64_t begin = 0, end = 0;
  bool tail = false;    // it runs to its segment's end
  bool proven = false;  // a block the recording allocates begins at its end, off a 2 MiB boundary
  bool chosen = false;  // filled by choice (the bytes fit nowhere proven)
  int64_t filled = 0;   // bytes of it restored as live (0: free)
};

// What earlier passes of the warm replay found about the start state.
struct WarmCorrections {
  std::map<int64_t, int64_t> grown_ends;  // segment begin → end (Note [Growing inferred segments])
  std::set<int64_t> joined;               // chosen boundaries that are not segment boundaries
  std::set<int64_t> filled;               // gap begins shown live (Note [Bytes live through the recording])
  std::set<int64_t> freed;                // gap begins shown free: not chosen to hold such bytes
  std::map<int64_t, int64_t> front_free;  // gap begin → bytes at its front shown free
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
  bool new_segment = false;  // the model mapped a segment for it
};

// The bytes the corrections of Note [Departures from the recorded
// addresses] and Note [Growing inferred segments] may move: free reserved
// bytes where no recorded block lies (a segment grows into them), and the
// bytes live through the recording restored there (a gap shown live takes
// them).
struct WarmBudget {
  Bytes spare;    // free, in the untouched segment
  Bytes movable;  // live, in the untouched segment
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
  std::vector<StartGap> gaps;             // ascending
  Bytes spare_bytes;  // of untouched_bytes, what the bytes live before recording leave free
  Bytes movable_bytes;  // of untouched_bytes, the bytes live before recording restored there
  // Note [Bytes live through the recording]: the bytes live before recording
  // at unknown addresses, and where they were restored.
  Bytes unknown_bytes;
  Bytes proven_bytes;     // in gaps a recorded placement proves live
  Bytes chosen_bytes;     // in gaps chosen to hold them (they did not fit elsewhere)
  Bytes shown_bytes;      // in gaps a replay's placement showed live
  Bytes unplaced_bytes;   // in no inferred segment: a segment of their own past Total Reserved
  int64_t grown_segments = 0;  // segments grown by Note [Growing inferred segments]
  int64_t passes = 1;          // replays run to reach the fixed point
  int64_t joined_boundaries = 0;  // chosen boundaries joined by Note [Departures from the recorded addresses]
  // Note [Exact from the first determined event]: the first memory event
  // from which the start state is fully placed (0: from the start; -1:
  // never).
  int64_t determined_from = 0;
  WarmBudget budget() const { return {spare_bytes, movable_bytes}; }
};

// What a replay's placement shows about the start state: a gap that was
// live, or a segment that ends later (Note [Growing inferred segments]).
struct StartCorrection {
  bool fill = false;  // true: the gap at `key` is live; false: the segment at `key` ends at `end`
  int64_t key = 0;
  int64_t end = 0;
};

// Note [Growing inferred segments]: after a warm replay placed a large-pool
// request of `recorded_block` bytes (Kineto's Bytes: the real block size) at
// its recorded address `addr` in a model block of `model_block` bytes, what
// must differ in the start state; nullopt when the placement says nothing.
std::optional<StartCorrection> CorrectionForPlacement(const WarmStart& w, int64_t addr, int64_t recorded_block,
                                                      int64_t model_block);

// Note [Departures from the recorded addresses]: what the first departure
// of a replay from the warm start `w` says about that start, added to
// `kept` (growths within *spare bytes, which shrink by them); whether
// anything was.
bool CorrectForDeparture(const WarmStart& w, const AddressDeparture& d, WarmBudget* budget, WarmCorrections* kept);

// The sentence WarmStart::undetermined carries for a departure no
// correction explains.
std::string DepartureUnexplained(const AddressDeparture& d);

// Note [Warm facts, not events]: what the warm-start inference reads from a
// recording, collected one memory event at a time (in recorded order) in
// memory bounded by the distinct blocks, not by the events: the first
// event's Total Reserved, the union of the small-pool and of the large-pool
// block ranges (pieces, with whether the
// recording allocates a block at its begin), the live blocks, and the
// blocks freed but never allocated (live at the start).
// The whole-trace replay feeds it the imported events; the streamed one
// (sim/replay/replay_stream.cc) feeds it as the trace is parsed, so both
// infer from the same facts.
class WarmFactCollector {
 public:
  // `device`: the recorded device whose events count; `rounding`: the
  // allocator whose RoundedBlockSize gives a request's block (it must
  // outlive the collector).
  WarmFactCollector(int32_t device, const Allocator& rounding) : device_(device), rounding_(rounding) {}
  // `index`: the event's recorded memory-event index.
  void Add(const RecordedMemoryEvent& m, int64_t index);

  // A block live at the start: freed in the recording, never allocated in it.
  struct StartBlock {
    int64_t address, size, requested;
    int64_t free_event;  // the memory event that frees it
  };
  // A range of recorded blocks, overlapping ones merged.
  struct Piece {
    int64_t end = 0;
    bool alloc_at_begin = false;  // the recording allocates a block at its begin
  };
  // The facts, read by RestoreWarmStart.
  const std::string& why_not() const { return why_not_; }
  bool have_reserved() const { return have_reserved_; }
  Bytes recorded_reserved() const { return recorded_reserved_; }
  const std::vector<std::pair<int64_t, int64_t>>& straddles() const { return straddles_; }
  int64_t straddle_count() const { return straddle_count_; }
  const std::map<int64_t, Piece>& small_pieces() const { return small_pieces_; }
  const std::map<int64_t, Piece>& large_pieces() const { return large_pieces_; }
  const std::vector<StartBlock>& start_blocks() const { return start_blocks_; }

 private:
  int32_t device_;
  const Allocator& rounding_;
  std::string why_not_;  // the first fact that rules the inference out while reading
  bool have_reserved_ = false;
  Bytes recorded_reserved_;
  // Small blocks across a 2 MiB boundary (address, block): the first few.
  std::vector<std::pair<int64_t, int64_t>> straddles_;
  int64_t straddle_count_ = 0;
  std::map<int64_t, Piece> small_pieces_;  // small-pool ranges, begin → piece
  std::map<int64_t, Piece> large_pieces_;  // large-pool ranges, begin → piece
  // Per recorded address: a block is live there, and the largest blocks an
  // alloc there added to the small and to the large pieces (Note [Pieces
  // seen before] in warm_start.cc).
  struct Seen {
    bool live = false;
    int64_t small_block = 0, large_block = 0;
  };
  absl::flat_hash_map<int64_t, Seen> seen_;
  std::vector<StartBlock> start_blocks_;
};

// Restores into `a` (a caching allocator: Allocator::ModelsSegments) the
// segment set inferred from `facts` (the recording's memory events, Note
// [Warm facts, not events]) and the blocks live at its start: `head_ids`
// (the buffer ids of ToMemoryOps' head allocs — the blocks freed but never
// allocated in the recording — in order) at their recorded addresses, and
// `preexisting` (Trace::preexisting, the bytes live before recording at
// unknown addresses) in blocks of buffers `preexisting_id` and up, in gaps
// between recorded blocks and in the reserved bytes no address lies in
// (Note [Bytes live through the recording]). Buffers restored are added to
// `restored`. When the data rule the inference out (no addresses, no Total
// Reserved), returns applied = false and why, and leaves `a` untouched;
// what breaks a rule is named in WarmStart::undetermined and the rest
// placed. `kept` is what earlier passes found.
// REQUIRES: a.ModelsSegments().
absl::StatusOr<WarmStart> RestoreWarmStart(const WarmFactCollector& facts, const std::vector<BufferId>& head_ids,
                                           Bytes preexisting, BufferId preexisting_id,
                                           const WarmCorrections& kept, Allocator& a,
                                           absl::flat_hash_set<BufferId>* restored);

// ReplayResult::start_state of an applied warm start.
std::string WarmStartState(const WarmStart& ws);

}  // namespace gpusim

#endif  // GPUSIM_SIM_REPLAY_WARM_START_H_
