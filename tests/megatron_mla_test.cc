// Multi-latent attention in a Megatron-LM launch line (sim/config/
// megatron_mla_args.cc, models/gpt_mla.cc): arguments and refusals, the
// parameters of a DeepSeek-V2 layer worked out by hand from
// multi_latent_attention.py, and the tensors one layer keeps for the
// backward (Note [Megatron multi-latent attention]).
#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "gtest/gtest.h"
#include "models/gpt.h"
#include "sim/config/loader.h"
#include "sim/step/megatron_step.h"
#include "sim/step/step.h"

namespace gpusim::megatron_mla_test {
namespace {

absl::StatusOr<RunSpec> Parse(const std::string& args, int world = 1) {
  return ParseRunSpec(absl::StrCat("device: h100-sxm-80gb\nmegatron:\n  world_size: ", world, "\n  args: \"", args,
                                   "\"\n"),
                      "t.yaml");
}

// DeepSeek-V2's attention (SimuMax's run_pretrain_deepseekv2.sh MLA_ARGS):
// h 5120, 128 heads, q latent 1536, kv latent 512, d_qk 128 + 64, d_v 128.
constexpr char kV2[] = "pretrain_deepseekv2.py --num-layers 2 --hidden-size 5120 --num-attention-heads 128 "
                       "--seq-length 256 --micro-batch-size 1 --bf16 --tokenizer-type NullTokenizer "
                       "--vocab-size 1000 --disable-bias-linear --swiglu --normalization RMSNorm "
                       "--ffn-hidden-size 1024 --position-embedding-type rope --qk-layernorm "
                       "--multi-latent-attention --enable-experimental --q-lora-rank 1536 --kv-lora-rank 512 "
                       "--qk-head-dim 128 --qk-pos-emb-head-dim 64 --v-head-dim 128 --rotary-scaling-factor 1";

const LayerValue* Find(const LayerGraph& g, const std::string& name) {
  for (const LayerValue& v : g.values) {
    if (v.name == name) return &v;
  }
  return nullptr;
}

TEST(MegatronMlaTest, ArgumentsAndRefusals) {
  auto s = Parse(kV2);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_TRUE(s->megatron.mla.present);
  EXPECT_EQ(s->megatron.mla.q_lora_rank, 1536);
  EXPECT_EQ(s->megatron.mla.kv_lora_rank, 512);
  EXPECT_TRUE(s->megatron.mla.rope_fusion);
  EXPECT_EQ(s->megatron.script, "pretrain_deepseekv2.py");
  for (const auto& [args, why] : std::vector<std::pair<std::string, std::string>>{
           {absl::StrReplaceAll(kV2, {{" --enable-experimental", ""}}), "needs --enable-experimental"},
           {absl::StrReplaceAll(kV2, {{" --multi-latent-attention", ""}}), "--q-lora-rank: needs --multi-latent"},
           {absl::StrCat(kV2, " --group-query-attention --num-query-groups 8"), "has no query groups"},
           {absl::StrCat(kV2, " --context-parallel-size 2"), "--context-parallel-size > 1 is not modelled"}}) {
    auto r = Parse(args, absl::StrContains(args, "context-parallel") ? 2 : 1);
    ASSERT_FALSE(r.ok()) << args;
    EXPECT_NE(r.status().message().find(why), std::string::npos) << r.status();
  }
  // --no-rope-fusion runs the torch rope ops, without the experimental kernel.
  s = Parse(absl::StrReplaceAll(kV2, {{" --enable-experimental", " --no-rope-fusion"}}));
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_FALSE(s->megatron.mla.rope_fusion);
  // The script: virtual pipeline stages raise in its model_provider.
  auto r = Parse(absl::StrReplaceAll(kV2, {{"--num-layers 2", "--num-layers 4"}}) +
                     " --pipeline-model-parallel-size 2 --num-layers-per-virtual-pipeline-stage 1 --global-batch-size 2",
                 2);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("megatron.args: pretrain_deepseekv2.py: virtual pipeline stages"),
            std::string::npos)
      << r.status();
}

// Per layer (multi_latent_attention.py, gpt_layer_specs.py): input norm h;
// q_down h x 1536; q_up's fused norm 1536 and 1536 x 128 x 192; kv_down
// h x (512 + 64); kv_up's norm 512 and 512 x 128 x (128 + 128); linear_proj
// 128 x 128 x h = 149,232,640 with the input norm.
TEST(MegatronMlaTest, ParametersOfADeepSeekV2Layer) {
  auto s = Parse(kV2);
  ASSERT_TRUE(s.ok()) << s.status();
  s->megatron.rank_selected = true;
  auto rep = SimulateStep(*s);
  ASSERT_TRUE(rep.ok()) << rep.status();
  int64_t attn = 0;
  for (const Tensor& t : rep->program.tensors) {
    if (t.name.rfind("params.layer0.", 0) != 0) continue;
    if (t.name.size() > 4 && t.name.compare(t.name.size() - 4, 4, ".new") == 0) continue;  // the updated copy
    const std::string w = t.name.substr(std::string("params.layer0.").size());
    if (w == "ln2" || w == "w_fc1" || w == "w_fc2") continue;
    attn += t.elements();
  }
  EXPECT_EQ(attn, 149232640);
  const int64_t h = 5120, f = 1024;
  EXPECT_EQ(MegatronParamCount(*s), 2 * (149232640 + h + 3 * h * f) + 1024 * h + h);  // tied, padded to 1024
}

// What one layer keeps (Note [Megatron multi-latent attention]): the q and
// kv latents (the kv one a contiguous copy), their normed outputs, the
// query (roped in place), the new key and value, the context and its fp32
// statistics; never the kv up projection's output.
TEST(MegatronMlaTest, SavedTensorsOfALayer) {
  auto s = Parse(kV2);
  ASSERT_TRUE(s.ok()) << s.status();
  s->megatron.rank_selected = true;
  auto g = GptLayerGraph(*s);
  ASSERT_TRUE(g.ok()) << g.status();
  std::vector<std::string> needed;
  for (const LayerValue& v : g->values) needed.insert(needed.end(), v.needs.begin(), v.needs.end());
  auto kept = [&](const std::string& n) { return std::find(needed.begin(), needed.end(), n) != needed.end(); };
  for (const char* n : {"ln1", "q_down", "q_ln", "kv_latent", "kv_ln", "q_up", "mla_k", "mla_v", "context",
                        "attn_lse"}) {
    EXPECT_TRUE(kept(n)) << n;
  }
  EXPECT_FALSE(kept("kv_up"));
  EXPECT_FALSE(kept("kv_down"));
  EXPECT_EQ(Find(*g, "q_up")->shape, (std::vector<int64_t>{256, 1, 128 * 192}));
  EXPECT_EQ(Find(*g, "mla_k")->shape, (std::vector<int64_t>{256, 1, 128 * 192}));
  EXPECT_EQ(Find(*g, "mla_v")->shape, (std::vector<int64_t>{256, 1, 128 * 128}));
  EXPECT_EQ(Find(*g, "context")->shape, (std::vector<int64_t>{256, 1, 128 * 128}));
  EXPECT_EQ(Find(*g, "attn_lse")->dtype, DType::kF32);
  EXPECT_DOUBLE_EQ(Find(*g, "context")->bwd_scale, (3.0 * 192 + 2 * 128) / (192 + 128));
  EXPECT_EQ(Find(*g, "mla_q"), nullptr);  // fused rope: the query is roped in place
  s = Parse(absl::StrReplaceAll(kV2, {{" --enable-experimental", " --no-rope-fusion"}}));
  ASSERT_TRUE(s.ok()) << s.status();
  g = GptLayerGraph(*s);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(Find(*g, "context")->inputs.front(), "mla_q");
}

}  // namespace
}  // namespace gpusim::megatron_mla_test
