// MaxText Mixtral (issue 33): a `maxtext:` block with num_experts > 1 runs
// MoeBlock.dense_matmul without capacity as the llama family's MoE MLP
// (Note [MaxText MoE dense matmul], models/llama_moe.cc); the other MoeBlock
// paths are refused by name (Note [MaxText MoE paths], sim/config/maxtext.cc).
#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "models/llama.h"
#include "sim/config/loader.h"
#include "sim/remat/apply.h"
#include "sim/report/render.h"
#include "sim/step/capabilities.h"
#include "sim/step/step.h"

namespace gpusim::maxtext_mixtral_test {
namespace {

const char kExample[] = GPUSIM_SOURCE_DIR "/examples/maxtext/mixtral_8x7b_fsdp16.yaml";

// Mixtral 8x7B as MaxText's GPU configs run it, one device, small batch.
const char kMixtral[] = R"(device: h100-sxm-80gb
maxtext:
  model_name: mixtral-8x7b
  hardware: gpu
  per_device_batch_size: 1
  max_target_length: 4096
  attention: cudnn_flash_te
  remat_policy: full
  megablox: false
  sparse_matmul: false
  ici_fsdp_parallelism: 16
)";

absl::StatusOr<RunSpec> Parse(const std::string& yaml, const std::vector<std::string>& set = {}) {
  return ParseRunSpec(yaml, GPUSIM_SOURCE_DIR "/configs/maxtext_mixtral_test.yaml", set);
}

std::string Error(const std::string& yaml, const std::vector<std::string>& set = {}) {
  auto s = Parse(yaml, set);
  return s.ok() ? "ok" : std::string(s.status().message());
}

// Hand count (MaxText/configs/models/mixtral-8x7b.yml: D 4096, 32/8 heads of
// 128, M 14336, E 8, V 32000, 32 layers, untied):
//   attention 2·4096·4096 + 2·4096·1024        =     41,943,040
//   experts   3 · 8 · 4096 · 14336              =  1,409,286,144
//   gate      4096 · 8                          =         32,768
//   norms     2 · 4096                          =          8,192
//   layer                                       =  1,451,270,144
//   model: 32 layers + 2 · 32000·4096 + 4096    = 46,702,792,704 (46.7 B)
TEST(MaxTextMixtral, ParameterCountIsMixtral8x7b) {
  auto s = Parse(kMixtral);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->model.experts, 8);
  EXPECT_EQ(s->model.experts_per_token, 2);
  EXPECT_EQ(LlamaLayerParamCount(s->model), 1451270144);
  EXPECT_EQ(LlamaParamCount(s->model), 46702792704);
  // The dense mistral-7b layer beside it: 3·D·M instead of experts and gate.
  ModelSpec dense = s->model;
  dense.experts = 1;
  dense.experts_per_token = 1;
  EXPECT_EQ(LlamaLayerParamCount(dense), 41943040 + 3 * 4096 * 14336 + 8192);
}

// maxtext_utils.py calculate_tflops_training_per_device at 4bf3beaa with
// B 1, S 4096: gate 2·B·S·D·E + 2 x 6·B·S·D·M per layer, by hand 313.309
// TFLOP learnable + 26.388 attention.
TEST(MaxTextMixtral, TflopsAreMaxTextsMoeFormula) {
  auto s = Parse(kMixtral);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_NEAR(s->maxtext.learnable_weight_tflops, 313.309274308608, 1e-9);
  EXPECT_NEAR(s->maxtext.attention_tflops, 26.388279066624, 1e-9);
  EXPECT_NEAR(s->maxtext.tflops_per_device_step, 339.697553375232, 1e-9);
}

std::vector<std::string> Saved(const std::string& policy) {
  auto s = Parse(kMixtral, {"maxtext.remat_policy=" + policy});
  EXPECT_TRUE(s.ok()) << s.status();
  auto g = LlamaLayerGraph(*s);
  EXPECT_TRUE(g.ok()) << g.status();
  auto plan = ApplyRematPolicy(*g, s->remat);
  EXPECT_TRUE(plan.ok()) << plan.status();
  return {plan->saved.begin(), plan->saved.end()};
}

// The MoE values and their names (linears.py:831-862): `minimal` saves the
// dots without batch dims (the gate, mlpwi_0, mlpwi_1 [B,S,E,M]), not
// mlpwo (E is a batch dim) nor the weighted sum; save_dot_except_mlpwi
// saves mlpwo by name; full saves only the layer input.
TEST(MaxTextMixtral, SavedSetsUnderRematPolicies) {
  const std::vector<std::string> minimal = Saved("minimal");
  for (const char* v : {"gate_logits", "mlpwi_0", "mlpwi_1"}) {
    EXPECT_NE(std::find(minimal.begin(), minimal.end(), v), minimal.end()) << v;
  }
  for (const char* v : {"mlpwo", "moe_out", "act", "router_weights"}) {
    EXPECT_EQ(std::find(minimal.begin(), minimal.end(), v), minimal.end()) << v;
  }
  const std::vector<std::string> except_wi = Saved("save_dot_except_mlpwi");
  EXPECT_NE(std::find(except_wi.begin(), except_wi.end(), "mlpwo"), except_wi.end());
  EXPECT_EQ(std::find(except_wi.begin(), except_wi.end(), "mlpwi_0"), except_wi.end());
  EXPECT_EQ(Saved("full"), std::vector<std::string>{"x"});
}

// The layer graph's MoE FLOPs: every token through all E experts,
// 3 · 2·T·D·E·M, E/k = 4 x the dropless count.
TEST(MaxTextMixtral, ExpertGemmsRunEveryTokenThroughEveryExpert) {
  auto s = Parse(kMixtral);
  ASSERT_TRUE(s.ok()) << s.status();
  auto g = LlamaLayerGraph(*s);
  ASSERT_TRUE(g.ok()) << g.status();
  ASSERT_TRUE(g->Validate().ok());
  const double per_gemm = 2.0 * 4096 * 4096 * 8 * 14336;
  for (const char* v : {"mlpwi_0", "mlpwi_1", "mlpwo"}) {
    const LayerValue* f = g->Find(v);
    ASSERT_NE(f, nullptr) << v;
    EXPECT_DOUBLE_EQ(f->flops, per_gemm) << v;
  }
  EXPECT_EQ(g->Find("mlpwi_0")->shape, (std::vector<int64_t>{1, 4096, 8, 14336}));
  EXPECT_TRUE(g->Find("mlpwo")->dot_batch_dims);
  EXPECT_FALSE(g->Find("mlpwi_1")->dot_batch_dims);
}

TEST(MaxTextMixtral, OtherMoePathsRefusedByName) {
  const std::string base = "device: h100-sxm-80gb\nmaxtext:\n  model_name: mixtral-8x7b\n  ici_fsdp_parallelism: 16\n";
  // base.yml's defaults: megablox's Pallas TPU kernel.
  std::string e = Error(base);
  EXPECT_NE(e.find("maxtext.megablox: true with sparse_matmul true"), std::string::npos) << e;
  EXPECT_NE(e.find("Pallas TPU kernel"), std::string::npos) << e;
  EXPECT_NE(e.find("megablox: false and sparse_matmul: false"), std::string::npos) << e;
  e = Error(base, {"maxtext.megablox=false"});
  EXPECT_NE(e.find("maxtext.sparse_matmul: true with megablox false runs jax.lax.ragged_dot"), std::string::npos) << e;
  e = Error(base, {"maxtext.megablox=false", "maxtext.sparse_matmul=false", "maxtext.capacity_factor=1.25"});
  EXPECT_NE(e.find("maxtext.capacity_factor: 1.25 runs dense_matmul's capacity branch"), std::string::npos) << e;
  e = Error(kMixtral, {"maxtext.ici_tensor_parallelism=2"});
  EXPECT_NE(e.find("maxtext.ici_tensor_parallelism: '2' with num_experts 8"), std::string::npos) << e;
  e = Error(kMixtral, {"maxtext.routed_bias=true"});
  EXPECT_NE(e.find("maxtext.routed_bias: 'true' is not modelled"), std::string::npos) << e;
  e = Error(kMixtral, {"maxtext.num_experts_per_tok=9"});
  EXPECT_NE(e.find("maxtext.num_experts_per_tok"), std::string::npos) << e;
  // llama2's decoder layer has no MoeBlock.
  e = Error("device: h100-sxm-80gb\nmaxtext: {num_experts: 8, megablox: false, sparse_matmul: false}\n");
  EXPECT_NE(e.find("maxtext.num_experts: 8 with decoder_block 'llama2'"), std::string::npos) << e;
  // Dense models: the MoE keys written are listed as without effect.
  auto dense =
      Parse("device: h100-sxm-80gb\nmaxtext: {model_name: llama2-7b, attention: cudnn_flash_te, "
            "ici_fsdp_parallelism: 2, megablox: false}\n");
  ASSERT_TRUE(dense.ok()) << dense.status();
  EXPECT_EQ(dense->model.experts, 1);
  EXPECT_NE(std::find(dense->maxtext.no_effect.begin(), dense->maxtext.no_effect.end(), "megablox"),
            dense->maxtext.no_effect.end());
}

TEST(MaxTextMixtral, EagerLlamaRefusesExperts) {
  auto s = LoadRunSpec(GPUSIM_SOURCE_DIR "/configs/llama7b.yaml",
                       {"framework=pytorch", "model.param_scan_axis=0", "loop.mode=unrolled", "model.experts=8",
                        "model.experts_per_token=2"});
  ASSERT_TRUE(s.ok()) << s.status();
  auto checked = ApplyCapabilities(*s);
  ASSERT_FALSE(checked.ok());
  EXPECT_NE(std::string(checked.status().message())
                .find("model.experts: not modelled for model family 'llama' under framework 'pytorch'"),
            std::string::npos)
      << checked.status();
}

// The shipped example runs, and the report shows the balanced and bound
// figures per rank (equal: static shapes) for all 16 SPMD ranks.
TEST(MaxTextMixtral, ExampleReportsBalancedAndBoundPerRank) {
  auto s = LoadRunSpec(kExample, {});
  ASSERT_TRUE(s.ok()) << s.status();
  auto r = SimulateStep(*s);
  ASSERT_TRUE(r.ok()) << r.status();
  const std::string text = RenderText(*r);
  EXPECT_NE(text.find("Mixture of experts: 8 experts, top-2"), std::string::npos) << text;
  EXPECT_NE(text.find("balanced = bound"), std::string::npos);
  EXPECT_NE(text.find("every rank (16 = FSDP 16 x TP 1)"), std::string::npos);
  const std::string json = RenderJson(*r);
  EXPECT_NE(json.find(absl::StrCat("\"balanced_peak_bytes\": ", r->peak.value())), std::string::npos) << json;
  EXPECT_NE(json.find(absl::StrCat("\"bound_peak_bytes\": ", r->peak.value())), std::string::npos);
  EXPECT_EQ(r->param_count, 46702792704);
}

}  // namespace
}  // namespace gpusim::maxtext_mixtral_test
