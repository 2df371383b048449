// `gpusim explain TRACE`: the largest blocks live at a trace's peak, with the
// call stacks that allocated them (Trace::frames, traces/FORMAT.md 1.1; from
// a snapshot's `frames`, Note [Interned stack frames] in
// sim/import/snapshot.cc).
#ifndef GPUSIM_SIM_REPLAY_EXPLAIN_TRACE_H_
#define GPUSIM_SIM_REPLAY_EXPLAIN_TRACE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "sim/import/input.h"
#include "sim/base/units.h"
#include "sim/trace/trace.h"

namespace gpusim {

struct TracePeakBlock {
  BufferId buffer = -1;
  std::string name;           // alloc name (imports: the recorded address)
  Bytes size;                 // requested bytes
  int64_t alloc_event = -1;   // native event index of its alloc
  std::vector<int32_t> stack; // into the trace's frames, innermost first
};

struct TracePeak {
  std::string source;
  Bytes peak_live;            // live requested bytes at the peak, incl. preexisting
  int64_t peak_event = -1;    // first event reaching it; -1 = before any
  Bytes preexisting;          // Trace::preexisting (no block, no stack)
  int64_t live_blocks = 0;    // blocks live at the peak
  int64_t with_stack = 0;     // of those, blocks with a recorded stack
  std::vector<TracePeakBlock> largest;  // the `top` largest, ties by alloc order
  std::vector<StackFrame> frames;       // the trace's frames
};

// The live set at the first event where live requested bytes peak.
TracePeak ExplainTracePeak(const Trace& trace, const std::string& source, int top);

// Loads `path` as a Trace: a native trace, or any recorded format through
// ImportRecordedTrace + ToNativeTrace (memory events only).
absl::StatusOr<Trace> LoadTraceForExplain(const std::string& path);
// The same for an input SniffInput classified (sim/import/input.h).
absl::StatusOr<Trace> LoadTraceForExplain(const Input& in);

// Text: one line per block, then its source ("from FILE:LINE FUNCTION
// (module M)", the user's frame: Note [The user's frame], sim/trace/
// frames.h) and up to `frames_per_block` frames ("function (file:line)"),
// innermost first, as memory_viz shows them (Note [memory_viz's frame
// filter]: C++ unwinder and interpreter frames dropped, repeats elided).
std::string RenderTracePeakText(const TracePeak& p, int frames_per_block = 4);
// JSON: {source, peak_live_bytes, peak_event, preexisting_bytes, live_blocks,
// blocks_with_stack, largest: [{buffer, name, bytes, alloc_event, [source,
// module,] frames_hidden, stack: [{function, file, line}]}]}: `stack` the
// frames memory_viz shows (all of them, innermost first), frames_hidden how
// many it omits, source and module the user's frame where there is one.
std::string RenderTracePeakJson(const TracePeak& p);

}  // namespace gpusim

#endif  // GPUSIM_SIM_REPLAY_EXPLAIN_TRACE_H_
