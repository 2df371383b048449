// Ring α–β collectives; see collective_model.h.
#include "sim/device/collective_model.h"

#include <algorithm>

#include "sim/base/status.h"

namespace gpusim {

double BusBandwidthFactor(OpKind kind, int64_t n) {
  GPUSIM_CHECK(IsCollective(kind));
  if (n <= 1) return 0;
  const double dn = static_cast<double>(n);
  if (kind == OpKind::kBroadcast) return 1;
  const double f = (dn - 1) / dn;
  return kind == OpKind::kAllReduce ? 2 * f : f;
}

int64_t RingSteps(OpKind kind, int64_t n) {
  GPUSIM_CHECK(IsCollective(kind));
  if (n <= 1) return 0;
  return kind == OpKind::kAllReduce ? 2 * (n - 1) : n - 1;
}

namespace {

// RingSteps without int64 arithmetic.
double RingStepsReal(OpKind kind, int64_t n) {
  if (n <= 1) return 0;
  const double steps = static_cast<double>(n) - 1;
  return kind == OpKind::kAllReduce ? 2 * steps : steps;
}

}  // namespace

SimTime CollectiveTime(OpKind kind, double full_bytes, int64_t group,
                       const DeviceSpec& d, const CollectiveOptions& options, int64_t nodes) {
  if (group <= 1) return SimTime(0);
  const int64_t per_node = std::max<int64_t>(options.gpus_per_node, 1);
  if (nodes <= 0) nodes = (group + per_node - 1) / per_node;
  nodes = std::min(nodes, group);
  const double intra_bw = d.nvlink_bandwidth > 0 ? d.nvlink_bandwidth : d.pcie_bandwidth;
  double bw = intra_bw;
  if (nodes > 1 && d.network_bandwidth > 0) bw = std::min(bw, d.network_bandwidth);
  // A device with no link (links.nvlink and links.pcie 0 or absent) cannot
  // run a collective: out of range, which the engine refuses naming the
  // event and the keys (DescribeDuration, timing.h); never a CHECK.
  if (!(bw > 0)) return SimTime::OutOfRange();
  // Steps in double: 2 (n - 1) wraps int64 for a group past 2^62 (issue 27).
  const double steps = RingStepsReal(kind, group);
  const double inter_steps = nodes > 1 ? RingStepsReal(kind, nodes) : 0;
  const double latency = (steps - inter_steps) * d.link_latency.seconds() +
                         inter_steps * options.network_step_latency.seconds();
  const double transfer =
      BusBandwidthFactor(kind, group) * full_bytes / (bw * d.collective_efficiency);
  return SimTime::FromSeconds(latency + transfer);
}

SimTime PointToPointTime(double bytes, bool inter_node, const DeviceSpec& d, const CollectiveOptions& options) {
  if (bytes <= 0) return SimTime(0);
  double bw = d.nvlink_bandwidth > 0 ? d.nvlink_bandwidth : d.pcie_bandwidth;
  if (inter_node && d.network_bandwidth > 0) bw = std::min(bw, d.network_bandwidth);
  if (!(bw > 0)) return SimTime::OutOfRange();  // no link: as CollectiveTime
  const double latency = inter_node ? options.network_step_latency.seconds() : d.link_latency.seconds();
  return SimTime::FromSeconds(latency + bytes / (bw * d.collective_efficiency));
}

}  // namespace gpusim
