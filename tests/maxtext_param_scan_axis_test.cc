// The MaxText param_scan_axis report (../shared/reference/measurements.md §A,
// measured figures read from traces/calibration/maxtext_llama7b.yaml): the
// temp difference between the two axes and what makes it up.
#include <cmath>
#include <map>
#include <string>

#include "gtest/gtest.h"
#include "sim/config/calibration_spec.h"
#include "sim/report/explain.h"
#include "sim/step/step.h"

namespace gpusim::maxtext_param_scan_axis_test {
namespace {

constexpr char kFile[] = GPUSIM_SOURCE_DIR "/traces/calibration/maxtext_llama7b.yaml";

struct Axes {
  std::map<std::string, Bytes> measured;  // by case name
  std::map<std::string, StepReport> run;
};

const Axes& Runs() {
  static const Axes* axes = [] {
    auto* a = new Axes;
    auto spec = LoadCalibrationSpec(kFile);
    EXPECT_TRUE(spec.ok()) << spec.status();
    for (const CalibrationCase& c : spec->cases) {
      a->measured[c.name] = c.measured.peak_bytes;
      auto r = SimulateStep(c.run);
      EXPECT_TRUE(r.ok()) << r.status();
      a->run.emplace(c.name, *std::move(r));
    }
    return a;
  }();
  return *axes;
}

TEST(MaxTextParamScanAxis, TempDifferenceIsTheTransposedCopy) {
  const Axes& a = Runs();
  ASSERT_EQ(a.run.size(), 2u);
  const StepReport& r0 = a.run.at("param_scan_axis_0");
  const StepReport& r1 = a.run.at("param_scan_axis_1");
  const double measured = static_cast<double>(a.measured.at("param_scan_axis_1").value() -
                                              a.measured.at("param_scan_axis_0").value());
  const double predicted = static_cast<double>(r1.temp.value() - r0.temp.value());
  // Done-when: within 5% of the measured 13,181,894,656 B.
  EXPECT_LT(std::fabs(predicted / measured - 1), 0.05) << predicted << " vs " << measured;
  // The transposed copy (Flax transpose_to_front) is live at the axis-1
  // peak — the backward loop reads it — and accounts for >= 90% of the
  // difference.
  int64_t transposed = 0;
  for (const PeakBuffer& b : BuffersAtPeak(r1)) {
    if (b.origin.rfind("transposed copy of stacked params", 0) == 0) transposed += b.bytes.value();
  }
  EXPECT_GE(static_cast<double>(transposed), 0.9 * predicted);
  for (const PeakBuffer& b : BuffersAtPeak(r0)) {
    EXPECT_EQ(b.origin.rfind("transposed copy", 0), std::string::npos) << b.name;
  }
  // Argument and output within 0.1% of the seed (same for both axes).
  EXPECT_EQ(r0.argument.value(), 40430575628);
  EXPECT_LT(std::fabs(static_cast<double>(r1.output.value()) / 40430494092.0 - 1), 1e-3);
}

}  // namespace
}  // namespace gpusim::maxtext_param_scan_axis_test
