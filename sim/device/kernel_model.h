// Kernel models: how long one timed trace event (a kernel, a host copy, a
// collective) takes on a device. One small interface; implementations under
// impl/, chosen by name from a registry that lists itself. A calibrated model
// (a measured kernel table, a fitted regression) plugs in as another
// implementation; the fitted device parameters (DeviceSpec efficiencies)
// reach every model through the DeviceSpec argument.
//
//   roofline  flat efficiencies per op class (the pre-issue-6 model)
//   tiled     roofline + matmul tile/wave quantisation (matmul_tiling.h);
//             the default
#ifndef GPUSIM_SIM_DEVICE_KERNEL_MODEL_H_
#define GPUSIM_SIM_DEVICE_KERNEL_MODEL_H_

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "sim/base/registry.h"
#include "sim/base/units.h"
#include "sim/config/spec.h"
#include "sim/trace/trace.h"

namespace gpusim {

class KernelModel {
 public:
  virtual ~KernelModel() = default;
  virtual std::string_view name() const = 0;
  // REQUIRES: e is a timed event (compute, copy or collective). Ignores
  // e.recorded_duration (EventDuration in timing.h honours it first).
  // Deterministic, thread-compatible, no state between calls.
  virtual SimTime Duration(const TraceEvent& e, const DeviceSpec& d) const = 0;
};

// A registry entry (sim/base/registry.h): name, doc, the device keys
// (configs/devices/*.yaml) the model reads.
using KernelModelInfo = RegistryEntry;

// Registered models, sorted by name.
std::vector<KernelModelInfo> ListKernelModels();
// NotFound "kernel_model: unknown kernel model 'x' (did you mean 'y'?);
// available: roofline, tiled".
absl::StatusOr<std::unique_ptr<KernelModel>> MakeKernelModel(std::string_view name);
// The model a device's YAML chooses (DeviceSpec::kernel_model, one shared
// instance per name). REQUIRES: d.kernel_model is registered (the config
// layer accepts only kKernelModelNames).
const KernelModel& KernelModelOf(const DeviceSpec& d);
// The default model: "tiled".
const KernelModel& DefaultKernelModel();

}  // namespace gpusim

#endif  // GPUSIM_SIM_DEVICE_KERNEL_MODEL_H_
