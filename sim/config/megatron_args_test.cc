// Megatron-LM launch lines: splitting, defaults, refusals (megatron_args.h).
#include "sim/config/megatron_args.h"

#include <algorithm>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "sim/config/loader.h"

namespace gpusim::megatron_args_test {
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
  auto s = Parse(absl::StrCat(kBase, " --fp8-format hybrid --fp8-recipe mxfp8"));
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("t.yaml:4:"), std::string::npos) << s.status();
  EXPECT_NE(s.status().message().find("--fp8-recipe: mxfp8 block scaling"), std::string::npos) << s.status();
  s = Parse(absl::StrCat(kBase, " --fp8-format hybrid"));  // modelled (models/gpt_fp8.cc)
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->megatron.fp8_format, "hybrid");
  EXPECT_EQ(s->megatron.fp8_recipe, "delayed");
  EXPECT_EQ(s->megatron.fp8_amax_history_len, 1);  // Megatron's default (TE's DelayedScaling has 1024)
  s = Parse(absl::StrCat(kBase, " --num-experts 8"));  // MoE: tests/megatron_moe_test.cc
  EXPECT_NE(s.status().message().find("biases in the expert linears are not modelled"), std::string::npos)
      << s.status();
  s = Parse(absl::StrCat(kBase, " --num-layer 4"));
  EXPECT_NE(s.status().message().find("did you mean '--num-layers'"), std::string::npos) << s.status();
  s = Parse("--num-layers 4 --hidden-size 1024 --num-attention-heads 16 --micro-batch-size 1");
  EXPECT_NE(s.status().message().find("--seq-length is required"), std::string::npos) << s.status();
  s = Parse(absl::StrCat(kBase, " --pipeline-model-parallel-size 3"), 6);
  EXPECT_NE(s.status().message().find("must divide --num-layers"), std::string::npos) << s.status();
  s = Parse(absl::StrCat(kBase, " --tensor-model-parallel-size 3"));
  EXPECT_NE(s.status().message().find("world_size: 8 is not a multiple"), std::string::npos) << s.status();
}

// --cross-entropy-loss-fusion with --cross-entropy-fusion-impl native
// (Megatron's default) or te (as Megatron ran it before 168cb15) is
// modelled; --deterministic-mode with it is refused with Megatron's own
// reason (arguments.py validate_args).
TEST(MegatronArgsTest, FusedCrossEntropyNativeAndTeModelled) {
  auto s = Parse(kBase);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_FALSE(s->megatron.cross_entropy_fusion);
  s = Parse(absl::StrCat(kBase, " --cross-entropy-loss-fusion"));
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_TRUE(s->megatron.cross_entropy_fusion);
  s = Parse(absl::StrCat(kBase, " --cross-entropy-loss-fusion --cross-entropy-fusion-impl native"));
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_TRUE(s->megatron.cross_entropy_fusion);
  EXPECT_FALSE(s->megatron.cross_entropy_te);
  s = Parse(absl::StrCat(kBase, " --cross-entropy-loss-fusion --cross-entropy-fusion-impl te"));
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_TRUE(s->megatron.cross_entropy_fusion);
  EXPECT_TRUE(s->megatron.cross_entropy_te);
  s = Parse(absl::StrCat(kBase, " --cross-entropy-loss-fusion --deterministic-mode"));
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("not deterministic"), std::string::npos) << s.status();
  // Without the fusion the impl is read by nothing: listed as no effect.
  s = Parse(absl::StrCat(kBase, " --cross-entropy-fusion-impl te"));
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_FALSE(s->megatron.cross_entropy_fusion);
  EXPECT_NE(std::find(s->megatron.no_effect.begin(), s->megatron.no_effect.end(), "cross-entropy-fusion-impl"),
            s->megatron.no_effect.end());
  s = Parse(absl::StrCat(kBase, " --cross-entropy-loss-fusion --cross-entropy-fusion-impl native"));
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(std::find(s->megatron.no_effect.begin(), s->megatron.no_effect.end(), "cross-entropy-fusion-impl"),
            s->megatron.no_effect.end());
  s = Parse(absl::StrCat(kBase, " --cross-entropy-fusion-impl fast"));
  EXPECT_NE(s.status().message().find("expected one of native|te"), std::string::npos) << s.status();
}

// Logging that computes every iteration is modelled (Note [Megatron
// iteration on the host], models/gpt_megatron_host.cc), not listed as
// having no effect; the spec carries it to the builder.
TEST(MegatronArgsTest, PerIterationLoggingIsModelled) {
  std::string why;
  EXPECT_EQ(ClassifyMegatronArg("log-params-norm", &why), "modelled");
  EXPECT_NE(why.find("host sync"), std::string::npos) << why;
  EXPECT_EQ(ClassifyMegatronArg("log-num-zeros-in-grad", &why), "modelled");
  EXPECT_EQ(ClassifyMegatronArg("no-check-for-nan-in-loss-and-grad", &why), "modelled");
  EXPECT_EQ(ClassifyMegatronArg("log-interval", &why), "no_effect");
  auto s = ParseRunSpec(
      "device: h100-sxm-80gb\nmegatron:\n  world_size: 2\n  args:\n    num_layers: 2\n    hidden-size: 512\n"
      "    num-attention-heads: 8\n    seq-length: 128\n    micro-batch-size: 1\n    bf16: true\n"
      "    log-params-norm: true\n    log-interval: 1\n    no-check-for-nan-in-loss-and-grad:\n",
      "m.yaml");
  ASSERT_TRUE(s.ok()) << s.status();
  ASSERT_EQ(s->megatron.no_effect.size(), 1u);
  EXPECT_EQ(s->megatron.no_effect[0], "log-interval");
  EXPECT_TRUE(s->megatron.log_params_norm);
  EXPECT_FALSE(s->megatron.log_num_zeros_in_grad);
  EXPECT_FALSE(s->megatron.check_for_nan);
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

// Note [Megatron uneven stages]: get_num_layers_to_build's counts.
TEST(MegatronArgsTest, UnevenStages) {
  const std::string l10 = "--num-layers 10 --hidden-size 1024 --num-attention-heads 16 --seq-length 2048 "
                          "--micro-batch-size 1 --bf16 --pipeline-model-parallel-size 4";
  auto s = Parse(absl::StrCat(l10, " --decoder-first-pipeline-num-layers 1 --decoder-last-pipeline-num-layers 3"), 4);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->megatron.stage_layers, (std::vector<int64_t>{1, 3, 3, 3}));
  s = Parse(absl::StrCat(l10, " --account-for-embedding-in-pipeline-split --account-for-loss-in-pipeline-split"), 4);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->megatron.stage_layers, (std::vector<int64_t>{2, 3, 3, 2}));  // (10 + 2) / 4, less one at each end
  // Interleaved, 2 chunks per rank, the first rank given 4 layers.
  s = Parse("--num-layers 12 --hidden-size 1024 --num-attention-heads 16 --seq-length 2048 --micro-batch-size 1 "
            "--pipeline-model-parallel-size 2 --num-virtual-stages-per-pipeline-rank 2 --global-batch-size 4 "
            "--decoder-first-pipeline-num-layers 4",
            2);
  ASSERT_TRUE(s.ok()) << s.status();
  // Rank 0 holds 4 (2 per chunk), rank 1 the other 8 (4 per chunk): virtual stages 0..3 = 2, 4, 2, 4.
  EXPECT_EQ(s->megatron.stage_layers, (std::vector<int64_t>{2, 4, 2, 4}));
  s = Parse(absl::StrCat(l10, " --decoder-first-pipeline-num-layers 2"), 4);
  EXPECT_NE(s.status().message().find("--decoder-first-pipeline-num-layers: the layers left (8) must divide over the "
                                      "other 3 pipeline stages"),
            std::string::npos)
      << s.status();
  s = Parse(absl::StrCat(l10, " --decoder-first-pipeline-num-layers 1 --account-for-loss-in-pipeline-split"), 4);
  EXPECT_NE(s.status().message().find("does not go with --account-for"), std::string::npos) << s.status();
  s = Parse("--num-layers 3 --hidden-size 1024 --num-attention-heads 16 --seq-length 2048 --micro-batch-size 1 "
            "--pipeline-model-parallel-size 4 --account-for-embedding-in-pipeline-split",
            4);
  EXPECT_NE(s.status().message().find("--account-for-embedding-in-pipeline-split: leaves virtual stage 0 with no "
                                      "transformer layer"),
            std::string::npos)
      << s.status();
}

TEST(MegatronArgsTest, PointToPointSettings) {
  const std::string vp = "--num-layers 8 --hidden-size 1024 --num-attention-heads 16 --seq-length 2048 "
                         "--micro-batch-size 1 --num-layers-per-virtual-pipeline-stage 1 --global-batch-size 8 ";
  auto s = Parse(absl::StrCat(vp, "--pipeline-model-parallel-size 4"), 4);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_TRUE(s->megatron.overlap_p2p);  // Megatron's default under the interleaved schedule
  s = Parse(absl::StrCat(vp, "--pipeline-model-parallel-size 4 --no-overlap-p2p-communication"), 4);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_FALSE(s->megatron.overlap_p2p);
  s = Parse(absl::StrCat(vp, "--pipeline-model-parallel-size 2 --no-overlap-p2p-communication"), 2);
  EXPECT_NE(s.status().message().find("needs PP > 2"), std::string::npos) << s.status();
  s = Parse(absl::StrCat(kBase, " --pipeline-model-parallel-size 2 --use-tp-pp-dp-mapping"), 8);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_FALSE(s->megatron.overlap_p2p);  // 1F1B: switched off (validate_args)
  EXPECT_TRUE(s->megatron.tp_pp_dp_mapping);
}

TEST(MegatronArgsTest, CublasWorkspaceConfigFromTheLauncher) {
  SourceLocation at{"t.yaml", 3, 9, ""};
  auto a = SplitMegatronArgs("CUBLAS_WORKSPACE_CONFIG=:4096:8 NCCL_ALGO=Ring torchrun pretrain_gpt.py --num-layers 2", at);
  ASSERT_TRUE(a.ok()) << a.status();
  // Every environment assignment is kept, to be classified (never dropped
  // silently); torchrun itself is the launcher's.
  ASSERT_EQ(a->size(), 3u);
  EXPECT_EQ((*a)[0].name, "CUBLAS_WORKSPACE_CONFIG");
  EXPECT_EQ((*a)[0].value, ":4096:8");
  EXPECT_EQ((*a)[1].name, "NCCL_ALGO");
  EXPECT_EQ((*a)[1].value, "Ring");
  EXPECT_EQ((*a)[2].name, "num-layers");
  // Leading a line without a script.
  a = SplitMegatronArgs("CUBLAS_WORKSPACE_CONFIG=:16:8 --num-layers 2", at);
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_EQ(a->size(), 2u);
  EXPECT_EQ((*a)[0].value, ":16:8");
  auto s = Parse(absl::StrCat("CUBLAS_WORKSPACE_CONFIG=:4096:8 ", kBase));
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->megatron.cublas_workspace_config, ":4096:8");
  // An environment variable gpusim does not model is refused by name; the
  // logging ones have no effect; CUDA_DEVICE_MAX_CONNECTIONS is named.
  s = Parse(absl::StrCat("NCCL_ALGO=Ring NVTE_FLASH_ATTN=0 torchrun pretrain_gpt.py ", kBase));
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("NCCL_ALGO=Ring: not modelled: an environment variable"), std::string::npos)
      << s.status();
  s = Parse(absl::StrCat("NCCL_DEBUG=INFO CUDA_DEVICE_MAX_CONNECTIONS=1 torchrun --nproc_per_node 8 pretrain_gpt.py ",
                         kBase));
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->megatron.no_effect, std::vector<std::string>{"NCCL_DEBUG"});
  bool named = false;
  for (const auto& [name, what] : s->megatron.args) {
    if (name == "CUDA_DEVICE_MAX_CONNECTIONS") named = absl::StartsWith(what, "not modelled");
  }
  EXPECT_TRUE(named);
  s = Parse(absl::StrCat("CUBLAS_WORKSPACE_CONFIG=4096 ", kBase));
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("CUBLAS_WORKSPACE_CONFIG: expected :SIZE:COUNT"), std::string::npos)
      << s.status();
}

// Arguments of Megatron-LM's functional tests (validation/megatron_functional.json).
TEST(MegatronArgsTest, FunctionalTestArguments) {
  for (const char* extra : {"--no-ckpt-fully-parallel-save", "--no-check-for-nan-in-loss-and-grad",
                            "--apply-query-key-layer-scaling", "--check-weight-hash-across-dp-replicas-interval 10"}) {
    auto s = Parse(absl::StrCat(kBase, " ", extra));
    EXPECT_TRUE(s.ok()) << extra << ": " << s.status();
  }
  auto s = Parse(absl::StrCat(kBase, " --check-weight-hash-across-dp-replicas-interval 10"));
  ASSERT_TRUE(s.ok()) << s.status();
  bool named = false;
  for (const auto& [name, what] : s->megatron.args) {
    if (name == "check-weight-hash-across-dp-replicas-interval") named = absl::StartsWith(what, "not modelled");
  }
  EXPECT_TRUE(named);
  s = Parse(absl::StrCat(kBase, " --context-parallel-size 4 --cp-comm-type a2a+p2p "
                                "--hierarchical-context-parallel-sizes 2 2"));
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("hierarchical context parallelism"), std::string::npos) << s.status();
}

// Note [Sinkhorn routing]: no aux loss, the loop's time named as not modelled.
TEST(MegatronArgsTest, SinkhornRouting) {
  const std::string moe = absl::StrCat(kBase, " --disable-bias-linear --num-experts 4 --moe-router-topk 1 "
                                              "--moe-router-load-balancing-type sinkhorn");
  auto s = Parse(moe);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_FALSE(s->megatron.moe.aux_loss);
  bool named = false;
  for (const auto& [name, what] : s->megatron.args) {
    if (name == "moe-router-load-balancing-type") named = absl::StrContains(what, "sinkhorn");
  }
  EXPECT_TRUE(named);
  s = Parse(absl::StrCat(moe, " --moe-aux-loss-coeff 0.01"));
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("must be 0 with sinkhorn routing"), std::string::npos) << s.status();
}

// SimuMax's B200 launch lines (validation/simumax_b200.json) carry these:
// each is modelled as Megatron-LM runs it or refused by name.
TEST(MegatronArgsTest, ScriptTpCommFlagsRecomputeZeroScoreFunctionAndMla) {
  // Another training script is refused, not run as pretrain_gpt.py;
  // SimuMax's pretrain_deepseekv2.py is modelled (Note [SimuMax
  // pretrain_deepseekv2.py]) and recorded as a setting of its own.
  auto s = Parse(absl::StrCat("torchrun pretrain_bert.py ", kBase));
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("pretrain_bert.py: not modelled: the training script"), std::string::npos)
      << s.status();
  s = Parse(absl::StrCat("torchrun simu_tools/megatron_scripts/pretrain_deepseekv2.py ", kBase));
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->megatron.script, "pretrain_deepseekv2.py");
  s = Parse(absl::StrCat("torchrun /opt/Megatron-LM/pretrain_gpt.py ", kBase));
  ASSERT_TRUE(s.ok()) << s.status();
  // The --disable-tp-comm-* flags are read only under --tp-comm-overlap.
  s = Parse(absl::StrCat(kBase, " --disable-tp-comm-split-rs --disable-tp-comm-bulk-wgrad"));
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->megatron.no_effect, (std::vector<std::string>{"disable-tp-comm-split-rs", "disable-tp-comm-bulk-wgrad"}));
  // Block recompute of 0 layers is the step without recompute; uniform
  // needs at least one layer.
  s = Parse(absl::StrCat(kBase, " --recompute-granularity full --recompute-method block --recompute-num-layers 0"));
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->remat.policy, "none");
  s = Parse(absl::StrCat(kBase, " --recompute-granularity full --recompute-method block --recompute-num-layers 1"));
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->remat.policy, "full");
  s = Parse(absl::StrCat(kBase, " --recompute-granularity full --recompute-method uniform --recompute-num-layers 0"));
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("0 only with --recompute-granularity full --recompute-method block"),
            std::string::npos)
      << s.status();
  // Softmax scores are Megatron's default; sigmoid is modelled too
  // (tests/megatron_moe_test.cc SigmoidScoresAndExpertBias).
  auto refused = [](const std::string& line, const std::string& why) {
    auto r = Parse(line);
    ASSERT_FALSE(r.ok()) << line;
    EXPECT_NE(r.status().message().find(why), std::string::npos) << r.status();
  };
  const std::string moe = absl::StrCat(kBase, " --num-experts 4 --moe-router-topk 2 --disable-bias-linear");
  s = Parse(absl::StrCat(moe, " --moe-router-score-function softmax"));
  ASSERT_TRUE(s.ok()) << s.status();
  s = Parse(absl::StrCat(moe, " --moe-router-score-function sigmoid"));
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_TRUE(s->megatron.moe.sigmoid);
  refused(absl::StrCat(moe, " --moe-router-score-function tanh"), "--moe-router-score-function");
  // Multi-latent attention's fused yarn rope is an experimental function:
  // Megatron raises without --enable-experimental (tests/megatron_mla_test.cc).
  refused(absl::StrCat(kBase, " --multi-latent-attention --kv-lora-rank 512"), "needs --enable-experimental");
}

// Arguments of Megatron-LM's functional tests (tests/functional_tests/
// test_cases at 57a02672): each no effect, modelled or refused by name.
TEST(MegatronArgsTest, FunctionalTestSettings) {
  auto s = Parse(absl::StrCat(kBase, " --use-checkpoint-opt-param-scheduler --tiktoken-pattern v2 "
                                     "--rotary-interleaved --ddp-average-in-collective"));
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->megatron.no_effect, (std::vector<std::string>{"use-checkpoint-opt-param-scheduler", "tiktoken-pattern",
                                                              "rotary-interleaved", "ddp-average-in-collective"}));
  // TikTokenizer's vocabulary defaults to 2**17 (tiktoken_tokenizer.py).
  s = Parse(absl::StrCat(kBase, " --tokenizer-type TikTokenizer"));
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->megatron.vocab_unpadded, 131072);
  // A dense model's expert tensor parallelism splits no expert.
  s = Parse(absl::StrCat(kBase, " --expert-tensor-parallel-size 1"));
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_NE(std::find(s->megatron.no_effect.begin(), s->megatron.no_effect.end(), "expert-tensor-parallel-size"),
            s->megatron.no_effect.end());
  s = Parse(absl::StrCat(kBase, " --rerun-mode disabled"));
  ASSERT_TRUE(s.ok()) << s.status();
  s = Parse(absl::StrCat(kBase, " --rerun-mode report_stats"));
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("--rerun-mode: not modelled: report_stats"), std::string::npos) << s.status();
  s = Parse(absl::StrCat(kBase, " --max-tokens-to-oom 1200000"));
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("not modelled: inference"), std::string::npos) << s.status();
}

}  // namespace
}  // namespace gpusim::megatron_args_test
