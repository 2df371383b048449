#include "sim/device/timing.h"

#include <algorithm>
#include <cmath>

namespace gpusim {
namespace {

SimTime Seconds(double s) { return SimTime::FromSeconds(s); }

}  // namespace

SimTime EventDuration(const TraceEvent& e, const DeviceSpec& d) {
  if (e.recorded_duration.ns() >= 0) return e.recorded_duration;
  const double bytes = static_cast<double>((e.bytes_read + e.bytes_written).value());
  if (IsCollective(e.kind)) {
    const double n = static_cast<double>(std::max<int64_t>(e.group, 1));
    if (n <= 1) return SimTime(0);
    // S: the full buffer — the output of an all-gather, the input of a
    // reduce-scatter or all-reduce.
    const double full = static_cast<double>(
        (e.kind == OpKind::kAllGather ? e.bytes_written : e.bytes_read).value());
    const double bw = d.nvlink_bandwidth > 0 ? d.nvlink_bandwidth : d.pcie_bandwidth;
    const double steps = e.kind == OpKind::kAllReduce ? 2 * (n - 1) : (n - 1);
    const double t = steps * d.link_latency.seconds() + steps / n * full / (bw * d.collective_efficiency);
    return Seconds(t);
  }
  if (e.kind == OpKind::kHostToDevice || e.kind == OpKind::kDeviceToHost) {
    return Seconds(static_cast<double>(e.bytes_read.value()) / d.pcie_bandwidth) + d.launch_overhead;
  }
  const double mem_t = bytes / (d.hbm_bandwidth * d.memory_efficiency);
  double flop_t = 0;
  if (e.kind == OpKind::kMatmul) {
    flop_t = e.flops / (d.PeakFlops(e.dtype) * d.matmul_efficiency);
  } else if (e.kind == OpKind::kAttention) {
    flop_t = e.flops / (d.PeakFlops(e.dtype) * d.attention_efficiency);
  } else {
    // Vector units: elementwise and reductions run at the fp32 non-tensor rate.
    flop_t = e.flops / d.peak_fp32;
  }
  return Seconds(std::max(mem_t, flop_t)) + d.launch_overhead;
}

}  // namespace gpusim
