#include "models/llama.h"

#include <map>
#include <set>
#include <string>

#include "gtest/gtest.h"
#include "sim/config/loader.h"
#include "sim/ir/compute_graph.h"
#include "sim/lower/lower.h"
#include "sim/step/model_program.h"

namespace gpusim::llama_test {
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
  auto program = BuildModelProgram(*spec);
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
  auto full = LoadRunSpec(GPUSIM_SOURCE_DIR "/configs/llama7b.yaml", {"model.n_layers=2", "remat.policy=full"});
  auto none = LoadRunSpec(GPUSIM_SOURCE_DIR "/configs/llama7b.yaml", {"model.n_layers=2", "remat.policy=none"});
  ASSERT_TRUE(full.ok() && none.ok());
  auto pf = BuildModelProgram(*full);
  auto pn = BuildModelProgram(*none);
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
  // Full remat (rolled): the carry stack (2 layers x [1,4096,4096] bf16)
  // and the four fp32 [1,4096,32000] cross-entropy residuals. The layer
  // params are remat inputs, forwarded as the scanned xs (Note [Param
  // residual stacks]): no param stack.
  EXPECT_EQ(residual_bytes(*pf).value(), 2 * 4096 * 4096 * 2 + 4LL * 4096 * 32000 * 4);
  EXPECT_GT(residual_bytes(*pn), residual_bytes(*pf));
}

// Param residual stacks exist only without remat: there the dots save the
// bf16 cast of each weight (not a forwarding of the xs slice); norm scales
// are read directly and stay forwarded.
Bytes ParamStackBytes(const std::string& policy, const std::string& axis = "0") {
  auto spec = LoadRunSpec(GPUSIM_SOURCE_DIR "/configs/llama7b.yaml",
                          {"model.n_layers=2", "remat.policy=" + policy, "model.param_scan_axis=" + axis});
  EXPECT_TRUE(spec.ok()) << spec.status();
  auto p = BuildModelProgram(*spec);
  EXPECT_TRUE(p.ok()) << p.status();
  Bytes n(0);
  for (const Tensor& t : p->tensors) {
    if (t.name.rfind("residual_stack.params.", 0) == 0) {
      EXPECT_EQ(t.dtype, DType::kBF16) << t.name;
      EXPECT_EQ(t.shape.size(), 3u) << t.name;  // matrices only, no norm scales
      n += t.bytes();
    }
  }
  return n;
}

TEST(LlamaTest, ParamResidualStacksOnlyWithoutRemat) {
  for (const char* policy : {"full", "minimal", "save_qkv_proj", "save_dot_except_mlp"}) {
    EXPECT_EQ(ParamStackBytes(policy).value(), 0) << policy;
    EXPECT_EQ(ParamStackBytes(policy, "1").value(), 0) << policy;
  }
  // Two layers' matrices (all but the 2·4096 norm scale entries), sharded
  // over 2, in bf16.
  const ModelSpec m = Llama2_7B();
  EXPECT_EQ(ParamStackBytes("none").value(), 2 * (LlamaLayerParamCount(m) - 2 * 4096) / 2 * 2);
}

// With param_scan_axis=1 the backward loop reads the forwarded xs, the
// layer-first transposed copy: it lives from before the forward loop to the
// last backward layer.
TEST(LlamaTest, TransposedCopyLivesThroughTheBackwardLoop) {
  auto spec = LoadRunSpec(GPUSIM_SOURCE_DIR "/configs/llama7b.yaml", {"model.n_layers=2", "model.param_scan_axis=1"});
  ASSERT_TRUE(spec.ok()) << spec.status();
  auto p = BuildModelProgram(*spec);
  ASSERT_TRUE(p.ok()) << p.status();
  auto graph = ComputeGraph::Build(*p);
  ASSERT_TRUE(graph.ok());
  int checked = 0;
  for (const Tensor& t : p->tensors) {
    if (t.name.size() < 13 || t.name.compare(t.name.size() - 13, 13, ".layers_first") != 0) continue;
    const Op& last = p->ops[static_cast<size_t>(graph->last_use(t.id))];
    EXPECT_EQ(last.phase, Phase::kBackward) << t.name << " last read by " << last.name;
    EXPECT_EQ(last.name.rfind("layer0.", 0), 0u) << t.name << " last read by " << last.name;
    ++checked;
  }
  EXPECT_EQ(checked, 9);  // every stacked layer parameter
}

// Note [Copy fusion of stack inits]: stacks of one shape and dtype share
// one zero broadcast, and its copies are written by the same fused kernel,
// so a backward-loop stack of the forward stacks' shape exists before the
// forward loop. With bf16 weights and no remat, each matrix's bf16 param
// residual stack and its gradient stack have one shape and dtype.
TEST(LlamaTest, SameShapeStackInitsAreFusedBeforeTheFirstLoop) {
  auto spec = LoadRunSpec(GPUSIM_SOURCE_DIR "/configs/llama7b.yaml",
                          {"model.n_layers=2", "remat.policy=none", "model.weight_dtype=bf16"});
  ASSERT_TRUE(spec.ok()) << spec.status();
  auto p = BuildModelProgram(*spec);
  ASSERT_TRUE(p.ok()) << p.status();
  auto graph = ComputeGraph::Build(*p);
  ASSERT_TRUE(graph.ok());
  std::map<std::string, OpId> made;
  for (const Tensor& t : p->tensors) made[t.name] = graph->producer(t.id);
  ASSERT_TRUE(made.count("grad_stack.wi_0") && made.count("residual_stack.params.wi_0"));
  // wi_0 and wi_1 (4 stacks of one shape) come from one op, which runs
  // before the first forward layer.
  const OpId init = made.at("grad_stack.wi_0");
  EXPECT_EQ(made.at("residual_stack.params.wi_0"), init);
  EXPECT_EQ(made.at("residual_stack.params.wi_1"), init);
  EXPECT_EQ(made.at("grad_stack.wi_1"), init);
  EXPECT_EQ(p->ops[static_cast<size_t>(init)].outputs.size(), 4u);
  EXPECT_EQ(p->ops[static_cast<size_t>(init)].phase, Phase::kForward);
  // Gradient stacks of a shape no forward stack has are made before the
  // backward loop (the norm scales' gradients).
  EXPECT_EQ(p->ops[static_cast<size_t>(made.at("grad_stack.attn_norm"))].phase, Phase::kBackward);
  OpId first_layer = -1;
  for (const Op& op : p->ops) {
    if (op.name.rfind("layer0.", 0) == 0) {
      first_layer = op.id;
      break;
    }
  }
  EXPECT_LT(init, first_layer);
}

// The residual stacks of a rolled layer scan name the saved set.
std::set<std::string> SavedSet(const std::string& policy) {
  auto spec = LoadRunSpec(GPUSIM_SOURCE_DIR "/configs/llama7b.yaml", {"model.n_layers=2", "remat.policy=" + policy});
  EXPECT_TRUE(spec.ok()) << spec.status();
  auto p = BuildModelProgram(*spec);
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
}  // namespace gpusim::llama_test
