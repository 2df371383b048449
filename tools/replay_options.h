// Replay options from the command line or the Python package: the capacity
// a replay may reserve (--device) and allocator options (--set
// allocator.x=y). Shared by tools/cli_replay.cc and python/_gpusim.cc.
#ifndef GPUSIM_TOOLS_REPLAY_OPTIONS_H_
#define GPUSIM_TOOLS_REPLAY_OPTIONS_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "sim/config/spec.h"
#include "sim/step/native_step.h"
#include "sim/replay/replay.h"

namespace gpusim {

// --device's usable memory when `device` is set; the default device's as the
// fallback when the trace records no device memory.
absl::Status ResolveReplayCapacity(const std::string& device, ReplayOptions* o);
// Each of `sets` is allocator.OPTION=VALUE (allocator.impl=NAME chooses the
// strategy); anything else is an error naming it.
absl::Status ApplyAllocatorSets(const std::vector<std::string>& sets, AllocatorSpec* spec);

// A native trace (a step recorded by python/gpusim_torch): its timed events
// through the engine on `device` (default H100), and the largest buffers at
// the peak.
absl::StatusOr<NativeStepReport> NativeReplayStep(const std::string& trace, const std::string& device,
                                                  const ReplayOptions& o);
// `gpusim replay TRACE --format json`'s document for a replay `r` of `trace`
// (with the native step for a native trace).
absl::StatusOr<std::string> ReplayJson(const std::string& trace, const std::string& device, const ReplayOptions& o,
                                       const ReplayResult& r);

}  // namespace gpusim

#endif  // GPUSIM_TOOLS_REPLAY_OPTIONS_H_
