// ApplyRematPolicy on a small layer graph: each policy kind's saved,
// recomputed and offloaded sets, and Megatron's layer groups.
#include "sim/remat/apply.h"

#include <set>
#include <string>

#include "gtest/gtest.h"

namespace gpusim::apply_test {
namespace {

using Names = std::set<std::string>;

// x -> h (norm) -> q (weight matmul, tagged query_proj) -> s (QK^T, batch
// dims) -> p (softmax, tagged attn_probs) -> o (weight matmul, out_proj) -> y.
LayerGraph Graph(CheckpointUnit unit = CheckpointUnit::kValues, int64_t layers = 4) {
  LayerGraph g;
  g.n_layers = layers;
  g.checkpoint_unit = unit;
  g.values = {
      {"h", {8}, DType::kBF16, OpKind::kElementwise, {"x", "W:norm"}, 8, "", false, false, {"x"}},
      {"q", {8}, DType::kBF16, OpKind::kMatmul, {"h", "W:wq"}, 64, "query_proj", true, false, {"h"}},
      {"s", {8}, DType::kBF16, OpKind::kMatmul, {"q"}, 64, "", true, true, {"q"}},
      {"p", {8}, DType::kBF16, OpKind::kElementwise, {"s"}, 8, "attn_probs", false, false, {"p"}},
      {"o", {8}, DType::kBF16, OpKind::kMatmul, {"p", "W:wo"}, 64, "out_proj", true, false, {"p"}},
      {"y", {8}, DType::kBF16, OpKind::kElementwise, {"x", "o"}, 8, "", false, false, {}},
  };
  return g;
}

RematPlan Plan(const LayerGraph& g, RematSpec spec) {
  absl::StatusOr<RematPlan> p = ApplyRematPolicy(g, spec);
  EXPECT_TRUE(p.ok()) << p.status();
  return p.ok() ? *p : RematPlan();
}

RematSpec Policy(const std::string& name) {
  RematSpec s;
  s.policy = name;
  return s;
}

TEST(ApplyRematPolicyTest, NoneSavesWhatTheBackwardReads) {
  const RematPlan p = Plan(Graph(), Policy("none"));
  EXPECT_TRUE(p.no_remat);
  EXPECT_EQ(p.saved, (Names{"x", "h", "q", "p"}));  // s and y are read by no backward rule
  EXPECT_TRUE(p.recompute.empty());
  EXPECT_TRUE(p.offload.empty());
  EXPECT_FALSE(p.layer_groups);
}

TEST(ApplyRematPolicyTest, FullUnderPartialEvalRecomputesFromTheInput) {
  const RematPlan p = Plan(Graph(), Policy("full"));
  EXPECT_FALSE(p.no_remat);
  EXPECT_EQ(p.saved, (Names{"x"}));
  // s is recomputed because recomputing p reads it; o and y are not.
  EXPECT_EQ(p.recompute, (Names{"h", "q", "s", "p"}));
  EXPECT_FALSE(p.layer_groups);
  EXPECT_FALSE(p.Checkpointed(0));
}

TEST(ApplyRematPolicyTest, NamesAndDotPredicates) {
  RematSpec names = Policy("save_only_these_names");
  names.names = {"query_proj"};
  RematPlan p = Plan(Graph(), names);
  EXPECT_EQ(p.saved, (Names{"x", "q"}));
  EXPECT_EQ(p.recompute, (Names{"h", "s", "p"}));

  // dots_with_no_batch_dims_saveable: q saved, s (batch dims) recomputed.
  p = Plan(Graph(), Policy("dots_with_no_batch_dims_saveable"));
  EXPECT_EQ(p.saved, (Names{"x", "q"}));
  EXPECT_EQ(p.recompute, (Names{"h", "s", "p"}));

  // dots_saveable saves s too, so p's recompute stops there.
  p = Plan(Graph(), Policy("dots_saveable"));
  EXPECT_EQ(p.saved, (Names{"x", "q", "s"}));
  EXPECT_EQ(p.recompute, (Names{"h", "p"}));
}

TEST(ApplyRematPolicyTest, OffloadKeepsOffloadedValuesApart) {
  RematSpec spec = Policy("save_and_offload_only_these_names");
  spec.names = {"attn_probs"};
  spec.offload_names = {"query_proj"};
  const RematPlan p = Plan(Graph(), spec);
  EXPECT_EQ(p.saved, (Names{"x", "p"}));
  EXPECT_EQ(p.offload, (Names{"q"}));
  EXPECT_EQ(p.recompute, (Names{"h"}));

  spec.offload_names = {"attn_probs"};  // in both sets: the policy's own error
  absl::StatusOr<RematPlan> bad = ApplyRematPolicy(Graph(), spec);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("'attn_probs' is in both remat.names and remat.offload_names"),
            std::string::npos);
}

TEST(ApplyRematPolicyTest, MegatronSelectiveRecomputesTheAttentionCore) {
  const RematPlan p = Plan(Graph(CheckpointUnit::kLayerGroups), Policy("selective"));
  EXPECT_EQ(p.saved, (Names{"x", "h", "q", "s"}));
  EXPECT_EQ(p.recompute, (Names{"p"}));
  EXPECT_FALSE(p.layer_groups);
  EXPECT_FALSE(p.Checkpointed(0));
}

TEST(ApplyRematPolicyTest, MegatronBlockChecksTheFirstLayersOneByOne) {
  RematSpec spec = Policy("full");
  spec.method = "block";
  spec.num_layers = 2;
  const RematPlan p = Plan(Graph(CheckpointUnit::kLayerGroups), spec);
  // Layers outside the checkpointed block run without checkpoint.
  EXPECT_EQ(p.saved, (Names{"x", "h", "q", "p"}));
  EXPECT_TRUE(p.recompute.empty());
  EXPECT_TRUE(p.layer_groups);
  EXPECT_TRUE(p.Checkpointed(0));
  EXPECT_TRUE(p.Checkpointed(1));
  EXPECT_FALSE(p.Checkpointed(2));
  EXPECT_EQ(p.group_size, 1);
}

TEST(ApplyRematPolicyTest, MegatronUniformGroupsEveryLayer) {
  RematSpec spec = Policy("full");
  spec.method = "uniform";
  spec.num_layers = 2;
  const RematPlan p = Plan(Graph(CheckpointUnit::kLayerGroups), spec);
  EXPECT_EQ(p.group_size, 2);
  for (int l = 0; l < 4; ++l) EXPECT_TRUE(p.Checkpointed(l)) << l;
  EXPECT_TRUE(p.GroupStart(2));
  EXPECT_FALSE(p.GroupStart(3));

  spec.method = "sequential";  // 4 layers in 2 segments, the last not checkpointed
  const RematPlan q = Plan(Graph(CheckpointUnit::kLayerGroups), spec);
  EXPECT_EQ(q.group_size, 2);
  EXPECT_TRUE(q.Checkpointed(1));
  EXPECT_FALSE(q.Checkpointed(2));

  spec.method = "sqrt";  // ceil(sqrt(10)) = 4
  const RematPlan r = Plan(Graph(CheckpointUnit::kLayerGroups, 10), spec);
  EXPECT_EQ(r.group_size, 4);
  EXPECT_TRUE(r.Checkpointed(9));
}

TEST(ApplyRematPolicyTest, NumLayersOutOfRangeIsRefusedByName) {
  RematSpec spec = Policy("full");
  spec.method = "sequential";
  spec.num_layers = 5;
  absl::StatusOr<RematPlan> p = ApplyRematPolicy(Graph(CheckpointUnit::kLayerGroups), spec);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().message(), "remat.num_layers: 5 must be >= 1 and <= model.n_layers (4) for method sequential");
  spec.method = "uniform";
  spec.num_layers = 0;
  p = ApplyRematPolicy(Graph(CheckpointUnit::kLayerGroups), spec);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().message(), "remat.num_layers: 0 must be >= 1");
  // Values-level families have no layer groups to check.
  EXPECT_TRUE(ApplyRematPolicy(Graph(), spec).ok());
}

TEST(ApplyRematPolicyTest, AMisspeltNeedIsAnInternalError) {
  LayerGraph g = Graph();
  g.values[3].needs = {"prbs"};
  absl::StatusOr<RematPlan> p = ApplyRematPolicy(g, Policy("full"));
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), absl::StatusCode::kInternal);
  EXPECT_EQ(p.status().message(), "layer graph: the backward rule of 'p' needs 'prbs', which is no value");
  g = Graph();
  g.values[1].inputs = {"o", "W:wq"};  // read before it is defined
  EXPECT_EQ(ApplyRematPolicy(g, Policy("none")).status().code(), absl::StatusCode::kInternal);
}

// Note [A second output of a kernel]: q -> ring (a collective) -> o, a
// kernel whose second output l (tagged attn_lse) is listed before it.
LayerGraph FlashGraph() {
  LayerGraph g;
  g.checkpoint_unit = CheckpointUnit::kLayerGroups;
  LayerValue l{"l", {8}, DType::kF32, OpKind::kElementwise, {"q"}, 1, "attn_lse", false, false, {}};
  l.kernel_of = "o";
  g.values = {
      {"q", {8}, DType::kBF16, OpKind::kMatmul, {"x", "W:wq"}, 64, "qkv", true, false, {"x"}},
      {"ring", {8}, DType::kBF16, OpKind::kAllGather, {"q"}, 0, "attn_kv_ring", false, false, {}},
      l,
      {"o", {8}, DType::kBF16, OpKind::kAttention, {"q", "ring"}, 64, "context", false, true, {"q", "o", "l"}},
  };
  return g;
}

TEST(ApplyRematPolicyTest, ASecondOutputIsRecomputedFromItsKernelsInputs) {
  const RematPlan p = Plan(FlashGraph(), Policy("selective"));
  EXPECT_EQ(p.saved, (Names{"x", "q", "o"}));
  // Rerunning o's kernel reads the ring too, which is recomputed with it.
  EXPECT_EQ(p.recompute, (Names{"l", "ring"}));
  EXPECT_EQ(Plan(FlashGraph(), Policy("none")).saved, (Names{"x", "q", "o", "l"}));
}

TEST(ApplyRematPolicyTest, ASecondOutputOfNoKernelIsAnInternalError) {
  LayerGraph g = FlashGraph();
  g.values[2].kernel_of = "missing";
  EXPECT_NE(std::string(g.Validate().message()).find("'l' is an output of the kernel of 'missing'"), std::string::npos);
  g.values[2].kernel_of = "l";
  EXPECT_FALSE(g.Validate().ok());
}

}  // namespace
}  // namespace gpusim::apply_test
