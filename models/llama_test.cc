#include "models/llama.h"

#include <set>
#include <string>

#include "gtest/gtest.h"
#include "sim/config/loader.h"
#include "sim/lower/lower.h"

namespace gpusim {
namespace {

ModelSpec Llama2_7B() {
  auto m = LoadModelSpec("llama2-7b");
  EXPECT_TRUE(m.ok()) << m.status();
  return *m;
}

TEST(LlamaTest, ParamCountMatchesLlama2_7B) {
  const ModelSpec m = Llama2_7B();
  // 4·4096² + 3·4096·11008 + 2·4096 per layer (xla_semantics.md §7).
  EXPECT_EQ(LlamaLayerParamCount(m), 202383360);
  EXPECT_EQ(LlamaParamCount(m), 6738415616);
}

TEST(LlamaTest, ParamCountsOfOtherSizes) {
  auto m70 = LoadModelSpec("llama2-70b");
  ASSERT_TRUE(m70.ok());
  // Llama-2-70b-hf: 68,976,648,192 parameters (GQA, 8 KV heads).
  EXPECT_EQ(LlamaParamCount(*m70), 68976648192);
  auto m8 = LoadModelSpec("llama3-8b");
  ASSERT_TRUE(m8.ok());
  // Meta-Llama-3-8B: 8,030,261,248 parameters.
  EXPECT_EQ(LlamaParamCount(*m8), 8030261248);
}

TEST(LlamaTest, TrainStateBytesPerDeviceUnderFsdp2) {
  auto spec = LoadRunSpec(GPUSIM_SOURCE_DIR "/configs/llama7b.yaml", {});
  ASSERT_TRUE(spec.ok()) << spec.status();
  auto program = BuildLlamaTrainStep(*spec);
  ASSERT_TRUE(program.ok()) << program.status();
  Bytes params, moments, batch, scalars;
  for (const Tensor& t : program->tensors) {
    if (!t.entry_parameter) continue;
    if (t.role == Role::kParameter) params += t.bytes();
    if (t.role == Role::kOptimizerState) moments += t.bytes();
    if (t.role == Role::kInputBatch) batch += t.bytes();
    if (t.role == Role::kScalar) scalars += t.bytes();
  }
  // 6,738,415,616 fp32 parameters over 2 devices; mu and nu likewise.
  EXPECT_EQ(params.value(), 6738415616LL * 4 / 2);
  EXPECT_EQ(moments.value(), 2 * 6738415616LL * 4 / 2);
  // Five int32 [1, 4096] batch arrays (targets_position is pruned).
  EXPECT_EQ(batch.value(), 5 * 4096 * 4);
  // step, adam count, schedule count.
  EXPECT_EQ(scalars.value(), 12);
  auto lowered = LowerEager(*program);
  ASSERT_TRUE(lowered.ok());
  EXPECT_EQ(lowered->argument_bytes.value(), 40430575628LL);  // the seed's, exactly
}

TEST(LlamaTest, FullRematRecomputesAndNoneDoesNot) {
  auto full = LoadRunSpec(GPUSIM_SOURCE_DIR "/configs/llama7b.yaml", {"model.n_layers=2"});
  auto none = LoadRunSpec(GPUSIM_SOURCE_DIR "/configs/llama7b.yaml", {"model.n_layers=2", "remat.policy=none"});
  ASSERT_TRUE(full.ok() && none.ok());
  auto pf = BuildLlamaTrainStep(*full);
  auto pn = BuildLlamaTrainStep(*none);
  ASSERT_TRUE(pf.ok() && pn.ok());
  auto count = [](const Program& p) {
    int n = 0;
    for (const Op& op : p.ops) n += op.recompute;
    return n;
  };
  EXPECT_GT(count(*pf), 0);
  EXPECT_EQ(count(*pn), 0);
  auto residual_bytes = [](const Program& p) {
    Bytes n(0);
    for (const Tensor& t : p.tensors) {
      if (t.role == Role::kResidual) n += t.bytes();
    }
    return n;
  };
  // Full remat (rolled): the carry stack (2 layers x [1,4096,4096] bf16),
  // the fp32 param residual stacks (2 layers' shards) and the four fp32
  // [1,4096,32000] cross-entropy residuals.
  const int64_t layer_shard = LlamaLayerParamCount(full->model) / 2 * 4;
  EXPECT_EQ(residual_bytes(*pf).value(), 2 * 4096 * 4096 * 2 + 2 * layer_shard + 4LL * 4096 * 32000 * 4);
  EXPECT_GT(residual_bytes(*pn), residual_bytes(*pf));
}

// The residual stacks of a rolled layer scan name the saved set.
std::set<std::string> SavedSet(const std::string& policy) {
  auto spec = LoadRunSpec(GPUSIM_SOURCE_DIR "/configs/llama7b.yaml", {"model.n_layers=2", "remat.policy=" + policy});
  EXPECT_TRUE(spec.ok()) << spec.status();
  auto p = BuildLlamaTrainStep(*spec);
  EXPECT_TRUE(p.ok()) << p.status();
  std::set<std::string> saved;
  const std::string prefix = "residual_stack.";
  for (const Tensor& t : p->tensors) {
    if (t.name.rfind(prefix, 0) == 0 && t.name.rfind("residual_stack.params.", 0) != 0) {
      saved.insert(t.name.substr(prefix.size()));
    }
  }
  return saved;
}

TEST(LlamaTest, RematPoliciesChooseTheSavedSet) {
  using Set = std::set<std::string>;
  EXPECT_EQ(SavedSet("full"), (Set{"x"}));
  EXPECT_EQ(SavedSet("save_qkv_proj"), (Set{"x", "query_proj", "key_proj", "value_proj"}));
  EXPECT_EQ(SavedSet("save_out_proj"), (Set{"x", "out_proj"}));
  // out_proj is saved because recomputing x1 = x + out_proj needs it;
  // mlpwo is never needed (y is the next layer's carry), so save_dot_except_mlpwi
  // saves the same as save_dot_except_mlp.
  EXPECT_EQ(SavedSet("save_dot_except_mlp"), (Set{"x", "query_proj", "key_proj", "value_proj", "out_proj"}));
  EXPECT_EQ(SavedSet("save_dot_except_mlpwi"), SavedSet("save_dot_except_mlp"));
  // minimal = dots without batch dims: the projections before RoPE (q_lin,
  // k_lin are dot outputs; query_proj/key_proj are RoPE's), not flash
  // attention (not a dot), so attention is recomputed from q, k, v.
  EXPECT_EQ(SavedSet("minimal"), (Set{"x", "q_lin", "k_lin", "value_proj", "out_proj", "mlpwi_0", "mlpwi_1"}));
  EXPECT_EQ(SavedSet("none"), (Set{"x", "h1", "query_proj", "key_proj", "value_proj", "attn_out", "attn_lse", "x1",
                                   "h2", "mlpwi_0", "mlpwi_1", "act"}));
}

}  // namespace
}  // namespace gpusim
