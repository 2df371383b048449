// --qk-layernorm in a Megatron-LM launch line (Note [Megatron QK layernorm],
// models/gpt_layer.cc): TE's norm of the queries and keys keeps a query- and
// a key-sized copy and their fp32 statistics per layer, worked out by hand;
// the parameters; the refusal under --transformer-impl local.
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "gtest/gtest.h"
#include "models/gpt.h"
#include "sim/config/loader.h"
#include "sim/step/megatron_step.h"

namespace gpusim::megatron_qk_layernorm_test {
namespace {

absl::StatusOr<RunSpec> Parse(const std::string& args) {
  return ParseRunSpec(absl::StrCat("device: h100-sxm-80gb\nmegatron:\n  world_size: 1\n  args: \"", args, "\"\n"),
                      "t.yaml");
}

// h 256, 8 heads of 32 (4 query groups), s 1024, two layers.
constexpr char kLine[] = "--num-layers 2 --hidden-size 256 --num-attention-heads 8 --group-query-attention "
                         "--num-query-groups 4 --seq-length 1024 --max-position-embeddings 1024 "
                         "--micro-batch-size 1 --bf16 --tokenizer-type NullTokenizer --vocab-size 1000 "
                         "--use-flash-attn --hidden-dropout 0 --attention-dropout 0 --normalization RMSNorm";

// Residual bytes and parameter count of the line's one rank.
std::pair<int64_t, int64_t> Held(const std::string& line) {
  auto s = Parse(line);
  EXPECT_TRUE(s.ok()) << s.status();
  if (!s.ok()) return {-1, -1};
  auto r = SimulateMegatron(*s);
  EXPECT_TRUE(r.ok()) << r.status();
  if (!r.ok()) return {-1, -1};
  int64_t bytes = 0;
  for (const Tensor& t : r->ranks.at(0).report.program.tensors) {
    if (t.role == Role::kResidual) bytes += t.bytes().value();
  }
  return {bytes, r->param_count};
}

TEST(MegatronQkLayernormTest, Values) {
  auto s = Parse(absl::StrCat(kLine, " --qk-layernorm"));
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_TRUE(s->megatron.qk_layernorm);
  auto g = GptLayerGraph(*s);
  ASSERT_TRUE(g.ok()) << g.status();
  ASSERT_NE(g->Find("q_ln_in"), nullptr);
  EXPECT_EQ(g->Find("q_ln_in")->shape, (std::vector<int64_t>{1024, 1, 256}));
  EXPECT_EQ(g->Find("k_ln_in")->shape, (std::vector<int64_t>{1024, 1, 128}));
  EXPECT_EQ(g->Find("q_ln_stats")->shape, (std::vector<int64_t>{1024, 1, 8}));
  EXPECT_EQ(g->Find("q_ln_stats")->dtype, DType::kF32);
  EXPECT_EQ(g->Find("q_ln")->needs, (std::vector<std::string>{"q_ln_in", "q_ln_stats"}));
  // Attention reads the normed q, k and v, of the QKV output's size.
  EXPECT_EQ(g->Find("qkv_normed")->shape, g->Find("qkv")->shape);
  EXPECT_EQ(g->Find("context")->inputs, (std::vector<std::string>{"qkv_normed"}));
}

// Per layer: the query copy 1024 x 256 and the key copy 1024 x 128 in bf16,
// their statistics 1024 x (8 + 4) in fp32 (RMSNorm: rstd; LayerNorm: mean
// and rstd); parameters: a [32] weight per norm and layer (and a bias under
// LayerNorm).
TEST(MegatronQkLayernormTest, KeepsTheNormInputsAndStatistics) {
  const auto [plain, plain_params] = Held(kLine);
  const auto [qk, qk_params] = Held(absl::StrCat(kLine, " --qk-layernorm"));
  EXPECT_EQ(qk - plain, 2 * (1024 * (256 + 128) * 2 + 1024 * (8 + 4) * 4));
  EXPECT_EQ(qk_params - plain_params, 2 * 2 * 32);
  const std::string ln = absl::StrReplaceAll(kLine, {{"RMSNorm", "LayerNorm"}});
  const auto [ln_plain, ln_plain_params] = Held(ln);
  const auto [ln_qk, ln_qk_params] = Held(absl::StrCat(ln, " --qk-layernorm"));
  EXPECT_EQ(ln_qk - ln_plain, 2 * (1024 * (256 + 128) * 2 + 1024 * 2 * (8 + 4) * 4));
  EXPECT_EQ(ln_qk_params - ln_plain_params, 2 * 2 * 2 * 32);
}

TEST(MegatronQkLayernormTest, LocalImplIsRefused) {
  auto s = Parse(absl::StrCat(kLine, " --qk-layernorm --transformer-impl local"));
  ASSERT_FALSE(s.ok());
  EXPECT_TRUE(absl::StrContains(s.status().message(), "--qk-layernorm")) << s.status();
}

}  // namespace
}  // namespace gpusim::megatron_qk_layernorm_test
