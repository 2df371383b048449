// RecordedTrace: what an importer read from a recorded run (a PyTorch
// profiler / Kineto Chrome trace, a CUDA caching-allocator memory snapshot, a
// torch.profiler memory-timeline raw dump), kept close to the recording: the
// memory events in recorded order with whatever each format carries (address,
// recorded totals, stream, category), the timed kernel / operator events, and
// where it came from. ToNativeTrace turns it into a replayable `Trace`
// (sim/trace/trace.h): alloc/free pairs with buffer ids.
//
// Importers: sim/import/kineto.h, sim/import/snapshot.h,
// sim/import/memory_timeline.h; by file: sim/import/import.h.
#ifndef GPUSIM_SIM_IMPORT_RECORDED_TRACE_H_
#define GPUSIM_SIM_IMPORT_RECORDED_TRACE_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "sim/base/units.h"
#include "sim/ir/program.h"
#include "sim/trace/trace.h"

namespace gpusim {

// Memory event kinds. Kineto and the memory timeline only know alloc/free
// (plus the timeline's pre-existing and version bumps); the snapshot's
// device_traces use the rest (PyTorch c10/cuda/CUDACachingAllocator.h,
// TraceEntry::Action).
enum class MemoryEventKind {
  kAlloc,
  kFree,
  kFreeRequested,   // snapshot: free() called; block may still be in use by a stream
  kFreeCompleted,   // snapshot: block returned to the pool (reusable from here)
  kSegmentAlloc,    // snapshot: cudaMalloc of a segment
  kSegmentFree,     // snapshot: cudaFree of a segment
  kSegmentMap,      // snapshot: expandable segment grown
  kSegmentUnmap,    // snapshot: expandable segment shrunk
  kOom,             // snapshot: allocation failed (size = bytes requested)
  kSnapshot,        // snapshot: a snapshot was taken here
  kPreexisting,     // timeline: tensor live before profiling began
  kIncrementVersion,// timeline: tensor mutated; category may change, bytes do not
};
std::string_view MemoryEventKindName(MemoryEventKind k);  // "alloc", "free_requested", ...
bool ParseMemoryEventKind(std::string_view s, MemoryEventKind* out);

struct RecordedMemoryEvent {
  MemoryEventKind kind = MemoryEventKind::kAlloc;
  std::optional<int64_t> address;  // absent in legacy Kineto and in the timeline
  Bytes size;                      // requested bytes; always >= 0 (a free's size too)
  int64_t stream = -1;             // recorded stream id; -1 = not recorded
  SimTime time{-1};                // recorded timestamp, ns; -1 = none (pre-existing)
  int32_t device = 0;              // device index ("Device Id", snapshot device)
  int32_t device_type = -1;        // Kineto "Device Type" (1 CUDA, 6 ROCm); -1 = n/a
  int64_t seq = -1;                // Kineto "Ev Idx"; -1 = not recorded
  std::optional<Bytes> total_allocated;  // Kineto "Total Allocated" after the event
  std::optional<Bytes> total_reserved;   // Kineto "Total Reserved" after the event
  std::optional<Role> category;          // timeline category (new one on a version bump)
  std::optional<Role> previous_category; // timeline version bump: category before
  // The call stack that made the event, innermost first, as indices into
  // RecordedTrace::frames (snapshot `frames`); empty = not recorded.
  std::vector<int32_t> stack;
  bool operator==(const RecordedMemoryEvent&) const = default;
};

enum class RecordedOpKind {
  kKernel,            // Kineto cat "kernel" / "Kernel"
  kMemcpy,            // "gpu_memcpy" / "Memcpy"
  kMemset,            // "gpu_memset" / "Memset"
  kCpuOp,             // "cpu_op" / "Operator"
  kUserAnnotation,    // "user_annotation" (record_function ranges on the CPU)
  kGpuUserAnnotation, // "gpu_user_annotation" (the same ranges on the GPU)
  kRuntime,           // "cuda_runtime" / "Runtime" / "cuda_driver"
  kModuleCall,        // "python_function" named "nn.Module: NAME" (with_stack)
};
std::string_view RecordedOpKindName(RecordedOpKind k);
bool IsGpuOp(RecordedOpKind k);  // kernel, memcpy, memset

// A complete ("ph":"X") event: something that ran for a measured duration.
struct RecordedOp {
  RecordedOpKind kind = RecordedOpKind::kKernel;
  std::string name;
  SimTime start;
  SimTime duration;
  int64_t stream = -1;        // args.stream; -1 = not recorded
  int32_t device = -1;        // args.device; -1 = not recorded
  int64_t correlation = -1;   // args.correlation (links a kernel to its launch)
  int64_t external_id = -1;   // args "External id" (links a kernel to its cpu_op)
  // cpu_op: args "Sequence number", set when the dispatcher entered the op
  // at an autograd key with grad mode on (Note [Dispatches from a Kineto
  // trace], sim/calibrate/host_measurements.h); -1 = not recorded.
  int64_t sequence = -1;
  // The recording thread (pid, tid), numbered densely per import in order
  // of first appearance; -1 = not recorded.
  int32_t thread = -1;
  Bytes bytes;                // memcpy / memset: args.bytes
  // cpu_op with record_shapes (KinetoImportOptions::keep_shapes): args
  // "Input Dims" (one shape per input; empty for a scalar, or for an input
  // that is not one tensor, e.g. a TensorList), "Input type" ("c10::BFloat16",
  // "float", "Scalar", ...) and "Concrete Inputs" (values of scalar inputs).
  bool has_shapes = false;
  std::vector<std::vector<int64_t>> input_dims;
  std::vector<std::string> input_types;
  std::vector<std::string> concrete_inputs;
};

struct RecordedDevice {
  int32_t id = 0;
  std::string name;           // "NVIDIA H100 80GB HBM3"
  Bytes total_global_mem;     // deviceProperties totalGlobalMem; 0 = unknown
};

struct RecordedMetadata {
  std::string source_file;    // the path the importer was given
  std::string format;         // "kineto", "snapshot", "memory_timeline"
  std::string trace_name;     // Kineto traceName, when present
  std::vector<RecordedDevice> devices;  // Kineto deviceProperties
  int64_t base_time_ns = 0;   // Kineto baseTimeNanoseconds, when present
  // Events seen but not kept, e.g. CPU [memory] events or other devices'.
  int64_t memory_events_filtered_out = 0;
  // Kineto [memory] events whose Total Reserved is below their Total
  // Allocated, which no caching allocator records (Note [Reserved below
  // allocated], kineto.cc): their Total Reserved is read as not recorded.
  int64_t reserved_below_allocated = 0;
};

// A CUDA/HIP graph capture seen in the recording: between the runtime's
// cudaStreamBeginCapture and cudaStreamEndCapture (hip*), allocations come
// from the graph's private pool (Note [CUDA graph private pools] in
// sim/replay/replay.cc). begin -1: begun before the recording; end -1: not
// ended within it.
struct CaptureWindow {
  SimTime begin{-1};
  SimTime end{-1};
};

struct RecordedTrace {
  RecordedMetadata metadata;
  std::vector<CaptureWindow> captures;  // ascending, disjoint
  // In recorded order: Kineto sorted by (ts, Ev Idx); snapshot and timeline in
  // file order (already time-ordered by their recorders).
  std::vector<RecordedMemoryEvent> memory_events;
  std::vector<RecordedOp> ops;  // sorted by (start, file order)
  // Blocks allocated before the recording and still allocated at its end,
  // which no event shows (snapshot: blocks of the final `segments` that no
  // trace entry allocated; Note [Blocks live through the window] in
  // snapshot.cc). Kind kPreexisting, with address, stream, device and the
  // requested size; ascending by (device, address).
  std::vector<RecordedMemoryEvent> live_through;
  // Stack frames, each stored once (interned); RecordedMemoryEvent::stack
  // refers to them by index. ToNativeTrace hands them on as Trace::frames.
  std::vector<StackFrame> frames;
};

// --- Conversion to the native trace ------------------------------------------

struct ToNativeOptions {
  // Device whose memory events to convert. Unset: the only device that has
  // memory events (an error when there are several).
  std::optional<int32_t> device;
  // Which snapshot action ends a block's life: kFreeCompleted (the block is
  // reusable from then on; the default, as an allocator replay needs) or
  // kFreeRequested (the caller's free(); what memory_allocated() tracks).
  MemoryEventKind snapshot_free = MemoryEventKind::kFreeCompleted;
  // Include kernels, memcpys and memsets as timed events (compute / copy /
  // collective) with their recorded durations, merged with the memory events
  // by timestamp.
  bool include_gpu_ops = true;
  // Frees without an address: which live block of the freed size they end.
  // See Note [Matching frees] in recorded_trace.cc for the measurements.
  enum class SizeMatch { kLifo, kFifo };
  SizeMatch size_match = SizeMatch::kLifo;
  std::string name;  // Trace::name; default: the source file's base name
  // When set, receives for each native event the index in
  // recorded.memory_events of the event it came from (an implicit free: the
  // alloc that implied it; a GPU op and an alloc of a block live before
  // recording: -1).
  std::vector<int64_t>* source_index = nullptr;
  // When set (ToNativeTrace), receives each head alloc (the blocks live
  // through the recording, then those freed in it but allocated before it)
  // that has a recorded address: its buffer id and that address, in order —
  // the block's identity for a start state rebuilt at the recorded addresses.
  std::vector<std::pair<BufferId, int64_t>>* head_addresses = nullptr;
};

struct ConversionStats {
  int64_t allocs = 0;
  int64_t frees = 0;
  int64_t frees_matched_by_address = 0;
  int64_t frees_matched_by_size = 0;
  // Frees with no earlier live alloc: the block was live when recording
  // began. Each gets an alloc at the start of the trace.
  int64_t allocs_before_recording = 0;
  Bytes bytes_before_recording;
  // Frees whose size differs from their (address-matched) alloc's size.
  int64_t size_mismatches = 0;
  // Allocs at an address that was still live (its free was not recorded):
  // the earlier buffer is freed just before.
  int64_t implicit_frees = 0;
  int64_t timed_events = 0;
  // RecordedTrace::live_through blocks of this device: allocated at the
  // start of the trace (before the allocs_before_recording ones), never freed.
  int64_t allocs_live_through = 0;
  Bytes bytes_live_through;
};

// Converts the memory events of one device (and, optionally, the GPU ops) to
// a Trace that passes ValidateTrace. See Note [Matching frees] in
// recorded_trace.cc for how frees find their allocs:
//   - with an address, a free ends the live alloc at that address;
//   - without one, a free of N bytes ends the most recently allocated live
//     block of exactly N bytes on that device (LIFO; FIFO on request).
// Bytes live before recording and never freed (from the first event's
// recorded Total Allocated, when present) become Trace::preexisting.
// Streams: recorded stream ids are renumbered densely (0, 1, ...) in
// ascending order and named "stream_<recorded id>"; memory events without a
// recorded stream go to native stream 0.
absl::StatusOr<Trace> ToNativeTrace(const RecordedTrace& recorded,
                                    const ToNativeOptions& options = {},
                                    ConversionStats* stats = nullptr);

// The alloc and free events alone, as ToNativeTrace orders them: what a
// replay through an allocator reads (24 bytes an event, where a TraceEvent
// takes 232), without the timed events.
struct MemoryOp {
  EventType type = EventType::kAlloc;  // kAlloc or kFree
  StreamId stream = 0;
  BufferId buffer = -1;
  Bytes size;  // alloc: requested bytes
};
struct MemoryOpStream {
  std::vector<MemoryOp> ops;
  Bytes preexisting;  // Trace::preexisting
};
// ToNativeTrace's conversion into MemoryOps (options.include_gpu_ops is not
// read: there are no timed events); the same buffer ids, order, sources,
// statistics and errors.
absl::StatusOr<MemoryOpStream> ToMemoryOps(const RecordedTrace& recorded, const ToNativeOptions& options = {},
                                           ConversionStats* stats = nullptr);
// ToMemoryOps one event at a time, for a replay that converts the events as
// they are parsed (sim/replay/replay_stream.cc): the same pairing (Note
// [Matching frees]), buffer ids, statistics and errors, holding only the
// live blocks. What needs the whole trace is refused, not guessed: a free
// that no live block matches (its alloc belongs at the trace's start, before
// every event) makes Add return false and emit nothing; a caller then
// converts the whole trace with ToMemoryOps instead. Blocks live through the
// recording (RecordedTrace::live_through) and timed events are not handled.
class MemoryOpPairer {
 public:
  // `take_head`: a free that no live block matches is paired as
  // ToMemoryOps pairs it (its alloc belongs at the trace's start): Add emits
  // the free and returns true, and the head alloc's buffer id is appended
  // to head_ids() — for a caller that knows the head already (a second pass
  // over the trace: sim/replay/replay_stream.cc).
  MemoryOpPairer(std::string source_file, ToNativeOptions options, bool take_head = false);
  ~MemoryOpPairer();
  MemoryOpPairer(const MemoryOpPairer&) = delete;
  MemoryOpPairer& operator=(const MemoryOpPairer&) = delete;
  // Recorded event `index` (of the device converted: the caller filters)
  // → its ops (0 to 2: an implicit free, then the alloc), appended to `ops`.
  absl::StatusOr<bool> Add(const RecordedMemoryEvent& m, int64_t index, StreamId stream, std::vector<MemoryOp>& ops);
  const ConversionStats& stats() const;
  // Total Allocated before the first event that recorded it.
  const std::optional<Bytes>& initial_allocated() const;
  BufferId next_buffer() const;  // one past the largest buffer id so far
  // With take_head: the head allocs' buffer ids so far, in order, with
  // their requested bytes.
  const std::vector<std::pair<BufferId, Bytes>>& head() const;
  // After the last event: MemoryOpStream::preexisting (live bytes checked
  // to fit in int64).
  absl::StatusOr<Bytes> Preexisting() const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

// A native trace's alloc and free events; `source_index`, when set, receives
// each one's index in trace.events.
MemoryOpStream MemoryOpsOf(const Trace& trace, std::vector<int64_t>* source_index = nullptr);

}  // namespace gpusim

#endif  // GPUSIM_SIM_IMPORT_RECORDED_TRACE_H_
