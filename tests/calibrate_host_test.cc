// Host costs from Kineto traces (Note [Host cost fit], sim/calibrate/
// calibrate.h): the phases and counts of a synthetic step (Note [Host phase
// spans from Kineto], Note [Dispatches from a Kineto trace]), the fit over
// the ten H200 test-size traces against the shipped host.* defaults, and
// `gpusim calibrate TRACE` on one trace.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "gtest/gtest.h"
#include "sim/calibrate/calibrate.h"
#include "sim/calibrate/host_measurements.h"
#include "sim/config/loader.h"
#include "sim/import/kineto.h"
#include "tests/cli_support.h"

namespace gpusim::calibrate_host_test {
namespace {

namespace fs = std::filesystem;

constexpr char kHostFile[] = GPUSIM_SOURCE_DIR "/traces/calibration/h200_kineto_host.yaml";
constexpr char kGpt2Trace[] = GPUSIM_SOURCE_DIR "/validation/h200_2026-12-04/kineto/gpt2_test.pt.trace.json.gz";

// One complete event; seq < 0: no "Sequence number".
std::string Ev(std::string_view cat, std::string_view name, int tid, int64_t ts, int64_t dur, int64_t seq = -1) {
  return absl::StrFormat(R"({"ph": "X", "cat": "%s", "name": "%s", "pid": 1, "tid": %d, "ts": %d, "dur": %d%s})",
                         cat, name, tid, ts, dur,
                         seq >= 0 ? absl::StrFormat(R"(, "args": {"Sequence number": %d})", seq) : "");
}

absl::StatusOr<HostMeasurements> HostOf(const std::vector<std::string>& events) {
  const fs::path path = fs::path(testing::TempDir()) / "host_step.json";
  std::ofstream(path) << "{\"traceEvents\": [\n" << absl::StrJoin(events, ",\n") << "\n]}\n";
  KinetoImportOptions o;
  o.keep_module_calls = true;
  absl::StatusOr<RecordedTrace> t = ImportKinetoTrace(path.string(), o);
  if (!t.ok()) return t.status();
  return ExtractHostMeasurements(*t);
}

// Main thread 1: a module call around aten::linear (CompositeImplicitAutograd:
// its aten::t and aten::addmm carry sequence numbers: they and the factory
// aten::empty between them, called by the decomposition, are the dispatches;
// aten::transpose inside aten::t and aten::empty inside aten::addmm ran below
// autograd), then aten::arange under no_grad (no sequence number). Engine
// thread 2: two nodes. Main thread again: the optimizer, after the backward.
std::vector<std::string> SyntheticStep() {
  return {Ev("python_function", "nn.Module: Linear_0", 1, 100, 60),
          Ev("cpu_op", "aten::linear", 1, 105, 50, 7),
          Ev("cpu_op", "aten::t", 1, 106, 10, 7),
          Ev("cpu_op", "aten::transpose", 1, 107, 5),
          Ev("cpu_op", "aten::empty", 1, 118, 1),
          Ev("cpu_op", "aten::addmm", 1, 120, 30, 7),
          Ev("cpu_op", "aten::empty", 1, 121, 2),
          Ev("cpu_op", "aten::arange", 1, 170, 10),
          Ev("cpu_op", "autograd::engine::evaluate_function: AddmmBackward0", 2, 300, 40),
          Ev("cpu_op", "aten::mm", 2, 305, 20),
          Ev("cpu_op", "autograd::engine::evaluate_function: TBackward0", 2, 350, 30),
          Ev("cpu_op", "aten::add_", 1, 500, 20, 9)};
}

TEST(HostMeasurementsTest, CountsAndSpansOfASyntheticStep) {
  absl::StatusOr<HostMeasurements> h = HostOf(SyntheticStep());
  ASSERT_TRUE(h.ok()) << h.status();
  EXPECT_EQ(h->top_level_ops, 2);  // aten::linear, aten::arange
  EXPECT_EQ(h->dispatches, 4);     // aten::t, aten::empty, aten::addmm, aten::arange
  EXPECT_EQ(h->nodes, 2);
  ASSERT_TRUE(h->module_calls.has_value());
  EXPECT_EQ(*h->module_calls, 1);
  EXPECT_EQ(h->engine_threads, 1);
  EXPECT_EQ(h->forward_span, SimTime::FromNanos(1000.0 * (300 - 105)));
  EXPECT_EQ(h->backward_span, SimTime::FromNanos(1000.0 * (380 - 300)));
  EXPECT_EQ(h->cpu_span, SimTime::FromNanos(1000.0 * (520 - 105)));
}

TEST(HostMeasurementsTest, RefusesWhatItCannotSplit) {
  std::vector<std::string> forward_only = {Ev("cpu_op", "aten::mm", 1, 100, 10, 1)};
  absl::StatusOr<HostMeasurements> h = HostOf(forward_only);
  ASSERT_FALSE(h.ok());
  EXPECT_NE(h.status().message().find("no autograd engine thread"), std::string_view::npos) << h.status();

  std::vector<std::string> two_steps = SyntheticStep();
  two_steps.push_back(Ev("user_annotation", "ProfilerStep#1", 1, 90, 500));
  two_steps.push_back(Ev("user_annotation", "ProfilerStep#2", 1, 600, 500));
  h = HostOf(two_steps);
  ASSERT_FALSE(h.ok());
  EXPECT_NE(h.status().message().find("2 ProfilerStep# ranges"), std::string_view::npos) << h.status();

  std::vector<std::string> no_modules = SyntheticStep();
  no_modules.erase(no_modules.begin());
  h = HostOf(no_modules);
  ASSERT_TRUE(h.ok()) << h.status();
  EXPECT_FALSE(h->module_calls.has_value());
}

const ParameterResult* Param(const CalibrationResult& r, std::string_view name) {
  for (const ParameterResult& p : r.parameters) {
    if (p.name == name) return &p;
  }
  return nullptr;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// The shipped host.* defaults (spec_parse.cc; Note [Recorded host costs]) were
// fitted offline to the same ten steps with the recorder's dispatch and node
// counts; the fit here counts them from the traces' CPU ops. Stated
// tolerance: each cost within 6% of its default (the counts differ by a few
// percent per case, resnet50's dispatches by more; Note [Dispatches from a
// Kineto trace] and docs/validation.md "host-calibration"); leave-one-out
// no worse than forward median 25% / max 45%, backward median 18% / max 80%
// (the offline fit's: 22% / 50%, 13% / 86%).
TEST(CalibrateHostTest, TenH200TracesReproduceTheShippedHostCosts) {
  absl::StatusOr<CalibrationResult> r = CalibrateFile(kHostFile);
  ASSERT_TRUE(r.ok()) << r.status();
  absl::StatusOr<DeviceSpec> d = LoadDeviceSpec("h200-sxm-141gb", "");
  ASSERT_TRUE(d.ok()) << d.status();
  const std::vector<std::pair<std::string_view, double>> shipped = {
      {"host.dispatch", d->host_dispatch_cost.seconds()},
      {"host.node", d->host_node_cost.seconds()},
      {"host.python_module", d->host_python_module_cost.seconds()}};
  for (const auto& [name, value] : shipped) {
    const ParameterResult* p = Param(*r, name);
    ASSERT_NE(p, nullptr) << name;
    EXPECT_FALSE(p->at_bound) << name;
    EXPECT_NEAR(p->fitted / value, 1.0, 0.06) << name << ": fitted " << p->fitted << " s, shipped " << value;
  }
  ASSERT_EQ(r->host_cases.size(), 10u);
  std::vector<double> forward, backward;
  for (const HostCaseResult& h : r->host_cases) {
    ASSERT_TRUE(h.absent.empty()) << h.name << ": " << h.absent;
    EXPECT_EQ(h.module_source, "case") << h.name;
    ASSERT_TRUE(h.inflation.has_value()) << h.name;
    EXPECT_GT(*h.inflation, 1.0) << h.name;  // the profiler slows the host
    ASSERT_TRUE(h.loo_forward_error.has_value() && h.loo_backward_error.has_value()) << h.name;
    forward.push_back(std::fabs(*h.loo_forward_error));
    backward.push_back(std::fabs(*h.loo_backward_error));
  }
  EXPECT_LE(Median(forward), 0.25);
  EXPECT_LE(*std::max_element(forward.begin(), forward.end()), 0.45);
  EXPECT_LE(Median(backward), 0.18);
  EXPECT_LE(*std::max_element(backward.begin(), backward.end()), 0.80);
  // The device file carries the fitted costs.
  const std::string yaml = CalibratedDeviceYaml(*r);
  EXPECT_NE(yaml.find(absl::StrCat("  dispatch: ", r->calibrated_device.host_dispatch_cost.ns(), "ns")),
            std::string::npos)
      << yaml;
}

// One trace: host.dispatch and host.node from its two spans (exactly
// determined: the fit meets them), the efficiencies its sized ops
// determine, and notes naming what is not fitted and the missing
// leave-one-out.
TEST(CalibrateHostTest, OneTraceFitsWhatItDetermines) {
  absl::StatusOr<DeviceSpec> d = LoadDeviceSpec("h200-sxm-141gb", "");
  ASSERT_TRUE(d.ok()) << d.status();
  absl::StatusOr<CalibrationResult> r = CalibrateTrace(kGpt2Trace, *d, 0);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_NE(Param(*r, "host.dispatch"), nullptr);
  ASSERT_NE(Param(*r, "host.node"), nullptr);
  EXPECT_NE(Param(*r, "efficiency.matmul"), nullptr);
  EXPECT_EQ(Param(*r, "host.python_module"), nullptr);
  ASSERT_EQ(r->host_cases.size(), 1u);
  const HostCaseResult& h = r->host_cases[0];
  EXPECT_FALSE(h.inflation.has_value());
  ASSERT_TRUE(h.backward_error_after.has_value());
  EXPECT_LT(std::fabs(*h.backward_error_after), 0.01);
  EXPECT_LT(std::fabs(*h.forward_error_after), 0.01);
  EXPECT_FALSE(h.loo_forward_error.has_value());
  const std::string text = RenderCalibrationText(*r);
  for (std::string_view want : {"no leave-one-out", "include the profiler's overhead", "host.python_module not fitted",
                                "efficiency.collective"}) {
    EXPECT_NE(text.find(want), std::string::npos) << want << "\n" << text;
  }
}

TEST(CalibrateHostTest, RefusesHostPythonModuleWithoutModuleCounts) {
  const fs::path dir = fs::path(testing::TempDir()) / "host_module";
  fs::create_directories(dir);
  std::ofstream(dir / "cal.yaml") << "parameters:\n  host.python_module: {min: 1.0e-7, max: 1.0e-3}\ncases:\n"
                                     "  - name: gpt2\n    kineto: "
                                  << kGpt2Trace << "\n    device: h200-sxm-141gb\n    source: test\n";
  absl::StatusOr<CalibrationResult> r = CalibrateFile((dir / "cal.yaml").string());
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("host.python_module cannot be fitted"), std::string_view::npos) << r.status();
}

// The command line: a trace needs --device; --device and --step-time are
// refused for a calibration file; a trace writes a device file with the
// fitted host costs in its host: block.
TEST(CalibrateHostTest, CommandLineForms) {
  Result r = Gpusim(absl::StrCat("calibrate ", kGpt2Trace));
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("needs --device"), std::string::npos) << r.out;
  r = Gpusim(absl::StrCat("calibrate ", kHostFile, " --step-time 0.01"));
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("--device and --step-time are for a Kineto trace"), std::string::npos) << r.out;
  const fs::path out = fs::path(testing::TempDir()) / "gpt2_host.yaml";
  r = Gpusim(absl::StrCat("calibrate ", kGpt2Trace, " --device h200-sxm-141gb --step-time 0.008427 --out ", out.string()));
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("Host (Kineto CPU ops)"), std::string::npos) << r.out;
  absl::StatusOr<DeviceSpec> d = LoadDeviceSpec(out.string(), "");
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_TRUE(d->host_recorded_given);
  // The rest of the device as the device file has it (a replayed PyTorch
  // step needs the compute capability).
  absl::StatusOr<DeviceSpec> h200 = LoadDeviceSpec("h200-sxm-141gb", "");
  ASSERT_TRUE(h200.ok()) << h200.status();
  EXPECT_EQ(d->cc_major, h200->cc_major);
  EXPECT_EQ(d->cc_minor, h200->cc_minor);
  EXPECT_EQ(d->kernel_model, h200->kernel_model);
  EXPECT_EQ(d->peak_fp8, h200->peak_fp8);
  EXPECT_EQ(d->max_threads_per_sm, h200->max_threads_per_sm);
}

}  // namespace
}  // namespace gpusim::calibrate_host_test
