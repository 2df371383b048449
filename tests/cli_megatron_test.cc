// A Megatron-LM launch line under the single-step commands: explain, diff
// run --out and viz show its peak rank (PeakRankView, sim/step/megatron_step.h)
// with the pipeline's step time; compare still refuses it by name (per row).
#include <filesystem>
#include <string>

#include "gtest/gtest.h"
#include "tests/cli_support.h"

namespace gpusim::cli_megatron_test {
namespace {

std::string Launch() {
  return Write("cli_megatron.yaml",
               "device: h100-sxm-80gb\nmegatron:\n  world_size: 2\n  args: \"--num-layers 4 --hidden-size 256 "
               "--num-attention-heads 4 --seq-length 128 --micro-batch-size 1 --tokenizer-type NullTokenizer "
               "--vocab-size 1000 --bf16 --pipeline-model-parallel-size 2 --global-batch-size 4\"\n");
}

// The last stage is the peak rank of these small models: it holds the
// output layer's two PyTorch cuBLAS workspaces (Note [Megatron GEMM
// workspaces]) beside the first stage's extra micro-batch of activations.
TEST(CliMegatronTest, ExplainShowsThePeakRank) {
  Result r = Gpusim("explain " + Launch());
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("Megatron-LM launch line: pipeline stage 1 of 2 (ranks 1-1), the rank with the largest peak"),
            std::string::npos)
      << r.out;
  Result run = Gpusim("run " + Launch());
  ASSERT_EQ(run.code, 0) << run.out;
  EXPECT_NE(run.out.find("parameters per rank"), std::string::npos) << run.out;
}

// fp8 training on the command line (Note [Megatron fp8], models/gpt_fp8.cc):
// it runs on an H100, the fp8 weight workspaces are listed among the
// buffers, and an A100 (no flops.fp8) refuses it by name with exit 1.
TEST(CliMegatronTest, Fp8HybridRunsAndA100RefusesIt) {
  const std::string args =
      " --world-size 2 --megatron-args \"pretrain_gpt.py --num-layers 2 --hidden-size 256 --num-attention-heads 4 "
      "--seq-length 128 --micro-batch-size 1 --tokenizer-type NullTokenizer --vocab-size 1000 --bf16 "
      "--fp8-format hybrid\"";
  Result r = Gpusim("run --device h100-sxm-80gb" + args + " --format json");
  ASSERT_EQ(r.code, 0) << r.out;
  const std::string yaml = Write("cli_megatron_fp8.yaml",
                                 "device: h100-sxm-80gb\nmegatron:\n  world_size: 2\n  args: \"--num-layers 2 "
                                 "--hidden-size 256 --num-attention-heads 4 --seq-length 128 --micro-batch-size 1 "
                                 "--tokenizer-type NullTokenizer --vocab-size 1000 --bf16 --fp8-format hybrid\"\n");
  Result ex = Gpusim("explain " + yaml + " --top 200");
  ASSERT_EQ(ex.code, 0) << ex.out;
  EXPECT_NE(ex.out.find("fp8 copy of layer0.w_qkv"), std::string::npos) << ex.out;
  Result a100 = Gpusim("run --device a100-sxm-80gb" + args);
  EXPECT_EQ(a100.code, 1) << a100.out;
  EXPECT_NE(a100.out.find("no fp8 tensor cores"), std::string::npos) << a100.out;
}

TEST(CliMegatronTest, DiffComparesPeakRanks) {
  Result same = Gpusim("diff " + Launch() + " --set device.host.op=20us");
  ASSERT_EQ(same.code, 0) << same.out;
  EXPECT_NE(same.out.find("A: Megatron-LM launch line: pipeline stage"), std::string::npos) << same.out;
  EXPECT_NE(same.out.find("step"), std::string::npos) << same.out;
}

// The step files are the peak rank's (--out shares the writer, WriteStepFiles
// in tools/cli.cc; its charts take seconds, so the test writes these two).
TEST(CliMegatronTest, RunWritesThePeakRanksStepFiles) {
  const std::string timeline = ::testing::TempDir() + "/cli_megatron_timeline.json";
  const std::string snapshot = ::testing::TempDir() + "/cli_megatron_snapshot.pickle";
  std::filesystem::remove(timeline);
  std::filesystem::remove(snapshot);
  Result r = Gpusim("run " + Launch() + " --timeline " + timeline + " --snapshot " + snapshot);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_GT(std::filesystem::file_size(timeline), 0u);
  EXPECT_GT(std::filesystem::file_size(snapshot), 0u);
  EXPECT_NE(r.out.find("Per rank"), std::string::npos) << r.out;
}

// viz draws the peak rank too (its charts take seconds).
TEST(CliMegatronTest, VizDrawsThePeakRank) {
  const std::string out = ::testing::TempDir() + "/cli_megatron_viz";
  std::filesystem::remove_all(out);
  const std::string small =
      Write("cli_megatron_viz.yaml",
            "device: h100-sxm-80gb\nmegatron:\n  world_size: 2\n  args: \"--num-layers 2 --hidden-size 64 "
            "--num-attention-heads 2 --seq-length 32 --micro-batch-size 1 --tokenizer-type NullTokenizer "
            "--vocab-size 100 --bf16 --pipeline-model-parallel-size 2 --global-batch-size 1\"\n");
  Result r = Gpusim("viz " + small + " --out " + out);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("Megatron-LM launch line: pipeline stage 1 of 2"), std::string::npos) << r.out;
  EXPECT_TRUE(std::filesystem::exists(out + "/report.html")) << r.out;
}

TEST(CliMegatronTest, CompareAndAdviseTakeALaunchLine) {
  // One row per device, each the peak rank's figures with the pipeline's
  // step (sim/advise/advise_megatron_test.cc checks them against run).
  Result r = Gpusim("compare " + Launch() + " --vary device=h100-sxm-80gb,a100-sxm-80gb");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("peak rank: stage 1 of 2, ranks 1-1; step s is the pipeline's"), std::string::npos) << r.out;
  r = Gpusim("advise " + Launch() + " --vary megatron.args.micro-batch-size=1,2");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("megatron.args.micro-batch-size=2  (peak rank: stage 1 of 2, ranks 1-1)"), std::string::npos)
      << r.out;
  // Without --vary there is no grid for a launch line: refused by name.
  r = Gpusim("advise " + Launch());
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("a Megatron-LM launch line has no default grid"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace gpusim::cli_megatron_test
