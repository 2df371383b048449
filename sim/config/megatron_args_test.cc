// Megatron-LM launch lines: splitting, defaults, refusals (megatron_args.h).
#include "sim/config/megatron_args.h"

#include "gtest/gtest.h"
#include "sim/config/loader.h"

namespace gpusim {
namespace {

absl::StatusOr<RunSpec> Parse(const std::string& args, int world = 8) {
  return ParseRunSpec(absl::StrCat("device: h100-sxm-80gb\nmegatron:\n  world_size: ", world, "\n  args: \"", args,
                                   "\"\n"),
                      "t.yaml");
}

constexpr char kBase[] = "--num-layers 4 --hidden-size 1024 --num-attention-heads 16 --seq-length 2048 "
                         "--micro-batch-size 1 --bf16";

TEST(MegatronArgsTest, SplitDropsTheLauncherAndJoinsContinuations) {
  SourceLocation at{"t.yaml", 3, 9, ""};
  auto a = SplitMegatronArgs("torchrun --nproc_per_node 8 pretrain_gpt.py \\\n --num-layers 2 --swiglu "
                             "--data-path 0.5 a 0.5 b --lr=1e-4",
                             at);
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_EQ(a->size(), 4u);
  EXPECT_EQ((*a)[0].name, "num-layers");
  EXPECT_EQ((*a)[0].value, "2");
  EXPECT_EQ((*a)[1].name, "swiglu");
  EXPECT_EQ((*a)[1].value, "true");
  EXPECT_EQ((*a)[2].value, "0.5 a 0.5 b");
  EXPECT_EQ((*a)[3].name, "lr");
  EXPECT_EQ((*a)[3].value, "1e-4");
}

TEST(MegatronArgsTest, MegatronDefaults) {
  auto s = Parse(kBase);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->model.mlp_dim, 4096);      // 4h
  EXPECT_EQ(s->model.n_kv_heads, 16);     // num-query-groups = heads
  EXPECT_EQ(s->model.head_dim, 64);       // kv-channels = h / heads
  EXPECT_EQ(s->model.vocab, 50304);       // GPT-2 BPE 50257 padded to 128
  EXPECT_EQ(s->megatron.data, 8);
  EXPECT_EQ(s->megatron.global_batch, 8);
  EXPECT_EQ(s->megatron.microbatches, 1);
  EXPECT_EQ(s->megatron.grad_dtype, DType::kF32);
  EXPECT_EQ(s->megatron.max_position, 2048);
  EXPECT_EQ(s->allocator.impl, "pytorch_caching");
  EXPECT_TRUE(s->model.tied_embeddings);
  // SwiGLU: int((4h x 2/3) / 64) x 64; GQA groups; vocabulary x TP.
  s = Parse(absl::StrCat(kBase, " --swiglu --group-query-attention --num-query-groups 4 "
                                "--tensor-model-parallel-size 4 --tokenizer-type NullTokenizer --vocab-size 32000"));
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->model.mlp_dim, 2688);
  EXPECT_EQ(s->model.n_kv_heads, 4);
  EXPECT_EQ(s->model.vocab, 32256);  // 32001 padded to 128 x 4
  EXPECT_EQ(s->megatron.data, 2);
}

TEST(MegatronArgsTest, RefusesByNameWithWhereItWasWritten) {
  auto s = Parse(absl::StrCat(kBase, " --fp8-format hybrid"));
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("t.yaml:4:"), std::string::npos) << s.status();
  EXPECT_NE(s.status().message().find("--fp8-format: not modelled: fp8"), std::string::npos) << s.status();
  s = Parse(absl::StrCat(kBase, " --num-experts 8"));
  EXPECT_NE(s.status().message().find("mixture of experts"), std::string::npos) << s.status();
  s = Parse(absl::StrCat(kBase, " --num-layer 4"));
  EXPECT_NE(s.status().message().find("did you mean '--num-layers'"), std::string::npos) << s.status();
  s = Parse("--num-layers 4 --hidden-size 1024 --num-attention-heads 16 --micro-batch-size 1");
  EXPECT_NE(s.status().message().find("--seq-length is required"), std::string::npos) << s.status();
  s = Parse(absl::StrCat(kBase, " --pipeline-model-parallel-size 3"), 6);
  EXPECT_NE(s.status().message().find("must divide --num-layers"), std::string::npos) << s.status();
  s = Parse(absl::StrCat(kBase, " --tensor-model-parallel-size 3"));
  EXPECT_NE(s.status().message().find("world_size: 8 is not a multiple"), std::string::npos) << s.status();
}

TEST(MegatronArgsTest, MappingFormAndNoEffectList) {
  auto s = ParseRunSpec(
      "device: h100-sxm-80gb\nmegatron:\n  world_size: 2\n  args:\n    num_layers: 2\n    hidden-size: 512\n"
      "    num-attention-heads: 8\n    seq-length: 128\n    micro-batch-size: 1\n    bf16: true\n"
      "    use-distributed-optimizer:\n    tp-comm-overlap: false\n    save: /ckpt\n    log-interval: 10\n",
      "m.yaml");
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_TRUE(s->megatron.distributed_optimizer);
  ASSERT_EQ(s->megatron.no_effect.size(), 2u);
  EXPECT_EQ(s->megatron.no_effect[0], "save");
  auto bad = ParseRunSpec("device: h100-sxm-80gb\nmegatron:\n  world_size: 2\n  arg: {}\n", "m.yaml");
  EXPECT_NE(bad.status().message().find("m.yaml:4:3: megatron: unknown key 'arg' (did you mean 'args'?)"),
            std::string::npos)
      << bad.status();
  bad = ParseRunSpec(absl::StrCat("device: h100-sxm-80gb\nmodel: gpt-22b\nmegatron: {world_size: 1, args: \"", kBase,
                                  "\"}\n"),
                     "m.yaml");
  EXPECT_NE(bad.status().message().find("expected exactly one of"), std::string::npos) << bad.status();
}

}  // namespace
}  // namespace gpusim
