// Trace: the replayable event stream the engine consumes. Lowering a Program
// produces one; importers turn recorded runs into one; traces/FORMAT.md
// documents its file form (sim/trace/trace_io.h reads and writes it).
//
// Memory events (alloc/free) are replayed in trace order: that is the order a
// runtime allocator sees them (PyTorch allocates in CPU launch order; XLA in
// its one sequential schedule). Timed events (compute/copy/collective) run on
// streams: in order within a stream, after the events named in `after`.
#ifndef GPUSIM_SIM_TRACE_TRACE_H_
#define GPUSIM_SIM_TRACE_TRACE_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "sim/base/units.h"
#include "sim/ir/program.h"

namespace gpusim {

using BufferId = int64_t;
using StreamId = int32_t;

// Stream ids are dense small non-negative integers: the engine keeps per-stream
// arrays indexed by id, and the PyTorch caching allocator packs the id into 16
// bits of its block key. Readers refuse any other id (sim/trace/trace_io.cc),
// and Simulate refuses a trace that holds one (sim/engine/engine.cc).
inline constexpr StreamId kMaxStreamId = 32767;
inline bool IsValidStreamId(int64_t id) { return id >= 0 && id <= kMaxStreamId; }

enum class EventType { kAlloc, kFree, kCompute, kCopy, kCollective, kMarker };

struct TraceEvent {
  EventType type = EventType::kCompute;
  StreamId stream = 0;
  // alloc / free
  BufferId buffer = -1;
  Bytes size;                 // alloc: requested bytes
  Role role = Role::kTemporary;
  // compute / copy / collective / marker
  std::string name;           // alloc: buffer name; marker: label
  OpKind kind = OpKind::kElementwise;
  double flops = 0;
  Bytes bytes_read;
  Bytes bytes_written;
  DType dtype = DType::kBF16;
  Phase phase = Phase::kForward;
  int64_t group = 1;          // collective group size
  int64_t group_nodes = 0;    // nodes the group spans; 0: consecutive ranks (Op::group_nodes)
  bool recompute = false;
  int64_t m = 0, n = 0, k = 0, batch = 1;  // matmul shape when known
  std::vector<int64_t> after; // indices of earlier timed events this waits on
  // Buffers this event reads or writes, when known; each must be live here
  // (sim/trace/validate.h). Empty = not recorded.
  std::vector<BufferId> uses;
  SimTime recorded_duration{-1};  // from a recorded trace; -1 = unknown
  // What the host does to issue it (Note [Host timeline], engine.h), priced
  // by the device's host.op and host.module (HostIssueTime,
  // sim/device/timing.h) so that a calibration trial re-prices them: kernel
  // launches / dispatches (fractional where one launch issues several ops)
  // and Python module calls. 0, 0: the host is not modelled for it.
  double host_ops = 0;
  int64_t host_modules = 0;
  // The host waits for the device after issuing it (Note [Host syncs],
  // engine.h): a torch.cuda.synchronize() or a .item() that copies a result
  // to the host. Set by the eager host timeline; not in the trace format.
  bool host_sync = false;
  // (1.6) `host=D,N,M`: what a recorder saw the host do since the previous
  // compute event, this one's own op included (Note [Host work per kernel],
  // python/gpusim_torch/recorder.py): D aten ops dispatched outside
  // autograd's engine, N autograd nodes the engine ran, M Python module
  // calls. Priced by host.dispatch, host.node and host.python_module
  // (HostIssueTime) in place of host.op. host_recorded false: not recorded.
  bool host_recorded = false;
  int32_t host_dispatches = 0, host_nodes = 0, host_module_calls = 0;
  // The call stack that made this event (mostly allocs), innermost frame
  // first, as indices into Trace::frames. Empty = not recorded.
  std::vector<int32_t> stack;
  // (1.2) The framework op a recorder saw run (e.g. an aten op name) and its
  // facts as integers, op by op as traces/FORMAT.md *Op facts* says: what a
  // device model needs to size the memory the op's kernel library adds
  // (sim/lower/eager/device_memory.h). Empty = not recorded.
  std::string op;
  std::vector<int64_t> dims;
};

// One interned call-stack frame (traces/FORMAT.md, version 1.1 `frame`).
struct StackFrame {
  std::string function;
  std::string file;
  int64_t line = 0;  // 0 = unknown
  bool operator==(const StackFrame&) const = default;
};

struct StreamInfo {
  StreamId id = 0;
  std::string name;  // "compute", "collective", "host_copy", ...
};

// Events [first, last] of a trace stand for `times` identical consecutive
// iterations of a rolled loop's body, built once (Note [Rolled loop built
// once], sim/lower/lower.h): the engine runs them once and charges them
// `times` times (sim/engine/engine.h).
struct TraceRepeat {
  int64_t first = 0;
  int64_t last = -1;
  int64_t times = 1;
};

// (1.5) One allocation or free of the warm-up history: what ran before the
// recorded window (a model's build, the warm-up steps), for the allocator
// only (Note [Warm-up history], sim/replay/replay.cc). Buffer ids share the
// events' space: a buffer the history leaves live is one the start state
// allocates (marker start_state .. marker step), with the same size.
// A compute marks where a cuBLAS op ran (op, phase, op facts), so that the
// workspaces cuBLAS keeps per (thread, stream) are placed where they were
// made (sim/lower/eager/device_memory.cc).
struct WarmupOp {
  enum class Kind { kAlloc, kFree, kCompute };
  Kind kind = Kind::kAlloc;
  BufferId buffer = 0;  // allocs, frees
  Bytes size;           // allocs
  std::string op;       // computes
  Phase phase = Phase::kForward;
  std::vector<int64_t> dims;
};

struct Trace {
  std::string name;
  std::vector<StreamInfo> streams;
  std::vector<TraceEvent> events;
  // Stack frames, stored once; TraceEvent::stack refers to them by index.
  std::vector<StackFrame> frames;
  // Bytes live before the first event and never freed (e.g. an XLA program's
  // arguments when replayed alone). Reported, counted in peaks.
  Bytes preexisting;
  // (1.2) `meta KEY VALUE` lines: facts about the recording (framework and
  // version, library settings), in file order.
  std::vector<std::pair<std::string, std::string>> meta;
  // In event order, disjoint; empty for every trace read from a file (the
  // native format has no such line: WriteTraceFile refuses a trace with
  // repeats rather than write one iteration for many).
  std::vector<TraceRepeat> repeats;
  // (1.5) `warmup alloc ID BYTES` / `warmup free ID` lines, in file order.
  std::vector<WarmupOp> warmup;
  // Where the trace was read (ReadTrace's source name) and each event's
  // line there, so that a semantic error (ValidateTrace, the engine) names
  // FILE:LINE as a parse error does; empty for a trace built in memory.
  std::string source;
  std::vector<int64_t> event_lines;
};

// The value of meta key `key`, or nullptr.
const std::string* FindMeta(const Trace& trace, std::string_view key);

// "FILE:LINE: event I (TYPE[ NAME])" for a trace read from a file,
// "event I (TYPE[ NAME])" otherwise: how an error names event `i`.
std::string EventWhere(const Trace& trace, size_t i);
// The index event `e` of the trace as built has in the loop as executed,
// every repeated range's iterations in turn (Note [Rolled loop built once],
// sim/lower/lower.h): the events after a range move by its further
// iterations' events; an event inside a range keeps its place in the first
// of them (the iterations' live sets are the same, so the first reaching a
// figure is the first iteration). Reports give event indices in this
// numbering, so a loop built once names the events the loop built
// iteration by iteration names; -1 stays -1.
int64_t ExecutedEventIndex(const Trace& trace, int64_t e);

bool IsTimed(EventType t);
std::string_view EventTypeName(EventType t);

}  // namespace gpusim

#endif  // GPUSIM_SIM_TRACE_TRACE_H_
