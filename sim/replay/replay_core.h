// Internal to sim/replay: the replay of an alloc/free stream through one
// allocator, one operation at a time, so that the same code serves a stream
// held in memory (ReplayRecorded, ReplayNativeTrace: replay.cc) and one
// replayed as the trace is parsed (replay_stream.cc, Note [Replaying as the
// trace is parsed]). It keeps only what is live: the allocator's state, the
// buffers placed, and the running comparison with the recorded totals.
#ifndef GPUSIM_SIM_REPLAY_REPLAY_CORE_H_
#define GPUSIM_SIM_REPLAY_REPLAY_CORE_H_

#include <map>
#include <memory>
#include <optional>
#include <set>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "sim/alloc/allocator.h"
#include "sim/alloc/graph_pools.h"
#include "sim/import/recorded_trace.h"
#include "sim/replay/replay.h"
#include "sim/replay/replay_internal.h"

namespace gpusim {
namespace replay_internal {

// One warm-start replay (Note [Growing inferred segments]): the segment
// growths earlier passes found, and those this pass finds.
struct WarmPass {
  WarmCorrections kept;                     // from earlier passes
  std::map<int64_t, int64_t> found;         // growths, segment begin → end
  std::set<int64_t> found_fills;            // gaps shown live (Note [Bytes live through the recording])
  std::optional<AddressDeparture> departure;  // this pass's first (ReplayCore::Start clears it)
  // Whether the pass may stop at a departure that corrects the start (and
  // found no growth before it): the rest of it would be replayed again.
  bool may_stop = true;
  bool stopped = false;  // it did (ReplayCore::Op returned Aborted)
};
// Whether `st`, from a warm pass, is its stop at a departure.
inline bool StoppedAtDeparture(const absl::Status& st, const WarmPass& pass) {
  return pass.stopped && absl::IsAborted(st);
}
// After a pass from the warm start `ws`: keeps in pass.kept the growths it
// found that fit in the spare reserved bytes together and what its first
// departure from the recorded addresses says (Note [Departures from the
// recorded addresses]); whether anything was kept (if not, the passes have
// reached their fixed point).
bool KeepGrowths(const WarmStart& ws, WarmPass& pass);

// Note [The start state the recording agrees with most]: the passes of a
// warm replay, from the inferred start state to its fixed point, and the
// result they end with.
class WarmFixedPoint {
 public:
  static constexpr int64_t kMaxPasses = 64;
  static constexpr int64_t kScoredEvents = 1'000'000;  // warm passes that replay fewer events in all run to the end
  // `events`: the memory events one pass replays.
  explicit WarmFixedPoint(int64_t events) : events_(events) {}
  WarmPass& pass() { return pass_; }
  // Before pass n (from 1).
  void Begin(int64_t n);
  // After pass n replayed into `w` (applied warm start): whether the passes
  // are done (then Take() is the result).
  bool End(int64_t n, ReplayResult w);
  ReplayResult Take() { return std::move(*best_); }

 private:
  WarmPass pass_;
  std::optional<ReplayResult> best_;
  int64_t events_;
  int64_t replayed_ = 0;  // memory events the warm passes replayed
};

class ReplayCore {
 public:
  // The allocator of options.allocator at options.capacity; fills r's
  // allocator, capacity and offline fields. `captures` (may be null: none)
  // are the CUDA graph captures whose allocs go to private pools;
  // `kineto_sizes`: the recorded sizes are block sizes (Kineto), which the
  // warm start's segment growth reads.
  static absl::StatusOr<std::unique_ptr<ReplayCore>> Make(const ReplayOptions& options,
                                                          const std::vector<CaptureWindow>* captures,
                                                          bool kineto_sizes, ReplayResult& r);

  Allocator& allocator() { return *allocator_; }

  // Before the first op. `preexisting`: bytes live before recording and
  // never freed, given buffer `preexisting_id`; `warm`, when set, is the warm
  // start restored into allocator() (its blocks `restored`), which holds
  // them already.
  absl::Status Start(Bytes preexisting, BufferId preexisting_id, const WarmStart* warm,
                     absl::flat_hash_set<BufferId> restored, WarmPass* pass);
  // One operation; `m` (may be null) is the recorded memory event it came
  // from, `source` its index (-1: none).
  absl::Status Op(const MemoryOp& e, const RecordedMemoryEvent* m, int64_t source);
  // After the last op of recorded event `source` (m: its record, null when
  // there is nothing recorded to compare with).
  void EndEvent(const RecordedMemoryEvent* m, int64_t source);
  // After the last op: Finish()es the allocator, fills the rest of r.
  absl::Status Finish();

 private:
  ReplayCore(const ReplayOptions& options, ReplayResult& r) : options_(options), r_(r) {}
  int64_t CaptureOf(const RecordedMemoryEvent* m) const;
  void OomAt(const MemoryOp& e, const RecordedMemoryEvent* m, int64_t source);
  AddressDeparture DepartureOf(int64_t source, int64_t recorded, BufferId buffer) const;
  void TrackReservedRun(const RecordedMemoryEvent& m, int64_t source, Bytes predicted);
  std::string WhyReservedDiffers(const RecordedMemoryEvent& m, int64_t source, Bytes predicted) const;

  const ReplayOptions& options_;
  ReplayResult& r_;
  std::unique_ptr<Allocator> allocator_;
  bool offline_ = false;
  bool kineto_sizes_ = false;
  const WarmStart* warm_ = nullptr;
  WarmPass* pass_ = nullptr;
  absl::flat_hash_set<BufferId> restored_;
  // Live buffers: requested bytes (for the no-fragmentation bound) and
  // whether the allocator holds them (placed, or restored at the start).
  struct Live {
    Bytes size;
    bool placed = false;
  };
  absl::flat_hash_map<BufferId, Live> live_blocks_;
  // Note [CUDA graph private pools]: allocator_ is then a
  // GraphPoolAllocator (pooled_), one private pool per capture window.
  const std::vector<CaptureWindow>* captures_ = nullptr;
  GraphPoolAllocator* pooled_ = nullptr;
  AllocatorUsage last_;  // usage after the latest op
  // Note [Exact from the first determined event]: the warm start's first
  // determined event (-2: no warm start), the reserved totals after the
  // previous compared event (model, recording; -1: none yet), and the open
  // run of inexact events.
  int64_t determined_from_ = -2;
  Bytes model_reserved_before_{-1}, recorded_reserved_before_{-1};
  std::optional<MismatchRun> open_run_;
  double alloc_det_abs_ = 0, reserved_det_abs_ = 0;
  PeakTracker peak_;
  double alloc_abs_ = 0, reserved_abs_ = 0;
  Bytes live_, live_peak_;
};

}  // namespace replay_internal
}  // namespace gpusim

#endif  // GPUSIM_SIM_REPLAY_REPLAY_CORE_H_
