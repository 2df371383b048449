// Integration tests of the gpusim binary: exit codes, messages, JSON keys.
#include <sys/wait.h>

#include <cstdio>
#include <fstream>
#include <cstdlib>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/cli_support.h"

namespace gpusim::cli_test {
namespace {

// The integer value of "key": N in a JSON document (first occurrence).
int64_t JsonInt(const std::string& json, const std::string& key) {
  const size_t at = json.find("\"" + key + "\": ");
  if (at == std::string::npos) return -1;
  return std::stoll(json.substr(at + key.size() + 4));
}

const std::string kConfig = std::string(GPUSIM_SOURCE_DIR) + "/configs/llama7b.yaml";

TEST(CliTest, RunLlama7bJsonHasTheContractKeys) {
  Result r = Gpusim("run " + kConfig + " --format json");
  ASSERT_EQ(r.code, 0) << r.out;
  for (const char* key : {"argument_bytes", "output_bytes", "alias_bytes", "temp_bytes", "peak_bytes",
                          "capacity_bytes", "fits", "peak_allocated_bytes", "peak_reserved_bytes",
                          "fragmentation_bytes", "step_time_s", "compute_s", "communication_s", "recompute_s",
                          "host_transfer_s", "tflops_per_device", "tokens_per_s_per_device", "breakdown"}) {
    EXPECT_NE(r.out.find(std::string("\"") + key + "\""), std::string::npos) << key;
  }
  // The seed's memory_analysis (measurements.md §A), within 0.1%.
  EXPECT_NEAR(static_cast<double>(JsonInt(r.out, "argument_bytes")), 40430575628.0, 40430575628.0 * 1e-3);
  EXPECT_NEAR(static_cast<double>(JsonInt(r.out, "output_bytes")), 40430494092.0, 40430494092.0 * 1e-3);
  // Same input, same output, byte for byte.
  EXPECT_EQ(Gpusim("run " + kConfig + " --format json").out, r.out);
}

TEST(CliTest, MisspeltKeyFailsWithLocationAndSuggestion) {
  const std::string path = Write("misspelt.yaml",
                                 "device: h100-sxm-80gb\nmodel: llama2-7b\nbatch:\n  per_devcie: 2\n");
  Result r = Gpusim("run " + path);
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.out.find(path + ":4:3: batch: unknown key 'per_devcie' (did you mean 'per_device'?)"),
            std::string::npos)
      << r.out;
}

TEST(CliTest, SetOfUnknownPathFails) {
  Result r = Gpusim("run " + kConfig + " --set nosuch.key=1");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.out.find("--set nosuch.key=1: unknown key 'nosuch'"), std::string::npos) << r.out;
}

TEST(CliTest, SetOverridesAField) {
  Result a = Gpusim("run " + kConfig + " --format json --set batch.per_device=2");
  ASSERT_EQ(a.code, 0) << a.out;
  EXPECT_EQ(JsonInt(a.out, "batch_per_device"), 2);
}

TEST(CliTest, ValidateRejectsDoubleFreeNamingTheEvent) {
  const std::string path = Write("double_free.trace",
                                 "gpusim-trace 1\nalloc 1 1024 role=activation\nfree 1\nfree 1\n");
  Result r = Gpusim("validate " + path);
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.out.find("event 2 (free): double free of buffer 1"), std::string::npos) << r.out;
}

TEST(CliTest, OutWritesResultAndTraceThatValidates) {
  const std::string dir = ::testing::TempDir() + "/gpusim_out";
  Result r = Gpusim("run " + kConfig + " --set model.n_layers=2 --out " + dir);
  ASSERT_EQ(r.code, 0) << r.out;
  std::ifstream json(dir + "/result.json");
  EXPECT_TRUE(json.good());
  Result v = Gpusim("validate " + dir + "/trace.gpusim");
  EXPECT_EQ(v.code, 0) << v.out;
  EXPECT_NE(v.out.find("valid trace"), std::string::npos);
}

TEST(CliTest, DevicesListsEveryDevice) {
  Result r = Gpusim("devices");
  ASSERT_EQ(r.code, 0) << r.out;
  for (const char* d : {"a100-sxm-40gb", "a100-sxm-80gb", "h100-sxm-80gb", "h100-pcie-80gb", "h200-sxm-141gb", "b200",
                        "gb200", "mi300x"}) {
    EXPECT_NE(r.out.find(d), std::string::npos) << d;
  }
}

TEST(CliTest, BadUsageExitsOne) {
  EXPECT_EQ(Gpusim("run").code, 1);
  EXPECT_EQ(Gpusim("frobnicate").code, 1);
  EXPECT_EQ(Gpusim("run /nonexistent.yaml").code, 1);
  EXPECT_EQ(Gpusim("--help").code, 0);
}

// Note [Run config names]: every command that takes a config takes a bundled
// one by NAME, from any directory; an unknown NAME lists them.
// Note [Shard from the job array]: `advise --shard auto` is the shard the
// Slurm array task or the Kubernetes Indexed Job pod names, the same lines
// `--shard I/N` prints; outside a job array, refused by name.
TEST(CliTest, AdviseShardAutoFromSlurmAndKubernetes) {
  const std::string grid = "advise " + kConfig + " --vary batch.per_device=1,2,4 --vary loop.mode=rolled,unrolled";
  const Result explicit_shard = GpusimStdout(grid + " --shard 1/3");
  ASSERT_EQ(explicit_shard.code, 0);
  const std::string env = "env -u SLURM_ARRAY_TASK_ID -u JOB_COMPLETION_INDEX ";
  const Result slurm = RunShell(env + "SLURM_ARRAY_TASK_ID=5 SLURM_ARRAY_TASK_MIN=3 SLURM_ARRAY_TASK_STEP=2 "
                                "SLURM_ARRAY_TASK_COUNT=3 " GPUSIM_BINARY " " + grid + " --shard auto 2>/dev/null");
  EXPECT_EQ(slurm.code, 0);
  EXPECT_EQ(slurm.out, explicit_shard.out);
  const Result k8s = RunShell(env + "JOB_COMPLETION_INDEX=1 GPUSIM_NUM_SHARDS=3 " GPUSIM_BINARY " " + grid +
                              " --shard auto 2>/dev/null");
  EXPECT_EQ(k8s.code, 0);
  EXPECT_EQ(k8s.out, explicit_shard.out);
  const Result none = RunShell(env + GPUSIM_BINARY " " + grid + " --shard auto 2>&1");
  EXPECT_EQ(none.code, 1);
  EXPECT_NE(none.out.find("--shard auto: not in a job array"), std::string::npos) << none.out;
  const Result no_count = RunShell(env + "JOB_COMPLETION_INDEX=1 " GPUSIM_BINARY " " + grid + " --shard auto 2>&1");
  EXPECT_EQ(no_count.code, 1);
  EXPECT_NE(no_count.out.find("GPUSIM_NUM_SHARDS is not"), std::string::npos) << no_count.out;
}

// Issue 32: misspelt commands, options and device names are named with
// what was meant; names are case folded.
TEST(CliTest, DidYouMeanForCommandsOptionsAndDevices) {
  Result r = Gpusim("rn " + kConfig);
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.out.find("unknown command 'rn' (did you mean 'run'?)"), std::string::npos) << r.out;
  r = Gpusim("run " + kConfig + " --fromat json");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.out.find("run: unknown option '--fromat' (did you mean '--format'?)"), std::string::npos) << r.out;
  r = Gpusim("run " + kConfig + " --set device=h100");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.out.find("(did you mean 'h100-pcie-80gb' or 'h100-sxm-80gb'?)"), std::string::npos) << r.out;
  EXPECT_EQ(GpusimStdout("RUN " + kConfig + " --set device=H100-SXM-80GB --FORMAT json").out,
            GpusimStdout("run " + kConfig + " --format json").out);
}

// Note [Registry names fold case]: remat policies and allocators written
// in another case are the registered ones (same output byte for byte); a
// near miss still gets its did-you-mean.
TEST(CliTest, PolicyAndAllocatorNamesFoldCase) {
  EXPECT_EQ(GpusimStdout("run " + kConfig + " --set remat.policy=FULL --format json").out,
            GpusimStdout("run " + kConfig + " --set remat.policy=full --format json").out);
  EXPECT_EQ(GpusimStdout("run " + kConfig + " --set allocator.impl=BFC --format json").out,
            GpusimStdout("run " + kConfig + " --set allocator.impl=bfc --format json").out);
  const std::string trace =
      std::string(GPUSIM_SOURCE_DIR) + "/traces/recorded/tracelens_mi300x_rocm_normalization_coldstart.pt.trace.json.gz";
  EXPECT_EQ(GpusimStdout("replay " + trace + " --allocator PyTorch_Caching --format json").out,
            GpusimStdout("replay " + trace + " --allocator pytorch_caching --format json").out);
  const Result near = Gpusim("run " + kConfig + " --set remat.policy=ful");
  EXPECT_EQ(near.code, 1);
  EXPECT_NE(near.out.find("unknown policy 'ful' (did you mean 'full'?)"), std::string::npos) << near.out;
}

TEST(CliTest, BundledConfigsByName) {
  const std::string in_tmp = "cd " + ::testing::TempDir() + " && " + GPUSIM_BINARY + " ";
  const Result by_path = GpusimStdout("run " GPUSIM_SOURCE_DIR "/configs/llama7b.yaml --format json");
  const Result by_name = RunShell(in_tmp + "run llama7b --format json 2>/dev/null");
  ASSERT_EQ(by_name.code, 0) << by_name.out;
  EXPECT_EQ(JsonInt(by_name.out, "peak_bytes"), JsonInt(by_path.out, "peak_bytes"));
  const std::vector<std::string> commands = {
      "explain llama7b --top 1", "diff llama7b --set batch.per_device=2", "advise llama7b --vary batch.per_device=1",
      "validate llama7b", "compare llama7b --vary batch.per_device=1,2",
      "viz llama7b --out " + ::testing::TempDir() + "/by_name_viz"};
  for (const std::string& cmd : commands) {
    const Result r = RunShell(in_tmp + cmd + " 2>&1");
    EXPECT_EQ(r.code, 0) << cmd << ": " << r.out;
  }
  const Result unknown = RunShell(in_tmp + "explain llama8b 2>&1");
  EXPECT_EQ(unknown.code, 1);
  EXPECT_NE(unknown.out.find("gpusim: error: llama8b: no such file, and no bundled run config of that name; "
                             "bundled: llama7b"),
            std::string::npos)
      << unknown.out;
}

TEST(CliTest, ReplayJsonKeysAndCompareRows) {
  const std::string trace =
      std::string(GPUSIM_SOURCE_DIR) + "/traces/recorded/tracelens_mi300x_rocm_normalization_coldstart.pt.trace.json.gz";
  Result r = Gpusim("replay " + trace + " --format json");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(JsonInt(r.out, "peak_reserved_bytes"), 8388608);
  EXPECT_EQ(JsonInt(r.out, "peak_allocated_bytes"), 8154624);
  EXPECT_EQ(JsonInt(r.out, "events"), 415);
  EXPECT_NE(r.out.find("\"reserved_exact_share\": 1"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\"address_exact_share\": null"), std::string::npos);
  Result c = Gpusim("compare " + trace + " --allocators pytorch_caching,ideal,bfc");
  ASSERT_EQ(c.code, 0) << c.out;
  EXPECT_NE(c.out.find("pytorch_caching"), std::string::npos);
  EXPECT_NE(c.out.find("bfc"), std::string::npos);
  Result bad = Gpusim("replay " + trace + " --set allocator.nope=1");
  EXPECT_EQ(bad.code, 1);
  EXPECT_NE(bad.out.find("allocator.nope"), std::string::npos);
  Result addr = Gpusim("replay " + trace + " --check-addresses");
  EXPECT_EQ(addr.code, 1);
  EXPECT_NE(addr.out.find("needs a memory snapshot"), std::string::npos);
}

void ExpectArgumentOutputAlias(const std::string& json, int64_t argument, int64_t output, int64_t alias) {
  EXPECT_EQ(JsonInt(json, "argument_bytes"), argument);
  EXPECT_EQ(JsonInt(json, "output_bytes"), output);
  EXPECT_EQ(JsonInt(json, "alias_bytes"), alias);
}

// `gpusim run STEP.hlo --device NAME` and `program_hlo:` in a run config:
// the 7B module of traces/hlo/ gives memory_analysis()'s argument, output
// and alias bytes (tests/hlo_jax/llama_check.py checks them against JAX).
TEST(CliTest, RunsAnHloModule) {
  const std::string hlo = std::string(GPUSIM_SOURCE_DIR) + "/traces/hlo/llama7b_axis0_rolled.hlo.gz";
  Result r = Gpusim("run " + hlo + " --device h100-sxm-80gb --format json");
  ASSERT_EQ(r.code, 0) << r.out;
  ExpectArgumentOutputAlias(r.out, 80861028364, 80860987764, 80860987404);
  const std::string config = Write("hlo_run.yaml", "framework: jax\ndevice: h100-sxm-80gb\nprogram_hlo: " + hlo + "\n");
  Result c = Gpusim("run " + config + " --format json");
  ASSERT_EQ(c.code, 0) << c.out;
  EXPECT_EQ(JsonInt(c.out, "temp_bytes"), JsonInt(r.out, "temp_bytes"));
  Result e = Gpusim("explain " + hlo + " --device h100-sxm-80gb --top 3");
  ASSERT_EQ(e.code, 0) << e.out;
  EXPECT_NE(e.out.find("while while."), std::string::npos) << e.out;

  Result no_device = Gpusim("run " + hlo);
  EXPECT_EQ(no_device.code, 1);
  EXPECT_NE(no_device.out.find("give the device with --device NAME"), std::string::npos) << no_device.out;
  Result yaml_device = Gpusim("run " + kConfig + " --device h100-sxm-80gb");
  EXPECT_EQ(yaml_device.code, 1);
  EXPECT_NE(yaml_device.out.find("use --set device=NAME"), std::string::npos) << yaml_device.out;
  Result trips = Gpusim("run " + hlo + " --device h100-sxm-80gb --set loop.trip_count=4");
  EXPECT_EQ(trips.code, 1);
  EXPECT_NE(trips.out.find("no while loop needs it"), std::string::npos) << trips.out;
  Result remat = Gpusim("run " + hlo + " --device h100-sxm-80gb --set remat.policy=full");
  EXPECT_EQ(remat.code, 1);
  EXPECT_NE(remat.out.find("remat.policy: not modelled for model family 'hlo'"), std::string::npos) << remat.out;
  const std::string both = Write("hlo_both.yaml", "device: h100-sxm-80gb\nmodel: llama2-7b\nprogram_hlo: x.hlo\n");
  Result b = Gpusim("run " + both);
  EXPECT_EQ(b.code, 1);
  EXPECT_NE(b.out.find("expected exactly one of 'model', 'program', 'program_hlo' or 'megatron'"), std::string::npos) << b.out;
  const std::string bad = Write("bad.hlo", "HloModule m\nENTRY main {\n  a = f32[2] parameter(0\n}\n");
  Result parse = Gpusim("run " + bad + " --device h100-sxm-80gb");
  EXPECT_EQ(parse.code, 1);
  EXPECT_NE(parse.out.find("bad.hlo:3:"), std::string::npos) << parse.out;
}

// Note [Gemm results are not written over] (sim/lower/lower.cc): in an
// unoptimised HLO module the exponential of a dying gemm result gets a
// buffer of its own beside it, as XLA-GPU's heap gives the fusion reading a
// cuBLAS custom call's tuple element.
TEST(CliTest, HloGemmResultsAreNotWrittenOver) {
  const std::string hlo = std::string(GPUSIM_SOURCE_DIR) + "/tests/data/hlo/gemm_result.hlo";  // d = dot; exp(d); dot
  Result r = Gpusim("run " + hlo + " --device h100-sxm-80gb --format json");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(JsonInt(r.out, "temp_bytes"), 2 * 64 * 32 * 2);  // d and e, 4 KiB each
}

// `gpusim run STEP.opt.hlo` reads XLA's compiled module as it is, and
// `--compiled` puts it beside the unoptimised module (issue 30): the
// figures are memory_analysis()'s on the H200 (validation/h200_2026-12-04).
TEST(CliTest, RunsACompiledModuleBesideItsUnoptimisedOne) {
  const std::string dir = std::string(GPUSIM_SOURCE_DIR) + "/validation/h200_2026-12-04/hlo/llama7b_L4_axis0_full_rolled";
  Result c = Gpusim("run " + dir + ".opt.hlo.gz --device h200-sxm-141gb --format json");
  ASSERT_EQ(c.code, 0) << c.out;
  ExpectArgumentOutputAlias(c.out, 12860219404, 12860178828, 12860178444);
  const int64_t temp = JsonInt(c.out, "temp_bytes");
  EXPECT_LT(std::abs(temp - 5412183400) * 10000, 5412183400) << temp;  // within 0.01%
  Result both = Gpusim("run " + dir + ".hlo.gz --compiled " + dir + ".opt.hlo.gz --device h200-sxm-141gb");
  ASSERT_EQ(both.code, 0) << both.out;
  EXPECT_NE(both.out.find("against compiled"), std::string::npos) << both.out;
  EXPECT_NE(both.out.find("step time"), std::string::npos) << both.out;
  Result swapped = Gpusim("run " + dir + ".opt.hlo.gz --compiled " + dir + ".hlo.gz --device h200-sxm-141gb");
  EXPECT_EQ(swapped.code, 1);
  EXPECT_NE(swapped.out.find("the first must be unoptimised and the second compiled"), std::string::npos) << swapped.out;
  Result e = Gpusim("explain " + dir + ".opt.hlo.gz --device h200-sxm-141gb --top 2");
  ASSERT_EQ(e.code, 0) << e.out;
  EXPECT_NE(e.out.find("XLA's buffer assignment of the compiled module"), std::string::npos) << e.out;
}

}  // namespace
}  // namespace gpusim::cli_test

namespace gpusim::cli_test {
namespace {

// Issue 11: every setting the issue names changes the result or is refused
// by name; grid commands refuse misspelt paths and unmodelled values.
TEST(CliCapabilityTest, UnmodelledSettingsExitOneNamingTheKey) {
  // sequence_parallel at tensor 1 has nothing to shard (Megatron-LM turns
  // it off): refused by the llama family's check.
  for (const char* set : {"parallelism.sequence_parallel=true", "loop.unroll=2",
                          "loop.trip_count=16", "remat.method=block", "allocator.impl=pytorch_caching"}) {
    Result r = Gpusim("run " + kConfig + " --set " + set);
    EXPECT_EQ(r.code, 1) << set;
    const std::string key = std::string(set).substr(0, std::string(set).find('='));
    EXPECT_NE(r.out.find(std::string("--set ") + set + ": " + key + ":"), std::string::npos) << r.out;
  }
}

// The gpt family too: sequence parallelism at tensor 1 would change nothing.
TEST(CliCapabilityTest, GptRefusesSequenceParallelAtTensorOne) {
  const std::string gpt = std::string(GPUSIM_SOURCE_DIR) + "/examples/gpt22b_korthikanti.yaml";
  Result r = Gpusim("run " + gpt + " --set parallelism.tensor=1 --set parallelism.sequence_parallel=true");
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("parallelism.sequence_parallel: true needs parallelism.tensor > 1 for model family 'gpt'"),
            std::string::npos)
      << r.out;
  EXPECT_EQ(Gpusim("run " + gpt + " --set parallelism.sequence_parallel=true").code, 0);
}

// Host costs are charged for every eager step (Note [Eager host costs]):
// a device file's host: block is modelled under pytorch and refused by name
// under jax (one XLA executable launch), not ignored.
TEST(CliCapabilityTest, DeviceHostCostsAreModelledEagerAndRefusedUnderXla) {
  const std::string dev = ::testing::TempDir() + "/cli_host_device.yaml";
  {
    std::ifstream in(std::string(GPUSIM_SOURCE_DIR) + "/configs/devices/a100-sxm-40gb.yaml");
    std::ofstream out(dev);
    out << in.rdbuf() << "host:\n  op: 500us\n";
  }
  Result r = Gpusim("run " + kConfig + " --set device=" + dev);
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("host: (host.op, host.module) is modelled only for eager steps"), std::string::npos)
      << r.out;
  const std::string gpt = std::string(GPUSIM_SOURCE_DIR) + "/examples/gpt22b_korthikanti.yaml";
  Result base = Gpusim("run " + gpt + " --format json");
  Result slow = Gpusim("run " + gpt + " --set device=" + dev + " --format json");
  ASSERT_EQ(base.code, 0) << base.out;
  ASSERT_EQ(slow.code, 0) << slow.out;
  EXPECT_NE(base.out, slow.out);
}

// Note [Recorded host costs]: the costs of a recording's host= work are
// refused for a model config (an eager one too), which has none to price.
TEST(CliCapabilityTest, RecordedHostCostsAreRefusedForAModelConfig) {
  const std::string dev = ::testing::TempDir() + "/cli_host_dispatch_device.yaml";
  {
    std::ifstream in(std::string(GPUSIM_SOURCE_DIR) + "/configs/devices/a100-sxm-40gb.yaml");
    std::ofstream out(dev);
    out << in.rdbuf() << "host:\n  dispatch: 5us\n";
  }
  const std::string gpt = std::string(GPUSIM_SOURCE_DIR) + "/examples/gpt22b_korthikanti.yaml";
  Result r = Gpusim("run " + gpt + " --set device=" + dev);
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("host.dispatch, host.node and host.python_module price the host work a recorded PyTorch step"),
            std::string::npos)
      << r.out;
}

TEST(CliCapabilityTest, GridCommandsRefuseMisspeltPathsAndUnmodelledValues) {
  for (const char* cmd : {"advise", "compare"}) {
    Result a = Gpusim(std::string(cmd) + " " + kConfig + " --vary batch.per_devise=1,2");
    EXPECT_EQ(a.code, 1) << cmd << a.out;
    EXPECT_NE(a.out.find("did you mean 'per_device'"), std::string::npos) << a.out;
    Result b = Gpusim(std::string(cmd) + " " + kConfig + " --vary loop.unroll=1,2");
    EXPECT_EQ(b.code, 1) << cmd << b.out;
    EXPECT_NE(b.out.find("loop.unroll: not modelled for model family 'llama'"), std::string::npos) << b.out;
    Result c = Gpusim(std::string(cmd) + " " + kConfig + " --vary parallelism.tensor=1,3");
    EXPECT_EQ(c.code, 1) << cmd << c.out;
    EXPECT_NE(c.out.find("parallelism.tensor: 3 must divide model.n_heads"), std::string::npos) << c.out;
  }
}

// Tensor and sequence parallelism are modelled for llama (Note [Llama
// tensor parallelism]): each changes the printed result.
TEST(CliCapabilityTest, TensorAndSequenceParallelismChangeALlamaResult) {
  Result base = Gpusim("run " + kConfig + " --format json");
  Result tp = Gpusim("run " + kConfig + " --set parallelism.tensor=2 --format json");
  Result sp = Gpusim("run " + kConfig + " --set parallelism.tensor=2 --set parallelism.sequence_parallel=true "
                     "--format json");
  ASSERT_EQ(base.code, 0) << base.out;
  ASSERT_EQ(tp.code, 0) << tp.out;
  ASSERT_EQ(sp.code, 0) << sp.out;
  EXPECT_NE(base.out, tp.out);
  EXPECT_NE(tp.out, sp.out);
}

// Issue 11 Deliver 4: every registry lists itself in one shape, with typed
// parameters, and an unknown name gets a did-you-mean.
TEST(CliRegistryTest, EveryKindListsTypedParametersInTextAndJson) {
  for (const char* kind : {"allocators", "remat", "devices", "kernels", "importers", "models"}) {
    Result text = Gpusim(std::string("list ") + kind);
    EXPECT_EQ(text.code, 0) << kind << text.out;
    Result json = Gpusim(std::string("list ") + kind + " --format json");
    ASSERT_EQ(json.code, 0) << kind << json.out;
    EXPECT_NE(json.out.find(std::string("\"") + kind + "\": ["), std::string::npos) << json.out;
    EXPECT_NE(json.out.find("\"parameters\": ["), std::string::npos) << kind;
  }
  Result a = Gpusim("list allocators --format json");
  EXPECT_NE(a.out.find("\"name\": \"allocator.mem_fraction\""), std::string::npos) << a.out;
  EXPECT_NE(a.out.find("\"range\": \"(0, 1]\""), std::string::npos) << a.out;
  Result k = Gpusim("list kernels");
  EXPECT_NE(k.out.find("tiled"), std::string::npos) << k.out;
  EXPECT_NE(k.out.find("sms (int"), std::string::npos) << k.out;
  Result i = Gpusim("list importers");
  EXPECT_NE(i.out.find("memory_timeline"), std::string::npos) << i.out;
  Result bad = Gpusim("run " + kConfig +
                      " --set framework=pytorch --set model.param_scan_axis=0 --set loop.mode=unrolled"
                      " --set allocator.impl=pytorch_cachng");
  EXPECT_EQ(bad.code, 1);
  EXPECT_NE(bad.out.find("allocator.impl: unknown allocator 'pytorch_cachng' (did you mean 'pytorch_caching'?)"),
            std::string::npos)
      << bad.out;
  Result kind = Gpusim("list kernel");
  EXPECT_EQ(kind.code, 1);
  EXPECT_NE(kind.out.find("did you mean 'kernels'"), std::string::npos) << kind.out;
}

TEST(CliCapabilityTest, ListModelsNamesEachFamilysSettings) {
  Result r = Gpusim("list models --format json");
  ASSERT_EQ(r.code, 0) << r.out;
  for (const char* s : {"\"name\": \"llama\"", "\"name\": \"gpt\"", "parallelism.sequence_parallel"}) {
    EXPECT_NE(r.out.find(s), std::string::npos) << s;
  }
}

}  // namespace
}  // namespace gpusim::cli_test
