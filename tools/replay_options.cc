#include "tools/replay_options.h"

#include "absl/strings/str_cat.h"
#include "sim/alloc/allocator.h"
#include "sim/base/status.h"
#include "sim/config/loader.h"
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
      spec->impl = s.substr(eq + 1);
    } else {
      spec->options[key] = s.substr(eq + 1);
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<NativeStepReport> NativeReplayStep(const std::string& trace, const std::string& device,
                                                  const ReplayOptions& o) {
  ASSIGN_OR_RETURN(Trace t, ReadTraceFile(trace));
  ASSIGN_OR_RETURN(DeviceSpec d, LoadDeviceSpec(device.empty() ? "h100-sxm-80gb" : device, ""));
  ASSIGN_OR_RETURN(auto allocator,
                   MakeAllocator(o.allocator, o.capacity > Bytes(0) ? o.capacity : o.default_capacity));
  return SimulateNativeStep(t, trace, d, allocator.get(), 10);
}

absl::StatusOr<std::string> ReplayJson(const std::string& trace, const std::string& device, const ReplayOptions& o,
                                       const ReplayResult& r) {
  if (r.format != "gpusim-trace") return RenderReplayJson(r);
  ASSIGN_OR_RETURN(NativeStepReport step, NativeReplayStep(trace, device, o));
  return RenderReplayJson(r, [&](JsonWriter& w) { NativeStepJson(w, step); });
}

}  // namespace gpusim
