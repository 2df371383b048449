#include "tools/replay_options.h"

#include "absl/strings/str_cat.h"
#include "sim/alloc/allocator.h"
#include "sim/alloc/start_state.h"
#include "sim/base/status.h"
#include "sim/config/loader.h"
#include "sim/lower/eager/host_timeline.h"
#include "sim/lower/semantics.h"
#include "sim/trace/trace_io.h"

namespace gpusim {

// The capacity cudaMalloc may reserve: --device's usable memory; else the
// device the trace recorded (Kineto deviceProperties totalGlobalMem); else
// the default device's usable memory (sim/replay/replay.h ReplayOptions).
absl::Status ResolveReplayCapacity(const std::string& device, ReplayOptions* o) {
  auto d = LoadDeviceSpec(device.empty() ? "h100-sxm-80gb" : device, "");
  if (!d.ok()) return d.status();
  if (!device.empty()) {
    o->capacity = d->usable();
    o->capacity_source = absl::StrCat(d->name, " usable memory");
  }
  o->default_capacity = d->usable();
  o->default_capacity_source =
      absl::StrCat(d->name, " usable memory (default: the trace records no device memory; use --device)");
  return absl::OkStatus();
}

absl::Status ApplyAllocatorSets(const std::vector<std::string>& sets, AllocatorSpec* spec) {
  for (const std::string& s : sets) {
    const size_t eq = s.find('=');
    if (eq == std::string::npos || s.rfind("allocator.", 0) != 0 || eq <= 10) {
      return absl::InvalidArgumentError(
          absl::StrCat("--set ", s, ": expected allocator.OPTION=VALUE (see `gpusim list allocators`)"));
    }
    const std::string key = s.substr(10, eq - 10);
    if (key == "impl") {
      spec->impl = FoldAllocatorName(s.substr(eq + 1));
    } else {
      spec->options[key] = s.substr(eq + 1);
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<DeviceSpec> ReplayDevice(const std::string& device) {
  return LoadDeviceSpec(device.empty() ? "h100-sxm-80gb" : device, "");
}

absl::Status AddDeviceMemory(LoadedRecording& loaded, const DeviceSpec& device, EagerDeviceMemory* report,
                             const EagerDeviceOptions& options) {
  if (!loaded.native.has_value()) return absl::OkStatus();
  return AddDeviceMemoryToTrace(*loaded.native, loaded.path, device, report, options);
}

absl::Status AddDeviceMemoryToTrace(Trace& trace, const std::string& path, const DeviceSpec& device,
                                    EagerDeviceMemory* report, const EagerDeviceOptions& options) {
  auto t = AddEagerDeviceMemory(trace, device, report, options);
  if (!t.ok()) return absl::Status(t.status().code(), absl::StrCat(path, ": ", t.status().message()));
  trace = std::move(*t);
  return absl::OkStatus();
}

absl::StatusOr<RunSpec> PrepareRecordedStep(Trace& trace, const std::string& path, const DeviceSpec& device,
                                            const AllocatorSpec& allocator, const EagerDeviceOptions& options,
                                            EagerDeviceMemory* added) {
  RETURN_IF_ERROR(AddDeviceMemoryToTrace(trace, path, device, added, options));
  RunSpec spec;
  spec.device = device;
  spec.device.context_reserve += added->nccl.total;
  spec.allocator = allocator;
  if (RecordedFromEagerPyTorch(trace)) ChargeRecordedHostTimeline(&trace);
  return spec;
}

absl::Status CheckDeviceOptionsApply(const Input& in, const EagerDeviceOptions& options) {
  if (in.kind == InputKind::kNativeTrace) return absl::OkStatus();
  const std::string& path = in.path;
  const bool cudnn = !options.cudnn_workspace.empty();
  if (!cudnn && options.sdpa_backend.empty()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      cudnn ? "--cudnn-workspace " : "--sdpa-backend ", cudnn ? options.cudnn_workspace : options.sdpa_backend,
      ": ", path,
      " is not a step recorded from PyTorch by python/gpusim_torch (a recording's own workspaces are in it)"));
}

absl::StatusOr<ReplayOptions> CapacityLessNccl(const ReplayOptions& o, const EagerDeviceMemory& added) {
  if (added.nccl.total <= Bytes(0)) return o;
  ReplayOptions less = o;
  const bool given = o.capacity > Bytes(0);
  const Bytes base = given ? o.capacity : o.default_capacity;
  if (added.nccl.total >= base) {
    return absl::InvalidArgumentError(absl::StrCat("NCCL buffers of ", added.nccl.total.value(),
                                                   " B (Note [NCCL buffers]) leave no capacity of the ",
                                                   base.value(), " B usable"));
  }
  less.capacity = base - added.nccl.total;
  less.capacity_source = absl::StrCat(given ? o.capacity_source : o.default_capacity_source, " less NCCL buffers ",
                                      FormatBytes(added.nccl.total));
  return less;
}

absl::StatusOr<ReplayReport> ReplayForReport(const Input& in, const std::string& device,
                                             const ReplayOptions& options, bool keep_loaded) {
  ReplayReport report;
  const EagerDeviceOptions device_options{options.cudnn_workspace, options.sdpa_backend};
  RETURN_IF_ERROR(CheckDeviceOptionsApply(in, device_options));
  ReplayOptions o = options;
  if (!o.check_addresses && in.kind == InputKind::kKineto) {
    // Note [Replaying as the trace is parsed]: streamed when it allows.
    ASSIGN_OR_RETURN(report.replay, ReplayFile(in, o));
    return report;
  }
  ASSIGN_OR_RETURN(LoadedRecording loaded, LoadRecording(in));
  EagerDeviceMemory added;
  std::optional<DeviceSpec> d;
  if (loaded.native.has_value()) {
    ASSIGN_OR_RETURN(d, ReplayDevice(device));
    RETURN_IF_ERROR(AddDeviceMemory(loaded, *d, &added, device_options));
    ASSIGN_OR_RETURN(o, CapacityLessNccl(o, added));
  }
  if (loaded.native.has_value() || keep_loaded) o.keep_start_state = true;
  ASSIGN_OR_RETURN(report.replay, ReplayLoaded(loaded, o));
  if (report.replay.format != "gpusim-trace") {
    if (keep_loaded) report.loaded = std::move(loaded);
    return report;
  }
  // A native trace (a step recorded by python/gpusim_torch): its timed events
  // through the engine on the device, and the largest buffers at the peak.
  // The engine's allocator starts where the memory replay's did (the
  // recording's warm-up history, Note [The warm-up history]): a warm step
  // reuses the segments its warm-up cached, so it pays no cudaMalloc for
  // them. Started cold, the timed step paid allocator_cost.malloc for every
  // segment (issue 29: llama_gpu's step 40 ms, a fifth, too long against
  // the H200's measured median).
  const Bytes capacity = o.capacity > Bytes(0) ? o.capacity : o.default_capacity;
  const AllocatorStartState* start =
      report.replay.start.has_value() && !report.replay.start->empty() ? &*report.replay.start : nullptr;
  ASSIGN_OR_RETURN(auto allocator, start != nullptr ? MakeStartedAllocator(o.allocator, capacity, *start)
                                                     : MakeAllocator(o.allocator, capacity));
  ASSIGN_OR_RETURN(NativeStepReport step,
                   SimulateNativeStep(*loaded.native, loaded.path, *d, allocator.get(), 10, start));
  step.device_memory = added;
  report.step = std::move(step);
  return report;
}

std::string ReplayReportJson(const ReplayReport& r) {
  if (!r.step.has_value()) return RenderReplayJson(r.replay);
  return RenderReplayJson(r.replay, [&](JsonWriter& w) { NativeStepJson(w, *r.step); });
}

}  // namespace gpusim
