// The roofline kernel model: one flat achievable fraction per op class.
//
// Roofline (Williams, Waterman, Patterson, "Roofline", CACM 2009):
//   t = max(flops / (peak(dtype) · eff_unit), bytes / (hbm · eff_mem)) + launch
// eff_unit is efficiency.matmul for matmuls and efficiency.attention for
// fused (flash) attention, whose FLOPs run on the tensor cores; elementwise
// and reduction FLOPs run on the vector units at the fp32 rate. Data
// movement (copies, transposes, slices, converts) is bandwidth-bound.
// Collectives: collective_model.h. Host copies: bytes over PCIe + launch.
#ifndef GPUSIM_SIM_DEVICE_IMPL_ROOFLINE_H_
#define GPUSIM_SIM_DEVICE_IMPL_ROOFLINE_H_

#include "sim/device/collective_model.h"
#include "sim/device/kernel_model.h"

namespace gpusim {

class RooflineKernelModel : public KernelModel {
 public:
  explicit RooflineKernelModel(CollectiveOptions collectives = {})
      : collectives_(collectives) {}
  std::string_view name() const override { return "roofline"; }
  SimTime Duration(const TraceEvent& e, const DeviceSpec& d) const override;

  // The pieces, for composition by other models. Seconds, without launch.
  static double MemorySeconds(double bytes, const DeviceSpec& d);
  static double MatmulSeconds(double flops, DType dtype, const DeviceSpec& d);

 private:
  CollectiveOptions collectives_;
};

}  // namespace gpusim

#endif  // GPUSIM_SIM_DEVICE_IMPL_ROOFLINE_H_
