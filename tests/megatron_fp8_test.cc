// Megatron-LM launch lines under fp8 (--fp8-format): the memory and time
// rules of Note [Megatron fp8] (models/gpt_fp8.cc), derived by hand on a
// tiny launch line.
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "sim/base/status.h"
#include "sim/config/loader.h"
#include "sim/step/megatron_step.h"

namespace gpusim::megatron_fp8_test {
namespace {

// 8 layers, h 256, 4 heads, ffn 4h = 1024, s 64, b 1, no TP: per layer the
// GEMM weights are 256x768 + 256x256 + 256x1024 + 1024x256 = 786,432
// parameters, 6,291,456 over the 8 layers.
constexpr char kTiny[] = "--num-layers 8 --hidden-size 256 --num-attention-heads 4 --seq-length 64 "
                         "--micro-batch-size 1 --tokenizer-type NullTokenizer --vocab-size 1000 --bf16 ";
constexpr int64_t kGemmParams = 8 * 786432;
constexpr int64_t kLayers = 8, kGemmsPerLayer = 4;

absl::StatusOr<MegatronReport> Launch(const std::string& args, const std::string& device = "h100-sxm-80gb",
                                      int world = 4) {
  ASSIGN_OR_RETURN(RunSpec spec, ParseRunSpec(absl::StrCat("device: ", device, "\nmegatron:\n  world_size: ", world,
                                                           "\n  args: \"", args, "\"\n"),
                                              "t.yaml"));
  return SimulateMegatron(spec);
}

StepReport Rank0(absl::StatusOr<MegatronReport> r) {
  EXPECT_TRUE(r.ok()) << r.status();
  if (!r.ok()) return StepReport();
  return std::move(r->ranks.at(0).report);
}

// Bytes of the step's tensors of `role` (saved activations: kResidual).
int64_t RoleBytes(const StepReport& s, Role role) {
  int64_t sum = 0;
  for (const Tensor& t : s.program.tensors) {
    if (t.role == role) sum += t.bytes().value();
  }
  return sum;
}

int64_t CountOps(const StepReport& s, OpKind kind, DType dtype) {
  int64_t n = 0;
  for (const Op& op : s.program.ops) n += op.kind == kind && op.dtype == dtype;
  return n;
}

TEST(MegatronFp8Test, WeightCachesAndAmaxHistoriesByHand) {
  const StepReport bf16 = Rank0(Launch(kTiny));
  const StepReport fp8 = Rank0(Launch(absl::StrCat(kTiny, "--fp8-format hybrid --fp8-amax-history-len 1024")));
  // Persistent: the fp8 weight copy and its transpose (1 B each per GEMM
  // parameter) and, per GEMM, 5 tensors x (1024 history rows + scale +
  // scale_inv) x 4 B.
  const int64_t scaling = kLayers * kGemmsPerLayer * 5 * (1024 + 2) * 4;
  EXPECT_EQ(fp8.argument.value() - bf16.argument.value(), 2 * kGemmParams + scaling);
  EXPECT_EQ(scaling, 656640);
  // Megatron's default history is 1 row; current scaling keeps none.
  const StepReport one = Rank0(Launch(absl::StrCat(kTiny, "--fp8-format e4m3")));
  EXPECT_EQ(one.argument.value() - bf16.argument.value(), 2 * kGemmParams + kLayers * kGemmsPerLayer * 5 * 3 * 4);
  const StepReport cur = Rank0(Launch(absl::StrCat(kTiny, "--fp8-format e4m3 --fp8-recipe tensorwise")));
  EXPECT_EQ(cur.argument.value() - bf16.argument.value(), 2 * kGemmParams + kLayers * kGemmsPerLayer * 5 * 2 * 4);
}

TEST(MegatronFp8Test, SavedGemmInputsHalve) {
  const StepReport bf16 = Rank0(Launch(kTiny));
  const StepReport fp8 = Rank0(Launch(absl::StrCat(kTiny, "--fp8-format hybrid")));
  // Saved for backward: the GEMM inputs ln1, ln2 (s·b·h) and gelu (s·b·f)
  // in fp8 instead of bf16 (-1 B an element); the attention output is kept
  // by flash attention in bf16 and, as the out-projection's input, in fp8
  // too (+s·b·h).
  const int64_t sbh = 64 * 256, sbf = 64 * 1024;
  EXPECT_EQ(RoleBytes(fp8, Role::kResidual) - RoleBytes(bf16, Role::kResidual), -kLayers * (sbh + sbf));
}

TEST(MegatronFp8Test, SequenceParallelGathersAndSavesTheFp8Shard) {
  const std::string sp = absl::StrCat(kTiny, "--tensor-model-parallel-size 2 --sequence-parallel ");
  const StepReport bf16 = Rank0(Launch(sp));
  const StepReport fp8 = Rank0(Launch(absl::StrCat(sp, "--fp8-format hybrid")));
  // TP 2: ln1, ln2 saved as their sequence shards [s/2, b, h], gelu as
  // [s, b, f/2], the out-projection's input [s, b, h/2] added in fp8.
  const int64_t shard = 32 * 256, gelu = 64 * 512, context = 64 * 128;
  EXPECT_EQ(RoleBytes(fp8, Role::kResidual) - RoleBytes(bf16, Role::kResidual),
            -kLayers * (2 * shard + gelu - context));
  // The backward re-gathers the saved fp8 shard: [s, b, h] at 1 B.
  int64_t regathers = 0;
  for (const Op& op : fp8.program.ops) {
    if (op.kind == OpKind::kAllGather && absl::EndsWith(op.name, ".regather")) {
      ++regathers;
      EXPECT_EQ(op.bytes_written.value(), 64 * 256) << op.name;
    }
  }
  EXPECT_EQ(regathers, kLayers * 2);  // qkv and fc1
}

TEST(MegatronFp8Test, ParamGatherHoldsParamsInFp8) {
  const std::string dist = absl::StrCat(kTiny, "--use-distributed-optimizer ");
  const StepReport bf16 = Rank0(Launch(dist));
  const StepReport fp8 = Rank0(Launch(absl::StrCat(dist, "--fp8-format hybrid --fp8-param-gather")));
  // GEMM params 2 B -> 1 B, no separate fp8 copy, the transpose kept (+1 B):
  // only the scaling state (history 1) is added; master shard unchanged.
  EXPECT_EQ(fp8.argument.value() - bf16.argument.value(), kLayers * kGemmsPerLayer * 5 * 3 * 4);
  int64_t f8_params = 0;
  for (const Tensor& t : fp8.program.tensors) {
    if (t.role == Role::kParameter && t.dtype == DType::kF8 && absl::StartsWith(t.name, "params.") &&
        !absl::EndsWith(t.name, ".new")) {  // the step's inputs, not the all-gathered updates
      f8_params += t.elements();
    }
  }
  EXPECT_EQ(f8_params, kGemmParams);
  auto refused = Launch(absl::StrCat(kTiny, "--fp8-format hybrid --fp8-param-gather"));
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("--fp8-param-gather: modelled with --use-distributed-optimizer only"),
            std::string::npos)
      << refused.status();
}

TEST(MegatronFp8Test, GemmsRunInFp8AtTheFp8Peak) {
  const StepReport bf16 = Rank0(Launch(kTiny));
  const StepReport fp8 = Rank0(Launch(absl::StrCat(kTiny, "--fp8-format hybrid")));
  // Per layer 4 GEMMs forward, 4 dgrad, 4 wgrad.
  EXPECT_EQ(CountOps(fp8, OpKind::kMatmul, DType::kF8), kLayers * kGemmsPerLayer * 3);
  EXPECT_EQ(CountOps(bf16, OpKind::kMatmul, DType::kF8), 0);
  // The casts: per layer 4 inputs x 2 (row-wise, transpose), 4 dY, 4 weights.
  EXPECT_EQ(CountOps(fp8, OpKind::kConvert, DType::kBF16) - CountOps(bf16, OpKind::kConvert, DType::kBF16),
            kLayers * kGemmsPerLayer * 4);
  // The step's compute time moves (fp8 GEMMs at 2x, plus the casts).
  EXPECT_NE(fp8.sim.step_time, bf16.sim.step_time);
  // A100 has no fp8 tensor cores: refused by name.
  auto a100 = Launch(absl::StrCat(kTiny, "--fp8-format hybrid"), "a100-sxm-80gb");
  ASSERT_FALSE(a100.ok());
  EXPECT_NE(a100.status().message().find("no fp8 tensor cores"), std::string::npos) << a100.status();
}

TEST(MegatronFp8Test, RefusesWhatIsNotModelledByName) {
  for (const auto& [args, want] : std::vector<std::pair<std::string, std::string>>{
           {"--fp8-format hybrid --fp8-recipe mxfp8", "--fp8-recipe: mxfp8 block scaling"},
           {"--fp8-format hybrid --fp8-recipe blockwise", "--fp8-recipe: blockwise block scaling"},
           {"--fp8-format hybrid --no-fp8-wgrad", "--no-fp8-wgrad: not modelled"},
           {"--fp8-format hybrid --first-last-layers-bf16", "--first-last-layers-bf16: not modelled"},
           {"--fp8", "--fp8: not modelled: not a Megatron-LM argument"},
           {"--fp8-recipe delayed", "--fp8-recipe: has no effect without --fp8-format"},
           {"--fp8-format e5m2", "--fp8-format: expected one of e4m3|hybrid"},
           {"--fp8-format hybrid --fp8-recipe tensorwise --fp8-amax-history-len 16",
            "--fp8-amax-history-len: is delayed scaling's"},
       }) {
    auto r = Launch(absl::StrCat(kTiny, args));
    ASSERT_FALSE(r.ok()) << args;
    EXPECT_NE(r.status().message().find(want), std::string::npos) << args << ": " << r.status();
  }
}

}  // namespace
}  // namespace gpusim::megatron_fp8_test
