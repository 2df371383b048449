// Flat-efficiency roofline; see roofline.h.
#include "sim/device/impl/roofline.h"

#include <algorithm>

namespace gpusim {

double RooflineKernelModel::MemorySeconds(double bytes, const DeviceSpec& d) {
  return bytes / (d.hbm_bandwidth * d.memory_efficiency);
}

double RooflineKernelModel::MatmulSeconds(double flops, DType dtype, const DeviceSpec& d) {
  return flops / (d.PeakFlops(dtype) * d.matmul_efficiency);
}

SimTime RooflineKernelModel::Duration(const TraceEvent& e, const DeviceSpec& d) const {
  if (IsCollective(e.kind)) {
    // S: the full buffer — the output of an all-gather, the input of a
    // reduce-scatter, all-reduce or broadcast.
    const Bytes full = e.kind == OpKind::kAllGather ? e.bytes_written : e.bytes_read;
    return CollectiveTime(e.kind, static_cast<double>(full.value()), e.group, d, collectives_, e.group_nodes);
  }
  if (e.kind == OpKind::kHostToDevice || e.kind == OpKind::kDeviceToHost) {
    return SimTime::FromSeconds(static_cast<double>(e.bytes_read.value()) / d.pcie_bandwidth) +
           d.launch_overhead;
  }
  const double bytes = static_cast<double>((e.bytes_read + e.bytes_written).value());
  const double mem_t = MemorySeconds(bytes, d);
  double flop_t = 0;
  if (e.kind == OpKind::kMatmul) {
    flop_t = MatmulSeconds(e.flops, e.dtype, d);
  } else if (e.kind == OpKind::kAttention) {
    flop_t = e.flops / (d.PeakFlops(e.dtype) * d.attention_efficiency);
  } else {
    flop_t = e.flops / d.peak_fp32;
  }
  return SimTime::FromSeconds(std::max(mem_t, flop_t)) + d.launch_overhead;
}

}  // namespace gpusim
