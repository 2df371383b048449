// A native trace recorded from a framework step (python/gpusim_torch) run
// through the engine on a modelled device: step time from the recorded ops'
// shapes (sim/engine/engine.h, the device's roofline and efficiencies), the
// peak of live bytes and the largest buffers live there with their names
// (module path and op) and innermost recorded frame. `gpusim replay` prints
// it after the allocator replay for native traces.
#ifndef GPUSIM_SIM_REPLAY_NATIVE_STEP_H_
#define GPUSIM_SIM_REPLAY_NATIVE_STEP_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "sim/config/spec.h"
#include "sim/engine/engine.h"
#include "sim/ir/program.h"
#include "sim/report/explain.h"
#include "sim/report/json_writer.h"
#include "sim/trace/trace.h"

namespace gpusim {

struct NativeStepReport {
  std::string device;
  int64_t timed_events = 0;
  SimTime step_time, compute_busy;
  double flops = 0;
  Bytes peak_live;
  // Live at the peak, largest first; `origin` is the innermost recorded
  // frame ("function file:line"), empty when none.
  std::vector<PeakBuffer> largest;
  OomInfo oom;
};

// REQUIRES: `trace` passed ValidateTrace. `allocator` may be null.
absl::StatusOr<NativeStepReport> SimulateNativeStep(const Trace& trace, const DeviceSpec& device,
                                                    Allocator* allocator, int top);

std::string RenderNativeStepText(const NativeStepReport& r);
// Key "step": {device, step_time_s, compute_s, timed_events, flops,
// peak_live_bytes, largest: [{name, role, bytes, where}], oom (null or
// {event, requested_bytes, live_bytes, buffer})}.
void NativeStepJson(JsonWriter& w, const NativeStepReport& r);

}  // namespace gpusim

#endif  // GPUSIM_SIM_REPLAY_NATIVE_STEP_H_
