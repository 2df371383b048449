// The calibration fit; see calibrate.h, Note [Calibration fit].
#include "sim/calibrate/calibrate.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "sim/alloc/allocator.h"
#include "sim/base/status.h"
#include "sim/calibrate/least_squares.h"
#include "sim/device/timing.h"
#include "sim/engine/engine.h"
#include "sim/step/megatron_step.h"
#include "sim/step/step.h"

namespace gpusim {
namespace {

// One case, simulated once; re-timed per trial parameter vector. A
// Megatron-LM launch line keeps one trace per pipeline stage, re-timed
// together (Note [Megatron step time], sim/step/megatron_step.h).
struct Prepared {
  const CalibrationCase* spec;
  std::vector<RunSpec> runs;  // per trace: its rank's run
  std::vector<Trace> traces;
  TimeBreakdown before;
  Bytes predicted_bytes{-1};
  std::vector<MegatronSlotEvents> slots;  // per trace of a launch line: its pipeline slots
};

// One kernel case's measurements.
struct PreparedKernels {
  const CalibrationCase* spec;
  KernelMeasurements m;
};

SimTime PredictOp(const KernelMeasurement& op, const DeviceSpec& d) { return EventDuration(op.event, d); }

TimeBreakdown Breakdown(const SimResult& s) {
  return {s.step_time, s.compute_busy, s.collective_busy, s.exposed_communication, s.recompute_busy};
}

Bytes PredictedBytes(const StepReport& r, MemoryMetric metric) {
  const bool has_allocator = !r.sim.allocator_name.empty();
  switch (metric) {
    case MemoryMetric::kNone:
      return Bytes(-1);
    case MemoryMetric::kMemoryAnalysisTemp:
      return r.temp;
    case MemoryMetric::kMaxMemoryAllocated:
      return has_allocator ? r.sim.allocator.peak_allocated : r.peak;
    case MemoryMetric::kMaxMemoryReserved:
      return has_allocator ? r.sim.allocator.peak_reserved : r.peak;
    case MemoryMetric::kNvidiaSmi:
      return (has_allocator ? r.sim.allocator.peak_reserved : r.peak) + r.spec.device.context_reserve;
  }
  return Bytes(-1);
}

DeviceSpec WithParameters(DeviceSpec d, const std::vector<FitParameter>& params,
                          const std::vector<double>& values) {
  for (size_t i = 0; i < params.size(); ++i) FindDeviceParameter(params[i].name)->set(d, values[i]);
  return d;
}

absl::StatusOr<TimeBreakdown> Time(const Prepared& c, const std::vector<FitParameter>& params,
                                   const std::vector<double>& values) {
  // A fresh allocator per trial: its device calls are timed too (engine.h,
  // Note [Allocator time]), and a cudaFree's drain depends on the timing.
  std::vector<MegatronRankTimes> ranks;
  TimeBreakdown slowest;
  for (size_t i = 0; i < c.traces.size(); ++i) {
    const RunSpec& run = c.runs[i];
    ASSIGN_OR_RETURN(std::unique_ptr<Allocator> alloc, MakeAllocator(run.allocator, run.device.usable()));
    ASSIGN_OR_RETURN(SimResult s, Simulate(c.traces[i], WithParameters(run.device, params, values), alloc.get()));
    if (i == 0 || s.step_time > slowest.step) slowest = Breakdown(s);
    if (run.megatron.present) ranks.push_back(RankTimesOf(c.slots[i], s));
  }
  if (!ranks.empty()) {
    ASSIGN_OR_RETURN(const MegatronPipelineTimes pipe,
                     SimulatePipeline(ranks, c.runs[0], WithParameters(c.runs[0].device, params, values)));
    slowest.step = pipe.step;
  }
  return slowest;
}

double RelError(double predicted, double measured) { return (predicted - measured) / measured; }

struct Fit {
  std::vector<double> values;
  int iterations = 0, evaluations = 0;
};

// Fits `params` to the fit cases in `cases` except `skip` (-1: none).
absl::StatusOr<Fit> FitParameters(const std::vector<Prepared>& cases, const std::vector<PreparedKernels>& kernels,
                                  const std::vector<FitParameter>& params, const std::vector<double>& initial,
                                  double prior_weight, int skip) {
  LeastSquaresProblem p;
  for (size_t i = 0; i < params.size(); ++i) {
    p.x0.push_back(std::log(initial[i]));
    p.lower.push_back(std::log(params[i].min));
    p.upper.push_back(std::log(params[i].max));
  }
  p.data_residuals = 0;
  for (size_t k = 0; k < cases.size(); ++k) {
    if (cases[k].spec->fit && static_cast<int>(k) != skip) ++p.data_residuals;
  }
  for (const PreparedKernels& kc : kernels) {
    if (kc.spec->fit) p.data_residuals += kc.m.ops.size();
  }
  absl::Status error;
  const double sqrt_w = std::sqrt(prior_weight);
  p.residuals = [&](const std::vector<double>& u) {
    std::vector<double> values(u.size()), r;
    for (size_t i = 0; i < u.size(); ++i) values[i] = std::exp(u[i]);
    for (size_t k = 0; k < cases.size(); ++k) {
      const CalibrationCase& c = *cases[k].spec;
      if (!c.fit || static_cast<int>(k) == skip) continue;
      absl::StatusOr<TimeBreakdown> t = Time(cases[k], params, values);
      if (!t.ok()) {
        if (error.ok()) error = t.status();
        r.push_back(0);
        continue;
      }
      r.push_back(RelError(t->step.seconds(), c.measured.step_time_s));
    }
    if (!kernels.empty()) {
      const DeviceSpec d = WithParameters(kernels[0].spec->run.device, params, values);
      for (const PreparedKernels& kc : kernels) {
        if (!kc.spec->fit || kc.m.ops.empty()) continue;
        double total = 0;
        for (const KernelMeasurement& op : kc.m.ops) total += op.measured.seconds();
        for (const KernelMeasurement& op : kc.m.ops) {
          const double w = std::sqrt(op.measured.seconds() / total);
          r.push_back(w * RelError(PredictOp(op, d).seconds(), op.measured.seconds()));
        }
      }
    }
    for (size_t i = 0; i < u.size(); ++i) r.push_back(sqrt_w * (u[i] - p.x0[i]));
    return r;
  };
  LeastSquaresResult res = SolveBoundedLeastSquares(p);
  RETURN_IF_ERROR(error);
  Fit f;
  for (double u : res.x) f.values.push_back(std::exp(u));
  f.iterations = res.iterations;
  f.evaluations = res.evaluations;
  return f;
}

std::optional<double> Rms(const std::vector<double>& v) {
  if (v.empty()) return std::nullopt;
  double s = 0;
  for (double x : v) s += x * x;
  return std::sqrt(s / static_cast<double>(v.size()));
}

KernelCaseResult KernelResult(const PreparedKernels& kc, const DeviceSpec& before, const DeviceSpec& after) {
  const CalibrationCase& c = *kc.spec;
  KernelCaseResult out;
  out.name = c.name;
  out.fit = c.fit;
  out.source = c.source;
  out.hardware = c.hardware;
  out.software = c.software;
  out.trace = kc.m.trace;
  out.trace_device = kc.m.device_name;
  out.kernels = kc.m.kernels;
  out.skipped_kernels = kc.m.skipped_kernels;
  out.skipped = kc.m.skipped;
  std::array<std::vector<double>, kNumKernelClasses + 1> err_before, err_after;
  for (size_t i = 0; i < kNumKernelClasses; ++i) {
    out.classes[i].kernels = kc.m.classes[i].kernels;
    out.classes[i].sized_kernels = kc.m.classes[i].sized_kernels;
    out.total.kernels += kc.m.classes[i].kernels;
    out.total.sized_kernels += kc.m.classes[i].sized_kernels;
  }
  for (const KernelMeasurement& op : kc.m.ops) {
    const size_t i = static_cast<size_t>(op.kernel_class);
    const SimTime b = PredictOp(op, before), a = PredictOp(op, after);
    for (size_t slot : {i, static_cast<size_t>(kNumKernelClasses)}) {
      KernelClassResult& r = slot == i ? out.classes[i] : out.total;
      ++r.ops;
      r.measured += op.measured;
      r.predicted_before += b;
      r.predicted_after += a;
      err_before[slot].push_back(RelError(b.seconds(), op.measured.seconds()));
      err_after[slot].push_back(RelError(a.seconds(), op.measured.seconds()));
    }
  }
  for (size_t slot = 0; slot <= kNumKernelClasses; ++slot) {
    KernelClassResult& r = slot < kNumKernelClasses ? out.classes[slot] : out.total;
    if (r.ops == 0 || r.measured.ns() <= 0) continue;
    r.time_error_before = RelError(r.predicted_before.seconds(), r.measured.seconds());
    r.time_error_after = RelError(r.predicted_after.seconds(), r.measured.seconds());
    r.rms_error_before = Rms(err_before[slot]);
    r.rms_error_after = Rms(err_after[slot]);
  }
  return out;
}

}  // namespace

absl::StatusOr<CalibrationResult> Calibrate(const CalibrationSpec& spec) {
  if (spec.cases.empty()) return absl::InvalidArgumentError(absl::StrCat(spec.source_file, ": no cases"));
  CalibrationResult out;
  out.spec_file = spec.source_file;
  out.spec_name = spec.name;
  out.prior_weight = spec.prior_weight;
  out.initial_device = spec.cases[0].run.device;

  std::vector<Prepared> prepared;
  std::vector<PreparedKernels> kernels;
  for (const CalibrationCase& c : spec.cases) {
    if (c.is_kernel_case()) {
      absl::StatusOr<KernelMeasurements> m = LoadKernelMeasurements(c.kineto_path);
      if (!m.ok()) {
        return absl::Status(m.status().code(), absl::StrCat(c.location.ToString(), ": case '", c.name,
                                                            "': ", m.status().message()));
      }
      if (c.fit && !m->ops.empty()) {
        ++out.fit_cases;
        out.fit_ops += static_cast<int>(m->ops.size());
      }
      kernels.push_back({&c, *std::move(m)});
      continue;
    }
    auto failed = [&](const absl::Status& s) {
      return absl::Status(s.code(), absl::StrCat(c.location.ToString(), ": case '", c.name, "': ", s.message()));
    };
    Prepared p{&c, {}, {}, {}, Bytes(-1), {}};
    if (c.run.megatron.present) {
      // Megatron's log reports the memory of the last rank.
      absl::StatusOr<MegatronReport> m = SimulateMegatron(c.run);
      if (!m.ok()) return failed(m.status());
      // The slowest rank's breakdown with the pipeline's step, as Time gives it.
      size_t slow = 0;
      for (size_t i = 0; i < m->ranks.size(); ++i) {
        if (m->ranks[i].report.sim.step_time > m->ranks[slow].report.sim.step_time) slow = i;
      }
      p.before = Breakdown(m->ranks[slow].report.sim);
      p.before.step = m->step_time;
      p.predicted_bytes = PredictedBytes(m->ranks[m->last].report, c.measured.metric);
      for (MegatronRank& k : m->ranks) {
        p.runs.push_back(k.report.spec);
        p.traces.push_back(std::move(k.report.lowered.trace));
        p.slots.push_back(std::move(k.slots));
      }
    } else {
      absl::StatusOr<StepReport> r = SimulateStep(c.run);
      if (!r.ok()) return failed(r.status());
      p.before = Breakdown(r->sim);
      p.predicted_bytes = PredictedBytes(*r, c.measured.metric);
      p.runs.push_back(c.run);
      p.traces.push_back(std::move(r->lowered.trace));
    }
    prepared.push_back(std::move(p));
    if (c.fit) ++out.fit_cases;
  }

  std::vector<double> initial;
  for (const FitParameter& fp : spec.parameters) {
    initial.push_back(FindDeviceParameter(fp.name)->get(out.initial_device));
  }
  const int kernel_fit_cases = static_cast<int>(std::count_if(
      kernels.begin(), kernels.end(), [](const PreparedKernels& k) { return k.spec->fit && !k.m.ops.empty(); }));
  const int data_points = out.fit_cases - kernel_fit_cases + out.fit_ops;
  out.underdetermined = data_points < static_cast<int>(spec.parameters.size());
  std::vector<double> fitted = initial;
  if (out.fit_cases > 0) {
    ASSIGN_OR_RETURN(Fit f, FitParameters(prepared, kernels, spec.parameters, initial, spec.prior_weight, -1));
    fitted = f.values;
    out.iterations = f.iterations;
    out.evaluations = f.evaluations;
  }
  for (size_t i = 0; i < spec.parameters.size(); ++i) {
    const FitParameter& fp = spec.parameters[i];
    ParameterResult pr{fp.name, initial[i], fitted[i], fp.min, fp.max, false};
    pr.at_bound = std::fabs(fitted[i] - fp.min) <= 1e-9 * fp.min || std::fabs(fitted[i] - fp.max) <= 1e-9 * fp.max;
    out.parameters.push_back(pr);
  }
  out.calibrated_device = WithParameters(out.initial_device, spec.parameters, fitted);
  out.calibrated_device.name = absl::StrCat(out.initial_device.name, "-calibrated");

  std::vector<double> err_before, err_after, err_loo;
  const bool loo = out.fit_cases - kernel_fit_cases >= 3;
  for (size_t k = 0; k < prepared.size(); ++k) {
    const Prepared& p = prepared[k];
    const CalibrationCase& c = *p.spec;
    CaseResult cr;
    cr.name = c.name;
    cr.fit = c.fit;
    cr.source = c.source;
    cr.hardware = c.hardware;
    cr.software = c.software;
    cr.measured = c.measured;
    cr.before = p.before;
    ASSIGN_OR_RETURN(cr.after, Time(p, spec.parameters, fitted));
    cr.predicted_bytes = p.predicted_bytes;
    if (c.measured.step_time_s > 0) {
      cr.step_error_before = RelError(cr.before.step.seconds(), c.measured.step_time_s);
      cr.step_error_after = RelError(cr.after.step.seconds(), c.measured.step_time_s);
      if (c.fit) {
        err_before.push_back(*cr.step_error_before);
        err_after.push_back(*cr.step_error_after);
      }
    }
    if (c.measured.peak_bytes.value() > 0 && p.predicted_bytes.value() >= 0) {
      cr.bytes_error = RelError(static_cast<double>(p.predicted_bytes.value()),
                                static_cast<double>(c.measured.peak_bytes.value()));
    }
    if (loo && c.fit) {
      ASSIGN_OR_RETURN(Fit f, FitParameters(prepared, kernels, spec.parameters, initial, spec.prior_weight,
                                            static_cast<int>(k)));
      ASSIGN_OR_RETURN(TimeBreakdown t, Time(p, spec.parameters, f.values));
      cr.loo_step = t.step;
      cr.loo_error = RelError(t.step.seconds(), c.measured.step_time_s);
      err_loo.push_back(*cr.loo_error);
    }
    out.cases.push_back(std::move(cr));
  }
  for (const PreparedKernels& kc : kernels) {
    out.kernel_cases.push_back(KernelResult(kc, out.initial_device, out.calibrated_device));
  }
  out.rms_error_before = Rms(err_before);
  out.rms_error_after = Rms(err_after);
  out.loo_rms_error = Rms(err_loo);
  return out;
}

absl::StatusOr<CalibrationResult> CalibrateFile(const std::string& path) {
  ASSIGN_OR_RETURN(CalibrationSpec spec, LoadCalibrationSpec(path));
  return Calibrate(spec);
}

}  // namespace gpusim
