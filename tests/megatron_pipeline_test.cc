// Megatron-LM launch lines through the pipeline: send time between stages
// (Note [Megatron pipeline in time]), uneven stages (Note [Megatron uneven
// stages]) and the grad buffer's padding (Note [Megatron gradient buffer
// layout]).
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "models/gpt.h"
#include "sim/config/loader.h"
#include "sim/step/megatron_step.h"
#include "sim/step/model_program.h"

namespace gpusim::megatron_pipeline_test {
namespace {

constexpr char kSmall[] = "--num-layers 8 --hidden-size 256 --num-attention-heads 4 --seq-length 64 "
                          "--micro-batch-size 1 --tokenizer-type NullTokenizer --vocab-size 1000 --bf16 ";

RunSpec Spec(const std::string& args, int world, int gpus_per_node = 8) {
  auto spec = ParseRunSpec(absl::StrCat("device: h100-sxm-80gb\nmegatron:\n  world_size: ", world,
                                        "\n  gpus_per_node: ", gpus_per_node, "\n  args: \"", args, "\"\n"),
                           "t.yaml");
  EXPECT_TRUE(spec.ok()) << spec.status();
  return spec.ok() ? *spec : RunSpec();
}

TEST(MegatronPipelineThroughALaunchLine, SendsCrossTheNetworkAndTheStepWaitsForThem) {
  // PP 4 over 4 nodes of one GPU: every send crosses the network. A network
  // 1000x faster takes at least the fill and drain transfers, 2 (p - 1) of
  // them, off the step.
  RunSpec slow = Spec(absl::StrCat(kSmall, "--pipeline-model-parallel-size 4 --global-batch-size 8"), 4, 1);
  RunSpec fast = slow;
  fast.device.network_bandwidth *= 1000;
  auto a = SimulateMegatron(slow);
  auto b = SimulateMegatron(fast);
  ASSERT_TRUE(a.ok() && b.ok());
  const MegatronRank& r0 = a->ranks[0];
  EXPECT_TRUE(r0.send_inter_node);
  EXPECT_EQ(PipelineMessageBytes(slow), 64 * 1 * 256 * 2);
  const SimTime saved = r0.send_time - b->ranks[0].send_time;
  EXPECT_GT(saved.ns(), 0);
  EXPECT_GE((a->step_time - b->step_time).ns(), 2 * 3 * saved.ns());
  // On one node the same sends go over NVLink.
  auto c = SimulateMegatron(Spec(absl::StrCat(kSmall, "--pipeline-model-parallel-size 4 --global-batch-size 8"), 4));
  ASSERT_TRUE(c.ok());
  EXPECT_FALSE(c->ranks[0].send_inter_node);
  EXPECT_LT(c->ranks[0].send_time, r0.send_time);
  // The first stage waits for its first gradient: the pipeline's fill.
  EXPECT_GT(a->ranks[0].pipeline_wait, a->ranks[0].compute_per_pass);
}

TEST(MegatronPipelineThroughALaunchLine, UnevenStagesHoldTheirLayers) {
  // 10 layers: 1 on the first stage, 3 on each other. The first stage keeps
  // the embedding and one layer; the others three layers each.
  auto r = SimulateMegatron(Spec("--num-layers 10 --hidden-size 256 --num-attention-heads 4 --seq-length 64 "
                                 "--micro-batch-size 1 --tokenizer-type NullTokenizer --vocab-size 1000 --bf16 "
                                 "--pipeline-model-parallel-size 4 --global-batch-size 4 "
                                 "--decoder-first-pipeline-num-layers 1",
                                 4));
  ASSERT_TRUE(r.ok()) << r.status();
  // qkv + proj, fc1 + fc2, two LayerNorms, the biases of qkv, proj, fc1, fc2.
  const int64_t layer = 4 * 256 * 256 + 2 * 256 * 1024 + 4 * 256 + 3 * 256 + 256 + 1024 + 256;
  EXPECT_EQ(r->ranks[1].report.param_count, 3 * layer);
  EXPECT_EQ(r->ranks[2].report.param_count, 3 * layer);
  // 1024 x 256 tied embedding (a copy on the last stage under PP > 1), 64 x 256 positions, ln_f.
  EXPECT_EQ(r->ranks[0].report.param_count, layer + 1024 * 256 + 64 * 256);
  EXPECT_EQ(r->ranks[3].report.param_count, 3 * layer + 1024 * 256 + 2 * 256);
  EXPECT_EQ(r->param_count, 10 * layer + 1024 * 256 + 64 * 256 + 2 * 256);
  // The middle stages run three layers per pass, the first one.
  EXPECT_GT(r->ranks[1].compute_per_pass, r->ranks[0].compute_per_pass);
}

TEST(MegatronPipelineThroughALaunchLine, DistributedOptimizerPadsTheGradBuffer) {
  // Worked by hand from _ParamAndGradBuffer.__init__: RMSNorm, no biases,
  // RoPE, h 96, 1 layer, vocabulary 1001 -> 1024. Buffer order ln_f 96,
  // w_fc2 36864, w_fc1 36864, ln2 96, w_proj 9216, w_qkv 27648, ln1 96,
  // embedding 98304; starts on multiples of 64: ln_f [0, 96), w_fc2 from
  // 128, w_fc1 36992, ln2 73856, w_proj 73984 (from 73952), w_qkv 83200,
  // ln1 110848, embedding 110976 (from 110944) to 209280; DP 7: the end
  // padded to lcm(7, 128) = 896: 209664. 209184 parameter elements: 480 of
  // padding, fp32 in main_grad and bf16 in the param buffer.
  const std::string args = "--num-layers 1 --hidden-size 96 --num-attention-heads 2 --seq-length 64 "
                           "--micro-batch-size 1 --tokenizer-type NullTokenizer --vocab-size 1000 --bf16 "
                           "--normalization RMSNorm --disable-bias-linear --position-embedding-type rope ";
  auto padded = BuildModelProgram(Spec(absl::StrCat(args, "--use-distributed-optimizer"), 7));
  ASSERT_TRUE(padded.ok()) << padded.status();
  int64_t grad_pad = 0, param_pad = 0;
  for (const Tensor& t : padded->tensors) {
    if (absl::StartsWith(t.name, "main_grad.padding.")) grad_pad += t.bytes().value();
    if (absl::StartsWith(t.name, "params.padding.")) param_pad += t.bytes().value();
  }
  EXPECT_EQ(grad_pad, 480 * 4);
  EXPECT_EQ(param_pad, 480 * 2);
  // Through the step: the state is 6 B per parameter, 12 B per shard element
  // (Note [Megatron bytes per parameter]) and the padding; the parameter
  // count leaves the padding out.
  auto r = SimulateMegatron(Spec(absl::StrCat(args, "--use-distributed-optimizer"), 7));
  ASSERT_TRUE(r.ok()) << r.status();
  const StepReport& s = r->ranks[0].report;
  EXPECT_EQ(s.param_count, 209184);
  // The GEMM workspaces (Note [Megatron GEMM workspaces]) are not state:
  // TE's and PyTorch's two, 32 MiB each on an H100; nor are TE's stand-in
  // weight gradients (Note [Transformer Engine dummy wgrads]): one layer's
  // four linear weights in bf16, and the output layer's [1024, 96] (the
  // vocabulary padded to 128) in bf16, which Megatron's own linear takes
  // from the same cache.
  int64_t dummies = 0, layer0 = 0;
  for (const Tensor& t : padded->tensors) {
    if (absl::StartsWith(t.name, "te.dummy_wgrad.")) dummies += t.bytes().value();
    for (const char* w : {"params.layer0.w_qkv", "params.layer0.w_proj", "params.layer0.w_fc1", "params.layer0.w_fc2"}) {
      if (t.name == w) layer0 += t.bytes().value();
    }
  }
  EXPECT_GT(layer0, 0);
  EXPECT_EQ(dummies, layer0 + 1024 * 96 * 2);
  const int64_t workspaces = 3 * 32 * 1024 * 1024 + dummies;
  EXPECT_EQ(s.argument.value() - 64 * 8 - workspaces, 6 * 209184 + 12 * ((209184 + 6) / 7) + 480 * (4 + 2));
  // Without the distributed optimizer Megatron pads nothing.
  auto plain = BuildModelProgram(Spec(args, 7));
  ASSERT_TRUE(plain.ok()) << plain.status();
  for (const Tensor& t : plain->tensors) EXPECT_FALSE(absl::StrContains(t.name, "padding")) << t.name;
}

}  // namespace
}  // namespace gpusim::megatron_pipeline_test
