#include "sim/device/impl/attention.h"

#include <vector>

#include "gtest/gtest.h"
#include "sim/device/impl/tiled.h"

namespace gpusim::attention_test {
namespace {

// A device with round rates: one SM at 1 GHz (128 FP32 lanes: flops.fp32
// 2·128·1e9), 4096 tensor FLOP per clock.
DeviceSpec RoundDevice(int sms = 1) {
  DeviceSpec d;
  d.sms = sms;
  d.cc_major = 9;
  d.peak_fp32 = 2.0 * 128 * 1e9 * sms;
  d.peak_bf16 = d.peak_fp16 = 4096e9 * sms;
  d.hbm_bandwidth = 1e15;
  d.memory_efficiency = 1;
  d.attention_efficiency = 1;
  d.fused_attention_efficiency = 1;
  return d;
}

// The 17 SDPA facts (traces/FORMAT.md): B Hq Hkv Sq Skv Dqk Dv E causal
// dropout-ppm grad mask codes[4] cudnn.
TraceEvent Sdpa(const char* op, int64_t sq, int64_t skv, int64_t d, bool causal, int64_t dropout_ppm = 0) {
  TraceEvent e;
  e.type = EventType::kCompute;
  e.kind = OpKind::kAttention;
  e.op = op;
  e.dims = {1, 1, 1, sq, skv, d, d, 2, causal ? 1 : 0, dropout_ppm, 1, 0, 0, 1, 3, 3, 92600};
  return e;
}

TEST(AttentionTest, CausalForwardSkipsTilesAboveTheDiagonal) {
  // cuDNN forward 64x128, S = 1024: 16 query tiles; tile i reaches key
  // (64i + 63), i.e. floor((64i + 63) / 128) + 1 key tiles: 1,1,2,2,...,8,8
  // = 72, plus one fill/epilogue iteration for each of the 16 CTAs.
  const AttentionTile t{64, 128, 64};
  const AttentionWork causal = CountAttentionTiles(1024, 1024, t, true, false);
  EXPECT_EQ(causal.ctas, 16);
  EXPECT_EQ(causal.iterations, 72 + 16);
  const AttentionWork full = CountAttentionTiles(1024, 1024, t, false, false);
  EXPECT_EQ(full.iterations, 16 * 8 + 16);
}

TEST(AttentionTest, CausalBackwardWalksQueryTilesBelowEachKeyTile) {
  // cuDNN backward 64x64, S = 1024: key tile j sees query tiles j..15:
  // 16 + 15 + ... + 1 = 136, plus 16 CTAs.
  const AttentionWork w = CountAttentionTiles(1024, 1024, {64, 64, 64}, true, true);
  EXPECT_EQ(w.ctas, 16);
  EXPECT_EQ(w.iterations, 136 + 16);
}

TEST(AttentionTest, SequencesArePaddedToWholeTiles) {
  // S = 197 on 64x128: ceil(197/64) = 4 query tiles x ceil(197/128) = 2.
  const AttentionWork w = CountAttentionTiles(197, 197, {64, 128, 64}, false, false);
  EXPECT_EQ(w.ctas, 4);
  EXPECT_EQ(w.iterations, 4 * 2 + 4);
  // Causal, Sq = 100 < Skv = 300 (top-left): both query tiles end before
  // key 128, one key tile each.
  EXPECT_EQ(CountAttentionTiles(100, 300, {64, 128, 64}, true, false).iterations, 2 + 2);
}

TEST(AttentionTest, IterationSumsTensorSfuFp32AndPhilox) {
  const DeviceSpec d = RoundDevice();
  std::optional<AttentionShape> s = FusedAttentionShape(Sdpa("_scaled_dot_product_cudnn_attention", 64, 128, 64, false));
  ASSERT_TRUE(s.has_value());
  const AttentionTile t = ChooseAttentionTile(*s, d);
  EXPECT_EQ(t.m, 64);
  EXPECT_EQ(t.n, 128);
  // 8192 elements: MMA 2·8192·128 / 4096 = 512 clocks, exp 8192 / 16 = 512,
  // FP32 8192·4 / 128 = 256: 1280 ns at 1 GHz.
  EXPECT_NEAR(AttentionIterationSeconds(*s, t, d), 1280e-9, 1e-15);
  // Dropout adds Philox: 8192·15 / 64 = 1920 clocks.
  s->dropout = 0.1;
  EXPECT_NEAR(AttentionIterationSeconds(*s, t, d), 3200e-9, 1e-15);
  // Backward, 64x64: MMA 2·4096·(3·64 + 2·64) / 4096 = 640, exp 256,
  // FP32 4096·6 / 128 = 192, Philox 960.
  s->backward = true;
  const AttentionTile tb = ChooseAttentionTile(*s, d);
  EXPECT_EQ(tb.n, 64);
  EXPECT_NEAR(AttentionIterationSeconds(*s, tb, d), (640 + 256 + 192 + 960) * 1e-9, 1e-15);
  // A head dim of 40 is padded to cuDNN's 64: the same time.
  s->dqk = s->dv = 40;
  EXPECT_NEAR(AttentionIterationSeconds(*s, tb, d), (640 + 256 + 192 + 960) * 1e-9, 1e-15);
}

TEST(AttentionTest, TiledModelTimesTheBackendThatRan) {
  DeviceSpec d = RoundDevice();
  const TiledKernelModel model;
  // One SM, one (batch, head): forward causal S = 1024 runs 88 iterations of
  // 1280 ns; non-causal 144.
  EXPECT_EQ(model.Duration(Sdpa("_scaled_dot_product_cudnn_attention", 1024, 1024, 64, true), d),
            SimTime::FromSeconds(88 * 1280e-9));
  EXPECT_EQ(model.Duration(Sdpa("_scaled_dot_product_cudnn_attention", 1024, 1024, 64, false), d),
            SimTime::FromSeconds(144 * 1280e-9));
  // Flash runs 128x128 at head dim 64 (no dropout): 8·8 + 8 iterations of
  // 2·16384·128 / 4096 + 16384 / 16 + 16384·4 / 128 = 2560 clocks.
  EXPECT_EQ(model.Duration(Sdpa("_scaled_dot_product_flash_attention", 1024, 1024, 64, false), d),
            SimTime::FromSeconds(72 * 2560e-9));
  // efficiency.fused_attention divides the kernel; efficiency.attention (the
  // roofline's, for attention without SDPA facts) does not touch it.
  d.fused_attention_efficiency = 0.5;
  EXPECT_EQ(model.Duration(Sdpa("_scaled_dot_product_cudnn_attention", 1024, 1024, 64, false), d),
            SimTime::FromSeconds(2 * 144 * 1280e-9));
  d.attention_efficiency = 0.25;
  EXPECT_EQ(model.Duration(Sdpa("_scaled_dot_product_cudnn_attention", 1024, 1024, 64, false), d),
            SimTime::FromSeconds(2 * 144 * 1280e-9));
  // Without efficiency.fused_attention the op falls back to the roofline,
  // which reads efficiency.attention.
  d.fused_attention_efficiency = 0;
  EXPECT_NE(model.Duration(Sdpa("_scaled_dot_product_cudnn_attention", 1024, 1024, 64, false), d),
            SimTime::FromSeconds(2 * 144 * 1280e-9));
}

TEST(AttentionTest, WavesQuantiseOverTheSms) {
  // 4 SMs, one head of S = 320 forward on 64x128: 5 CTAs, two waves, the
  // second one CTA: utilisation 5/8, iterations 5·3 + 5 = 20.
  const DeviceSpec d = RoundDevice(4);
  std::optional<AttentionShape> s = FusedAttentionShape(Sdpa("_scaled_dot_product_cudnn_attention", 320, 320, 64, false));
  ASSERT_TRUE(s.has_value());
  EXPECT_NEAR(FusedAttentionKernelSeconds(*s, d, 1), 20 * 1280e-9 / 4 / (5.0 / 8), 1e-15);
}

TEST(AttentionTest, BackwardAddsItsHelperKernels) {
  DeviceSpec d = RoundDevice();
  d.launch_overhead = SimTime::FromSeconds(1e-6);
  const TiledKernelModel model;
  const TraceEvent cudnn = Sdpa("_scaled_dot_product_cudnn_attention_backward", 64, 64, 64, false);
  const TraceEvent eff = Sdpa("_scaled_dot_product_efficient_attention_backward", 64, 64, 64, false);
  // cuDNN: main + dot(dO, O) + dQ convert, three launches; the
  // memory-efficient kernel computes both itself: one launch.
  const std::optional<AttentionShape> sc = FusedAttentionShape(cudnn);
  const std::optional<AttentionShape> se = FusedAttentionShape(eff);
  ASSERT_TRUE(sc && se);
  // dot(dO, O) reads dO and O (64·64·2 B each), writes 64 float row sums;
  // the dQ convert reads 64·64 floats and writes 64·64 bf16.
  const SimTime dot = SimTime::FromSeconds((64.0 * 64 * 2 * 2 + 64 * 4) / 1e15);
  const SimTime convert = SimTime::FromSeconds(64.0 * 64 * (4 + 2) / 1e15);
  EXPECT_EQ(model.Duration(cudnn, d),
            SimTime::FromSeconds(FusedAttentionKernelSeconds(*sc, d, 1)) + SimTime::FromSeconds(3e-6) + dot + convert);
  EXPECT_EQ(model.Duration(eff, d), SimTime::FromSeconds(FusedAttentionKernelSeconds(*se, d, 1)) + SimTime::FromSeconds(1e-6));
}

TEST(AttentionTest, OnlyFusedOpsWithTheirFactsAreShaped) {
  TraceEvent e = Sdpa("_scaled_dot_product_cudnn_attention", 64, 64, 64, false);
  e.dims.pop_back();
  EXPECT_FALSE(FusedAttentionShape(e).has_value());
  EXPECT_FALSE(FusedAttentionShape(Sdpa("_scaled_dot_product_attention_math", 64, 64, 64, false)).has_value());
  EXPECT_FALSE(FusedAttentionShape(Sdpa("_flash_attention_forward", 64, 64, 64, false)).has_value());
  const std::optional<AttentionShape> s =
      FusedAttentionShape(Sdpa("_scaled_dot_product_efficient_attention_backward", 64, 64, 64, true, 100000));
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->backend, AttentionBackend::kEfficient);
  EXPECT_TRUE(s->backward);
  EXPECT_TRUE(s->causal);
  EXPECT_DOUBLE_EQ(s->dropout, 0.1);
}

}  // namespace
}  // namespace gpusim::attention_test
