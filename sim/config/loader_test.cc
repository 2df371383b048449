#include "sim/config/loader.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace gpusim::loader_test {
namespace {

namespace fs = std::filesystem;

constexpr char kDevice[] = R"(name: testgpu
description: Test GPU
sms: 132
memory:
  cuda_total: 85045477376
  context_reserve: 1GiB
hbm_bandwidth: 3350GB/s
l2: 50MiB
flops: {bf16: 989TFLOP/s, fp32: 67TFLOP/s}
links: {nvlink: 450GB/s}
)";

constexpr char kOtherDevice[] = R"(name: othergpu
sms: 108
memory: {cuda_total: 40GiB, context_reserve: 512MiB}
hbm_bandwidth: 1555GB/s
flops: {bf16: 312TFLOP/s, tf32: 156TFLOP/s, fp32: 19.5TFLOP/s}
launch_overhead: 3us
efficiency: {matmul: 0.7}
)";

constexpr char kModel[] = R"(name: tiny
family: llama
d_model: 512
n_layers: 4
n_heads: 8
head_dim: 64
mlp_dim: 1536
vocab: 32000
)";

// Layout under a fresh directory:
//   runs/run.yaml, runs/devices/testgpu.yaml, runs/models/tiny.yaml,
//   configs/devices/othergpu.yaml, shared/gpu.yaml
class ConfigLoaderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::path(::testing::TempDir()) /
            (std::string("gpusim_config_") +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(root_);
    Write("runs/devices/testgpu.yaml", kDevice);
    Write("runs/models/tiny.yaml", kModel);
    Write("configs/devices/othergpu.yaml", kOtherDevice);
    Write("shared/gpu.yaml", kOtherDevice);
  }

  std::string Write(const std::string& rel, const std::string& text) {
    fs::path p = root_ / rel;
    fs::create_directories(p.parent_path());
    std::ofstream(p) << text;
    return p.string();
  }

  std::string Run(const std::string& text) { return Write("runs/run.yaml", text); }
  std::string Path(const std::string& rel) const { return (root_ / rel).string(); }

  // The error message of loading `text` as runs/run.yaml with `sets`.
  std::string LoadError(const std::string& text,
                        const std::vector<std::string>& sets = {}) {
    absl::StatusOr<RunSpec> r = LoadRunSpec(Run(text), sets);
    EXPECT_FALSE(r.ok());
    return std::string(r.status().message());
  }

  fs::path root_;
};

constexpr char kRun[] = "device: testgpu\nmodel: tiny\n";

TEST_F(ConfigLoaderTest, LoadsByNameWithDefaults) {
  absl::StatusOr<RunSpec> r = LoadRunSpec(Run(kRun), {});
  ASSERT_TRUE(r.ok()) << r.status();
  const DeviceSpec& d = r->device;
  EXPECT_EQ(d.name, "testgpu");
  EXPECT_EQ(d.source_file, Path("runs/devices/testgpu.yaml"));
  EXPECT_EQ(d.cuda_total, Bytes(85045477376));
  EXPECT_EQ(d.usable(), Bytes(85045477376 - (1LL << 30)));
  EXPECT_EQ(d.sms, 132);
  EXPECT_EQ(d.hbm_bandwidth, 3350e9);
  EXPECT_EQ(d.l2, 50_MiB);
  EXPECT_EQ(d.peak_bf16, 989e12);
  EXPECT_EQ(d.peak_fp16, 989e12);        // defaults to bf16
  EXPECT_EQ(d.peak_tf32, 989e12 / 2);    // defaults to bf16 / 2
  EXPECT_EQ(d.nvlink_bandwidth, 450e9);
  EXPECT_EQ(d.pcie_bandwidth, 0);
  EXPECT_EQ(d.link_latency.ns(), 5000);
  EXPECT_EQ(d.launch_overhead.ns(), 4000);
  EXPECT_EQ(d.matmul_efficiency, 0.80);
  EXPECT_EQ(d.attention_efficiency, 0.60);
  EXPECT_EQ(d.fused_attention_efficiency, 0.78);  // Note [Fused attention efficiency]
  EXPECT_EQ(d.memory_efficiency, 0.85);
  EXPECT_EQ(d.collective_efficiency, 0.80);
  EXPECT_EQ(d.malloc_cost.ns(), 50000);  // allocator_cost defaults (estimates)
  EXPECT_EQ(d.unmap_page_cost.ns(), 50000);
  EXPECT_EQ(r->model.n_kv_heads, 8);  // defaults to n_heads
  EXPECT_EQ(r->model.weight_dtype, DType::kF32);
  EXPECT_EQ(r->framework, "jax");
  EXPECT_EQ(r->batch.seq_len, 2048);
  EXPECT_EQ(r->allocator.impl, "ideal");
  EXPECT_EQ(r->source_file, Path("runs/run.yaml"));
}

TEST_F(ConfigLoaderTest, ParsesEveryRunSection) {
  absl::StatusOr<RunSpec> r = LoadRunSpec(Run(R"(framework: pytorch
device: othergpu            # found via ../configs/devices
model: tiny
optimizer: {kind: sgd, moment_dtype: bf16, clip_grad_norm: false}
loop: {mode: unrolled, trip_count: 7, unroll: 2}
remat: {policy: save_only_these_names, names: [attn_out, mlp_in]}
parallelism: {fsdp: 8, tensor: 2, sequence_parallel: true, gather_dtype: weight}
batch: {per_device: 4, seq_len: 8192}
allocator: {impl: bfc, round_to: 512, garbage_collection: true}
)"), {});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->framework, "pytorch");
  EXPECT_EQ(r->device.name, "othergpu");
  EXPECT_EQ(r->device.peak_tf32, 156e12);
  EXPECT_EQ(r->device.launch_overhead.ns(), 3000);
  EXPECT_EQ(r->device.matmul_efficiency, 0.7);
  EXPECT_EQ(r->optimizer.kind, "sgd");
  EXPECT_EQ(r->optimizer.moment_dtype, DType::kBF16);
  EXPECT_FALSE(r->optimizer.clip_grad_norm);
  EXPECT_EQ(r->loop.mode, "unrolled");
  EXPECT_EQ(r->loop.trip_count, 7);
  EXPECT_EQ(r->loop.unroll, 2);
  EXPECT_EQ(r->remat.policy, "save_only_these_names");
  EXPECT_EQ(r->remat.names, (std::vector<std::string>{"attn_out", "mlp_in"}));
  EXPECT_EQ(r->parallelism.fsdp, 8);
  EXPECT_TRUE(r->parallelism.sequence_parallel);
  EXPECT_EQ(r->parallelism.gather_dtype, "weight");
  EXPECT_EQ(r->batch.per_device, 4);
  EXPECT_EQ(r->allocator.impl, "bfc");
  EXPECT_EQ(r->allocator.options,
            (std::map<std::string, std::string>{{"round_to", "512"},
                                                {"garbage_collection", "true"}}));
}

TEST_F(ConfigLoaderTest, ResolvesPathRelativeToIncludingFile) {
  absl::StatusOr<RunSpec> r =
      LoadRunSpec(Run("device: ../shared/gpu.yaml\nmodel: models/tiny.yaml\n"), {});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->device.name, "othergpu");
  EXPECT_EQ(r->device.source_file, Path("shared/gpu.yaml"));
  EXPECT_EQ(r->model.name, "tiny");
}

TEST_F(ConfigLoaderTest, UnknownNameListsAvailable) {
  std::string msg = LoadError("device: nosuchgpu\nmodel: tiny\n");
  std::string want_prefix = Path("runs/run.yaml") +
                            ":1:9: device: unknown device 'nosuchgpu'; available: ";
  EXPECT_EQ(msg.substr(0, want_prefix.size()), want_prefix) << msg;
  EXPECT_NE(msg.find("othergpu"), std::string::npos) << msg;
  EXPECT_NE(msg.find("testgpu"), std::string::npos) << msg;
  EXPECT_EQ(LoadError("device: nope/x.yaml\nmodel: tiny\n"),
            Path("runs/run.yaml") + ":1:9: device: no such file '" +
                Path("runs/nope/x.yaml") + "'");
}

TEST_F(ConfigLoaderTest, FromWithDeepMergedOverrides) {
  absl::StatusOr<RunSpec> r = LoadRunSpec(Run(R"(device:
  from: testgpu
  memory: {context_reserve: 2GiB}
  efficiency: {memory: 0.9, fused_attention: 0.7}
model: {from: tiny, n_layers: 2, n_kv_heads: 2}
)"), {});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->device.context_reserve, 2_GiB);
  EXPECT_EQ(r->device.cuda_total, Bytes(85045477376));  // kept from the file
  EXPECT_EQ(r->device.memory_efficiency, 0.9);
  EXPECT_EQ(r->device.fused_attention_efficiency, 0.7);
  EXPECT_EQ(r->device.attention_efficiency, 0.60);  // not the fused key
  // 0 turns the tile model off (Note [Fused attention efficiency]); the
  // other efficiencies stay in (0, 1].
  absl::StatusOr<RunSpec> off = LoadRunSpec(Run("device:\n  from: testgpu\n  efficiency: {fused_attention: 0}\nmodel: tiny\n"), {});
  ASSERT_TRUE(off.ok()) << off.status();
  EXPECT_EQ(off->device.fused_attention_efficiency, 0);
  EXPECT_FALSE(LoadRunSpec(Run("device:\n  from: testgpu\n  efficiency: {attention: 0}\nmodel: tiny\n"), {}).ok());
  EXPECT_FALSE(LoadRunSpec(Run("device:\n  from: testgpu\n  efficiency: {fused_attention: 1.5}\nmodel: tiny\n"), {}).ok());
  EXPECT_EQ(r->device.matmul_efficiency, 0.8);
  EXPECT_EQ(r->model.n_layers, 2);
  EXPECT_EQ(r->model.n_kv_heads, 2);
  EXPECT_EQ(r->model.vocab, 32000);
}

TEST_F(ConfigLoaderTest, UnknownKeyWithSuggestion) {
  EXPECT_EQ(LoadError("device: testgpu\nmodel: tiny\nloop:\n  mdoe: unrolled\n"),
            Path("runs/run.yaml") +
                ":4:3: loop: unknown key 'mdoe' (did you mean 'mode'?)");
  EXPECT_EQ(LoadError("device: testgpu\nmodel: tiny\nzzzzzzzz: 1\n"),
            Path("runs/run.yaml") + ":3:1: unknown key 'zzzzzzzz'");
  // A key in the device file is reported where it was written.
  Write("runs/devices/typo.yaml",
        std::string(kDevice) + "efficiency:\n  colective: 0.5\n");
  EXPECT_EQ(LoadError("device: typo\nmodel: tiny\n"),
            Path("runs/devices/typo.yaml") +
                ":12:3: device.efficiency: unknown key 'colective' (did you "
                "mean 'collective'?)");
}

TEST_F(ConfigLoaderTest, WrongTypeErrors) {
  EXPECT_EQ(LoadError("device: testgpu\nmodel: {from: tiny, param_scan_axis: abc}\n"),
            Path("runs/run.yaml") +
                ":2:38: model.param_scan_axis: expected an integer, got 'abc'");
  EXPECT_EQ(LoadError(std::string(kRun) + "loop: {mode: sideways}\n"),
            Path("runs/run.yaml") +
                ":3:14: loop.mode: expected one of rolled|unrolled, got 'sideways'");
  EXPECT_EQ(LoadError(std::string(kRun) + "optimizer: {clip_grad_norm: maybe}\n"),
            Path("runs/run.yaml") +
                ":3:29: optimizer.clip_grad_norm: expected true or false, got 'maybe'");
  EXPECT_EQ(LoadError(std::string(kRun) + "optimizer: {moment_dtype: f64}\n"),
            Path("runs/run.yaml") +
                ":3:27: optimizer.moment_dtype: expected a dtype (f32, bf16, f16, "
                "f8, i32, i64, u8, pred), got 'f64'");
  EXPECT_EQ(LoadError("device: {from: testgpu, l2: 12 apples}\nmodel: tiny\n"),
            Path("runs/run.yaml") +
                ":1:29: device.l2: expected a byte size such as 80GiB, 81920MiB, "
                "85e9B or 1024; got '12 apples'");
  EXPECT_EQ(LoadError(std::string(kRun) + "batch: {seq_len: 1.5}\n"),
            Path("runs/run.yaml") +
                ":3:18: batch.seq_len: expected an integer, got '1.5'");
  EXPECT_EQ(LoadError("device: {from: testgpu, allocator_cost: {malloc: 50}}\nmodel: tiny\n"),
            Path("runs/run.yaml") +
                ":1:50: device.allocator_cost.malloc: expected a duration with a unit (ns, us, ms or s) "
                "such as 5us; got '50'");
  EXPECT_EQ(LoadError("device: {from: testgpu, allocator_cost: {mallc: 5us}}\nmodel: tiny\n"),
            Path("runs/run.yaml") +
                ":1:42: device.allocator_cost: unknown key 'mallc' (did you mean 'malloc'?)");
  EXPECT_EQ(LoadError(std::string(kRun) + "loop: 3\n"),
            Path("runs/run.yaml") + ":3:7: loop: expected a mapping, got '3'");
}

TEST_F(ConfigLoaderTest, RangeErrors) {
  EXPECT_EQ(LoadError("device: testgpu\nmodel: {from: tiny, n_layers: 0}\n"),
            Path("runs/run.yaml") +
                ":2:31: model.n_layers: expected an integer >= 1, got '0'");
  EXPECT_EQ(LoadError(std::string(kRun) + "parallelism: {fsdp: 0}\n"),
            Path("runs/run.yaml") +
                ":3:21: parallelism.fsdp: expected an integer >= 1, got '0'");
  EXPECT_EQ(LoadError(std::string(kRun) + "loop: {trip_count: -1}\n"),
            Path("runs/run.yaml") +
                ":3:20: loop.trip_count: expected an integer >= 0, got '-1'");
  EXPECT_EQ(LoadError("device: {from: testgpu, efficiency: {matmul: 1.5}}\nmodel: tiny\n"),
            Path("runs/run.yaml") +
                ":1:46: device.efficiency.matmul: expected a number in (0, 1], "
                "got '1.5'");
  EXPECT_EQ(LoadError("device: {from: testgpu, memory: {context_reserve: 80GB, "
                      "cuda_total: 80GB}}\nmodel: tiny\n"),
            Path("runs/run.yaml") +
                ":1:51: device.memory.context_reserve: expected less than "
                "memory.cuda_total (80000000000 bytes), got '80GB'");
  EXPECT_EQ(LoadError("device: testgpu\nmodel: {from: tiny, n_kv_heads: 3}\n"),
            Path("runs/run.yaml") +
                ":2:33: model.n_kv_heads: expected a divisor of n_heads (8), got '3'");
}

TEST_F(ConfigLoaderTest, MissingRequiredKey) {
  Write("runs/devices/partial.yaml",
        "name: partial\nsms: 1\nhbm_bandwidth: 1GB/s\nflops: {bf16: 1, fp32: 1}\n"
        "memory:\n  cuda_total: 1GiB\n");
  EXPECT_EQ(LoadError("device: partial\nmodel: tiny\n"),
            Path("runs/devices/partial.yaml") +
                ":6:3: device.memory.context_reserve: missing required key");
  EXPECT_EQ(LoadError("model: tiny\n"),
            Path("runs/run.yaml") + ":1:1: device: missing required key");
}

TEST_F(ConfigLoaderTest, SetOnExistingAndAbsentKeys) {
  absl::StatusOr<RunSpec> r = LoadRunSpec(
      Run(std::string(kRun) + "batch: {seq_len: 1024}\n"),
      {"batch.seq_len=4096", "loop.trip_count=3", "remat.names=[a, b]",
       "device.memory.context_reserve=2GiB", "model.n_layers=1",
       "allocator.round_to=512"});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->batch.seq_len, 4096);
  EXPECT_EQ(r->loop.trip_count, 3);
  EXPECT_EQ(r->remat.names, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(r->device.context_reserve, 2_GiB);
  EXPECT_EQ(r->device.cuda_total, Bytes(85045477376));
  EXPECT_EQ(r->model.n_layers, 1);
  EXPECT_EQ(r->allocator.options.at("round_to"), "512");
}

TEST_F(ConfigLoaderTest, SetReplacesDeviceByName) {
  absl::StatusOr<RunSpec> r = LoadRunSpec(
      Run("device: {from: testgpu, sms: 7}\nmodel: tiny\n"),
      {"device=othergpu", "device.sms=99"});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->device.name, "othergpu");
  EXPECT_EQ(r->device.sms, 99);
  EXPECT_EQ(r->device.cuda_total, 40_GiB);
  EXPECT_EQ(r->device.source_file, Path("configs/devices/othergpu.yaml"));
}

TEST_F(ConfigLoaderTest, SetErrors) {
  EXPECT_EQ(LoadError(kRun, {"nosuch.key=1"}),
            "--set nosuch.key=1: unknown key 'nosuch'");
  EXPECT_EQ(LoadError(kRun, {"loop.mdoe=x"}),
            "--set loop.mdoe=x: loop: unknown key 'mdoe' (did you mean 'mode'?)");
  EXPECT_EQ(LoadError(kRun, {"modle.n_layers=1"}),
            "--set modle.n_layers=1: unknown key 'modle' (did you mean 'model'?)");
  EXPECT_EQ(LoadError(kRun, {"framework.x=1"}),
            "--set framework.x=1: framework: is a single value; it has no key 'x'");
  EXPECT_EQ(LoadError(kRun, {"model.param_scan_axis=x"}),
            "--set model.param_scan_axis=x: model.param_scan_axis: expected an "
            "integer, got 'x'");
  EXPECT_EQ(LoadError(kRun, {"batch.seq_len"}),
            "--set batch.seq_len: expected PATH=VALUE such as --set "
            "model.n_layers=2");
  EXPECT_EQ(LoadError(kRun, {"=3"}),
            "--set =3: expected PATH=VALUE such as --set model.n_layers=2");
  EXPECT_EQ(LoadError(kRun, {"a..b=3"}),
            "--set a..b=3: expected PATH=VALUE such as --set model.n_layers=2");
  std::string msg = LoadError(kRun, {"device=nosuchgpu"});
  EXPECT_EQ(msg.rfind("--set device=nosuchgpu: device: unknown device 'nosuchgpu'; "
                      "available: ", 0),
            0u)
      << msg;
}

TEST_F(ConfigLoaderTest, YamlSyntaxErrorNamesPosition) {
  std::string msg = LoadError("device: testgpu\nmodel: [tiny\n");
  EXPECT_EQ(msg.rfind(Path("runs/run.yaml") + ":", 0), 0u) << msg;
}

TEST_F(ConfigLoaderTest, LoadDeviceAndModelOnTheirOwn) {
  absl::StatusOr<DeviceSpec> d =
      LoadDeviceSpec("othergpu", Path("runs"));
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->peak_fp32, 19.5e12);
  absl::StatusOr<ModelSpec> m = LoadModelSpec(Path("runs/models/tiny.yaml"));
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->d_model, 512);
  // Key paths are relative to the file when it is loaded on its own.
  Write("x/bad.yaml", "name: bad\nsms: many\n");
  EXPECT_EQ(LoadDeviceSpec(Path("x/bad.yaml")).status().message(),
            Path("x/bad.yaml") + ":2:6: sms: expected an integer, got 'many'");
  // Device files may start from another device file.
  Write("runs/devices/derived.yaml", "from: testgpu\nname: derived\nsms: 114\n");
  d = LoadDeviceSpec("derived", Path("runs"));
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->name, "derived");
  EXPECT_EQ(d->sms, 114);
  EXPECT_EQ(d->hbm_bandwidth, 3350e9);
  EXPECT_EQ(d->source_file, Path("runs/devices/testgpu.yaml"));
}

// The files shipped under configs/ parse under the strict schema.
TEST(ConfigShippedTest, EveryShippedDeviceAndModelLoads) {
  for (const std::string& name : ListDeviceNames()) {
    absl::StatusOr<DeviceSpec> d = LoadDeviceSpec(name);
    ASSERT_TRUE(d.ok()) << d.status();
    EXPECT_EQ(d->name, name);
    EXPECT_LT(d->context_reserve, d->cuda_total);
    EXPECT_GT(d->malloc_cost.ns(), 0) << name;  // every device file states its allocator costs
  }
  for (const std::string& name : ListModelNames()) {
    absl::StatusOr<ModelSpec> m = LoadModelSpec(name);
    EXPECT_TRUE(m.ok()) << m.status();
  }
  // Run configs at the top of configs/ resolve their names from there.
  for (const auto& entry : fs::directory_iterator(GPUSIM_SOURCE_DIR "/configs")) {
    if (entry.path().extension() != ".yaml") continue;
    absl::StatusOr<RunSpec> r = LoadRunSpec(entry.path().string(), {});
    EXPECT_TRUE(r.ok()) << r.status();
  }
}

// Note [Run config names]: a NAME is the bundled configs/NAME.yaml; a path,
// or a NAME that is a file in the working directory, is itself.
TEST(RunConfigNamesTest, ANameIsABundledConfig) {
  absl::StatusOr<std::string> r = ResolveRunConfig("llama7b");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(fs::equivalent(*r, GPUSIM_SOURCE_DIR "/configs/llama7b.yaml")) << *r;
  const std::vector<std::string> names = ListRunConfigNames();
  EXPECT_NE(std::find(names.begin(), names.end(), "llama7b"), names.end());
  for (const std::string& n : names) EXPECT_TRUE(LoadRunSpec(*ResolveRunConfig(n), {}).ok()) << n;
  for (const std::string& not_a_name : {"configs/llama7b.yaml", "llama7b.yaml", "missing.yaml", "a b", ""}) {
    EXPECT_EQ(ResolveRunConfig(not_a_name).value_or("?"), not_a_name);
  }
  absl::StatusOr<std::string> unknown = ResolveRunConfig("llama8b");
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(unknown.status().message().find("llama8b: no such file, and no bundled run config of that name; "
                                            "bundled: llama7b"),
            std::string::npos)
      << unknown.status();
  // A file of that name in the working directory wins.
  const fs::path cwd = fs::current_path();
  fs::current_path(::testing::TempDir());
  std::ofstream("llama7b") << "framework: jax\n";
  EXPECT_EQ(ResolveRunConfig("llama7b").value_or("?"), "llama7b");
  fs::remove("llama7b");
  fs::current_path(cwd);
}

// Note [Run configs given as text].
TEST(RunConfigTextTest, ALabelStandsForTheTextOnItsThread) {
  EXPECT_FALSE(IsRunConfigText("<dict>"));
  {
    const std::string yaml = "device: h100-sxm-80gb\nmodel: llama2-7b\nbatch: {per_device: 2}\n";
    ScopedRunConfigText text("<dict>", yaml);
    EXPECT_TRUE(IsRunConfigText("<dict>"));
    EXPECT_EQ(ResolveRunConfig("<dict>").value_or("?"), "<dict>");
    EXPECT_EQ(ReadRunConfigBytes("<dict>").value_or("?"), yaml);
    absl::StatusOr<RunSpec> spec = LoadRunSpec("<dict>", {"batch.seq_len=1024"});
    ASSERT_TRUE(spec.ok()) << spec.status();
    EXPECT_EQ(spec->device.name, "h100-sxm-80gb");
    EXPECT_EQ(spec->batch.per_device, 2);
    EXPECT_EQ(spec->batch.seq_len, 1024);
    EXPECT_TRUE(RunConfig::Read("<dict>").ok());
    {
      ScopedRunConfigText inner("<dict>", "device: h100-sxm-80gb\nmodel: llama2-7b\nbatch:\n  per_devise: 1\n");
      absl::StatusOr<RunSpec> bad = LoadRunSpec("<dict>", {});
      ASSERT_FALSE(bad.ok());
      EXPECT_EQ(bad.status().message(), "<dict>:4:3: batch: unknown key 'per_devise' (did you mean 'per_device'?)");
    }
    EXPECT_TRUE(LoadRunSpec("<dict>", {}).ok());  // the outer text again
    bool seen_elsewhere = true;
    std::thread([&] { seen_elsewhere = IsRunConfigText("<dict>"); }).join();
    EXPECT_FALSE(seen_elsewhere);
  }
  EXPECT_FALSE(IsRunConfigText("<dict>"));
  EXPECT_EQ(LoadRunSpec("<dict>", {}).status().code(), absl::StatusCode::kNotFound);
}

TEST(ConfigSpecTest, PeakFlopsByDType) {
  DeviceSpec d;
  d.peak_bf16 = 989e12;
  d.peak_fp16 = 900e12;
  d.peak_tf32 = 495e12;
  d.peak_fp32 = 67e12;
  EXPECT_EQ(d.PeakFlops(DType::kBF16), 989e12);
  EXPECT_EQ(d.PeakFlops(DType::kF16), 900e12);
  EXPECT_EQ(d.PeakFlops(DType::kF8), 0);  // no flops.fp8: no fp8 tensor cores
  d.peak_fp8 = 1979e12;
  EXPECT_EQ(d.PeakFlops(DType::kF8), 1979e12);
  EXPECT_EQ(d.PeakFlops(DType::kF32), 67e12);
  EXPECT_EQ(d.PeakFlops(DType::kI32), 67e12);
}

// Every bundled device file loads; flops.fp8 is the file's where it writes one,
// twice bf16 by default on 8.9/9.0 only (Note [fp8 peak]), absent on A100.
TEST(ConfigSpecTest, EveryBundledDeviceLoadsWithItsFp8Rate) {
  const std::vector<std::string> names = ListDeviceNames();
  for (const char* want : {"a100-sxm-40gb", "a100-sxm-80gb", "b200", "gb200", "h100-pcie-80gb", "h100-sxm-80gb",
                           "h200-sxm-141gb", "mi300x"}) {
    EXPECT_NE(std::find(names.begin(), names.end(), want), names.end()) << want;
  }
  for (const std::string& name : names) {
    absl::StatusOr<DeviceSpec> d = LoadDeviceSpec(name);
    ASSERT_TRUE(d.ok()) << name << ": " << d.status();
    EXPECT_EQ(d->name, name);
    EXPECT_GT(d->usable().value(), 0) << name;
  }
  EXPECT_EQ(LoadDeviceSpec("a100-sxm-80gb")->peak_fp8, 0);
  EXPECT_EQ(LoadDeviceSpec("h100-sxm-80gb")->peak_fp8, 1979e12);
  EXPECT_EQ(LoadDeviceSpec("b200")->peak_fp8, 4500e12);
  EXPECT_EQ(LoadDeviceSpec("b200")->cc_major, 10);
  EXPECT_EQ(LoadDeviceSpec("gb200")->peak_bf16, 2500e12);
  EXPECT_EQ(LoadDeviceSpec("mi300x")->cuda_total.value(), 206141652992);
  EXPECT_EQ(LoadDeviceSpec("mi300x")->cc_major, 0);  // CUDA-keyed rules refuse it by name
}

TEST_F(ConfigLoaderTest, Fp8DefaultsToTwiceBf16OnHopperOnly) {
  const std::string base = "name: x\nsms: 1\nmemory: {cuda_total: 1GiB, context_reserve: 0}\nhbm_bandwidth: 1TB/s\n";
  const std::string flops = "flops: {bf16: 100TFLOP/s, fp32: 1TFLOP/s}\n";
  Write("d/hopper.yaml", base + flops + "compute_capability: \"9.0\"\n");
  Write("d/ampere.yaml", base + flops + "compute_capability: \"8.0\"\n");
  Write("d/blackwell.yaml", base + flops + "compute_capability: \"10.0\"\n");
  Write("d/given.yaml", base + "flops: {bf16: 100TFLOP/s, fp32: 1TFLOP/s, fp8: 300TFLOP/s}\n");
  EXPECT_EQ(LoadDeviceSpec(Path("d/hopper.yaml"))->peak_fp8, 200e12);
  EXPECT_EQ(LoadDeviceSpec(Path("d/ampere.yaml"))->peak_fp8, 0);
  EXPECT_EQ(LoadDeviceSpec(Path("d/blackwell.yaml"))->peak_fp8, 0);  // no source for a default: write flops.fp8
  EXPECT_EQ(LoadDeviceSpec(Path("d/given.yaml"))->peak_fp8, 300e12);
}

}  // namespace
}  // namespace gpusim::loader_test
