#include "sim/device/matmul_tiling.h"

#include "gtest/gtest.h"

namespace gpusim::matmul_tiling_test {
namespace {

constexpr int kH100Sms = 132;

TEST(MatmulTilingTest, SquareGemmOnFixedTileByHand) {
  // 4096³ on 128×128 tiles: 32·32 = 1024 tiles, ceil(1024/132) = 8 waves;
  // issued = 8·132·128·128·(4096 + 128), useful = 4096³.
  TilingOptions o;
  MatmulTiling t = EvaluateMatmulTiling(4096, 4096, 4096, 1, kH100Sms, {128, 128}, 1, o);
  EXPECT_EQ(t.tiles, 1024);
  EXPECT_EQ(t.waves, 8);
  EXPECT_DOUBLE_EQ(t.utilisation, (4096.0 * 4096 * 4096) / (8.0 * 132 * 128 * 128 * 4224));
  EXPECT_NEAR(t.utilisation, 0.9403, 1e-4);
  EXPECT_EQ(t.split_k_bytes, 0);
}

TEST(MatmulTilingTest, OneTileMoreThanTheSmsCostsAWave) {
  TilingOptions o;
  o.k_overhead = 0;
  // 132 tiles of 128×128: one full wave, utilisation 1.
  MatmulTiling full = EvaluateMatmulTiling(128 * 132, 128, 4096, 1, kH100Sms, {128, 128}, 1, o);
  EXPECT_EQ(full.waves, 1);
  EXPECT_DOUBLE_EQ(full.utilisation, 1.0);
  // 133 tiles: two waves, the second with one busy SM: 133 / 264.
  MatmulTiling over = EvaluateMatmulTiling(128 * 133, 128, 4096, 1, kH100Sms, {128, 128}, 1, o);
  EXPECT_EQ(over.waves, 2);
  EXPECT_DOUBLE_EQ(over.utilisation, 133.0 / 264.0);
}

TEST(MatmulTilingTest, SmallKAndSkinnyShapesAreSlower) {
  // K = 64 with 128 elements of per-tile overhead: 64 / 192 at best.
  MatmulTiling small_k = ChooseMatmulTiling(8192, 8192, 64, 1, kH100Sms);
  EXPECT_LE(small_k.utilisation, 64.0 / 192.0 + 1e-12);
  MatmulTiling big_k = ChooseMatmulTiling(8192, 8192, 8192, 1, kH100Sms);
  EXPECT_GT(big_k.utilisation, 0.9);
  // m = 16 fills at most 16 of a 64-row tile.
  MatmulTiling skinny = ChooseMatmulTiling(16, 8192, 8192, 1, kH100Sms);
  EXPECT_LE(skinny.utilisation, 16.0 / 64.0);
  EXPECT_EQ(skinny.tile.m, 64);
}

TEST(MatmulTilingTest, SplitKFillsIdleSms) {
  // 256×256 output: at most 4 tiles of 128×128 on 132 SMs; K = 65536 splits.
  MatmulTiling t = ChooseMatmulTiling(256, 256, 65536, 1, kH100Sms);
  EXPECT_GT(t.split_k, 1);
  MatmulTiling unsplit = EvaluateMatmulTiling(256, 256, 65536, 1, kH100Sms, {128, 128}, 1, {});
  EXPECT_GT(t.utilisation, 4 * unsplit.utilisation);
  EXPECT_DOUBLE_EQ(t.split_k_bytes, 2.0 * (t.split_k - 1) * 256 * 256 * 4);
  // Enough tiles: never split.
  EXPECT_EQ(ChooseMatmulTiling(4096, 4096, 65536, 1, kH100Sms).split_k, 1);
}

TEST(MatmulTilingTest, BatchMultipliesTiles) {
  MatmulTiling t = EvaluateMatmulTiling(4096, 128, 4096, 32, kH100Sms, {128, 128}, 1, {});
  EXPECT_EQ(t.tiles, 32 * 32);
}

}  // namespace
}  // namespace gpusim::matmul_tiling_test
