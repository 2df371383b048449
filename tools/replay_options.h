// Replay options from the command line or the Python package: the capacity
// a replay may reserve (--device) and allocator options (--set
// allocator.x=y). Shared by tools/cli_replay.cc and python/_gpusim.cc.
#ifndef GPUSIM_TOOLS_REPLAY_OPTIONS_H_
#define GPUSIM_TOOLS_REPLAY_OPTIONS_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "sim/config/spec.h"
#include "sim/import/input.h"
#include "sim/lower/eager/device_memory.h"
#include "sim/replay/replay.h"
#include "sim/step/native_step.h"

namespace gpusim {

// --device's usable memory when `device` is set; the default device's as the
// fallback when the trace records no device memory.
absl::Status ResolveReplayCapacity(const std::string& device, ReplayOptions* o);
// Each of `sets` is allocator.OPTION=VALUE (allocator.impl=NAME chooses the
// strategy); anything else is an error naming it.
absl::Status ApplyAllocatorSets(const std::vector<std::string>& sets, AllocatorSpec* spec);

// The device a native trace is modelled on: `device` (NAME or PATH), else
// H100-SXM-80GB.
absl::StatusOr<DeviceSpec> ReplayDevice(const std::string& device);
// A native trace recorded from PyTorch (python/gpusim_torch) gets what the
// device's CUDA libraries add (sim/lower/eager/device_memory.h) before any
// allocator sees it; other recordings are left as they are. Errors name
// loaded.path.
absl::Status AddDeviceMemory(LoadedRecording& loaded, const DeviceSpec& device, EagerDeviceMemory* report,
                             const EagerDeviceOptions& options = {});
// The same for a native trace read by the caller (explain, viz): `trace`
// with the device's additions when it is a PyTorch recording; a
// --cudnn-workspace or --sdpa-backend given for any other trace is refused by name. Errors
// name `path`.
absl::Status AddDeviceMemoryToTrace(Trace& trace, const std::string& path, const DeviceSpec& device,
                                    EagerDeviceMemory* report, const EagerDeviceOptions& options = {});
// A native trace made ready to simulate as `gpusim replay` does
// (sim/step/native_step.cc SimulateNativeStep), for the commands that build
// a StepReport from it (viz, explain --time): what the device's CUDA
// libraries add joins it (AddDeviceMemoryToTrace), NCCL's buffers come off
// `device`'s capacity as the context does, and a PyTorch recording's host
// work is charged (Note [Recorded host costs]). The RunSpec on `device`
// with `allocator`; `added` gets the additions.
absl::StatusOr<RunSpec> PrepareRecordedStep(Trace& trace, const std::string& path, const DeviceSpec& device,
                                            const AllocatorSpec& allocator, const EagerDeviceOptions& options,
                                            EagerDeviceMemory* added);
// --cudnn-workspace and --sdpa-backend on `in` refused by name unless it
// is a native trace (gpusim-trace): a recording's own workspaces are in it.
absl::Status CheckDeviceOptionsApply(const Input& in, const EagerDeviceOptions& options);
// `o` with NCCL's buffers (Note [NCCL buffers]) taken off the capacity, as
// the CUDA context is: they are outside the caching allocator. Unchanged
// without them; InvalidArgument when they leave no capacity.
absl::StatusOr<ReplayOptions> CapacityLessNccl(const ReplayOptions& o, const EagerDeviceMemory& added);
// What `gpusim replay` reports (the CLI and the Python package alike): the
// replay (ReplayFile for a Kineto trace that streams; else LoadRecording,
// AddDeviceMemory on ReplayDevice(device), ReplayLoaded) and, for a native
// trace, its timed step through the engine on the device with the device's
// additions. REQUIRES: IsTraceKind(in.kind).
// `keep_loaded`: a recording imported whole (a snapshot, a memory
// timeline, a Kineto trace with --check-addresses) is kept with its start
// state (ReplayResult::start), so that `replay --snapshot` draws the engine
// run from this replay instead of importing and replaying it again
// (ReportFromReplayed, tools/cli.h).
struct ReplayReport {
  ReplayResult replay;
  std::optional<NativeStepReport> step;
  std::optional<LoadedRecording> loaded;  // when kept
};
absl::StatusOr<ReplayReport> ReplayForReport(const Input& in, const std::string& device, const ReplayOptions& o,
                                             bool keep_loaded = false);
// `gpusim replay TRACE --format json`'s document.
std::string ReplayReportJson(const ReplayReport& r);

}  // namespace gpusim

#endif  // GPUSIM_TOOLS_REPLAY_OPTIONS_H_
