// Full-recompute layer grouping for the gpt family (models/gpt.cc
// GroupSize/Checkpointed): Megatron uniform (every k layers) and block,
// torch checkpoint_sequential, Chen et al. 2016 sqrt(n) segments; and the
// per-layer times of the Korthikanti 22B case in the right order.
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "models/gpt.h"
#include "sim/config/loader.h"
#include "sim/step/step.h"
#include "sim/step/model_program.h"

namespace gpusim::gpt_remat_methods_test {
namespace {

// s 128, b 2, h 256, a 8, t 1, 9 layers.
constexpr int64_t kS = 128, kB = 2, kH = 256, kA = 8, kL = 9;
constexpr int64_t kSbh = kS * kB * kH;
constexpr int64_t kAll = 34 * kSbh + 5 * kA * kS * kS * kB;  // Korthikanti, no parallelism

Program Build(std::vector<std::string> sets) {
  std::vector<std::string> o = {"model.n_layers=9",  "model.d_model=256",       "model.n_heads=8",
                                "model.head_dim=32", "model.mlp_dim=1024",      "model.vocab=1024",
                                "batch.seq_len=128", "batch.per_device=2",      "parallelism.tensor=1",
                                "remat.policy=full"};
  o.insert(o.end(), sets.begin(), sets.end());
  auto spec = LoadRunSpec(GPUSIM_SOURCE_DIR "/examples/gpt22b_korthikanti.yaml", o);
  EXPECT_TRUE(spec.ok()) << spec.status();
  auto p = BuildModelProgram(*spec);
  EXPECT_TRUE(p.ok()) << p.status();
  return *p;
}

std::vector<int64_t> PerLayer(const Program& p) {
  std::vector<int64_t> out;
  for (int l = 0; l < kL; ++l) out.push_back(GptLayerActivationBytes(p, l).value());
  return out;
}

int RecomputedLayers(const Program& p) {
  std::vector<bool> seen(kL, false);
  for (const Op& op : p.ops) {
    if (op.recompute && op.layer >= 0) seen[static_cast<size_t>(op.layer)] = true;
  }
  int n = 0;
  for (bool b : seen) n += b;
  return n;
}

TEST(GptRematMethodsTest, UniformEveryKLayers) {
  // Every layer its own checkpoint: each keeps its input (2sbh).
  EXPECT_EQ(PerLayer(Build({"remat.method=uniform", "remat.num_layers=1"})), std::vector<int64_t>(kL, 2 * kSbh));
  // Every 3 layers: only the first of each group keeps its input.
  const std::vector<int64_t> every3 = {2 * kSbh, 0, 0, 2 * kSbh, 0, 0, 2 * kSbh, 0, 0};
  const Program p = Build({"remat.method=uniform", "remat.num_layers=3"});
  EXPECT_EQ(PerLayer(p), every3);
  EXPECT_EQ(RecomputedLayers(p), kL);
}

TEST(GptRematMethodsTest, BlockFirstKLayers) {
  const Program p = Build({"remat.method=block", "remat.num_layers=4"});
  std::vector<int64_t> want(kL, kAll);
  for (int l = 0; l < 4; ++l) want[static_cast<size_t>(l)] = 2 * kSbh;
  EXPECT_EQ(PerLayer(p), want);
  EXPECT_EQ(RecomputedLayers(p), 4);
}

TEST(GptRematMethodsTest, CheckpointSequentialLeavesTheLastSegment) {
  // segments=3 over 9 layers: segments of 3; the first two checkpointed.
  const Program p = Build({"remat.method=sequential", "remat.num_layers=3"});
  EXPECT_EQ(PerLayer(p), (std::vector<int64_t>{2 * kSbh, 0, 0, 2 * kSbh, 0, 0, kAll, kAll, kAll}));
  EXPECT_EQ(RecomputedLayers(p), 6);
  auto bad = LoadRunSpec(GPUSIM_SOURCE_DIR "/examples/gpt22b_korthikanti.yaml",
                         {"model.n_layers=9", "remat.policy=full", "remat.method=sequential", "remat.num_layers=10"});
  ASSERT_TRUE(bad.ok());
  EXPECT_EQ(BuildModelProgram(*bad).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(GptRematMethodsTest, SqrtNSegments) {
  // ceil(sqrt(9)) = 3: the same checkpoints as every 3 layers.
  EXPECT_EQ(PerLayer(Build({"remat.method=sqrt"})), PerLayer(Build({"remat.method=uniform", "remat.num_layers=3"})));
  // 10 layers: segments of 4 (layers 0, 4, 8 keep their inputs).
  const Program p = Build({"remat.method=sqrt", "model.n_layers=10"});
  int64_t kept = 0;
  for (int l = 0; l < 10; ++l) kept += GptLayerActivationBytes(p, l).value();
  EXPECT_EQ(kept, 3 * 2 * kSbh);
}

// Korthikanti et al. 2022 Table 4 (22B, A100-80GB): full recompute is the
// slowest backward, selective a small overhead, forward unchanged.
TEST(GptRematMethodsTest, Korthikanti22BPerLayerTimesInOrder) {
  auto mean = [](const std::string& policy, bool sp) {
    auto spec = LoadRunSpec(GPUSIM_SOURCE_DIR "/examples/gpt22b_korthikanti.yaml",
                            {"remat.policy=" + policy, std::string("parallelism.sequence_parallel=") +
                                                           (sp ? "true" : "false")});
    EXPECT_TRUE(spec.ok()) << spec.status();
    auto r = SimulateStep(*spec);
    EXPECT_TRUE(r.ok()) << r.status();
    double f = 0, b = 0;
    for (const LayerTime& t : r->layer_times) {
      f += t.forward.seconds();
      b += t.backward.seconds();
    }
    EXPECT_EQ(r->layer_times.size(), 48u);
    return std::pair<double, double>{f / 48, b / 48};
  };
  const auto none = mean("none", false), full = mean("full", false), sel = mean("selective", false);
  EXPECT_GT(full.second, sel.second);
  EXPECT_GT(sel.second, none.second);
  EXPECT_LT(sel.second / none.second, 1.2);         // a small overhead
  EXPECT_GT(full.second / none.second, 1.25);       // about one more forward
  EXPECT_NEAR(full.first / none.first, 1.0, 0.02);  // forward unchanged
  EXPECT_NEAR(sel.first / none.first, 1.0, 0.02);
}

}  // namespace
}  // namespace gpusim::gpt_remat_methods_test
