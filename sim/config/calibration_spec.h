// Calibration files: measured runs that gpusim's predictions are checked
// against and device parameters are fitted to (sim/calibrate/calibrate.h).
// Parsed strictly like every config file (unknown keys rejected with a
// suggestion; errors "FILE:LINE:COL: key.path: message").
//
//   name: maxtext-llama2-7b                 # optional
//   description: ...                        # optional
//   parameters:                             # optional; default: the four
//     efficiency.matmul: {min: 0.05, max: 1}  #   efficiencies in [0.05, 1]
//   prior_weight: 1e-4                      # optional, >= 0 (see below)
//   cases:
//     - name: axis0                         # unique
//       config: ../../configs/llama7b.yaml  # relative to this file
//       set: [model.param_scan_axis=0]      # --set overrides, optional
//       measured:
//         step_time_s: 0.434                # seconds; required when fit
//         # or iteration_time_ms: 1234.5    # Megatron-LM's log "elapsed time per
//                                           #   iteration (ms)" (a megatron: config)
//         peak_bytes: 27134419432           # a byte size; needs metric
//         metric: memory_analysis_temp      # | max_memory_allocated |
//                                           #   max_memory_reserved | nvidia_smi
//       hardware: 2x H100-SXM-80GB          # free text, optional
//       software: MaxText 4bf3beaa, JAX ... # free text, optional
//       source: https://...                 # required: where the numbers are from
//       fit: true                           # default true
//     - name: bert_kernels                  # a kernel case: per-op measurements
//       kineto: ../recorded/x.pt.trace.json.gz  # a Kineto trace (relative to this file)
//       device: h100-sxm-80gb               # NAME or PATH, as in a run config
//       source: https://...                 # required; hardware, software, fit as above
//       measured: {step_time_s: 0.0078}     # optional: the step unprofiled (host spans
//                                           #   lose the profiler's overhead)
//       module_calls: 51                    # optional: the forward's nn.Module calls when
//                                           #   the trace has no nn.Module events
//
// A case has exactly one of `config` (a run with measured step time / peak)
// or `kineto` (kernel durations of a recorded trace as per-op measurements,
// sim/calibrate/kernel_measurements.h, and its host phases,
// sim/calibrate/host_measurements.h); a kineto case takes no `set`, of
// `measured` only step_time_s, and needs `device`.
//
// prior_weight w adds w·Σ ln²(p / p₀) to the least-squares objective: with
// fewer fit cases than parameters the fit then moves each parameter as little
// as the data allows (a deterministic, regularised answer).
//
// Each case's run config is loaded (LoadRunSpec with its `set`) while the
// file is read; its errors come back prefixed with the case's location:
//   CAL:LINE:COL: cases[1]: <the run config's own error>
// Every case must simulate the same device (the one being calibrated).
#ifndef GPUSIM_SIM_CONFIG_CALIBRATION_SPEC_H_
#define GPUSIM_SIM_CONFIG_CALIBRATION_SPEC_H_

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "sim/base/units.h"
#include "sim/config/node.h"
#include "sim/config/spec.h"

namespace gpusim {

// What a measured peak means (which number the framework reported).
enum class MemoryMetric {
  kNone,
  kMemoryAnalysisTemp,   // XLA compiled.memory_analysis().temp_size_in_bytes
  kMaxMemoryAllocated,   // torch.cuda.max_memory_allocated()
  kMaxMemoryReserved,    // torch.cuda.max_memory_reserved()
  kNvidiaSmi,            // nvidia-smi used memory (reserved + CUDA context)
};
std::string_view MemoryMetricName(MemoryMetric m);

struct MeasuredRun {
  double step_time_s = 0;  // 0: not measured
  // Megatron-LM's "elapsed time per iteration (ms)" as written (then
  // step_time_s = it / 1000); 0: the case gave step_time_s.
  double iteration_time_ms = 0;
  Bytes peak_bytes{-1};    // -1: not measured
  MemoryMetric metric = MemoryMetric::kNone;
};

struct CalibrationCase {
  std::string name;
  std::string config_path;              // resolved against the file's folder; empty for kineto
  std::string kineto_path;              // a kernel case's trace, resolved likewise; else empty
  std::vector<std::string> overrides;   // `set`
  MeasuredRun measured;                 // kineto: step_time_s only (0: not given)
  int64_t module_calls = -1;            // kineto: the forward's nn.Module calls; -1: not given
  std::string hardware, software, source;
  bool fit = true;
  SourceLocation location;              // the case's mapping
  RunSpec run;                          // the loaded run config (kineto: only .device)
  bool is_kernel_case() const { return !kineto_path.empty(); }
};

// A device parameter calibration may fit: a positive number read from and
// written to a DeviceSpec.
struct DeviceParameter {
  std::string_view name;      // the device-file key path: "efficiency.matmul"
  std::string_view doc;
  double default_min, default_max;
  double (*get)(const DeviceSpec&);
  void (*set)(DeviceSpec&, double);
};
// efficiency.{matmul,attention,memory,collective} (fractions),
// launch_overhead and links.latency (seconds).
const std::vector<DeviceParameter>& DeviceParameters();
// nullptr when unknown.
const DeviceParameter* FindDeviceParameter(std::string_view name);

struct FitParameter {
  std::string name;  // a DeviceParameters() name
  double min = 0, max = 0;
};

struct CalibrationSpec {
  std::string source_file;
  std::string name, description;
  std::vector<FitParameter> parameters;  // in file order, or the defaults
  double prior_weight = 1e-4;
  std::vector<CalibrationCase> cases;
};

absl::StatusOr<CalibrationSpec> LoadCalibrationSpec(const std::string& path);

}  // namespace gpusim

#endif  // GPUSIM_SIM_CONFIG_CALIBRATION_SPEC_H_
