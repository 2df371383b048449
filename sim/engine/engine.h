// The engine: a discrete-event replay of one Trace on one device.
//
// Memory events are replayed in trace order through the configured
// allocator, with an ideal (no-fragmentation) tracker beside it, so
// fragmentation = the allocator's peak − the ideal peak. Running out of
// device memory is a result (where, what was requested, what was live).
//
// Timed events run on streams: each starts when its stream is free and every
// event in its `after` list has finished, and lasts EventDuration(). The
// step time is the last finish; busy and exposed times are kept per stream.
//
// Note [Allocator time]
// Memory events are replayed in the same pass as the timed ones, so what the
// allocator does to the device delays the stream that asked. After each
// alloc the engine reads the allocator's action log (RecordEventsTo) and
// charges the alloc's stream, in order, for:
//   segment_alloc   device.malloc_cost         (cudaMalloc of a new segment;
//                                               BFC growing a region)
//   segment_map     pages · map_page_cost      (expandable segments: cuMemCreate
//                                               + cuMemMap per page; PyTorch
//                                               CUDACachingAllocator.cpp
//                                               ExpandableSegment::map)
//   segment_free    wait until every stream has drained, then free_cost
//                   (cudaFree synchronises the device; release_cached_blocks
//                   synchronises first: synchronize_and_free_events)
//   segment_unmap   wait until the segment's stream has drained, then
//                   pages · unmap_page_cost (ExpandableSegment::unmapHandles:
//                   cudaStreamSynchronize, then cuMemUnmap + cuMemRelease
//                   per page)
// The next event of that stream (the op that needed the buffer) starts after
// the charge. The allocator starts empty, as in a first step: a warm caching
// allocator pays again only when a step needs more than it has cached or
// frees cached segments (the retry path; torch.cuda.empty_cache() has no
// trace event yet, so only the retry path frees here). A costly alloc joins
// the critical path like a timed event. Only strategies that log segment
// actions are charged (pytorch_caching, bfc); ideal, the offline planners
// and the composites (best_of, fallback) log none. The fit of sim/calibrate
// replays with a fresh allocator per trial for the same reason.
#ifndef GPUSIM_SIM_ENGINE_ENGINE_H_
#define GPUSIM_SIM_ENGINE_ENGINE_H_

#include <array>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "sim/alloc/allocator.h"
#include "sim/alloc/start_state.h"
#include "sim/config/spec.h"
#include "sim/trace/trace.h"

namespace gpusim {

struct OomInfo {
  bool happened = false;
  int64_t event = -1;    // trace index of the failing alloc
  SimTime time;          // simulated time it was issued
  Bytes requested;
  Bytes live;            // ideal live bytes just before it
  Bytes reserved;        // allocator reserved bytes then
  Bytes capacity;
  std::string buffer;    // name of the requested buffer
};

// The allocator's counters after one memory event.
struct AllocatorSample {
  int64_t event = -1;  // trace index
  Bytes allocated;
  Bytes reserved;
};

// Note [Host timeline]: an eager step is issued by one host thread, op by
// op in program order, each costing the host HostIssueTime (PyTorch
// dispatch and the launch call; Python module calls charged to an op of the
// module). The host runs ahead of the GPU without waiting (launches are
// asynchronous), so a kernel starts at the latest of its stream being
// free, its dependencies and the host having issued it: a step is bounded
// by whichever side is slower. Eager steps are charged by
// sim/lower/eager/host_timeline.h; events with no host cost (XLA steps) do
// not move the host clock.
//
// Note [Host syncs]: an event marked host_sync (a torch.cuda.synchronize(),
// a .item() reading a result on the host) stops the host until every stream
// has run what was issued so far; it issues nothing more before that. The
// host's clock is its issue time plus these waits, so after a sync the next
// kernel waits for the host again: a step that syncs often is bounded by
// host + GPU rather than the larger of the two. A sync waits for all
// streams (cudaDeviceSynchronize); a .item() waits for its stream, which in
// the steps that mark it (the collectives it reads run before it) ends
// last anyway.
//
// Note [Critical path segments]
// The critical path as the engine ran it, on request (Simulate's
// `critical_path`): segments in time order that tile [0, step_time]
// exactly, walked back from the event that ends last. Each timed event's
// start was set by one thing, which the pass in trace order records:
//   stream_order      its stream's previous event ended (the stream was busy)
//   dependency        an event in its `after` list ended
//   collective_wait   as dependency, the event waited for being a collective
//   host_issue        the host had not yet issued it (Note [Host timeline]):
//                     the host never waits for the GPU, so the path before
//                     it is the host issuing every op up to this one, one
//                     kHostIssue segment per op with host work
//   allocator_drain   an alloc's cudaFree / unmap waited for a stream to
//                     drain (Note [Allocator time])
//   start             nothing: it started at time 0
//   host_sync         (a kGap in the host's issue) the host waited at a sync
//                     (Note [Host syncs]) for the streams to drain: the GPU
//                     work before the sync, not the host, held the path. The
//                     walk goes on from the timed event at or before the
//                     sync that ended last (when it ended after the host's
//                     issue did), so the path names the kernels the sync
//                     waited for; the gap is what is left between that
//                     event's end and the host resuming (none in the engine)
// Walking back through the recorded predecessor, a predecessor that ended
// before its successor started leaves a gap: the further iterations of a
// repeated range the walk crossed (Note [Rolled loop built once]; events in
// a range carry their first iteration's times), or the successor's own
// wait (an allocator drain). An event that ended after its successor
// started (an alloc whose charge mixed a malloc and a drain) is cut at that
// start, so the segments never overlap. kIdle is what no recorded cause
// explains; no event graph the tests build has one.
enum class PathGate {
  kStart, kStreamOrder, kDependency, kCollectiveWait, kHostIssue, kAllocatorDrain, kRepeatedIterations, kIdle,
  kHostSync
};
// "start", "stream_order", "dependency", "collective_wait", "host_issue",
// "allocator_drain", "repeated_iterations", "idle", "host_sync".
std::string_view PathGateName(PathGate g);

struct PathSegment {
  enum class Kind {
    kEvent,               // event `event` ran (a timed event or a charged alloc)
    kHostIssue,           // the host issued event `event` while the GPU waited
    kRepeatedIterations,  // further iterations of the repeated range holding `event`
    kGap,                 // a wait with no event: gate says why
  };
  Kind kind = Kind::kEvent;
  int64_t event = -1;
  SimTime start, end;
  PathGate gate = PathGate::kStart;  // what its start waited for
};

// Note [One memory event log]
// The engine consults the allocator at every alloc and free (Note [Allocator
// time]). Asked to (Simulate's keep_memory_log), it keeps what the
// allocator decided: every action it logged (RecordEventsTo) with the trace
// event whose alloc or free took it, where each allocated buffer was placed,
// and the blocks live when the allocator stopped (the end of the step, or
// the first out of memory, before its request: the allocator sees nothing
// after it). Whatever shows the step's memory reads this log instead of
// replaying the trace through a fresh allocator again: the memory map's
// addresses (viz/memory_map.cc) and the memory snapshot's device_traces and
// segments (viz/memory_snapshot.cc). On main `gpusim viz CONFIG --out DIR
// --snapshot FILE` replayed the step four times (the engine, the map for
// memory_map.svg and again for report.html, the snapshot); it replays it
// once (Note [Counting memory replays], sim/alloc/allocator.h). The log is
// the engine's allocator's: a step whose engine tracks live bytes only
// (Note [JAX arena]) keeps none.
struct MemoryEventLog {
  bool kept = false;  // Simulate was asked, with an allocator
  struct Action {
    int64_t event = -1;  // trace index of the alloc or free that took it
    AllocatorEvent action;
  };
  std::vector<Action> actions;  // in the order taken
  struct Placed {
    int64_t event = -1;          // trace index of the alloc
    std::optional<uint64_t> address;  // Allocator::AddressOf after it
  };
  // Every alloc the allocator saw or held from its start state (Simulate's
  // `start`), in trace order, until the first out of memory (not included).
  std::vector<Placed> placed;
  struct Block {
    BufferId buffer = -1;
    std::optional<uint64_t> address;  // Allocator::AddressOf
    std::optional<Bytes> size;        // Allocator::BlockSizeOf
  };
  // The buffers live then and those of the start state's blocks, by id.
  std::vector<Block> live_at_stop;
  // The block of `id` in live_at_stop; null when it is not there.
  const Block* LiveBlock(BufferId id) const;
};

struct SimResult {
  // Memory (ideal tracker).
  Bytes preexisting;                   // the trace's preexisting bytes (in peak_live)
  // The allocator holds them: it was restored to a start state (Simulate's
  // `start`), which has them in its segments. false: never in the allocator.
  bool preexisting_in_allocator = false;
  Bytes peak_live;
  int64_t peak_event = -1;
  std::array<Bytes, kNumRoles> live_by_role_at_peak{};
  std::vector<BufferId> live_at_peak;  // buffers live at the ideal peak
  // Allocator.
  std::string allocator_name;
  AllocatorStats allocator;
  // Allocated and reserved after each memory event where either changed
  // (and after the first), until an out-of-memory; empty without an
  // allocator. The memory timeline draws it.
  std::vector<AllocatorSample> allocator_curve;
  OomInfo oom;
  // Time.
  std::vector<SimTime> start, end;     // per event (memory events: issue time)
  // Per Trace::repeats entry: the period of its steady iteration (the events
  // after the range start (times - 1) periods later). The charts draw the
  // iterations it stands for in that time (viz/step_view.h).
  std::vector<SimTime> repeat_periods;
  SimTime step_time;
  SimTime compute_busy;                // compute stream busy
  SimTime collective_busy;             // collective stream busy
  SimTime copy_busy;                   // host copies (PCIe), whatever stream they ran on
  SimTime copy_to_host;                // of which device→host
  SimTime copy_to_device;              // of which host→device
  Bytes bytes_to_host, bytes_to_device;  // PCIe bytes each way
  SimTime recompute_busy;              // compute spent on rematerialisation
  SimTime host_busy;                   // the host's issue time (Note [Host timeline])
  SimTime host_wait;                   // kernel start delays waiting for the host
  SimTime host_sync_wait;              // the host waiting for the device at syncs (Note [Host syncs])
  int64_t host_syncs = 0;              // syncs it waited at (each iteration of a repeated one)
  SimTime exposed_communication;       // collective time not hidden by compute
  SimTime exposed_copy;                // host-copy time not hidden by compute
  // Allocator time (Note [Allocator time]).
  int64_t segment_allocs = 0;          // cudaMalloc calls (new segments)
  int64_t segment_frees = 0;           // cudaFree calls
  int64_t pages_mapped = 0;            // expandable-segment pages mapped
  int64_t pages_unmapped = 0;          // and unmapped
  SimTime allocator_time;              // device-allocation calls charged to streams
  SimTime allocator_sync_wait;         // streams idle waiting for a drain before cudaFree/unmap
  // The critical path: the chain of timed events, each starting when the
  // one before it ended (on its stream or as a dependency), that ends last.
  int64_t critical_events = 0;
  SimTime critical_compute;            // compute time on the critical path
  SimTime critical_communication;      // collective time on it
  SimTime critical_copy;               // host-copy time on it
  SimTime critical_allocator;          // device-allocation calls on it
  // Note [Critical path segments]; empty unless Simulate was asked.
  std::vector<PathSegment> critical_path;
  double flops = 0;                    // all compute flops
  double model_flops = 0;              // flops excluding recompute
  // Device time of the timed events by (kind, framework op: EventOpName in
  // sim/device/timing.h): every
  // iteration an event stands for, as the busy times above count them.
  // Note [Kernel time by op]: what tools/collect/kineto_classes.py sums
  // into op classes to set against a Kineto trace's kernel times.
  //
  // Note [Kernel time by op on request]
  // Only a recorded PyTorch step reports it (native_step.h: the replay
  // JSON's step.kernel_time). A simulated model step names nearly every
  // event apart (3,149 keys for llama7b's 3,456 timed events), and keying
  // each one into this map (a string built per event, compares down the
  // tree, a node and a string allocated, then freed with the report) was a
  // third of a replay, which `advise` runs a thousand times for nothing:
  // ReplayStep (run, advise, compare) asks Simulate for none.
  struct OpTime {
    int64_t events = 0;   // kernels (events x iterations)
    SimTime busy;
    double flops = 0;
    double bytes = 0;     // read + written
  };
  std::map<std::pair<OpKind, std::string>, OpTime> time_by_op;
  // Note [One memory event log]; kept only when Simulate was asked.
  MemoryEventLog memory_log;
};

// Note [Fragmentation]: bytes the allocator holds beyond what is live.
// Without an out-of-memory it is peak reserved - the no-fragmentation peak
// (peak live). After an OOM the allocator stops (it never sees the later
// allocations) while the ideal tracker counts on, so whole-run peaks are not
// comparable (their difference went negative, issue 17); it is taken at the
// OOM point instead: reserved then - live then, the bytes held that could
// not serve the failing request. Live bytes here exclude the trace's
// preexisting bytes, which never pass through the allocator (the replay
// fuzzer found fragmentation of minus the preexisting bytes) unless a start
// state holds them (preexisting_in_allocator). Never negative.
Bytes FragmentationBytes(const SimResult& r);

// A trace's repeats (Note [Rolled loop built once], sim/lower/lower.h) run
// once each and are charged `times` times: the later events start
// (times - 1) periods later, a period being how far the range advanced the
// streams it ran on; busy times, FLOPs, PCIe bytes, the critical path and
// exposed communication count the range's events `times` times (exposure:
// one period's window from the range's start, per further iteration).
// Per-event start/end of the range are its first iteration's. Memory events
// in it are replayed once: a steady iteration's live set is the same in
// every iteration (XLA semantics, where the engine's allocator tracks live
// bytes only; a runtime allocator would see one iteration).
// REQUIRES: trace passed ValidateTrace. `allocator` is consulted for every
// memory event; it may be null (ideal tracking only, no allocator time).
// Simulate logs the allocator's actions itself (RecordEventsTo) and leaves
// its log unset on return. `start`, when set, is the state `allocator` was
// restored to (sim/alloc/start_state.h): the allocs of the buffers it holds
// already are not passed to the allocator (the ideal tracker counts them).
// `time_by_op` false leaves SimResult::time_by_op empty (Note [Kernel time
// by op on request]). `critical_path` true fills SimResult::critical_path
// (Note [Critical path segments]); the walk runs only then.
// `keep_memory_log` true with an allocator fills SimResult::memory_log
// (Note [One memory event log]). Each call counts one memory replay (Note
// [Counting memory replays], sim/alloc/allocator.h).
absl::StatusOr<SimResult> Simulate(const Trace& trace, const DeviceSpec& device, Allocator* allocator,
                                   const AllocatorStartState* start = nullptr, bool time_by_op = true,
                                   bool critical_path = false, bool keep_memory_log = false);

}  // namespace gpusim

#endif  // GPUSIM_SIM_ENGINE_ENGINE_H_
