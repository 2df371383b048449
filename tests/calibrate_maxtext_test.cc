// The MaxText Llama2-7B calibration (traces/calibration/maxtext_llama7b.yaml):
// issue 6's done-when, and the calibrated device file as a run's device.
#include <cmath>
#include <fstream>
#include <string>

#include "gtest/gtest.h"
#include "sim/calibrate/calibrate.h"
#include "sim/config/loader.h"
#include "sim/step/step.h"

namespace gpusim::calibrate_maxtext_test {
namespace {

constexpr char kFile[] = GPUSIM_SOURCE_DIR "/traces/calibration/maxtext_llama7b.yaml";

const CaseResult& Case(const CalibrationResult& r, const std::string& name) {
  for (const CaseResult& c : r.cases) {
    if (c.name == name) return c;
  }
  ADD_FAILURE() << "no case " << name;
  return r.cases.front();
}

TEST(CalibrateMaxTextTest, FitsAxis0AndPredictsAxis1) {
  auto r = CalibrateFile(kFile);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->cases.size(), 2u);
  EXPECT_EQ(r->fit_cases, 1);
  EXPECT_TRUE(r->underdetermined);  // 1 case, 4 efficiencies
  const CaseResult& a0 = Case(*r, "param_scan_axis_0");
  const CaseResult& a1 = Case(*r, "param_scan_axis_1");
  EXPECT_TRUE(a0.fit);
  EXPECT_FALSE(a1.fit);
  // Done-when: calibrated axis 0 within 5% of 0.434 s, axis 1 within 2%.
  ASSERT_TRUE(a0.step_error_after.has_value() && a1.step_error_after.has_value());
  EXPECT_LT(std::fabs(*a0.step_error_after), 0.05);
  EXPECT_LT(std::fabs(*a0.step_error_after), 1e-3);  // one case: fitted exactly
  EXPECT_LT(std::fabs(*a1.step_error_after), 0.02);
  EXPECT_GT(std::fabs(*a0.step_error_before), std::fabs(*a0.step_error_after));
  // Axis 1 stays slower (the transposes) by about the measured 16 ms.
  const double gap = a1.after.step.seconds() - a0.after.step.seconds();
  EXPECT_GT(gap, 0.010);
  EXPECT_LT(gap, 0.025);
  // Memory: XLA temp is the metric; fitting time does not change it.
  EXPECT_EQ(a0.measured.metric, MemoryMetric::kMemoryAnalysisTemp);
  EXPECT_EQ(a0.measured.peak_bytes.value(), 27134419432);
  EXPECT_EQ(a1.measured.peak_bytes.value(), 40316314088);
  EXPECT_GT(a1.predicted_bytes, a0.predicted_bytes);
  // Breakdown is consistent.
  EXPECT_LE(a0.after.exposed_communication, a0.after.communication);
  EXPECT_LE(a0.after.recompute, a0.after.compute);
  for (const ParameterResult& p : r->parameters) {
    EXPECT_GE(p.fitted, p.min);
    EXPECT_LE(p.fitted, p.max);
  }
}

TEST(CalibrateMaxTextTest, CalibratedDeviceFileRunsAndReproducesTheFit) {
  auto r = CalibrateFile(kFile);
  ASSERT_TRUE(r.ok()) << r.status();
  const std::string path = ::testing::TempDir() + "/h100-calibrated.yaml";
  ASSERT_TRUE(WriteCalibratedDevice(*r, path).ok());
  auto d = LoadDeviceSpec(path);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->name, "h100-sxm-80gb-calibrated");
  EXPECT_NEAR(d->matmul_efficiency, r->calibrated_device.matmul_efficiency, 1e-9);
  EXPECT_DOUBLE_EQ(d->hbm_bandwidth, r->initial_device.hbm_bandwidth);
  EXPECT_EQ(d->cuda_total, r->initial_device.cuda_total);
  auto spec = LoadRunSpec(GPUSIM_SOURCE_DIR "/configs/llama7b.yaml",
                          {"model.param_scan_axis=1", "device=" + path});
  ASSERT_TRUE(spec.ok()) << spec.status();
  auto step = SimulateStep(*spec);
  ASSERT_TRUE(step.ok()) << step.status();
  EXPECT_NEAR(step->sim.step_time.seconds(), Case(*r, "param_scan_axis_1").after.step.seconds(), 1e-6);
}

TEST(CalibrateMaxTextTest, JsonHasTheDocumentedKeys) {
  auto r = CalibrateFile(kFile);
  ASSERT_TRUE(r.ok()) << r.status();
  const std::string json = RenderCalibrationJson(*r);
  for (const char* key : {"\"cases\"", "\"parameters\"", "\"name\"", "\"metric\"", "\"measured\"",
                          "\"predicted_before\"", "\"predicted_after\"", "\"relative_error_after\"",
                          "\"exposed_communication_s\"", "\"recompute_s\"", "\"efficiency.matmul\"",
                          "\"leave_one_out\"", "\"memory_analysis_temp\""}) {
    EXPECT_NE(json.find(key), std::string::npos) << key;
  }
  const std::string text = RenderCalibrationText(*r);
  EXPECT_NE(text.find("param_scan_axis_1"), std::string::npos);
  EXPECT_NE(text.find("underdetermined"), std::string::npos);
}

}  // namespace
}  // namespace gpusim::calibrate_maxtext_test
