// A native trace recorded from a framework step (python/gpusim_torch) run
// through the engine on a modelled device: step time from the recorded ops'
// shapes (sim/engine/engine.h: the device's roofline and efficiencies), and
// the largest buffers live at the engine's (ideal) peak with their roles and
// innermost frames (`gpusim explain TRACE` lists whole stacks). `gpusim replay` prints it after the allocator replay of a
// native trace (text), or under the key `step` (JSON).
#ifndef GPUSIM_SIM_STEP_NATIVE_STEP_H_
#define GPUSIM_SIM_STEP_NATIVE_STEP_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "sim/base/json_writer.h"
#include "sim/config/spec.h"
#include "sim/engine/engine.h"
#include "sim/lower/eager/device_memory.h"
#include "sim/step/compiled_graphs.h"
#include "sim/trace/trace.h"

namespace gpusim {

struct StepPeakBuffer {
  std::string name;
  Role role = Role::kTemporary;
  Bytes size;
  std::string where;  // the user's frame "function file:line" (sim/trace/frames.h); empty when none
};

struct NativeStepReport {
  std::string device;
  int64_t timed_events = 0;
  SimTime step_time, compute_busy;
  // The host timeline of a PyTorch recording (Note [Eager host costs]):
  // events charged host.op, the host's issue time, kernel waits for it.
  int64_t host_charged_events = 0;
  // Of those, the events with recorded host work (Note [Recorded host
  // costs]) and its sums: dispatches, autograd nodes, module calls.
  int64_t host_recorded_events = 0;
  int64_t host_dispatches = 0, host_nodes = 0, host_module_calls = 0;
  SimTime host_busy, host_wait;
  // Collective events (a distributed step) and their stream's busy time,
  // priced by the kernel model's ring collectives (Note [Ring collectives]).
  int64_t collective_events = 0;
  SimTime collective_busy;
  double flops = 0;
  // Device time by (kind, framework op): SimResult::time_by_op
  // (Note [Kernel time by op], sim/engine/engine.h).
  std::map<std::pair<OpKind, std::string>, SimResult::OpTime> time_by_op;
  OomInfo oom;
  Bytes peak_live;
  std::vector<StepPeakBuffer> largest;  // live at the peak, largest first (ties: alloc order)
  // What the device model added to a PyTorch recording (applied false:
  // not one); the caller ran AddEagerDeviceMemory on the trace.
  EagerDeviceMemory device_memory;
  // The torch.compile'd graphs the step ran (empty: none).
  std::vector<CompiledGraphSummary> compiled_graphs;
};

// REQUIRES: `trace` passed ValidateTrace. `allocator` may be null.
// `start`, when set, is the state `allocator` was restored to (Simulate's).
absl::StatusOr<NativeStepReport> SimulateNativeStep(const Trace& trace, const std::string& source,
                                                    const DeviceSpec& device, Allocator* allocator, int top,
                                                    const AllocatorStartState* start = nullptr);

std::string RenderNativeStepText(const NativeStepReport& r);
// Key "step": {device, step_time_s, compute_s, host_issue_s, host_wait_s, collective_events,
// collective_s, timed_events, flops,
// peak_live_bytes, largest: [{name, role, bytes, where}] (where: the user's
// frame "function file:line" (sim/trace/frames.h), or ""), oom (null or {event,
// requested_bytes, live_bytes, buffer}), device_memory (null, or {torch_version,
// context_reserve_bytes, nccl (null, or {world_size, rank, total_bytes,
// communicators: [{id, ranks, channels, bytes}]}), added: [{what, source, count, largest_bytes, kept}],
// not_modelled: [text], assumptions: [text], sdpa (only with fused SDPA
// events: [{op, count, backend, why}]), step_start_live_bytes,
// step_rise_bytes (null without a step marker)}), kernel_time: [{kind, op,
// events, busy_s, flops, bytes}] (device time by kind and framework op,
// largest first), compiled_graphs (only when the step ran torch.compile'd
// graphs: sim/step/compiled_graphs.h)}.
void NativeStepJson(JsonWriter& w, const NativeStepReport& r);

}  // namespace gpusim

#endif  // GPUSIM_SIM_STEP_NATIVE_STEP_H_
