// Calibration mode: simulate every case of a calibration file
// (sim/config/calibration_spec.h), fit device parameters to the measured
// step times of its `fit: true` cases, and report measured vs predicted
// before and after the fit.
//
// Note [Calibration fit]
// Each case is built, lowered and replayed once (SimulateStep); the fit then
// replays only the timed events of the lowered trace (Simulate, no
// allocator) with the trial parameters, so memory results do not change and
// a trial costs a few milliseconds. The parameters p are fitted in log space,
// u = ln p within [ln min, ln max], minimising
//   Σ_fit ((t_pred − t_meas) / t_meas)² + w · Σ_params (u − u₀)²
// (bounded Levenberg–Marquardt, least_squares.h; w = prior_weight). With
// fewer fit cases than parameters the problem is underdetermined; the prior
// term picks the answer nearest the starting values (the device file), and
// the result says so. Leave-one-out (≥ 3 fit cases): each fit case in turn is
// dropped, the rest refitted, and the dropped case predicted.
//
// Kernel cases (`kineto:` in the file) add one residual per sized op of the
// trace (kernel_measurements.h), (t_pred − t_meas) / t_meas scaled by
// √(t_meas / Σ t_meas): the squares sum to the time-weighted mean squared
// relative error, so a trace weighs as much as one step-time case however
// many kernels it holds, and within it each op counts by its share of the
// measured kernel time (as it would in a step time; thousands of
// microsecond-long, launch-bound kernels do not outvote the few that take
// the time). Leave-one-out drops step-time cases only.
#ifndef GPUSIM_SIM_CALIBRATE_CALIBRATE_H_
#define GPUSIM_SIM_CALIBRATE_CALIBRATE_H_

#include <array>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "sim/base/units.h"
#include "sim/calibrate/kernel_measurements.h"
#include "sim/config/calibration_spec.h"
#include "sim/config/spec.h"

namespace gpusim {

// Where one predicted step's time goes (SimResult's busy times).
struct TimeBreakdown {
  SimTime step;
  SimTime compute;                // compute stream busy, recompute included
  SimTime communication;          // collective stream busy
  SimTime exposed_communication;  // collective time with the compute stream idle
  SimTime recompute;              // compute spent rematerialising
};

struct CaseResult {
  std::string name;
  bool fit = false;
  std::string source, hardware, software;
  MeasuredRun measured;
  TimeBreakdown before, after;
  Bytes predicted_bytes{-1};      // for measured.metric; -1 when no metric
  // (predicted − measured) / measured; nullopt when not measured.
  std::optional<double> step_error_before, step_error_after, bytes_error;
  // Leave-one-out: predicted step and its error with this case left out of
  // the fit (fit cases, when there are >= 3 of them).
  std::optional<SimTime> loo_step;
  std::optional<double> loo_error;
};

// Predicted vs measured for the sized ops of one kernel class (or all).
struct KernelClassResult {
  int64_t kernels = 0;        // kernels of the class in the trace
  int64_t sized_kernels = 0;  // of those, in sized ops
  int64_t ops = 0;            // sized ops whose longest kernel is of the class
  SimTime measured, predicted_before, predicted_after;  // summed over those ops
  // Σ predicted / Σ measured − 1, and the RMS of the ops' relative errors.
  std::optional<double> time_error_before, time_error_after;
  std::optional<double> rms_error_before, rms_error_after;
};

struct KernelCaseResult {
  std::string name, trace, trace_device;  // trace_device: deviceProperties name
  bool fit = false;
  std::string source, hardware, software;
  int64_t kernels = 0, skipped_kernels = 0;
  std::map<std::string, int64_t> skipped;  // reason -> kernels
  std::array<KernelClassResult, kNumKernelClasses> classes{};
  KernelClassResult total;
};

struct ParameterResult {
  std::string name;
  double initial = 0, fitted = 0, min = 0, max = 0;
  bool at_bound = false;  // fitted within 1e-9 (relative) of min or max
};

struct CalibrationResult {
  std::string spec_file, spec_name;
  DeviceSpec initial_device;     // cases[0]'s device as loaded
  DeviceSpec calibrated_device;  // with the fitted parameters
  std::vector<ParameterResult> parameters;
  std::vector<CaseResult> cases;          // step-time (config) cases
  std::vector<KernelCaseResult> kernel_cases;
  int fit_cases = 0;             // step-time and kernel cases fitted
  int fit_ops = 0;               // sized ops of the fitted kernel cases
  bool underdetermined = false;  // fewer data points than parameters
  double prior_weight = 0;
  int iterations = 0, evaluations = 0;
  // Root mean square of the relative step-time error over the fit cases.
  std::optional<double> rms_error_before, rms_error_after, loo_rms_error;
};

absl::StatusOr<CalibrationResult> Calibrate(const CalibrationSpec& spec);

// LoadCalibrationSpec + Calibrate.
absl::StatusOr<CalibrationResult> CalibrateFile(const std::string& path);

// Renderers (render.cc). Text: a table per case and the parameters. JSON:
//   {"calibration": {"file", "name", "device", "calibrated_device",
//     "fit_cases", "underdetermined", "prior_weight", "iterations",
//     "evaluations", "rms_error_before", "rms_error_after", "loo_rms_error"},
//    "parameters": {NAME: {"initial", "fitted", "min", "max", "at_bound"}},
//    "cases": [{"name", "fit", "metric",
//               "measured": {"step_time_s", "peak_bytes"},
//               "predicted_before": {"step_time_s", "compute_s",
//                   "communication_s", "exposed_communication_s",
//                   "recompute_s", "peak_bytes"},
//               "predicted_after": {... as predicted_before},
//               "relative_error_before": {"step_time", "peak_bytes"},
//               "relative_error_after": {"step_time", "peak_bytes"},
//               "leave_one_out": {"step_time_s", "relative_error"} | null,
//               "source", "hardware", "software"}],
//    "kernel_cases": [{"name", "fit", "trace", "trace_device", "kernels",
//               "skipped_kernels", "skipped": {REASON: kernels},
//               "classes": {gemm|attention|memory|collective|other|all:
//                   {"kernels", "sized_kernels", "ops", "measured_s",
//                    "predicted_before_s", "predicted_after_s",
//                    "time_error_before", "time_error_after",
//                    "rms_error_before", "rms_error_after"}},
//               "source", "hardware", "software"}]}
// Unmeasured values are null; keys are stable.
std::string RenderCalibrationText(const CalibrationResult& r);
std::string RenderCalibrationJson(const CalibrationResult& r);

// A device file (configs/devices format) for the calibrated device, usable as
// `device: PATH` in a run config; its header comments name the calibration
// file, the cases and the fit's errors. Name: "<device>-calibrated".
std::string CalibratedDeviceYaml(const CalibrationResult& r);
absl::Status WriteCalibratedDevice(const CalibrationResult& r, const std::string& path);

}  // namespace gpusim

#endif  // GPUSIM_SIM_CALIBRATE_CALIBRATE_H_
