// Shape-aware matmuls over the roofline; see tiled.h.
#include "sim/device/impl/tiled.h"

#include <algorithm>
#include <optional>
#include <string>

#include "sim/device/impl/attention.h"
#include "sim/device/impl/conv.h"
#include "sim/device/timing.h"

namespace gpusim {

double UnalignedGemmShare(const TraceEvent& e) {
  if (e.dtype != DType::kBF16 && e.dtype != DType::kF16) return 0;
  // cuDNN pads a convolution's channels to its kernels' alignment.
  if (EventOpNameView(e).find("convolution") != std::string_view::npos) return 0;
  if (e.m % 2 != 0 || e.n % 2 != 0 || e.k % 2 != 0) return kUnalignedGemmShare;
  if (e.m % 4 != 0 || e.n % 4 != 0 || e.k % 4 != 0) return kAlign2GemmShare;
  return 0;
}

bool UnalignedHalfGemm(const TraceEvent& e) { return UnalignedGemmShare(e) > 0; }

double AtenCopyShare(const TraceEvent& e) {
  if (e.kind != OpKind::kTranspose && e.kind != OpKind::kConvert) return 0;
  const std::string_view op = EventOpNameView(e);
  if (op != "copy_" && op != "_to_copy" && op != "clone" && op != "contiguous" && op != "copy" &&
      op != "_copy_from") {
    return 0;
  }
  if (e.kind == OpKind::kTranspose) return kStridedCopyShare;
  // A widening cast (more bytes written than read: bf16 -> fp32) takes the
  // unrolled loop; a narrowing one (fp32 -> bf16) the vectorised one.
  return e.bytes_written.value() > e.bytes_read.value() ? kCastCopyShare : 0;
}

double AtenElementwiseSeconds(const TraceEvent& e, const DeviceSpec& d) {
  if (e.kind != OpKind::kElementwise || e.op.empty() || e.dims.size() != 1 || d.hbm_bandwidth <= 0) return 0;
  const int64_t loop = e.dims[0];
  const int64_t size = DTypeSize(e.dtype);
  if (loop < 1 || loop > 3 || size <= 0) return 0;
  const double elements = static_cast<double>(e.bytes_written.value() / size);
  return elements / (kElementwiseLoopRates[loop] * d.hbm_bandwidth / kMeasuredHbmPeak);
}

double AtenReduceRate(const TraceEvent& e) {
  if (e.kind != OpKind::kReduce) return 0;
  const std::string_view op = EventOpNameView(e);
  for (const AtenReduceRateRow& r : kAtenReduceRates) {
    if (op == r.op) return r.per_element ? r.bytes_per_s * static_cast<double>(DTypeSize(e.dtype)) : r.bytes_per_s;
  }
  return 0;
}

MatmulTiling TiledKernelModel::Tiling(int64_t m, int64_t n, int64_t k, int64_t batch, int sms) const {
  constexpr size_t kMaxMemo = 1 << 16;  // bound the memory of a long-lived model
  const auto key = std::make_tuple(m, n, k, batch, sms);
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = tilings_.find(key);
    if (it != tilings_.end()) return it->second;
  }
  const MatmulTiling t = ChooseMatmulTiling(m, n, k, batch, sms, tiling_);
  std::lock_guard<std::mutex> lock(mu_);
  if (tilings_.size() >= kMaxMemo) tilings_.clear();
  tilings_.emplace(key, t);
  return t;
}

SimTime TiledKernelModel::Duration(const TraceEvent& e, const DeviceSpec& d) const {
  const bool shaped = e.kind == OpKind::kMatmul && e.m > 0 && e.n > 0 && e.k > 0 &&
                      e.batch > 0 && d.sms > 0;
  if (e.kind == OpKind::kAttention && d.sms > 0 && d.peak_fp32 > 0 && d.fused_attention_efficiency > 0) {
    // Note [Fused attention time]: a fused SDPA op with its facts.
    if (const std::optional<AttentionShape> s = FusedAttentionShape(e)) {
      return FusedAttentionTime(*s, static_cast<double>((e.bytes_read + e.bytes_written).value()), d);
    }
  }
  if (!shaped) {
    // Note [ATen copy kernels], Note [ATen reduction kernels]: a measured
    // share of the HBM peak, the slower of it and the roofline.
    if (const double loop_s = AtenElementwiseSeconds(e, d); loop_s > 0) {
      return std::max(roofline_.Duration(e, d), SimTime::FromSeconds(loop_s) + d.launch_overhead);
    }
    double share = AtenCopyShare(e);
    if (share == 0) share = AtenReduceRate(e) / kMeasuredHbmPeak;
    if (share > 0 && d.hbm_bandwidth > 0) {
      const double bytes = static_cast<double>((e.bytes_read + e.bytes_written).value());
      return std::max(roofline_.Duration(e, d), SimTime::FromSeconds(bytes / (d.hbm_bandwidth * share)) + d.launch_overhead);
    }
    return roofline_.Duration(e, d);
  }
  bool conv_backward = false;
  const std::optional<ConvGeometry> conv = ConvEventGeometry(e, &conv_backward);
  // Note [Small-channel convolutions]: C/groups padded to 8.
  const double pad = conv.has_value() ? ConvChannelPadding(*conv) : 1;
  const int64_t k = pad == 1 ? e.k : static_cast<int64_t>(static_cast<double>(e.k) * pad + 0.5);
  const double flops = e.flops * pad;
  const MatmulTiling t = Tiling(e.m, e.n, k, e.batch, d.sms);
  const double bytes = static_cast<double>((e.bytes_read + e.bytes_written).value()) + t.split_k_bytes;
  const double mem_t = RooflineKernelModel::MemorySeconds(bytes, d);
  double flop_t = RooflineKernelModel::MatmulSeconds(flops, e.dtype, d) / t.utilisation;
  double share = UnalignedGemmShare(e);
  if (conv.has_value()) share = SmallChannelConvShare(*conv, conv_backward, d);
  if (share > 0) {
    // Note [Unaligned GEMMs], Note [Small-channel convolutions]: no
    // TMA/WGMMA kernel; an mma.sync kernel at a measured share of the
    // tensor-core peak.
    flop_t = std::max(flop_t, flops / (d.PeakFlops(e.dtype) * share));
  }
  SimTime t_kernel = SimTime::FromSeconds(std::max(mem_t, flop_t)) + d.launch_overhead;
  // Note [cuDNN layout transforms]: a channels-first 16-bit convolution's
  // transposes to and from NHWC, one kernel per tensor.
  if (conv.has_value()) t_kernel += CudnnLayoutTransformTime(CudnnLayoutTransforms(*conv, conv_backward, d), d);
  return t_kernel;
}

}  // namespace gpusim
