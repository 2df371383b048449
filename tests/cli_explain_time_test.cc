// `gpusim explain --time` on every input explain takes: a model config, an
// HLO module, a Megatron-LM launch line (a config's megatron: block), a
// recorded PyTorch step with host= work, a Kineto trace.
#include <string>

#include "gtest/gtest.h"
#include "tests/cli_support.h"

namespace gpusim::cli_explain_time_test {
namespace {

// The integer value of "key": N in a JSON document, from `from` on.
int64_t JsonIntAt(const std::string& json, const std::string& key, size_t from = 0) {
  const size_t at = json.find("\"" + key + "\": ", from);
  if (at == std::string::npos) return -1;
  return std::stoll(json.substr(at + key.size() + 4));
}

// The sum of every "time_ns" of the rows of array `array`.
int64_t RowSum(const std::string& json, const std::string& array) {
  const size_t begin = json.find("\"" + array + "\": [");
  if (begin == std::string::npos) return -1;
  const size_t end = json.find(']', begin);
  int64_t sum = 0;
  for (size_t at = json.find("\"time_ns\": ", begin); at != std::string::npos && at < end;
       at = json.find("\"time_ns\": ", at + 1)) {
    sum += JsonIntAt(json, "time_ns", at);
  }
  return sum;
}

// The JSON contract: the path is the step time, each table sums to it, and
// the same input gives the same bytes.
std::string ExpectExplainedTime(const std::string& args) {
  Result r = GpusimStdout("explain " + args + " --time --format json");
  EXPECT_EQ(r.code, 0) << Gpusim("explain " + args + " --time").out;
  const int64_t step = JsonIntAt(r.out, "step_time_ns");
  EXPECT_GT(step, 0) << r.out;
  EXPECT_EQ(JsonIntAt(r.out, "path_time_ns"), step) << r.out;
  for (const char* table : {"by_class", "by_layer", "by_gate"}) EXPECT_EQ(RowSum(r.out, table), step) << table;
  EXPECT_EQ(GpusimStdout("explain " + args + " --time --format json").out, r.out);
  return r.out;
}

// `gpusim replay TRACE`'s step time is `step_ns`.
void ExpectReplayStep(const std::string& trace_and_options, int64_t step_ns) {
  Result replay = GpusimStdout("replay " + trace_and_options + " --format json");
  ASSERT_EQ(replay.code, 0) << replay.out;
  const size_t at = replay.out.find("\"step_time_s\": ");
  ASSERT_NE(at, std::string::npos) << replay.out;
  EXPECT_NEAR(std::stod(replay.out.substr(at + 15)), static_cast<double>(step_ns) * 1e-9, 1e-9);
}

TEST(CliExplainTimeTest, ModelConfig) {
  const std::string config = GPUSIM_SOURCE_DIR "/configs/llama7b.yaml";
  const std::string json = ExpectExplainedTime(config);
  EXPECT_NE(json.find("\"name\": \"layer 0\""), std::string::npos);
  EXPECT_NE(json.find("\"name\": \"gemm\""), std::string::npos);
  // The step time is `gpusim run`'s.
  Result run = GpusimStdout("run " + config + " --format json");
  ASSERT_EQ(run.code, 0);
  const size_t at = run.out.find("\"step_time_s\": ");
  ASSERT_NE(at, std::string::npos);
  EXPECT_NEAR(std::stod(run.out.substr(at + 15)), static_cast<double>(JsonIntAt(json, "step_time_ns")) * 1e-9, 1e-9);
  // --top bounds the contributors listed; the rest are counted.
  Result top = GpusimStdout("explain " + config + " --time --top 2 --format json");
  ASSERT_EQ(top.code, 0);
  EXPECT_EQ(JsonIntAt(top.out, "segments"), 2 + JsonIntAt(top.out, "rest_segments"));
  Result text = Gpusim("explain " + config + " --time --top 3");
  ASSERT_EQ(text.code, 0) << text.out;
  EXPECT_NE(text.out.find("By op class"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("  3. "), std::string::npos) << text.out;
  EXPECT_EQ(text.out.find("  4. "), std::string::npos) << text.out;
}

TEST(CliExplainTimeTest, HloModule) {
  ExpectExplainedTime(GPUSIM_SOURCE_DIR "/traces/hlo/llama7b_axis0_rolled.hlo.gz --device h100-sxm-80gb");
}

TEST(CliExplainTimeTest, MegatronLaunchLine) {
  const std::string yaml =
      Write("explain_time_megatron.yaml",
            "device: h100-sxm-80gb\nmegatron:\n  world_size: 2\n  args: \"--num-layers 2 --hidden-size 256 "
            "--num-attention-heads 4 --seq-length 128 --micro-batch-size 1 --tokenizer-type NullTokenizer "
            "--vocab-size 1000 --bf16 --tensor-model-parallel-size 2 --global-batch-size 2\"\n");
  const std::string json = ExpectExplainedTime(yaml);
  EXPECT_GT(JsonIntAt(json, "busy_ns"), 0) << json;  // tensor-parallel collectives
}

// With pipeline stages the launch line's step time is the schedule's; the
// path is the peak rank's own replay, and says so.
TEST(CliExplainTimeTest, MegatronPipelineSaysWhichTime) {
  const std::string yaml =
      Write("explain_time_megatron_pp.yaml",
            "device: h100-sxm-80gb\nmegatron:\n  world_size: 2\n  args: \"--num-layers 4 --hidden-size 256 "
            "--num-attention-heads 4 --seq-length 128 --micro-batch-size 1 --tokenizer-type NullTokenizer "
            "--vocab-size 1000 --bf16 --pipeline-model-parallel-size 2 --global-batch-size 4\"\n");
  Result r = GpusimStdout("explain " + yaml + " --time --format json");
  ASSERT_EQ(r.code, 0) << r.out;
  const int64_t path = JsonIntAt(r.out, "path_time_ns");
  EXPECT_NE(JsonIntAt(r.out, "step_time_ns"), path);
  EXPECT_NE(r.out.find("pipeline schedule"), std::string::npos) << r.out;
  for (const char* table : {"by_class", "by_layer", "by_gate"}) EXPECT_EQ(RowSum(r.out, table), path) << table;
}

// A recorded PyTorch step (format 1.6) whose host work outlasts its
// kernels: the path is the host issuing them, marked host-bound, and the
// step time is `gpusim replay`'s.
TEST(CliExplainTimeTest, RecordedStepWithHostWork) {
  const std::string trace = Write(
      "explain_time_host.trace",
      "gpusim-trace 1.6\nname tiny_host\nmeta framework pytorch\nmeta torch_version 2.11.0\nstream 0 compute\n"
      "alloc 0 1048576 role=activation name=x\n"
      "compute model.layers.0.mlp:mm kind=matmul flops=2000000 read=1048576 write=1048576 m=512 n=512 k=4 uses=0 "
      "host=1,0,1\n"
      "compute model.layers.0.mlp:gelu kind=elementwise read=1048576 write=1048576 uses=0 host=1,0,0\n"
      "compute model.layers.1.mlp:mm kind=matmul phase=backward flops=2000000 read=1048576 write=1048576 m=512 "
      "n=512 k=4 uses=0 host=0,1,0\n"
      "free 0\nend 5\n");
  const std::string json = ExpectExplainedTime(trace);
  const int64_t step = JsonIntAt(json, "step_time_ns");
  EXPECT_GT(JsonIntAt(json, "host_bound_ns"), step / 2) << json;
  EXPECT_NE(json.find("\"first_layer\": \"model.layers.0\""), std::string::npos) << json;
  EXPECT_NE(json.find("\"name\": \"host_issue\""), std::string::npos) << json;
  ExpectReplayStep(trace, step);
  Result text = Gpusim("explain " + trace + " --time");
  ASSERT_EQ(text.code, 0) << text.out;
  EXPECT_NE(text.out.find("host-bound: "), std::string::npos) << text.out;
}

// A real recording: examples/torch/gpt2.py recorded by
// `python -m gpusim_torch record examples/torch/gpt2.py --device
// h200-sxm-141gb` (format 1.6, host= work on every kernel). Its small
// kernels are issued slower than they run (Note [Recorded host costs]: the
// test-size steps are host-bound), so the path is mostly host issue, spread
// over its decoder layers.
TEST(CliExplainTimeTest, RecordedGpt2Step) {
  const std::string trace = GPUSIM_SOURCE_DIR "/tests/data/explain_time/gpt2_h200.gpusim --device h200-sxm-141gb";
  const std::string json = ExpectExplainedTime(trace);
  ExpectReplayStep(trace, JsonIntAt(json, "step_time_ns"));
  EXPECT_GT(JsonIntAt(json, "host_bound_ns"), JsonIntAt(json, "step_time_ns") / 2) << json;
  EXPECT_NE(json.find("\"first_event\": "), std::string::npos) << json;
  for (const char* layer : {"transformer.h.0", "transformer.h.1"}) {
    EXPECT_NE(json.find(std::string("\"name\": \"") + layer + "\""), std::string::npos) << layer;
  }
}

// viz builds its step the same way (PrepareRecordedStep): a recording's host
// work is charged there too, so its timeline's step is replay's.
TEST(CliExplainTimeTest, VizStepIsReplays) {
  const std::string trace = GPUSIM_SOURCE_DIR "/tests/data/explain_time/gpt2_h200.gpusim --device h200-sxm-141gb";
  const std::string out = ::testing::TempDir() + "/viz_step_is_replays";
  Result viz = Gpusim("viz " + trace + " --out " + out);
  ASSERT_EQ(viz.code, 0) << viz.out;
  const std::string timeline = RunShell("cat " + out + "/timeline.json").out;
  const size_t at = timeline.find("\"step_time_ns\":");
  ASSERT_NE(at, std::string::npos);
  ExpectReplayStep(trace, std::stoll(timeline.substr(at + 15)));
}

TEST(CliExplainTimeTest, KinetoTrace) {
  ExpectExplainedTime(GPUSIM_SOURCE_DIR "/validation/h200_2026-12-04/kineto/vit_b16_test.pt.trace.json.gz");
}

// Options of the peak that take no part in a trace's time are refused by
// name, as without --time.
TEST(CliExplainTimeTest, RefusesWhatDoesNotApply) {
  Result r = Gpusim("explain " GPUSIM_SOURCE_DIR
                    "/validation/h200_2026-12-04/kineto/vit_b16_test.pt.trace.json.gz --time --set batch.per_device=2");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.out.find("explain TRACE: --set applies to run configs only"), std::string::npos) << r.out;
  // --allocator is named as itself, not as the --set it becomes.
  Result a = Gpusim("explain " GPUSIM_SOURCE_DIR "/tests/data/explain_time/gpt2_h200.gpusim --allocator bfc");
  EXPECT_EQ(a.code, 1);
  EXPECT_NE(a.out.find("explain TRACE: --allocator applies to run configs"), std::string::npos) << a.out;
  Result c = Gpusim("explain " GPUSIM_SOURCE_DIR "/configs/llama7b.yaml --time --cudnn-workspace gemm");
  EXPECT_EQ(c.code, 1) << c.out;
}

}  // namespace
}  // namespace gpusim::cli_explain_time_test
