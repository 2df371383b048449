#include "sim/device/timing.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"

namespace gpusim {

std::string_view EventOpNameView(const TraceEvent& e) {
  if (!e.op.empty()) return e.op;
  std::string_view n = e.name;
  if (const size_t colon = n.rfind(':'); colon != std::string_view::npos) n.remove_prefix(colon + 1);
  if (const size_t blank = n.find(' '); blank != std::string_view::npos) n = n.substr(0, blank);
  return n;
}

std::string EventOpName(const TraceEvent& e) { return std::string(EventOpNameView(e)); }

SimTime EventDuration(const TraceEvent& e, const DeviceSpec& d, const KernelModel& model) {
  if (e.recorded_duration.ns() >= 0) return e.recorded_duration;
  return model.Duration(e, d);
}

SimTime EventDuration(const TraceEvent& e, const DeviceSpec& d) {
  return EventDuration(e, d, KernelModelOf(d));
}

SimTime HostIssueTime(const TraceEvent& e, const DeviceSpec& d) {
  if (e.host_ops == 0 && e.host_modules == 0) return SimTime(0);
  return SimTime::FromNanos(e.host_ops * static_cast<double>(d.host_op_cost.ns())) +
         d.host_module_cost * e.host_modules;
}

std::string UnrunnableReason(const TraceEvent& e, const DeviceSpec& d) {
  if (e.recorded_duration.ns() >= 0) return "";
  if (e.dtype == DType::kF8 && (e.kind == OpKind::kMatmul || e.kind == OpKind::kAttention) && e.flops > 0 &&
      !(d.peak_fp8 > 0)) {
    return absl::StrCat("an fp8 ", e.kind == OpKind::kMatmul ? "matmul" : "attention", ", and device '", d.name,
                        "' (compute capability ", d.cc_major, ".", d.cc_minor,
                        ") has no fp8 tensor cores: flops.fp8 is absent (Note [fp8 peak] in sim/config/spec_parse.cc)");
  }
  const bool multi = (IsCollective(e.kind) && e.group > 1) || e.kind == OpKind::kHostToDevice ||
                     e.kind == OpKind::kDeviceToHost;
  if (!multi) return "";
  if (IsCollective(e.kind) && !(d.nvlink_bandwidth > 0 || d.pcie_bandwidth > 0)) {
    return absl::StrCat("a collective over ", e.group, " devices, and device '", d.name,
                        "' has no link: links.nvlink and links.pcie are 0 or absent");
  }
  if (!IsCollective(e.kind) && !(d.pcie_bandwidth > 0)) {
    return absl::StrCat("a host copy, and device '", d.name, "' has no PCIe link: links.pcie is 0 or absent");
  }
  return "";
}

std::string DescribeDuration(const TraceEvent& e, const DeviceSpec& d) {
  const std::string dev = absl::StrCat("device '", d.name, "'", d.source_file.empty() ? "" : " (", d.source_file,
                                       d.source_file.empty() ? "" : ")");
  if (e.recorded_duration.ns() >= 0) {
    return e.recorded_duration.ok() ? absl::StrCat("recorded duration ", e.recorded_duration.ns(), " ns")
                                    : "a recorded duration beyond 2^62 ns";
  }
  const bool link = d.nvlink_bandwidth > 0 || d.pcie_bandwidth > 0;
  if (IsCollective(e.kind)) {
    if (!link && e.group > 1) {
      return absl::StrCat("a collective over ", e.group, " devices on ", dev,
                          ", which has no link: links.nvlink and links.pcie are 0 or absent");
    }
    return absl::StrCat("a collective of ", std::max(e.bytes_read, e.bytes_written).value(), " bytes over ", e.group,
                        " devices on ", dev, " (links.nvlink ", d.nvlink_bandwidth, " B/s, links.pcie ",
                        d.pcie_bandwidth, " B/s, links.latency ", d.link_latency.ns(), " ns)");
  }
  if (e.kind == OpKind::kHostToDevice || e.kind == OpKind::kDeviceToHost) {
    return absl::StrCat(e.bytes_read.value(), " bytes over PCIe on ", dev, " (links.pcie ", d.pcie_bandwidth,
                        " B/s)");
  }
  return absl::StrCat(e.flops, " FLOPs and ", (e.bytes_read + e.bytes_written).value(), " bytes on ", dev, " (flops.",
                      std::string(DTypeName(e.dtype)), " ", d.PeakFlops(e.dtype), " FLOP/s, flops.fp32 ", d.peak_fp32,
                      " FLOP/s, hbm_bandwidth ", d.hbm_bandwidth, " B/s)");
}

}  // namespace gpusim
