// Calibration files: strict parsing, errors with file:line:col and key paths.
#include <filesystem>
#include <fstream>
#include <string>

#include "gtest/gtest.h"
#include "sim/config/calibration_spec.h"

namespace gpusim::calibrate_spec_test {
namespace {

std::string Write(const std::string& name, const std::string& text) {
  const std::string path = ::testing::TempDir() + "/" + name;
  std::ofstream(path) << text;
  return path;
}

constexpr char kConfig[] = GPUSIM_SOURCE_DIR "/configs/llama7b.yaml";

std::string OneCase(const std::string& extra_case_lines, const std::string& top = "") {
  return top + "cases:\n  - name: a\n    config: " + kConfig +
         "\n    source: test\n    measured: {step_time_s: 0.5}\n" + extra_case_lines;
}

TEST(CalibrationSpecTest, ParsesCasesAndDefaults) {
  const std::string path = Write("ok.yaml", OneCase(
      "    set: [model.n_layers=2]\n    fit: false\n",
      "name: t\nprior_weight: 0\n"));
  auto s = LoadCalibrationSpec(path);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->name, "t");
  EXPECT_EQ(s->prior_weight, 0);
  ASSERT_EQ(s->parameters.size(), 4u);
  EXPECT_EQ(s->parameters[0].name, "efficiency.matmul");
  EXPECT_EQ(s->parameters[0].min, 0.05);
  EXPECT_EQ(s->parameters[3].max, 1);
  ASSERT_EQ(s->cases.size(), 1u);
  EXPECT_FALSE(s->cases[0].fit);
  EXPECT_EQ(s->cases[0].run.model.n_layers, 2);
  EXPECT_DOUBLE_EQ(s->cases[0].measured.step_time_s, 0.5);
  EXPECT_EQ(s->cases[0].measured.metric, MemoryMetric::kNone);
}

TEST(CalibrationSpecTest, RelativeConfigPathsResolveAgainstTheFile) {
  auto s = LoadCalibrationSpec(GPUSIM_SOURCE_DIR "/traces/calibration/maxtext_llama7b.yaml");
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->cases[0].run.model.param_scan_axis, 0);
  EXPECT_EQ(s->cases[1].run.model.param_scan_axis, 1);
  EXPECT_EQ(s->cases[1].measured.peak_bytes.value(), 40316314088);
}

struct BadCase {
  std::string name, text, error;
};

class CalibrationSpecErrorTest : public ::testing::TestWithParam<BadCase> {};

TEST_P(CalibrationSpecErrorTest, ReportsLocationAndPath) {
  const std::string path = Write(GetParam().name + ".yaml", GetParam().text);
  auto s = LoadCalibrationSpec(path);
  ASSERT_FALSE(s.ok());
  // "{tmp}/name": a path under ::testing::TempDir(), which main sets
  // (tests/test_main.cc) after these parameters are made.
  std::string want = GetParam().error;
  if (const size_t at = want.find("{tmp}"); at != std::string::npos) {
    const size_t end = want.find('\'', at);
    const std::string name = want.substr(at + 5, end - at - 5);
    want.replace(at, end - at, std::filesystem::path(::testing::TempDir() + name).lexically_normal().string());
  }
  EXPECT_EQ(std::string(s.status().message()), path + ":" + want);
}

const std::string kCfg = kConfig;
const std::string kTrace = GPUSIM_SOURCE_DIR "/traces/recorded/tracelens_h100_bert-small_inference.pt.trace.json.gz";

TEST(CalibrationSpecTest, ParsesKernelCases) {
  const std::string path = Write("kernels.yaml", "cases:\n  - name: k\n    kineto: " + kTrace +
                                                     "\n    device: h100-sxm-80gb\n    source: s\n    fit: false\n");
  auto s = LoadCalibrationSpec(path);
  ASSERT_TRUE(s.ok()) << s.status();
  ASSERT_EQ(s->cases.size(), 1u);
  EXPECT_TRUE(s->cases[0].is_kernel_case());
  EXPECT_EQ(s->cases[0].kineto_path, kTrace);
  EXPECT_EQ(s->cases[0].run.device.name, "h100-sxm-80gb");
  EXPECT_FALSE(s->cases[0].fit);
  auto shipped = LoadCalibrationSpec(GPUSIM_SOURCE_DIR "/traces/calibration/h100_kineto_kernels.yaml");
  ASSERT_TRUE(shipped.ok()) << shipped.status();
  EXPECT_TRUE(shipped->cases[0].is_kernel_case());
}

INSTANTIATE_TEST_SUITE_P(
    Errors, CalibrationSpecErrorTest,
    ::testing::Values(
        BadCase{"unknown_key", "cases:\n  - name: a\n    config: " + kCfg + "\n    sourse: x\n",
                "4:5: cases[0]: unknown key 'sourse' (did you mean 'source'?)"},
        BadCase{"duplicate_key", OneCase("    measured: {peak_bytes: 1GiB, metric: smi}\n"),
                "6:5: duplicate key 'measured' (first written at 5:5)"},
        BadCase{"metric_value",
                "cases:\n  - name: a\n    config: " + kCfg +
                    "\n    source: s\n    measured: {step_time_s: 1, peak_bytes: 1GiB, metric: smi}\n",
                "5:58: cases[0].measured.metric: expected one of memory_analysis_temp|max_memory_allocated|"
                "max_memory_reserved|nvidia_smi, got 'smi'"},
        BadCase{"missing_source", "cases:\n  - name: a\n    config: " + kCfg + "\n    fit: false\n",
                "2:5: cases[0].source: missing required key"},
        BadCase{"fit_needs_time", "cases:\n  - name: a\n    config: " + kCfg + "\n    source: s\n",
                "2:5: cases[0].measured.step_time_s: missing required key (a fit: true case needs a step "
                "time, or iteration_time_ms)"},
        BadCase{"no_config", "cases:\n  - name: a\n    config: nowhere.yaml\n    source: s\n",
                "3:13: cases[0].config: no such file '{tmp}/nowhere.yaml'"},
        BadCase{"bad_parameter", "parameters:\n  efficiency.matmull: {min: 0.1}\n" + OneCase(""),
                "2:3: parameters: unknown device parameter 'efficiency.matmull' (did you mean "
                "'efficiency.matmul'?); fittable: efficiency.matmul, efficiency.attention, "
                "efficiency.fused_attention, efficiency.memory, efficiency.collective, launch_overhead, host.op, "
                "host.module, host.megatron_op, host.megatron_module, host.dispatch, host.node, host.python_module, "
                "links.latency"},
        BadCase{"bad_bound", "parameters:\n  efficiency.memory: {min: 0.5, max: 1.5}\n" + OneCase(""),
                "2:38: parameters.efficiency.memory.max: expected a number > 0 and <= 1, got '1.5'"},
        BadCase{"bytes_without_metric",
                "cases:\n  - name: a\n    config: " + kCfg +
                    "\n    source: s\n    measured: {step_time_s: 1, peak_bytes: 1GiB}\n",
                "5:15: cases[0].measured.metric: missing required key (peak_bytes needs its metric)"},
        BadCase{"bad_set", OneCase("    set: [model.n_layer=2]\n"),
                "2:5: cases[0]: --set model.n_layer=2: model: unknown key 'n_layer' (did you mean "
                "'n_layers'?)"},
        BadCase{"duplicate_name",
                "cases:\n  - {name: a, config: " + kCfg + ", source: s, fit: false}\n  - {name: a, config: " +
                    kCfg + ", source: s, fit: false}\n",
                "3:12: cases[1].name: duplicate case name 'a'"},
        BadCase{"no_cases", "name: x\n", "1:1: cases: missing required key"},
        BadCase{"config_and_kineto",
                "cases:\n  - name: a\n    config: " + kCfg + "\n    kineto: " + kTrace + "\n    source: s\n",
                "2:5: cases[0]: expected one of 'config' (a measured run) or 'kineto' (a recorded trace), got both"},
        BadCase{"neither", "cases:\n  - name: a\n    source: s\n",
                "2:5: cases[0]: missing required key 'config' (a measured run) or 'kineto' (a recorded trace)"},
        BadCase{"kineto_measured",
                "cases:\n  - name: a\n    kineto: " + kTrace +
                    "\n    device: h100-sxm-80gb\n    measured: {peak_bytes: 1GiB}\n    source: s\n",
                "5:28: cases[0].measured.peak_bytes: not allowed in a kineto case (only step_time_s, the step's unprofiled time)"},
        BadCase{"kineto_module_calls_fraction",
                "cases:\n  - name: a\n    kineto: " + kTrace +
                    "\n    device: h100-sxm-80gb\n    module_calls: 2.5\n    source: s\n",
                "5:19: cases[0].module_calls: expected a whole number of calls"},
        BadCase{"config_module_calls",
                "cases:\n  - name: a\n    config: " + kCfg + "\n    module_calls: 3\n"
                "    measured: {step_time_s: 1}\n    source: s\n",
                "4:19: cases[0].module_calls: not allowed in a config case (it counts a kineto case's nn.Module calls)"},
        BadCase{"kineto_no_device", "cases:\n  - name: a\n    kineto: " + kTrace + "\n    source: s\n",
                "2:5: cases[0].device: missing required key"},
        BadCase{"kineto_bad_device",
                "cases:\n  - name: a\n    kineto: " + kTrace + "\n    device: nowhere/gpu.yaml\n    source: s\n",
                "4:13: cases[0].device: no such file '{tmp}/nowhere/gpu.yaml'"},
        BadCase{"kineto_no_file", "cases:\n  - name: a\n    kineto: nowhere.json.gz\n    device: h100-sxm-80gb\n",
                "3:13: cases[0].kineto: no such file '{tmp}/nowhere.json.gz'"},
        BadCase{"config_device",
                "cases:\n  - name: a\n    config: " + kCfg + "\n    device: h100-sxm-80gb\n    source: s\n",
                "4:13: cases[0].device: not allowed in a config case (the device comes from its run config); "
                "kineto cases name one"}),
    [](const ::testing::TestParamInfo<BadCase>& i) { return i.param.name; });

}  // namespace
}  // namespace gpusim::calibrate_spec_test
