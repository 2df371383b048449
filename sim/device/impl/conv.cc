// cuDNN's layout transforms; see conv.h, Note [cuDNN layout transforms].
#include "sim/device/impl/conv.h"

#include <string_view>

#include "sim/device/timing.h"

namespace gpusim {
namespace {

// One transform of a tensor of `elements` elements with `channels` innermost
// channels after the transform.
void AddTransform(ConvTransforms& t, double elements, int64_t channels, int64_t elem) {
  const double bytes = 2 * elements * static_cast<double>(elem);
  ++t.kernels;
  (channels < kConvSmallChannels ? t.small_channel_bytes : t.bytes) += bytes;
}

}  // namespace

ConvTransforms CudnnLayoutTransforms(const ConvGeometry& g, bool backward, const DeviceSpec& d) {
  ConvTransforms t;
  if (d.cc_major < 7 || g.layout == ConvLayout::kChannelsLast || g.elem != 2 || g.transposed || g.groups != 1) {
    return t;
  }
  const bool one_by_one = g.r == 1 && g.s == 1;
  if (one_by_one && g.stride_h == 1 && g.stride_w == 1 && g.pad_h == 0 && g.pad_w == 0) return t;  // the GEMM path
  const double x = static_cast<double>(g.n) * g.c * g.h * g.w;
  const double y = static_cast<double>(g.n) * g.k * g.p * g.q;
  const double w = static_cast<double>(g.k) * g.cg * g.r * g.s;
  const auto weight = [&] {
    if (!one_by_one) AddTransform(t, w, g.cg, g.elem);
  };
  if (!backward) {
    AddTransform(t, x, g.c, g.elem);
    weight();
    AddTransform(t, y, g.k, g.elem);
    return t;
  }
  if (g.grad_input) {
    AddTransform(t, y, g.k, g.elem);
    weight();
    AddTransform(t, x, g.c, g.elem);
  }
  if (g.grad_weight) {
    AddTransform(t, x, g.c, g.elem);
    AddTransform(t, y, g.k, g.elem);
    weight();
  }
  return t;
}

SimTime CudnnLayoutTransformTime(const ConvTransforms& t, const DeviceSpec& d) {
  if (t.kernels == 0 || d.hbm_bandwidth <= 0) return SimTime();
  const double s = t.bytes / (d.hbm_bandwidth * kConvTransformShare) +
                   t.small_channel_bytes / (d.hbm_bandwidth * kConvSmallChannelTransformShare);
  return SimTime::FromSeconds(s) + d.launch_overhead * t.kernels;
}

std::optional<ConvGeometry> ConvEventGeometry(const TraceEvent& e, bool* backward) {
  const std::string_view op = EventOpNameView(e);
  *backward = op == "convolution_backward";
  if (!*backward && op != "convolution" && op != "_convolution") return std::nullopt;
  absl::StatusOr<ConvGeometry> g = ParseConvFacts(e.dims, *backward);
  if (!g.ok()) return std::nullopt;  // the eager lowering refuses such facts by name
  return *std::move(g);
}

double ConvChannelPadding(const ConvGeometry& g) {
  if (g.elem != 2 || g.cg % kConvSmallChannels == 0) return 1;
  const int64_t padded = (g.cg + kConvSmallChannels - 1) / kConvSmallChannels * kConvSmallChannels;
  return static_cast<double>(padded) / static_cast<double>(g.cg);
}

double SmallChannelConvShare(const ConvGeometry& g, bool backward, const DeviceSpec& d) {
  if (backward || d.cc_major < 9 || ConvChannelPadding(g) == 1 || g.transposed) return 0;
  return kSmallChannelConvForwardShare;
}

}  // namespace gpusim
