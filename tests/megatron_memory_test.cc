// Megatron-LM launch lines: the memory rules per rank (Note [Megatron bytes
// per parameter], Note [Megatron pipeline schedules]).
#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "models/gpt.h"
#include "sim/config/loader.h"
#include "sim/step/megatron_step.h"
#include "sim/step/model_program.h"

namespace gpusim::megatron_memory_test {
namespace {

// A small model with a small vocabulary: state bytes dominate.
constexpr char kSmall[] = "--num-layers 8 --hidden-size 256 --num-attention-heads 4 --seq-length 64 "
                          "--micro-batch-size 1 --tokenizer-type NullTokenizer --vocab-size 1000 ";

MegatronReport RunLaunch(const std::string& args, int world) {
  auto spec = ParseRunSpec(absl::StrCat("device: h100-sxm-80gb\nmegatron:\n  world_size: ", world, "\n  args: \"",
                                        args, "\"\n"),
                           "t.yaml");
  EXPECT_TRUE(spec.ok()) << spec.status();
  auto r = SimulateMegatron(*spec);
  EXPECT_TRUE(r.ok()) << r.status();
  return *r;
}

// The GEMM workspaces of a one-stage TE rank on an H100 (Note [Megatron GEMM
// workspaces]): TE's 32 MiB and PyTorch's 32 MiB (torch >= 2.7 on Hopper)
// for the output layer's forward and backward threads.
constexpr int64_t kH100Workspaces = 3 * 32 * 1024 * 1024;

// Transformer Engine's stand-in weight gradients (Note [Transformer Engine
// dummy wgrads]): kept like a workspace, not state.
int64_t DummyWgradBytes(const StepReport& s) {
  int64_t n = 0;
  for (const Tensor& t : s.program.tensors) {
    if (absl::StartsWith(t.name, "te.dummy_wgrad.")) n += t.bytes().value();
  }
  return n;
}

// Parameters and their state bytes on a rank: the step's arguments minus the
// token batch, the GEMM workspaces and TE's stand-in weight gradients.
int64_t Params(const StepReport& s) { return s.param_count; }
int64_t StateBytes(const StepReport& s, int64_t tokens) {
  return s.argument.value() - tokens * 8 - kH100Workspaces - DummyWgradBytes(s);
}

TEST(MegatronMemoryTest, EighteenBytesPerParameterWithoutTheDistributedOptimizer) {
  const MegatronReport r = RunLaunch(absl::StrCat(kSmall, "--bf16"), 4);
  ASSERT_EQ(r.ranks.size(), 1u);
  const StepReport& s = r.ranks[0].report;
  EXPECT_EQ(StateBytes(s, 64), 18 * Params(s));
  EXPECT_EQ(Params(s), r.param_count);  // one rank holds the whole model
}

TEST(MegatronMemoryTest, SixPlusTwelveOverDWithTheDistributedOptimizer) {
  const MegatronReport r = RunLaunch(absl::StrCat(kSmall, "--bf16 --use-distributed-optimizer"), 4);
  const StepReport& s = r.ranks[0].report;
  const int64_t p = Params(s), shard = (p + 3) / 4;
  EXPECT_EQ(StateBytes(s, 64), 6 * p + 12 * shard);
  // fp32 params: no master copy, 16 B and 8 + 8/d.
  const MegatronReport f = RunLaunch(kSmall, 4);
  EXPECT_EQ(StateBytes(f.ranks[0].report, 64), 16 * p);
  const MegatronReport fd = RunLaunch(absl::StrCat(kSmall, "--use-distributed-optimizer"), 4);
  EXPECT_EQ(StateBytes(fd.ranks[0].report, 64), 8 * p + 8 * shard);
}

// Note [Megatron GEMM workspaces]: TE's workspace on every TE rank;
// PyTorch's two (forward and autograd thread) where Megatron's own GEMMs run,
// sized by CUBLAS_WORKSPACE_CONFIG before the script.
TEST(MegatronMemoryTest, GemmWorkspacesByStageDeviceAndConfig) {
  auto args_bytes = [](const std::string& device, const std::string& line, int world) {
    auto spec = ParseRunSpec(absl::StrCat("device: ", device, "\nmegatron:\n  world_size: ", world, "\n  args: \"",
                                          line, "\"\n"),
                             "t.yaml");
    EXPECT_TRUE(spec.ok()) << spec.status();
    auto r = SimulateMegatron(*spec);
    EXPECT_TRUE(r.ok()) << r.status();
    std::vector<int64_t> out;
    for (const MegatronRank& k : r->ranks) out.push_back(k.report.argument.value() - DummyWgradBytes(k.report));
    return out;
  };
  const int64_t mib = 1024 * 1024;
  const std::string pp2 = absl::StrCat(kSmall, "--bf16 --pipeline-model-parallel-size 2 --global-batch-size 2 ");
  const std::vector<int64_t> plain = args_bytes("a100-sxm-80gb", pp2, 2);
  const std::vector<int64_t> cfg = args_bytes("a100-sxm-80gb", "CUBLAS_WORKSPACE_CONFIG=:4096:8 " + pp2, 2);
  ASSERT_EQ(plain.size(), 2u);
  ASSERT_EQ(cfg.size(), 2u);
  // The first stage runs only TE GEMMs: the setting does not reach it.
  EXPECT_EQ(cfg[0], plain[0]);
  // The last stage's two PyTorch workspaces: 8,519,680 B each by default on
  // an A100, 32 MiB each under ":4096:8".
  EXPECT_EQ(cfg[1] - plain[1], 2 * (32 * mib - 8519680));
  // (Arguments less TE's stand-in weight gradients, which local does not
  // keep.) Under --transformer-impl local every stage runs PyTorch GEMMs and
  // no TE one, and keeps Megatron's global memory buffer for the attention scores'
  // baddbmm input, [b x heads, s, s] in bf16 (Note [Megatron global memory
  // buffer]).
  const std::vector<int64_t> local =
      args_bytes("a100-sxm-80gb", "CUBLAS_WORKSPACE_CONFIG=:4096:8 " + pp2 + "--transformer-impl local", 2);
  EXPECT_EQ(local[0] - cfg[0], 2 * 32 * mib - 4 * mib + 1 * 4 * 64 * 64 * 2);
  // TE's workspace is 32 MiB from compute capability 9 on, 4 MiB before.
  const std::vector<int64_t> h100 = args_bytes("h100-sxm-80gb", "CUBLAS_WORKSPACE_CONFIG=:4096:8 " + pp2, 2);
  EXPECT_EQ(h100[0] - cfg[0], 28 * mib);
}

// Bytes above the persistent state at the live peak.
int64_t Transient(const StepReport& s) { return s.sim.peak_live.value() - s.argument.value(); }

TEST(MegatronMemoryTest, OneFOneBStagesHoldOneMicroBatchLessEachStage) {
  // PP 4, 8 micro-batches: stage r holds 4 - r micro-batches' activations.
  const MegatronReport r =
      RunLaunch(absl::StrCat(kSmall, "--bf16 --pipeline-model-parallel-size 4 --global-batch-size 8"), 4);
  ASSERT_EQ(r.ranks.size(), 4u);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(r.ranks[static_cast<size_t>(i)].in_flight, 4 - i);
  const int64_t d01 = Transient(r.ranks[0].report) - Transient(r.ranks[1].report);
  const int64_t d12 = Transient(r.ranks[1].report) - Transient(r.ranks[2].report);
  EXPECT_GT(d12, 0);
  EXPECT_EQ(d01, d12);  // one micro-batch's saved activations of a stage
  // Interleaved, 2 chunks per rank: consecutive stages differ by two chunk
  // activation sets, each half a stage: the same bytes.
  const MegatronReport v = RunLaunch(absl::StrCat(kSmall, "--bf16 --pipeline-model-parallel-size 4 --global-batch-size 8 "
                                                    "--num-layers-per-virtual-pipeline-stage 1"),
                               4);
  EXPECT_EQ(v.ranks[0].in_flight, 11);
  EXPECT_EQ(v.ranks[1].in_flight, 9);
  EXPECT_EQ(Transient(v.ranks[1].report) - Transient(v.ranks[2].report), d12);
  // Stage 0 interleaved holds 11 half-stage sets against 1F1B's 4 full ones.
  EXPECT_GT(Transient(v.ranks[0].report), Transient(r.ranks[0].report));
}

TEST(MegatronMemoryTest, ThePeakRankAndTheLoggedRank) {
  const MegatronReport r =
      RunLaunch(absl::StrCat(kSmall, "--bf16 --pipeline-model-parallel-size 2 --global-batch-size 4 "
                               "--tensor-model-parallel-size 2"),
          8);
  ASSERT_EQ(r.ranks.size(), 2u);
  EXPECT_EQ(r.ranks[r.last].last_rank, 7);
  for (const MegatronRank& k : r.ranks) {
    EXPECT_LE(k.report.sim.allocator.peak_allocated, r.ranks[r.peak].report.sim.allocator.peak_allocated);
  }
  EXPECT_GT(r.bubble.ns(), 0);
  EXPECT_GT(r.step_time, r.ranks[0].report.sim.step_time);
}

// Korthikanti et al. 2022 Table 2 (../shared/reference/measurements.md §B)
// through a launch line: the unfused attention backend keeps the s^2 terms;
// TE's flash/fused attention keeps the statistics (4 B per query row and
// head) instead.
int64_t LayerBytes(const std::string& extra, int64_t t) {
  const std::string args = absl::StrCat("--num-layers 3 --hidden-size 512 --num-attention-heads 16 --seq-length 512 ",
                                        "--micro-batch-size 3 --tokenizer-type NullTokenizer --vocab-size 1000 --bf16 ",
                                        "--tensor-model-parallel-size ", t, " ", extra);
  auto spec = ParseRunSpec(absl::StrCat("device: h100-sxm-80gb\nmegatron:\n  world_size: ", t, "\n  args: \"", args, "\"\n"),
                           "t.yaml");
  EXPECT_TRUE(spec.ok()) << spec.status();
  auto p = BuildModelProgram(*spec);
  EXPECT_TRUE(p.ok()) << p.status();
  return GptLayerActivationBytes(*p, 1).value();
}

TEST(MegatronMemoryTest, KorthikantiTable2ThroughALaunchLine) {
  const int64_t s = 512, b = 3, h = 512, a = 16, t = 8, sbh = s * b * h, as2b = a * s * s * b;
  EXPECT_EQ(LayerBytes("--attention-backend unfused", 1), 34 * sbh + 5 * as2b);
  EXPECT_EQ(LayerBytes("--attention-backend unfused", t), 10 * sbh + 24 * sbh / t + 5 * as2b / t);
  EXPECT_EQ(LayerBytes("--attention-backend unfused --sequence-parallel", t), 34 * sbh / t + 5 * as2b / t);
  EXPECT_EQ(LayerBytes("--attention-backend unfused --recompute-granularity selective", t), 10 * sbh + 24 * sbh / t);
  EXPECT_EQ(LayerBytes("--attention-backend unfused --sequence-parallel --recompute-granularity selective", t),
            34 * sbh / t);
  EXPECT_EQ(LayerBytes("--recompute-granularity full --recompute-method uniform", t), 2 * sbh);
  // Flash: the selective figure plus fp32 softmax statistics [b, a/t, s].
  EXPECT_EQ(LayerBytes("", t), 10 * sbh + 24 * sbh / t + 4 * b * a / t * s);
  // No dropout: no 1-byte masks (2 sbh less).
  EXPECT_EQ(LayerBytes("--hidden-dropout 0", t), 8 * sbh + 24 * sbh / t + 4 * b * a / t * s);
}

// Note [Megatron fused cross entropy] (models/gpt_cross_entropy.cc): with a
// vocabulary large enough that the loss decides the peak, the fused path
// adds one fp32 [s, b, V] buffer (Inductor's exp buffer in the compiled
// calculate_predicted_logits) and the [s, b] row max and [2, s, b]
// statistics beside the compute-dtype and fp32 logits; the unfused path is
// what it was (its peak at the fp32 copy, the compute-dtype logits beside it).
// A one-stage line whose peak the logits decide: [kS, kB, kV] logits.
constexpr int64_t kS = 1024, kB = 4, kV = 32768;  // NullTokenizer 32767 + EOD, a multiple of 128
std::string LogitsLine() {
  return absl::StrCat("--num-layers 2 --hidden-size 64 --num-attention-heads 4 --seq-length ", kS,
                      " --micro-batch-size ", kB, " --tokenizer-type NullTokenizer --vocab-size ", kV - 1, " --bf16 ");
}

TEST(MegatronMemoryTest, FusedCrossEntropyAddsInductorsExpBuffer) {
  const std::string line = LogitsLine();
  const MegatronReport unfused = RunLaunch(line, 1);
  const MegatronReport fused = RunLaunch(line + "--cross-entropy-loss-fusion", 1);
  const StepReport& u = unfused.ranks[0].report;
  const StepReport& f = fused.ranks[0].report;
  const int64_t logits_f32 = kS * kB * kV * 4, logits_bf16 = kS * kB * kV * 2;
  // The unfused peak: both copies of the logits over what else is live.
  const Bytes u_peak = u.sim.allocator.peak_allocated, f_peak = f.sim.allocator.peak_allocated;
  EXPECT_GE(u_peak.value(), logits_f32 + logits_bf16);
  EXPECT_LT(u_peak.value(), logits_f32 + logits_bf16 + logits_f32 / 2) << "the logits decide the peak";
  // The fused one: the exp buffer, the row max and the statistics more.
  EXPECT_EQ(f_peak.value() - u_peak.value(), logits_f32 + kS * kB * 4 + 2 * kS * kB * 4);
  // The state is the same.
  EXPECT_EQ(f.argument.value(), u.argument.value());
  // Who holds each peak: the unfused one the two copies of the logits, the
  // fused one Inductor's exp buffer besides.
  auto holders = [](const StepReport& r) {
    std::vector<std::string> names;
    for (BufferId b : r.peak_holders) names.push_back(r.lowered.buffers[static_cast<size_t>(b)].name);
    names.resize(std::min<size_t>(names.size(), 3));
    std::sort(names.begin(), names.end());
    return names;
  };
  EXPECT_EQ(holders(f), (std::vector<std::string>{"cross_entropy.exp", "logits", "logits.float"}));
  std::vector<std::string> top_u = holders(u);
  EXPECT_NE(std::find(top_u.begin(), top_u.end(), "logits"), top_u.end());
  EXPECT_NE(std::find(top_u.begin(), top_u.end(), "logits.float"), top_u.end());
  EXPECT_EQ(std::find(top_u.begin(), top_u.end(), "cross_entropy.exp"), top_u.end());
}

// Note [Transformer Engine cross entropy]: TE's kernel writes the gradient
// over the compute-dtype logits and keeps them for the backward, so the
// peak holds no fp32 copy of the logits: the unfused peak less the fp32
// logits, plus TE's loss and m_d_X_y (4 + 12 bytes a token; TP 1, no
// gather).
TEST(MegatronMemoryTest, TeCrossEntropyKeepsOnlyTheLogits) {
  const MegatronReport unfused = RunLaunch(LogitsLine(), 1);
  const MegatronReport te = RunLaunch(LogitsLine() + "--cross-entropy-loss-fusion --cross-entropy-fusion-impl te", 1);
  const StepReport& u = unfused.ranks[0].report;
  const StepReport& t = te.ranks[0].report;
  const int64_t logits_f32 = kS * kB * kV * 4, logits_bf16 = kS * kB * kV * 2;
  const Bytes u_peak = u.sim.allocator.peak_allocated, t_peak = t.sim.allocator.peak_allocated;
  EXPECT_GE(t_peak.value(), logits_bf16);
  EXPECT_LT(t_peak.value(), u_peak.value() - logits_f32 + logits_bf16 / 4) << "no fp32 copy of the logits";
  EXPECT_EQ(t.argument.value(), u.argument.value());
  for (BufferId b : t.peak_holders) {
    EXPECT_NE(t.lowered.buffers[static_cast<size_t>(b)].name, "logits.float");
  }
}

}  // namespace
}  // namespace gpusim::megatron_memory_test
