// Context parallelism in a Megatron-LM launch line: --cp-comm-type a2a
// (Note [Megatron CP all-to-all], models/gpt_layer.cc) against p2p, the
// layer's values and what one more saved tensor per layer costs, worked out
// by hand; and the refusals.
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "gtest/gtest.h"
#include "models/gpt.h"
#include "sim/config/loader.h"
#include "sim/step/megatron_step.h"

namespace gpusim::megatron_cp_test {
namespace {

absl::StatusOr<RunSpec> Parse(const std::string& args, int world = 4) {
  return ParseRunSpec(absl::StrCat("device: h100-sxm-80gb\nmegatron:\n  world_size: ", world, "\n  args: \"", args,
                                   "\"\n"),
                      "t.yaml");
}

// h 256, 8 heads of 32 (4 query groups), s 1024 over CP 4: 256 tokens a rank.
constexpr char kCp[] = "--num-layers 2 --hidden-size 256 --num-attention-heads 8 --group-query-attention "
                       "--num-query-groups 4 --seq-length 1024 --max-position-embeddings 1024 "
                       "--micro-batch-size 1 --bf16 --tokenizer-type NullTokenizer --vocab-size 1000 "
                       "--use-flash-attn --context-parallel-size 4 --hidden-dropout 0 --attention-dropout 0";

const LayerValue* Find(const LayerGraph& g, const std::string& name) {
  for (const LayerValue& v : g.values) {
    if (v.name == name) return &v;
  }
  return nullptr;
}

TEST(MegatronCpTest, AllToAllValues) {
  auto s = Parse(absl::StrCat(kCp, " --cp-comm-type a2a"));
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->megatron.cp_comm, "a2a");
  auto g = GptLayerGraph(*s);
  ASSERT_TRUE(g.ok()) << g.status();
  // qkv: 256 local tokens x (8 + 2 x 4) x 32; all-to-all'd to the whole
  // sequence over a quarter of the heads: the same elements.
  const LayerValue* qkv = Find(*g, "qkv");
  const LayerValue* x = Find(*g, "qkv_a2a");
  ASSERT_NE(qkv, nullptr);
  ASSERT_NE(x, nullptr);
  EXPECT_EQ(qkv->shape, (std::vector<int64_t>{256, 1, 512}));
  EXPECT_EQ(x->shape, (std::vector<int64_t>{1024, 1, 128}));
  EXPECT_EQ(x->group, 4);
  // The kernel's output over its heads, then back to the local tokens.
  const LayerValue* heads = Find(*g, "context_heads");
  ASSERT_NE(heads, nullptr);
  EXPECT_EQ(heads->kind, OpKind::kAttention);
  EXPECT_EQ(heads->inputs, (std::vector<std::string>{"qkv_a2a"}));
  EXPECT_EQ(heads->needs, (std::vector<std::string>{"qkv_a2a", "context_heads", "attn_lse"}));
  EXPECT_EQ(heads->shape, (std::vector<int64_t>{1024, 1, 64}));
  EXPECT_EQ(Find(*g, "attn_lse")->shape, (std::vector<int64_t>{1, 2, 1024}));
  EXPECT_EQ(Find(*g, "context")->shape, (std::vector<int64_t>{256, 1, 256}));
  EXPECT_EQ(Find(*g, "context")->inputs, (std::vector<std::string>{"context_heads"}));
  EXPECT_EQ(Find(*g, "kv_ring"), nullptr);
  // p2p: the ring, the kernel's output is the context.
  auto p = Parse(kCp);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->megatron.cp_comm, "p2p");
  g = GptLayerGraph(*p);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_NE(Find(*g, "kv_ring"), nullptr);
  EXPECT_EQ(Find(*g, "qkv_a2a"), nullptr);
  EXPECT_EQ(Find(*g, "context")->kind, OpKind::kAttention);
}

// Each layer keeps the kernel's output besides linear_proj's input: two
// layers x 1024 x 64 x 2 B = 256 KiB more held at the end of the forward.
// The peak (in the backward) differs from p2p's by that and the two
// schemes' transients, so the residuals are compared, not the peaks.
TEST(MegatronCpTest, AllToAllKeepsTheKernelsOutput) {
  auto held = [](const std::string& line) -> int64_t {
    auto s = Parse(line);
    EXPECT_TRUE(s.ok()) << s.status();
    auto r = SimulateMegatron(*s);
    EXPECT_TRUE(r.ok()) << r.status();
    if (!r.ok()) return -1;
    int64_t bytes = 0;
    for (const Tensor& t : r->ranks.at(0).report.program.tensors) {
      if (t.role == Role::kResidual) bytes += t.bytes().value();
    }
    return bytes;
  };
  EXPECT_EQ(held(absl::StrCat(kCp, " --cp-comm-type a2a")) - held(kCp), 2 * 1024 * 64 * 2);
}

TEST(MegatronCpTest, AllToAllRefusals) {
  // 8 heads / TP 1 over CP 8 is fine, but 4 query groups are not.
  auto s = Parse(absl::StrReplaceAll(absl::StrCat(kCp, " --cp-comm-type a2a"),
                                     {{"--context-parallel-size 4", "--context-parallel-size 8"}}),
                 8);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("query groups (4) divisible by --context-parallel-size 8"), std::string::npos)
      << s.status();
  s = Parse(absl::StrCat(kCp, " --cp-comm-type a2a+p2p"));
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("--cp-comm-type"), std::string::npos) << s.status();
}

}  // namespace
}  // namespace gpusim::megatron_cp_test
