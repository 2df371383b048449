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
// the time). Leave-one-out drops step-time cases (and, below, host phases).
//
// Note [Host cost fit]
// A kineto case whose trace is a training step also gives its host phases
// (host_measurements.h, Note [Host phase spans from Kineto]): two residuals,
//   forward:  host.dispatch · D + host.python_module · M − forward span
//   backward: host.node · N − backward span
// (the prices of Note [Recorded host costs], sim/lower/eager/
// host_timeline.h), each divided by one scale for the whole fit, the mean
// over the fit cases of (forward + backward span) / 2: an ordinary least
// squares in host time, so a case weighs by the host time it measured, as in
// the offline fit (tools/collect/kineto_classes.py host_fit). Spans are
// divided by the case's profiler inflation when it gives its unprofiled
// step (measured.step_time_s); otherwise the costs fitted include the
// profiler's overhead and the result says so (notes). M comes from the
// trace's nn.Module events or the case's module_calls; with neither, the
// module term is left out, host.python_module cannot be listed, and the
// result says host.dispatch then carries the module calls' Python.
// Leave-one-out (>= 3 fit host cases): each case's host phases in turn are
// dropped, the rest refitted, and its spans predicted.
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
#include "sim/calibrate/host_measurements.h"
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

// A kineto case's host phases (Note [Host cost fit]); times in seconds.
struct HostCaseResult {
  std::string name, trace;
  bool fit = false;
  std::string absent;  // why the trace has no host phases; then nothing below
  HostMeasurements measured;
  std::string module_source;  // "trace", "case" (module_calls) or "" (none)
  std::optional<int64_t> module_calls;
  double step_time_s = 0;     // the unprofiled step; 0: not given
  std::optional<double> inflation;  // CPU span / step_time_s
  double forward_s = 0, backward_s = 0;  // the spans fitted (deflated when known)
  double forward_before_s = 0, backward_before_s = 0, forward_after_s = 0, backward_after_s = 0;
  std::optional<double> forward_error_before, backward_error_before, forward_error_after, backward_error_after;
  std::optional<double> loo_forward_error, loo_backward_error;
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
  std::vector<HostCaseResult> host_cases;  // one per kineto case
  // What the fit could not determine or had to assume, each naming the
  // parameter or case (Note [Host cost fit]).
  std::vector<std::string> notes;
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

// Note [Calibrating from one trace]
// `gpusim calibrate TRACE.json.gz --device D`: one kineto case on device D
// (fit), with the parameters that one trace determines: host.dispatch and
// host.node from its host phases (Note [Host cost fit]; host.python_module
// is held at the device's value: one forward span cannot split it from
// host.dispatch), efficiency.matmul / efficiency.memory when it has sized
// GEMM / memory ops (record_shapes=True; kernel_measurements.h). What it
// does not fit is named in the result's notes, with why; with one case
// there is no leave-one-out, and the notes say so. `step_time_s` (0: not
// given) is the step's unprofiled time. An error when nothing can be fitted.
absl::StatusOr<CalibrationResult> CalibrateTrace(const std::string& path, const DeviceSpec& device,
                                                 double step_time_s);

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
//               "source", "hardware", "software"}],
//    "host_cases": [{"name", "fit", "trace", "absent", "engine_threads",
//               "top_level_ops", "dispatches", "nodes", "module_calls",
//               "module_source", "step_time_s", "inflation",
//               "profiled": {"forward_s", "backward_s", "cpu_s"},
//               "forward": {"span_s", "predicted_before_s",
//                   "predicted_after_s", "error_before", "error_after",
//                   "leave_one_out_error"},
//               "backward": {... as forward}}],
//    "notes": [TEXT]}
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
