// Calibration from Megatron-LM per-iteration times (measured:
// iteration_time_ms, a megatron: run config): the host costs of small,
// host-bound launch lines are recovered from synthetic measurements (gpusim's
// own predictions with host.megatron_op = 11 us, host.megatron_module = 40 us), every
// pipeline rank re-timed per trial.
#include <cmath>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "gtest/gtest.h"
#include "sim/calibrate/calibrate.h"
#include "sim/config/loader.h"
#include "sim/step/megatron_step.h"

namespace gpusim::calibrate_megatron_test {
namespace {

std::string WriteLaunch(const std::string& name, const std::string& extra) {
  const std::string path = ::testing::TempDir() + "/" + name + ".yaml";
  std::ofstream(path) << "device: h100-sxm-80gb\nmegatron:\n  world_size: 2\n  args: \"--num-layers 4 "
                         "--hidden-size 256 --num-attention-heads 4 --seq-length 128 --micro-batch-size 1 "
                         "--tokenizer-type NullTokenizer --vocab-size 1000 --bf16 "
                      << extra << "\"\n";
  return path;
}

double IterationMs(const std::string& config, const std::vector<std::string>& set) {
  auto spec = LoadRunSpec(config, set);
  EXPECT_TRUE(spec.ok()) << spec.status();
  auto r = SimulateMegatron(*spec);
  EXPECT_TRUE(r.ok()) << r.status();
  return r->step_time.seconds() * 1e3;
}

TEST(CalibrateMegatronTest, RecoversHostCostsFromIterationTimes) {
  const std::vector<std::pair<std::string, std::string>> launches = {
      {"dp2", "--global-batch-size 4"},
      {"pp2", "--pipeline-model-parallel-size 2 --global-batch-size 8"},
      {"dp2_recompute", "--global-batch-size 2 --recompute-granularity full --recompute-method uniform"},
      {"dp2_gb8", "--global-batch-size 8"},
  };
  // Note [Megatron host costs]: a launch line's host work is priced by
  // host.megatron_op / megatron_module (h100-sxm-80gb gives the module's;
  // the kernel's falls back to host.op).
  const std::vector<std::string> truth = {"device.host.megatron_op=11us", "device.host.megatron_module=40us"};
  std::string yaml =
      "name: megatron-iterations\nprior_weight: 0\nparameters:\n  host.megatron_op: {min: 1e-7, max: 1e-3}\n"
      "  host.megatron_module: {min: 1e-7, max: 1e-3}\ncases:\n";
  for (size_t i = 0; i < launches.size(); ++i) {
    const std::string config = WriteLaunch(launches[i].first, launches[i].second);
    absl::StrAppend(&yaml, "  - name: ", launches[i].first, "\n    config: ", config,
                    "\n    measured: {iteration_time_ms: ", absl::StrFormat("%.12g", IterationMs(config, truth)),
                    "}\n    source: synthetic\n    fit: ", i < 3 ? "true" : "false", "\n");
  }
  const std::string path = ::testing::TempDir() + "/megatron_iterations.yaml";
  std::ofstream(path) << yaml;
  auto r = CalibrateFile(path);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->parameters.size(), 2u);
  EXPECT_NEAR(r->parameters[0].initial, 29.6e-6, 1e-12);  // Note [Host cost per kernel]
  EXPECT_NEAR(r->parameters[0].fitted, 11e-6, 0.2e-6);
  EXPECT_NEAR(r->parameters[1].fitted, 40e-6, 1e-6);
  for (const CaseResult& c : r->cases) {
    EXPECT_GT(c.measured.iteration_time_ms, 0) << c.name;
    EXPECT_GT(std::fabs(*c.step_error_before), 0.05) << c.name;
    EXPECT_LT(std::fabs(*c.step_error_after), 1e-3) << c.name;
  }
}

TEST(CalibrateMegatronTest, StepTimeAndIterationTimeAreExclusive) {
  const std::string config = WriteLaunch("both", "--global-batch-size 2");
  const std::string path = ::testing::TempDir() + "/megatron_both.yaml";
  std::ofstream(path) << "cases:\n  - name: a\n    config: " << config
                      << "\n    measured: {step_time_s: 1, iteration_time_ms: 1000}\n    source: x\n";
  auto r = LoadCalibrationSpec(path);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("measured.iteration_time_ms: expected one of step_time_s or "
                                      "iteration_time_ms, got both"),
            std::string::npos)
      << r.status();
}

}  // namespace
}  // namespace gpusim::calibrate_megatron_test
