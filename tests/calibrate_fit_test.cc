// Calibration recovers a known device parameter from synthetic measurements
// (gpusim's own predictions on a device with efficiency.matmul = 0.6), with
// leave-one-out on three fit cases.
#include <cmath>
#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "gtest/gtest.h"
#include "sim/calibrate/calibrate.h"
#include "sim/config/loader.h"
#include "sim/step/step.h"

namespace gpusim::calibrate_fit_test {
namespace {

constexpr char kConfig[] = GPUSIM_SOURCE_DIR "/configs/llama7b.yaml";

double StepAt(const std::vector<std::string>& set) {
  auto spec = LoadRunSpec(kConfig, set);
  EXPECT_TRUE(spec.ok()) << spec.status();
  auto r = SimulateStep(*spec);
  EXPECT_TRUE(r.ok()) << r.status();
  return r->sim.step_time.seconds();
}

TEST(CalibrateFitTest, RecoversAKnownMatmulEfficiency) {
  const std::vector<std::string> seqs = {"1024", "2048", "4096", "8192"};
  std::string yaml = "name: synthetic\nprior_weight: 0\nparameters:\n  efficiency.matmul: {min: 0.05, max: 1}\n"
                     "cases:\n";
  for (size_t i = 0; i < seqs.size(); ++i) {
    const std::vector<std::string> set = {"model.n_layers=2", "batch.seq_len=" + seqs[i]};
    std::vector<std::string> truth = set;
    truth.push_back("device.efficiency.matmul=0.6");
    absl::StrAppend(&yaml, "  - name: s", seqs[i], "\n    config: ", kConfig, "\n    set: [", set[0], ", ", set[1],
                    "]\n    measured: {step_time_s: ", absl::StrFormat("%.12g", StepAt(truth)),
                    "}\n    source: synthetic\n    fit: ", i < 3 ? "true" : "false", "\n");
  }
  const std::string path = ::testing::TempDir() + "/synthetic.yaml";
  std::ofstream(path) << yaml;
  auto r = CalibrateFile(path);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->fit_cases, 3);
  EXPECT_FALSE(r->underdetermined);
  ASSERT_EQ(r->parameters.size(), 1u);
  EXPECT_NEAR(r->parameters[0].initial, 0.80, 1e-12);
  EXPECT_NEAR(r->parameters[0].fitted, 0.6, 1e-3);
  for (const CaseResult& c : r->cases) {
    EXPECT_LT(std::fabs(*c.step_error_after), 1e-4) << c.name;
    EXPECT_GT(std::fabs(*c.step_error_before), 0.01) << c.name;
    if (c.fit) {
      ASSERT_TRUE(c.loo_error.has_value()) << c.name;
      EXPECT_LT(std::fabs(*c.loo_error), 1e-3) << c.name;
    } else {
      EXPECT_FALSE(c.loo_error.has_value());
    }
  }
  ASSERT_TRUE(r->loo_rms_error.has_value());
  EXPECT_LT(*r->loo_rms_error, 1e-3);
}

}  // namespace
}  // namespace gpusim::calibrate_fit_test
