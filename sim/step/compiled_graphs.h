// The graphs torch.compile ran in a recorded PyTorch step, one summary per
// graph: python/gpusim_torch brackets each run of a compiled graph's plan
// (Inductor's wrapper, read on the CPU: Note [torch.compile on the CPU],
// inductor_cpu.py) with the markers `compiled:NAME` and
// `compiled_end:NAME`. `gpusim replay` prints the summaries after the
// step's largest buffers, and under `step.compiled_graphs` in JSON.
#ifndef GPUSIM_SIM_STEP_COMPILED_GRAPHS_H_
#define GPUSIM_SIM_STEP_COMPILED_GRAPHS_H_

#include <string>
#include <vector>

#include "sim/base/json_writer.h"
#include "sim/trace/trace.h"

namespace gpusim {

struct CompiledGraphSummary {
  std::string name;        // the graph's name in the trace ("0_forward", "0_backward", ...)
  int64_t runs = 0;        // times it ran in the recorded window
  int64_t kernels = 0;     // timed events inside its runs
  int64_t blocks = 0;      // blocks its runs allocated
  Bytes allocated;         // their bytes
  Bytes kept;              // of those, live when a run ended: the graph's outputs
                           // (a forward's include what it saved for the backward)
  Bytes live_at_start;     // live bytes when its (highest) run began
  Bytes highest_live;      // the highest live bytes during its runs
  bool holds_peak = false; // the step's highest live bytes fall inside one of its runs
};

// REQUIRES: `trace` passed ValidateTrace. Live bytes are the trace's own
// requests (and what the device model inserted into it), counted from the
// window's start; graphs are listed in first-run order. Empty: the step ran
// no compiled graph.
std::vector<CompiledGraphSummary> SummarizeCompiledGraphs(const Trace& trace);

std::string RenderCompiledGraphsText(const std::vector<CompiledGraphSummary>& graphs);
// Array "compiled_graphs": [{name, runs, kernels, blocks, allocated_bytes,
// kept_bytes, live_at_start_bytes, highest_live_bytes, holds_peak}].
void CompiledGraphsJson(JsonWriter& w, const std::vector<CompiledGraphSummary>& graphs);

}  // namespace gpusim

#endif  // GPUSIM_SIM_STEP_COMPILED_GRAPHS_H_
