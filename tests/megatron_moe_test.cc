// Mixture of experts in a Megatron-LM launch line (sim/config/
// megatron_moe_args.cc, models/gpt_moe.cc): the arguments and refusals, a
// tiny MoE's parameters, router and dispatcher buffers per rank worked out
// by hand, and `gpusim run --megatron-args` with 64 experts, top-8, EP 8.
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
#include "sim/step/model_program.h"
#include "sim/step/step.h"
#include "tests/cli_support.h"

namespace gpusim::megatron_moe_test {
namespace {

absl::StatusOr<RunSpec> Parse(const std::string& args, int world = 8) {
  return ParseRunSpec(absl::StrCat("device: h100-sxm-80gb\nmegatron:\n  world_size: ", world, "\n  args: \"", args,
                                   "\"\n"),
                      "t.yaml");
}

// h 64, s 128, micro-batch 2: T = 256 tokens per rank; 8 experts, top-2,
// EP 4 (2 experts per rank), world 8 = DP 8, expert DP 8 / 4 = 2.
constexpr char kTiny[] = "--num-layers 2 --hidden-size 64 --num-attention-heads 4 --seq-length 128 "
                         "--micro-batch-size 2 --bf16 --tokenizer-type NullTokenizer --vocab-size 1000 "
                         "--disable-bias-linear --num-experts 8 --moe-router-topk 2 --expert-model-parallel-size 4 "
                         "--moe-ffn-hidden-size 128 --moe-grouped-gemm --moe-token-dispatcher-type alltoall "
                         "--use-distributed-optimizer";

const LayerValue* Find(const LayerGraph& g, const std::string& name) {
  for (const LayerValue& v : g.values) {
    if (v.name == name) return &v;
  }
  return nullptr;
}

TEST(MegatronMoeTest, ArgumentsAndDefaults) {
  auto s = Parse(kTiny);
  ASSERT_TRUE(s.ok()) << s.status();
  const MegatronMoeSpec& e = s->megatron.moe;
  EXPECT_EQ(e.experts, 8);
  EXPECT_EQ(e.topk, 2);
  EXPECT_EQ(e.ep, 4);
  EXPECT_EQ(e.etp, 1);  // = TP
  EXPECT_EQ(e.edp, 2);  // TP x CP x DP / (EP x ETP) = 8 / 4
  EXPECT_EQ(e.ffn, 128);
  EXPECT_TRUE(e.grouped_gemm);
  EXPECT_EQ(e.dispatcher, "alltoall");
  EXPECT_FALSE(e.aux_loss);  // --moe-aux-loss-coeff defaults to 0
  s = Parse(absl::StrCat(kTiny, " --moe-aux-loss-coeff 0.01"));
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_TRUE(s->megatron.moe.aux_loss);
}

TEST(MegatronMoeTest, RefusesByName) {
  auto s = Parse(absl::StrCat(kTiny, " --moe-z-loss-coeff 0.001"));
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("--moe-z-loss-coeff: not modelled: the router z-loss"), std::string::npos)
      << s.status();
  s = Parse(absl::StrCat(kTiny, " --moe-enable-deepep"));
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("--moe-enable-deepep: not modelled"), std::string::npos) << s.status();
  s = Parse("--num-layers 2 --hidden-size 64 --num-attention-heads 4 --seq-length 128 --micro-batch-size 1 "
            "--moe-router-topk 2");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("--moe-router-topk: needs --num-experts"), std::string::npos) << s.status();
  s = Parse(absl::StrReplaceAll(kTiny, {{"alltoall", "allgather"}}) + " --moe-expert-capacity-factor 1.0");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("works with --moe-token-dispatcher-type alltoall only"), std::string::npos)
      << s.status();
  s = Parse(absl::StrReplaceAll(kTiny, {{"--expert-model-parallel-size 4", "--expert-model-parallel-size 3"}}), 12);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("--expert-model-parallel-size: must divide --num-experts"), std::string::npos)
      << s.status();
  s = Parse(absl::StrReplaceAll(kTiny, {{"--disable-bias-linear ", ""}}));
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("give --disable-bias-linear"), std::string::npos) << s.status();
}

// Router and dispatcher buffers of one layer, by hand: T = 128 x 2 = 256.
TEST(MegatronMoeTest, RouterAndPermutationBuffers) {
  auto s = Parse(kTiny);
  ASSERT_TRUE(s.ok()) << s.status();
  s->megatron.rank_selected = true;
  auto g = GptLayerGraph(*s);
  ASSERT_TRUE(g.ok()) << g.status();
  const LayerValue* logits = Find(*g, "router_logits");
  ASSERT_NE(logits, nullptr);
  EXPECT_EQ(logits->shape, (std::vector<int64_t>{256, 8}));
  EXPECT_EQ(logits->dtype, DType::kBF16);
  EXPECT_EQ(Find(*g, "router_probs")->dtype, DType::kF32);
  // Note [Megatron MoE router]: the softmax over the top-2 logits, saved.
  EXPECT_EQ(Find(*g, "router_probs")->shape, (std::vector<int64_t>{256, 2}));
  EXPECT_EQ(Find(*g, "aux_scores"), nullptr);  // no aux loss
  EXPECT_EQ(Find(*g, "router_group_mask"), nullptr);
  // Unpermute keeps only the permutation (the sorted indices, one i64 per
  // sent row), not the combined tokens: the weights scale the activation.
  EXPECT_EQ(Find(*g, "moe_permute_map")->shape, (std::vector<int64_t>{512}));
  EXPECT_EQ(Find(*g, "moe_permute_map")->dtype, DType::kI64);
  ASSERT_NE(Find(*g, "exp_act"), nullptr);
  EXPECT_EQ(Find(*g, "fc2")->needs, (std::vector<std::string>{"moe_permute_map"}));  // unpermute, no shared experts
  // GeLU experts: the activation, then the multiply by the weights, which
  // keeps the activation's output (SwiGLU: one fused kernel keeping fc1's).
  ASSERT_NE(Find(*g, "exp_act_unscaled"), nullptr);
  EXPECT_EQ(Find(*g, "exp_act_unscaled")->needs, (std::vector<std::string>{"exp_fc1"}));
  EXPECT_EQ(Find(*g, "exp_act")->needs, (std::vector<std::string>{"exp_act_unscaled"}));
  auto sw = Parse(absl::StrCat(kTiny, " --swiglu"));
  ASSERT_TRUE(sw.ok()) << sw.status();
  auto gs = GptLayerGraph(*sw);
  ASSERT_TRUE(gs.ok()) << gs.status();
  EXPECT_EQ(Find(*gs, "exp_act_unscaled"), nullptr);
  EXPECT_EQ(Find(*gs, "exp_act")->needs, (std::vector<std::string>{"exp_fc1"}));
  // Balanced: T x topk = 512 tokens sent and received; 2 experts per rank
  // are sorted into expert order.
  EXPECT_EQ(Find(*g, "moe_permuted")->shape, (std::vector<int64_t>{512, 64}));
  EXPECT_EQ(Find(*g, "moe_dispatched")->shape, (std::vector<int64_t>{512, 64}));
  EXPECT_EQ(Find(*g, "moe_dispatched")->kind, OpKind::kAllGather);
  EXPECT_EQ(Find(*g, "exp_fc1")->shape, (std::vector<int64_t>{512, 128}));
  EXPECT_EQ(Find(*g, "exp_fc1")->batch, 2);
  EXPECT_EQ(Find(*g, "fc2")->shape, (std::vector<int64_t>{128, 2, 64}));
  // Bound without a capacity factor: every token of the 4 EP ranks on this
  // rank's 2 experts, min(topk, 2) = 2 copies each: 4 x 256 x 2 = 2048.
  s->megatron.moe.routing = "bound";
  g = GptLayerGraph(*s);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(Find(*g, "moe_dispatched")->shape, (std::vector<int64_t>{2048, 64}));
  EXPECT_EQ(Find(*g, "moe_permuted")->shape, (std::vector<int64_t>{512, 64}));
  // Capacity factor 2: cap = ceil(512 / 8 x 2) = 128 per expert and source;
  // 4 ranks x 2 experts x 128 = 1024. Padded to capacity 1: 8 x 64 = 512 sent.
  auto c = Parse(absl::StrCat(kTiny, " --moe-expert-capacity-factor 2"));
  ASSERT_TRUE(c.ok()) << c.status();
  c->megatron.moe.routing = "bound";
  g = GptLayerGraph(*c);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(Find(*g, "moe_dispatched")->shape, (std::vector<int64_t>{1024, 64}));
  c = Parse(absl::StrCat(kTiny, " --moe-expert-capacity-factor 1 --moe-pad-expert-input-to-capacity "
                                "--moe-aux-loss-coeff 0.01"));
  ASSERT_TRUE(c.ok()) << c.status();
  g = GptLayerGraph(*c);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(Find(*g, "moe_permuted")->shape, (std::vector<int64_t>{512, 64}));
  EXPECT_EQ(Find(*g, "aux_scores")->shape, (std::vector<int64_t>{256, 8}));
  // Pre-softmax over all 8 experts; group-limited routing's saved mask;
  // TE's fused permute keeps its row_id_map, int32 [T, 2E + 1].
  c = Parse(absl::StrCat(kTiny, " --moe-router-pre-softmax --moe-router-num-groups 4 --moe-router-group-topk 2 "
                                "--moe-permute-fusion"));
  ASSERT_TRUE(c.ok()) << c.status();
  g = GptLayerGraph(*c);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(Find(*g, "router_probs")->shape, (std::vector<int64_t>{256, 8}));
  EXPECT_EQ(Find(*g, "router_group_mask")->shape, (std::vector<int64_t>{256, 8}));
  EXPECT_EQ(Find(*g, "router_group_mask")->dtype, DType::kU8);
  EXPECT_EQ(Find(*g, "router_group_probs")->needs, (std::vector<std::string>{"router_group_mask"}));
  EXPECT_EQ(Find(*g, "moe_permute_map")->shape, (std::vector<int64_t>{256, 17}));
  EXPECT_EQ(Find(*g, "moe_permute_map")->dtype, DType::kI32);
  for (const auto& [args, why] : std::vector<std::pair<std::string, std::string>>{
           {" --moe-router-num-groups 3 --moe-router-group-topk 1", "must divide --num-experts"},
           {" --moe-router-group-topk 1", "needs --moe-router-num-groups"},
           {" --moe-router-num-groups 4", "give both"},
           {" --moe-router-num-groups 4 --moe-router-group-topk 8", "must be at most --moe-router-num-groups"},
           {" --moe-router-topk 1 --moe-router-topk 1", "needs --moe-router-pre-softmax"}}) {
    c = Parse(absl::StrReplaceAll(kTiny, {{"--moe-router-topk 2", ""}}) +
              (absl::StrContains(args, "--moe-router-topk") ? std::string(" --moe-router-topk 1") : " --moe-router-topk 2") +
              (absl::StrContains(args, "--moe-router-topk") ? std::string() : args));
    ASSERT_FALSE(c.ok()) << args;
    EXPECT_NE(c.status().message().find(why), std::string::npos) << args << ": " << c.status();
  }
}

// Note [Megatron MoE layer pattern]: --moe-layer-freq as an integer or as
// _eval_pattern's list expression, one entry per layer; bad patterns
// refused by name.
TEST(MegatronMoeTest, LayerPattern) {
  auto pattern = [](const std::string& freq, int layers) -> absl::StatusOr<std::vector<int>> {
    auto s = Parse(absl::StrReplaceAll(kTiny, {{"--num-layers 2", absl::StrCat("--num-layers ", layers)}}) +
                   " --moe-layer-freq " + freq);
    if (!s.ok()) return s.status();
    return s->megatron.moe.layer_pattern;
  };
  auto p = pattern("1", 4);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_TRUE(p->empty());  // every layer an MoE layer
  p = pattern("2", 5);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(*p, (std::vector<int>{1, 0, 1, 0, 1}));
  p = pattern("'([0]*1+[1]*3)*1'", 4);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(*p, (std::vector<int>{0, 1, 1, 1}));
  p = pattern("'([1]*3+[0]*2)*2'", 10);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(*p, (std::vector<int>{1, 1, 1, 0, 0, 1, 1, 1, 0, 0}));
  p = pattern("'2*[0,1]'", 4);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(*p, (std::vector<int>{0, 1, 0, 1}));
  p = pattern("'[1]*3+[1]*(1+1)'", 5);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_TRUE(p->empty());
  for (const auto& [freq, why] : std::vector<std::pair<std::string, std::string>>{
           {"'[0,1]*3'", "has 6 entries; --num-layers is 4"},
           {"'[0,2,1,1]'", "holds 2"},
           {"'[0]*4'", "makes every layer dense"},
           {"'[1]*(2'", "expected ')'"},
           {"'[[1]]*4'", "a list inside a list"},
           {"'[1]*99999999'", "list too long"},
           {"'[__import__]'", "only digits and"},
           {"0", "expected an integer >= 1"}}) {
    p = pattern(freq, 4);
    ASSERT_FALSE(p.ok()) << freq;
    EXPECT_NE(p.status().message().find("--moe-layer-freq: "), std::string::npos) << p.status();
    EXPECT_NE(p.status().message().find(why), std::string::npos) << freq << ": " << p.status();
  }
}

// A dense layer beside MoE layers: its own MLP (--ffn-hidden-size) and
// parameters; no router, experts or dispatch, no dispatcher sync.
TEST(MegatronMoeTest, DenseLayersBesideMoeLayers) {
  auto s = Parse(absl::StrReplaceAll(kTiny, {{"--num-layers 2", "--num-layers 2 --ffn-hidden-size 96"}}) +
                 " --moe-layer-freq '[0,1]'");
  ASSERT_TRUE(s.ok()) << s.status();
  s->megatron.rank_selected = true;
  auto rep = SimulateStep(*s);
  ASSERT_TRUE(rep.ok()) << rep.status();
  const Program& p = rep->program;
  auto has = [&](const std::string& name) {
    for (const Tensor& t : p.tensors) {
      if (t.name == name) return true;
    }
    return false;
  };
  EXPECT_TRUE(has("params.layer0.w_fc1"));
  EXPECT_TRUE(has("params.layer0.w_fc2"));
  EXPECT_FALSE(has("params.layer0.w_router"));
  EXPECT_FALSE(has("params.layer0.w_exp_fc1"));
  EXPECT_TRUE(has("params.layer1.w_router"));
  EXPECT_TRUE(has("params.layer1.w_exp_fc1"));
  EXPECT_FALSE(has("params.layer1.w_fc1"));
  int64_t fc1 = -1;
  int syncs0 = 0, syncs1 = 0;
  for (const Tensor& t : p.tensors) {
    if (t.name == "params.layer0.w_fc1") fc1 = t.elements();
  }
  EXPECT_EQ(fc1, 64 * 96);  // gelu: one projection of --ffn-hidden-size
  for (const Op& op : p.ops) {
    if (!op.host_sync) continue;
    if (op.layer == 0) ++syncs0;
    if (op.layer == 1) ++syncs1;
  }
  EXPECT_EQ(syncs0, 0);
  EXPECT_GT(syncs1, 0);
  // Each kind of layer keeps its own MLP's values for the backward.
  EXPECT_TRUE(has("mb0.layer0.fc1") || has("layer0.fc1"));
  EXPECT_TRUE(has("mb0.layer1.router_logits") || has("layer1.router_logits"));
  // The parameter count Megatron prints: one dense and one MoE layer.
  auto all_moe = Parse(kTiny);
  ASSERT_TRUE(all_moe.ok());
  EXPECT_EQ(MegatronParamCount(*all_moe) - MegatronParamCount(*s),
            // the MoE layer's router and 8 experts less the dense MLP
            64 * 8 + 8 * 2 * 64 * 128 - 2 * 64 * 96);
}

// Parameters per rank under EP, and the distributed optimizer's shards.
TEST(MegatronMoeTest, ExpertParametersAndOptimizerShards) {
  auto s = Parse(kTiny);
  ASSERT_TRUE(s.ok()) << s.status();
  s->megatron.rank_selected = true;
  auto rep = SimulateStep(*s);
  ASSERT_TRUE(rep.ok()) << rep.status();
  const Program* p = &rep->program;
  int64_t expert = 0, dense = 0, router = 0, shard = -1;
  for (const Tensor& t : p->tensors) {
    if (t.name == "opt.exp_avg.shard") shard = t.elements();
    if (t.name.rfind("params.", 0) != 0 || t.name.find("padding") != std::string::npos) continue;
    if (t.name.size() > 4 && t.name.compare(t.name.size() - 4, 4, ".new") == 0) continue;  // the updated copy
    if (t.name.find(".w_exp") != std::string::npos) {
      expert += t.elements();
    } else {
      dense += t.elements();
    }
    if (t.name.find(".w_router") != std::string::npos) router += t.elements();
  }
  // 2 layers x 2 local experts x (64 x 128 + 128 x 64).
  EXPECT_EQ(expert, 2 * 2 * (64 * 128 + 128 * 64));
  EXPECT_EQ(router, 2 * 64 * 8);
  // Dense over DP 8, experts over expert DP 2.
  EXPECT_EQ(shard, (dense + 7) / 8 + expert / 2);
}

// Note [Megatron MoE router]: sigmoid scores keep their fp32 [T, E] result;
// the expert bias adds two fp32 [E] buffers per MoE layer and one all-reduce
// of the token counts over TP x CP x DP a step; it needs sigmoid scores.
TEST(MegatronMoeTest, SigmoidScoresAndExpertBias) {
  auto s = Parse(absl::StrCat(kTiny, " --moe-router-score-function sigmoid --moe-router-enable-expert-bias "
                                     "--moe-router-bias-update-rate 1e-3"));
  ASSERT_TRUE(s.ok()) << s.status();
  s->megatron.rank_selected = true;
  auto g = GptLayerGraph(*s);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(Find(*g, "router_probs")->shape, (std::vector<int64_t>{256, 8}));
  EXPECT_EQ(Find(*g, "router_probs")->dtype, DType::kF32);
  auto rep = SimulateStep(*s);
  ASSERT_TRUE(rep.ok()) << rep.status();
  int buffers = 0, all_reduces = 0;
  for (const Tensor& t : rep->program.tensors) {
    if (t.name.rfind("router.", 0) == 0) {
      ++buffers;
      EXPECT_EQ(t.bytes().value(), 8 * 4) << t.name;
    }
  }
  for (const Op& op : rep->program.ops) {
    if (op.name != "expert_bias.tokens_per_expert.all_reduce") continue;
    ++all_reduces;
    EXPECT_EQ(op.group, 8);
    EXPECT_EQ(op.bytes_written.value(), 2 * 8 * 4);  // two MoE layers' counts
  }
  EXPECT_EQ(buffers, 2 * 2);
  EXPECT_EQ(all_reduces, 1);
  auto r = Parse(absl::StrCat(kTiny, " --moe-router-enable-expert-bias"));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("--moe-router-enable-expert-bias: supports --moe-router-score-function sigmoid"),
            std::string::npos)
      << r.status();
}

// Note [Megatron fp32 router]: fp32 logits; the backward's fp32 copies of
// the weight, the input and the input's gradient ([T, h] = 256 x 64 fp32).
TEST(MegatronMoeTest, Fp32Router) {
  auto s = Parse(absl::StrCat(kTiny, " --moe-router-dtype fp32"));
  ASSERT_TRUE(s.ok()) << s.status();
  s->megatron.rank_selected = true;
  auto g = GptLayerGraph(*s);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(Find(*g, "router_logits")->dtype, DType::kF32);
  auto rep = SimulateStep(*s);
  ASSERT_TRUE(rep.ok()) << rep.status();
  int copies = 0;
  for (const Tensor& t : rep->program.tensors) {
    if (t.name.find("router.input_fp32") != std::string::npos ||
        t.name.find("router_logits.dx_fp32") != std::string::npos) {
      ++copies;
      EXPECT_EQ(t.bytes().value(), 256 * 64 * 4) << t.name;
    }
  }
  EXPECT_EQ(copies, 2 * 2);  // two layers, one micro-batch
  auto r = Parse(absl::StrCat(kTiny, " --moe-router-dtype fp64"));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("--moe-router-dtype: not modelled: fp64"), std::string::npos) << r.status();
}

// Note [Megatron expert gradients]: the expert gradients are reduced over
// the expert data-parallel group (kTiny: 8 / EP 4 = 2 ranks), the dense ones
// over DP (8); with EP spanning the stage (EP 8 of 8) the experts' need no
// collective, and their update is copied, not gathered.
TEST(MegatronMoeTest, ExpertGradientsReduceOverTheExpertDataParallelGroup) {
  auto reduces = [](const std::string& args) {
    auto s = Parse(args);
    EXPECT_TRUE(s.ok()) << s.status();
    s->megatron.rank_selected = true;
    auto rep = SimulateStep(*s);
    EXPECT_TRUE(rep.ok()) << rep.status();
    std::vector<std::pair<int64_t, bool>> out;  // (group, reads an expert gradient)
    for (const Op& op : rep->program.ops) {
      if (op.name.rfind("grad_sync.", 0) != 0 && op.name.rfind("param_all_gather", 0) != 0) continue;
      bool expert = op.name.find(".experts") != std::string::npos;
      for (TensorId t : op.inputs) expert |= rep->program.tensor(t).name.find(".w_exp") != std::string::npos;
      out.push_back({op.group, expert});
    }
    return out;
  };
  auto r = reduces(kTiny);
  ASSERT_FALSE(r.empty());
  int expert_ops = 0;
  for (const auto& [group, expert] : r) {
    EXPECT_EQ(group, expert ? 2 : 8);
    expert_ops += expert ? 1 : 0;
  }
  EXPECT_GT(expert_ops, 0);
  r = reduces(absl::StrReplaceAll(kTiny, {{"--expert-model-parallel-size 4", "--expert-model-parallel-size 8"}}));
  ASSERT_FALSE(r.empty());
  for (const auto& [group, expert] : r) {
    EXPECT_FALSE(expert);
    EXPECT_EQ(group, 8);
  }
}

// Note [Transformer Engine dummy wgrads]: one kept stand-in per torch
// [out, in] shape. kTiny: w_qkv [192, 64], w_proj [64, 64], the experts'
// fc1 [128, 64] and fc2 [64, 128] (grouped or one linear per expert alike),
// the output layer [1024, 64] (the vocabulary padded to 128), all bf16.
// Shared experts of 128 have the experts' shapes and add none; of 256 they
// add their two.
TEST(MegatronMoeTest, StandInWeightGradientsPerShape) {
  auto dummies = [](const std::string& args) -> int64_t {
    auto s = Parse(args);
    EXPECT_TRUE(s.ok()) << s.status();
    if (!s.ok()) return -1;
    s->megatron.rank_selected = true;
    auto rep = SimulateStep(*s);
    EXPECT_TRUE(rep.ok()) << rep.status();
    if (!rep.ok()) return -1;
    int64_t n = 0;
    for (const Tensor& t : rep->program.tensors) {
      if (absl::StartsWith(t.name, "te.dummy_wgrad.")) n += t.bytes().value();
    }
    return n;
  };
  const int64_t base = (192 * 64 + 64 * 64 + 128 * 64 + 64 * 128 + 1024 * 64) * 2;
  EXPECT_EQ(dummies(kTiny), base);
  EXPECT_EQ(dummies(absl::StrReplaceAll(kTiny, {{" --moe-grouped-gemm", ""}})), base);
  EXPECT_EQ(dummies(absl::StrCat(kTiny, " --moe-shared-expert-intermediate-size 128")), base);
  EXPECT_EQ(dummies(absl::StrCat(kTiny, " --moe-shared-expert-intermediate-size 256")), base + 2 * 256 * 64 * 2);
  EXPECT_EQ(dummies(absl::StrCat(kTiny, " --no-gradient-accumulation-fusion")), 0);
}

// --use-tp-pp-dp-mapping with experts (Note [Megatron expert ranks]): the
// expert ranks follow the same order; with PP > 1 Megatron asserts that the
// expert data-parallel size is the data-parallel size.
TEST(MegatronMoeTest, TpPpDpMapping) {
  const std::string base = absl::StrReplaceAll(kTiny, {{"--expert-model-parallel-size 4", "--expert-model-parallel-size 2"}});
  // TP 2 (SP), PP 2, DP 2; EP 2, ETP 1 (it defaults to TP): expert DP 2 = DP.
  auto s = Parse(absl::StrCat(base, " --tensor-model-parallel-size 2 --sequence-parallel "
                                    "--expert-tensor-parallel-size 1 --pipeline-model-parallel-size 2 "
                                    "--use-tp-pp-dp-mapping"));
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->megatron.moe.edp, s->megatron.data);
  auto r = SimulateMegatron(*s);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->ranks.size(), 2u);
  // TP 1, PP 2, DP 4; EP 2: expert DP 2 is not DP 4.
  s = Parse(absl::StrCat(base, " --pipeline-model-parallel-size 2 --use-tp-pp-dp-mapping"));
  ASSERT_FALSE(s.ok());
  EXPECT_TRUE(absl::StrContains(s.status().message(), "expert data-parallel size (2) equal to the data-parallel size (4)"))
      << s.status();
}

TEST(MegatronMoeTest, RunReportsBalancedAndBoundPerRank) {
  Result r = Gpusim(
      "run --device h100-sxm-80gb --world-size 8 --megatron-args \"--num-layers 2 --hidden-size 128 "
      "--num-attention-heads 4 --seq-length 256 --micro-batch-size 1 --bf16 --tokenizer-type NullTokenizer "
      "--vocab-size 1000 --disable-bias-linear --swiglu --num-experts 64 --moe-router-topk 8 "
      "--expert-model-parallel-size 8 --moe-grouped-gemm --moe-token-dispatcher-type alltoall "
      "--moe-ffn-hidden-size 256 --use-distributed-optimizer\"");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("Mixture of experts: 64 experts, top-8, EP 8 x ETP 1 (expert data parallel 1)"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("worst case: every token of the EP group on this rank's experts"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("heaviest rank under the bound: stage 0 (ranks 0-7); the bound decides \"fits\": fits"),
            std::string::npos)
      << r.out;
}

// Note [MoE dispatch syncs]: the allgather dispatcher stops the host twice
// per MoE layer forward (the token counts' .cpu(), masked_select's size),
// the alltoall one once; kTiny has 2 layers and one micro-batch per rank.
TEST(MegatronMoeTest, DispatchersSyncTheHost) {
  auto syncs_after = [](const std::string& line, const std::string& value) {
    auto spec = Parse(line);
    EXPECT_TRUE(spec.ok()) << spec.status();
    auto p = BuildModelProgram(*spec);
    EXPECT_TRUE(p.ok()) << p.status();
    int n = 0;
    for (const Op& op : p->ops) n += op.host_sync && absl::EndsWith(op.name, "." + value);
    return n;
  };
  EXPECT_EQ(syncs_after(kTiny, "moe_permuted"), 2);
  const std::string ag = absl::StrReplaceAll(kTiny, {{"alltoall", "allgather"}});
  EXPECT_EQ(syncs_after(ag, "moe_permuted"), 0);
  EXPECT_EQ(syncs_after(ag, "moe_gathered_probs"), 2);
  EXPECT_EQ(syncs_after(ag, "exp_in"), 2);
}

}  // namespace
}  // namespace gpusim::megatron_moe_test
