// Note [cuDNN layout transforms] and Note [Small-channel convolutions].
#include "sim/device/impl/conv.h"

#include <vector>

#include "gtest/gtest.h"

namespace gpusim::conv_test {
namespace {

DeviceSpec H200() {
  DeviceSpec d;
  d.cc_major = 9;
  d.hbm_bandwidth = 4.8e12;
  d.launch_overhead = SimTime::FromSeconds(3e-6);
  return d;
}

// [N, C, H, W, K, C/groups, R, S, stride, stride, pad, pad, dil, dil,
// groups, transposed, element size, memory format] (+ the backward mask).
ConvGeometry Conv(int64_t n, int64_t c, int64_t hw, int64_t k, int64_t rs, int64_t stride, int64_t pad,
                  int64_t elem = 2, int64_t layout = 0, std::vector<int64_t> mask = {}, int64_t groups = 1) {
  std::vector<int64_t> d = {n, c, hw, hw, k, c / groups, rs, rs, stride, stride, pad, pad, 1, 1, groups, 0, elem};
  if (layout >= 0) d.push_back(layout);
  d.insert(d.end(), mask.begin(), mask.end());
  absl::StatusOr<ConvGeometry> g = ParseConvFacts(d, !mask.empty());
  EXPECT_TRUE(g.ok()) << g.status();
  return g.ok() ? *g : ConvGeometry{};
}

TEST(CudnnLayoutTransforms, ForwardChannelsFirst3x3) {
  // resnet50 layer1 3x3: X, W, Y (one kernel each).
  const ConvGeometry g = Conv(64, 64, 56, 64, 3, 1, 1);
  const ConvTransforms t = CudnnLayoutTransforms(g, false, H200());
  EXPECT_EQ(t.kernels, 3);
  const double x = 64.0 * 64 * 56 * 56, w = 64.0 * 64 * 9;
  EXPECT_DOUBLE_EQ(t.bytes, 2 * 2 * (x + w + x));
  EXPECT_EQ(t.small_channel_bytes, 0);
  // 3 launches + the bytes at 0.54 of 4.8 TB/s.
  EXPECT_NEAR(CudnnLayoutTransformTime(t, H200()).seconds(), 9e-6 + t.bytes / (4.8e12 * kConvTransformShare), 1e-9);
}

TEST(CudnnLayoutTransforms, BackwardDirectionsByMask) {
  // dgrad: dY, W -> dX; wgrad: X, dY -> dW (the weight only when R x S > 1).
  EXPECT_EQ(CudnnLayoutTransforms(Conv(64, 512, 7, 512, 3, 1, 1, 2, 0, {1, 1, 0}), true, H200()).kernels, 6);
  EXPECT_EQ(CudnnLayoutTransforms(Conv(64, 512, 7, 512, 3, 1, 1, 2, 0, {0, 1, 0}), true, H200()).kernels, 3);
  // A strided 1x1 (a downsample): no weight transform.
  EXPECT_EQ(CudnnLayoutTransforms(Conv(64, 256, 56, 512, 1, 2, 0, 2, 0, {1, 1, 0}), true, H200()).kernels, 4);
  EXPECT_EQ(CudnnLayoutTransforms(Conv(64, 256, 56, 512, 1, 2, 0), false, H200()).kernels, 2);
}

TEST(CudnnLayoutTransforms, NoneWhereTheRuleDoesNotApply) {
  const DeviceSpec d = H200();
  EXPECT_EQ(CudnnLayoutTransforms(Conv(64, 64, 56, 256, 1, 1, 0), false, d).kernels, 0);          // the GEMM path
  EXPECT_EQ(CudnnLayoutTransforms(Conv(64, 64, 56, 64, 3, 1, 1, 2, 1), false, d).kernels, 0);     // channels-last
  EXPECT_EQ(CudnnLayoutTransforms(Conv(64, 64, 56, 64, 3, 1, 1, 4), false, d).kernels, 0);        // fp32
  EXPECT_EQ(CudnnLayoutTransforms(Conv(64, 64, 56, 64, 3, 1, 1, 2, 0, {}, 64), false, d).kernels, 0);  // depthwise
  DeviceSpec pascal = d;
  pascal.cc_major = 6;
  EXPECT_EQ(CudnnLayoutTransforms(Conv(64, 64, 56, 64, 3, 1, 1), false, pascal).kernels, 0);
  // A recording without the memory format is timed as channels-first.
  const ConvGeometry old = Conv(64, 64, 56, 64, 3, 1, 1, 2, -1);
  EXPECT_EQ(old.layout, ConvLayout::kUnrecorded);
  EXPECT_EQ(CudnnLayoutTransforms(old, false, d).kernels, 3);
}

TEST(CudnnLayoutTransforms, SmallChannelTensorsAtTheirOwnRate) {
  // The RGB stem: the input and the weight (C = 3) are small-channel.
  const ConvGeometry g = Conv(64, 3, 224, 64, 7, 2, 3);
  const ConvTransforms t = CudnnLayoutTransforms(g, false, H200());
  EXPECT_EQ(t.kernels, 3);
  EXPECT_DOUBLE_EQ(t.small_channel_bytes, 2 * 2 * (64.0 * 3 * 224 * 224 + 64.0 * 3 * 49));
  EXPECT_DOUBLE_EQ(t.bytes, 2 * 2 * (64.0 * 64 * 112 * 112));
  // The measured 139.8 us of that input's transform (Note [cuDNN layout transforms]).
  EXPECT_NEAR(2 * 2 * 64.0 * 3 * 224 * 224 / (4.8e12 * kConvSmallChannelTransformShare) * 1e6 + 3, 140.6, 1.0);
}

TEST(SmallChannelConvolutions, PaddedToEightOnTheMmaSyncPath) {
  const DeviceSpec d = H200();
  const ConvGeometry stem = Conv(64, 3, 224, 64, 7, 2, 3);
  EXPECT_DOUBLE_EQ(ConvChannelPadding(stem), 8.0 / 3);
  EXPECT_DOUBLE_EQ(SmallChannelConvShare(stem, false, d), kSmallChannelConvForwardShare);
  EXPECT_EQ(SmallChannelConvShare(stem, true, d), 0);  // the backward: the tiled model
  EXPECT_EQ(ConvChannelPadding(Conv(64, 64, 56, 64, 3, 1, 1)), 1);
  EXPECT_EQ(ConvChannelPadding(Conv(64, 3, 224, 64, 7, 2, 3, 4)), 1);  // fp32: no tensor-core alignment
  EXPECT_EQ(SmallChannelConvShare(Conv(64, 64, 56, 64, 3, 1, 1), false, d), 0);
}

TEST(ConvFacts, MemoryFormatFactFromFormat17) {
  EXPECT_EQ(Conv(2, 3, 16, 8, 3, 2, 1, 4, 1).layout, ConvLayout::kChannelsLast);
  EXPECT_EQ(Conv(2, 3, 16, 8, 3, 2, 1, 4, 0).layout, ConvLayout::kContiguous);
  const ConvGeometry b = Conv(2, 3, 16, 8, 3, 2, 1, 4, 0, {0, 1, 0});
  EXPECT_FALSE(b.grad_input);
  EXPECT_TRUE(b.grad_weight);
  const ConvGeometry old = Conv(2, 3, 16, 8, 3, 2, 1, 4, -1, {1, 0, 0});
  EXPECT_TRUE(old.grad_input);
  EXPECT_FALSE(old.grad_weight);
  // The memory format is 0 or 1; 19 facts are neither layout.
  EXPECT_FALSE(ParseConvFacts({2, 3, 16, 16, 8, 3, 3, 3, 2, 2, 1, 1, 1, 1, 1, 0, 4, 2}, false).ok());
  EXPECT_FALSE(ParseConvFacts({2, 3, 16, 16, 8, 3, 3, 3, 2, 2, 1, 1, 1, 1, 1, 0, 4, 0, 0}, false).ok());
}

}  // namespace
}  // namespace gpusim::conv_test
