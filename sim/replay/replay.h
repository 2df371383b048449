// Replay of a recorded allocation stream (a Kineto trace, a memory timeline,
// a caching-allocator snapshot) through an allocator model, compared event by
// event with what the recording says: `gpusim replay` and `gpusim compare`.
//
// Two paths:
//  - ReplayRecorded: the recorded alloc/free stream (ToNativeTrace's pairing,
//    sim/import/recorded_trace.h) through any allocator. Where the recorder
//    wrote totals after each event (Kineto "Total Allocated" / "Total
//    Reserved"), the model's allocated and reserved bytes after the same
//    event are compared with them.
//  - ReplaySnapshot with check_addresses: the snapshot's allocator state at
//    the start of its trace window is rebuilt from the final `segments` and
//    the trace (Note [Rebuilding the window's start] in snapshot_replay.cc), then
//    replayed forward through the pytorch_caching model, checking every
//    allocation's address and the final segments.
#ifndef GPUSIM_SIM_REPLAY_REPLAY_H_
#define GPUSIM_SIM_REPLAY_REPLAY_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "sim/alloc/allocator.h"
#include "sim/alloc/start_state.h"
#include "sim/base/json_writer.h"
#include "sim/base/units.h"
#include "sim/config/spec.h"
#include "sim/import/input.h"
#include "sim/import/recorded_trace.h"
#include "sim/import/snapshot.h"
#include "sim/replay/warm_start.h"

namespace gpusim {

struct ReplayOptions {
  AllocatorSpec allocator{"pytorch_caching", {}};
  // What cudaMalloc may reserve in all. 0: the recorded device's
  // totalGlobalMem (Kineto deviceProperties) when the trace has it, else
  // default_capacity.
  Bytes capacity;
  std::string capacity_source;     // where `capacity` came from, for the report
  Bytes default_capacity;
  std::string default_capacity_source;
  std::optional<int32_t> device;   // recorded device; unset: the only one
  bool check_addresses = false;    // snapshots only; needs pytorch_caching
  bool keep_series = false;        // fill ReplayResult::series
  // pytorch_caching on a recording with addresses and Total Reserved whose
  // first event a cold start does not explain: start from the inferred warm
  // segment set (sim/replay/warm_start.h). false: always start cold.
  bool infer_warm_start = true;
  // Fill ReplayResult::start (Note [One start state for every command],
  // sim/alloc/start_state.cc).
  bool keep_start_state = false;
  // A step recorded from PyTorch: the cuDNN workspace assumption
  // (sim/lower/eager/device_memory_conv.h; --cudnn-workspace); empty: not
  // given. Refused by name on other recordings.
  std::string cudnn_workspace;
  // The same for --sdpa-backend (sim/lower/eager/device_memory_sdpa.h).
  std::string sdpa_backend;
  // A Kineto trace streamed (ReplayKinetoStreaming): how many memory events
  // may be held back to put it in (ts, Ev Idx) order (Note [A bounded
  // reorder window], sim/replay/reorder_window.h). The whole-trace path
  // sorts without a bound; only the streamed path reads this.
  int64_t reorder_window = 65536;
  // A Kineto trace streamed in passes (Note [Streaming a warm trace in
  // passes]): the most bytes its memory events may take, packed, so that the
  // passes after the first replay them from memory instead of reading the
  // file again (Note [Later passes from memory], sim/replay/event_cache.h);
  // past it they read the file. 0: always read the file.
  int64_t stream_cache_bytes = int64_t{256} << 20;
};

// Predicted vs recorded totals over the events that recorded one.
struct TotalsComparison {
  int64_t compared = 0;
  int64_t exact = 0;
  Bytes max_abs_error;
  double mean_abs_error = 0;      // bytes
  int64_t first_mismatch = -1;    // recorded memory-event index
  Bytes recorded_peak;
  Bytes predicted_peak;           // over the compared events
  double exact_share() const { return compared == 0 ? 0.0 : static_cast<double>(exact) / compared; }
};

struct AddressCheck {
  int64_t allocations = 0;          // allocations in the window
  int64_t at_recorded_address = 0;
  int64_t restored_segments = 0;    // segments rebuilt at the window's start
  int64_t restored_blocks = 0;      // blocks allocated at the window's start
  int64_t inferred_block_sizes = 0; // of those, blocks whose size was inferred
  int64_t passes = 0;               // replays run while inferring sizes
  int64_t grown_block_sizes = 0;    // inferred sizes grown from misplacements
  bool fixed_point = true;          // the last pass found no further growth
  bool final_segments_match = false;
  int64_t final_segment_differences = 0;
  std::vector<std::string> misses;  // the first few misplaced allocations
  double share() const {
    return allocations == 0 ? 1.0 : static_cast<double>(at_recorded_address) / allocations;
  }
};

struct ReplayOom {
  int64_t event = -1;    // recorded memory-event index
  SimTime time{-1};
  Bytes requested;
  Bytes reserved;        // the model's reserved bytes then
  Bytes free;            // capacity - reserved
};

struct ReplayPoint {
  int64_t event = 0;     // recorded memory-event index
  SimTime time{-1};
  Bytes allocated, reserved;                             // predicted
  std::optional<Bytes> recorded_allocated, recorded_reserved;
};

// Note [Exact from the first determined event] (sim/replay/warm_start.cc):
// consecutive recorded events at which the predicted reserved is not the
// recorded one, and the fact that explains the first of them.
struct MismatchRun {
  int64_t first = -1, last = -1;  // recorded memory-event indices
  Bytes error;                    // predicted - recorded at `first`
  std::string why;
};
inline constexpr size_t kMismatchRunsKept = 16;

struct ReplayResult {
  std::string source;
  std::string format;
  std::string allocator;
  Bytes capacity;
  std::string capacity_source;
  int64_t events = 0;            // memory events replayed (recorded)
  AllocatorStats stats;
  Bytes no_fragmentation_peak;   // peak of live requested bytes (ideal packing)
  Bytes fragmentation_at_peak;   // reserved - allocated at the reserved peak
  Bytes preexisting;             // bytes live before recording, never freed
  std::string start_state;       // how the allocator state at event 0 was made
  std::optional<WarmStart> warm_start;  // when tried: what was inferred, or why not
  int64_t graph_pools = 0;        // CUDA graph private pools (Note [CUDA graph private pools])
  int64_t graph_pool_allocs = 0;  // allocations they served
  ConversionStats conversion;
  std::optional<TotalsComparison> allocated, reserved;
  // A warm start applied: the comparisons over the events from the first
  // at which its start state is fully determined (WarmStart::determined_from;
  // compared = 0 when that is never).
  std::optional<TotalsComparison> allocated_determined, reserved_determined;
  std::vector<MismatchRun> reserved_mismatches;  // the first kMismatchRunsKept
  int64_t reserved_mismatch_runs = 0;            // all of them
  std::optional<AddressCheck> addresses;
  std::optional<ReplayOom> oom;  // the first allocation that failed
  int64_t ooms = 0;
  // Memory events whose recorded Total Reserved was below their Total
  // Allocated, read as not recorded (Note [Reserved below allocated],
  // sim/import/kineto.cc): not compared, no warm start inferred from them.
  int64_t reserved_below_allocated = 0;
  bool offline = false;          // an offline planner: totals not compared per event
  std::vector<ReplayPoint> series;  // when keep_series
  // When keep_start_state: the allocator state the replay started from,
  // under the buffer ids of the import (ToNativeTrace's). Unset for a
  // snapshot replayed from its rebuilt window start, whose ids are the
  // snapshot's own.
  std::optional<AllocatorStartState> start;
  // How the trace was read (ReplayFile): "streamed" (Note [Replaying as the
  // trace is parsed]), or "whole: WHY" when it was imported whole; empty
  // when the caller imported it.
  std::string import;
};

absl::StatusOr<ReplayResult> ReplayRecorded(const RecordedTrace& recorded, const ReplayOptions& options);
// Without check_addresses this is ReplayRecorded of the snapshot's trace.
absl::StatusOr<ReplayResult> ReplaySnapshot(const RecordedSnapshot& snapshot, const ReplayOptions& options);

// A native trace (sim/trace/trace_io.h, `gpusim-trace` files): its alloc/free
// events through the allocator, from Trace::preexisting; nothing recorded to
// compare with. ValidateTrace runs first.
absl::StatusOr<ReplayResult> ReplayNativeTrace(const Trace& trace, const std::string& source_name,
                                               const ReplayOptions& options);

// A file loaded once for `replay`, `compare` (one replay per allocator) and
// anything else that replays it: exactly one of native, snapshot, recorded.
struct LoadedRecording {
  std::string path;
  std::string format;  // "gpusim-trace", "snapshot", "kineto", "memory_timeline"
  std::optional<Trace> native;
  std::optional<RecordedSnapshot> snapshot;
  RecordedTrace recorded;  // kineto, memory_timeline
};
// Reads a trace SniffInput classified (sim/import/input.h), through its one
// open; a run config or an HLO module is an error naming it.
absl::StatusOr<LoadedRecording> LoadRecording(const Input& in);
// SniffInput(path), then the above.
absl::StatusOr<LoadedRecording> LoadRecording(const std::string& path);
// Snapshots through ReplaySnapshot (Note [One start state for snapshots]),
// native traces through ReplayNativeTrace, the rest through ReplayRecorded.
absl::StatusOr<ReplayResult> ReplayLoaded(const LoadedRecording& loaded, const ReplayOptions& options);

// Note [Replaying as the trace is parsed] (replay_stream.cc): a Kineto trace
// replayed in one pass as it is parsed, in memory bounded by its live blocks.
// nullopt, with *why_not set, when the trace needs the whole-trace path
// (ReplayFile then takes it; the numbers are the same either way).
// REQUIRES: in.kind is kKineto. Every pass reads through in.file.
absl::StatusOr<std::optional<ReplayResult>> ReplayKinetoStreaming(const Input& in, const ReplayOptions& options,
                                                                  std::string* why_not = nullptr);
absl::StatusOr<std::optional<ReplayResult>> ReplayKinetoStreaming(const std::string& path,
                                                                  const ReplayOptions& options,
                                                                  std::string* why_not = nullptr);

// Replays `path` (a native trace or any recorded format): a Kineto trace
// through ReplayKinetoStreaming when it allows, else LoadRecording +
// ReplayLoaded. ReplayResult::import says which.
absl::StatusOr<ReplayResult> ReplayFile(const Input& in, const ReplayOptions& options);
// SniffInput(path), then the above.
absl::StatusOr<ReplayResult> ReplayFile(const std::string& path, const ReplayOptions& options);

std::string RenderReplayText(const ReplayResult& r);
// Keys: source, format, allocator.{name, peak_allocated_bytes,
// peak_reserved_bytes, ...}, replay.{events, allocated_exact_share,
// reserved_exact_share, address_exact_share, allocated, reserved,
// allocated_determined, reserved_determined (Note [Exact from the first
// determined event]), reserved_mismatch_runs, reserved_mismatches[{first_event,
// last_event, error_bytes, why}], warm_start, ...}, oom.
std::string RenderReplayJson(const ReplayResult& r);
// The same object with more keys after the replay's (`more` writes them).
std::string RenderReplayJson(const ReplayResult& r, const std::function<void(JsonWriter&)>& more);

// `gpusim compare`: one row per allocator.
std::string RenderAllocatorCompareText(const std::vector<ReplayResult>& rows);
std::string RenderAllocatorCompareJson(const std::vector<ReplayResult>& rows);

}  // namespace gpusim

#endif  // GPUSIM_SIM_REPLAY_REPLAY_H_
