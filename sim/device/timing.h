// Device timing model: how long one trace event takes on a device.
//
// Roofline per op (Williams, Waterman, Patterson, "Roofline", CACM 2009):
//   t = max(flops / (peak(dtype) · eff_unit), bytes / (hbm · eff_mem)) + launch
// with eff_unit the matmul (or flash-attention) efficiency; elementwise and
// data-movement ops are bandwidth-bound. Collectives use a ring α–β model
// (NCCL docs, "Performance" / nccl-tests PERFORMANCE.md bus bandwidth):
//   all-gather, reduce-scatter: (n−1)·α + (n−1)/n · S / (bw · eff)
//   all-reduce:                 2(n−1)·α + 2(n−1)/n · S / (bw · eff)
// where S is the full (unsharded) buffer size and bw the per-direction link
// bandwidth. Host copies run over PCIe.
#ifndef GPUSIM_SIM_DEVICE_TIMING_H_
#define GPUSIM_SIM_DEVICE_TIMING_H_

#include "sim/base/units.h"
#include "sim/config/spec.h"
#include "sim/trace/trace.h"

namespace gpusim {

// REQUIRES: e is a timed event (compute, copy or collective).
SimTime EventDuration(const TraceEvent& e, const DeviceSpec& d);

}  // namespace gpusim

#endif  // GPUSIM_SIM_DEVICE_TIMING_H_
