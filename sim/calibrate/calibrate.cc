// The calibration fit; see calibrate.h, Note [Calibration fit].
#include "sim/calibrate/calibrate.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <memory>
#include <string_view>
#include <tuple>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "sim/alloc/allocator.h"
#include "sim/base/status.h"
#include "sim/calibrate/least_squares.h"
#include "sim/device/timing.h"
#include "sim/engine/engine.h"
#include "sim/import/kineto.h"
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

// A kineto case's host phases as fitted (Note [Host cost fit]).
struct HostData {
  HostMeasurements m;
  std::optional<int64_t> modules;
  std::string module_source;
  std::optional<double> inflation;
  double forward_s = 0, backward_s = 0;
};

// One kineto case's measurements: kernels and, for a training step, host phases.
struct PreparedKernels {
  const CalibrationCase* spec;
  KernelMeasurements m;
  std::optional<HostData> host;
  std::string host_absent;  // why !host
};

SimTime PredictOp(const KernelMeasurement& op, const DeviceSpec& d) { return EventDuration(op.event, d); }

// (forward, backward) host seconds: Note [Host cost fit].
std::pair<double, double> PredictHost(const HostData& h, const DeviceSpec& d) {
  double forward = d.host_dispatch_cost.seconds() * static_cast<double>(h.m.dispatches);
  if (h.modules.has_value()) forward += d.host_python_module_cost.seconds() * static_cast<double>(*h.modules);
  return {forward, d.host_node_cost.seconds() * static_cast<double>(h.m.nodes)};
}

bool FitsHost(const PreparedKernels& k) { return k.spec->fit && k.host.has_value(); }

// The trace of kineto case `c`, imported once (sim/import/kineto.h), as
// kernel measurements and host phases.
absl::StatusOr<PreparedKernels> LoadKinetoCase(const CalibrationCase& c) {
  KinetoImportOptions o;
  o.keep_shapes = true;
  o.keep_module_calls = true;
  o.keep_stacks = false;
  absl::StatusOr<RecordedTrace> t = ImportKinetoTrace(c.kineto_path, o);
  if (!t.ok()) {
    return absl::Status(t.status().code(),
                        absl::StrCat(c.location.ToString(), ": case '", c.name, "': ", t.status().message()));
  }
  PreparedKernels k{&c, ExtractKernelMeasurements(*t), std::nullopt, ""};
  absl::StatusOr<HostMeasurements> h = ExtractHostMeasurements(*t);
  if (!h.ok()) {
    k.host_absent = std::string(h.status().message());
    return k;
  }
  HostData d;
  d.m = *h;
  if (h->module_calls.has_value() && c.module_calls >= 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        c.location.ToString(), ": case '", c.name, "': module_calls: given, but the trace has ", *h->module_calls,
        " nn.Module events in its forward: one count (drop module_calls)"));
  }
  if (h->module_calls.has_value()) {
    d.modules = h->module_calls;
    d.module_source = "trace";
  } else if (c.module_calls >= 0) {
    d.modules = c.module_calls;
    d.module_source = "case";
  }
  const double scale = [&] {
    if (c.measured.step_time_s <= 0) return 1.0;
    d.inflation = h->cpu_span.seconds() / c.measured.step_time_s;
    return *d.inflation;
  }();
  d.forward_s = h->forward_span.seconds() / scale;
  d.backward_s = h->backward_span.seconds() / scale;
  k.host = d;
  return k;
}

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

// The device a case's step runs: a Megatron-LM rank's prices its host work
// with host.megatron_op / megatron_module (Note [Megatron host costs]), as
// the run did (ApplyCapabilities), now with the trial's values.
DeviceSpec RunDevice(const RunSpec& run, const std::vector<FitParameter>& params,
                     const std::vector<double>& values) {
  DeviceSpec d = WithParameters(run.device, params, values);
  if (run.megatron.present) UseMegatronHostCosts(&d);
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
    ASSIGN_OR_RETURN(SimResult s, Simulate(c.traces[i], RunDevice(run, params, values), alloc.get()));
    if (i == 0 || s.step_time > slowest.step) slowest = Breakdown(s);
    if (run.megatron.present) ranks.push_back(RankTimesOf(c.slots[i], s));
  }
  if (!ranks.empty()) {
    ASSIGN_OR_RETURN(const MegatronPipelineTimes pipe,
                     SimulatePipeline(ranks, c.runs[0], RunDevice(c.runs[0], params, values)));
    slowest.step = pipe.step;
  }
  return slowest;
}

double RelError(double predicted, double measured) { return (predicted - measured) / measured; }

struct Fit {
  std::vector<double> values;
  int iterations = 0, evaluations = 0;
};

// The host residuals' scale (Note [Host cost fit]): the mean over the fit
// host cases of (forward + backward) / 2; 1 when there are none.
double HostScale(const std::vector<PreparedKernels>& kernels) {
  double sum = 0;
  int n = 0;
  for (const PreparedKernels& k : kernels) {
    if (!FitsHost(k)) continue;
    sum += (k.host->forward_s + k.host->backward_s) / 2;
    ++n;
  }
  return n > 0 && sum > 0 ? sum / n : 1.0;
}

// Fits `params` to the fit cases in `cases` except `skip` (-1: none), and
// the host phases of the kineto cases except `skip_host` (-1: none).
absl::StatusOr<Fit> FitParameters(const std::vector<Prepared>& cases, const std::vector<PreparedKernels>& kernels,
                                  const std::vector<FitParameter>& params, const std::vector<double>& initial,
                                  double prior_weight, int skip, int skip_host = -1) {
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
  for (size_t k = 0; k < kernels.size(); ++k) {
    if (kernels[k].spec->fit) p.data_residuals += kernels[k].m.ops.size();
    if (FitsHost(kernels[k]) && static_cast<int>(k) != skip_host) p.data_residuals += 2;
  }
  const double host_scale = HostScale(kernels);
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
      for (size_t k = 0; k < kernels.size(); ++k) {
        if (!FitsHost(kernels[k]) || static_cast<int>(k) == skip_host) continue;
        const HostData& h = *kernels[k].host;
        const auto [forward, backward] = PredictHost(h, d);
        r.push_back((forward - h.forward_s) / host_scale);
        r.push_back((backward - h.backward_s) / host_scale);
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

bool IsRecordedHostCost(std::string_view name) {
  return name == "host.dispatch" || name == "host.node" || name == "host.python_module";
}

// Note [Host cost fit]: refuses by name a listed host cost that no fit case
// measures, and host.python_module where a fit case has no module count;
// notes what the fit assumes (profiler overhead, module calls carried by
// host.dispatch).
absl::Status CheckHostParameters(const CalibrationSpec& spec, const std::vector<Prepared>& prepared,
                                 const std::vector<PreparedKernels>& kernels, std::vector<std::string>& notes) {
  const bool step_cases = std::any_of(prepared.begin(), prepared.end(), [](const Prepared& p) { return p.spec->fit; });
  const bool host_cases = std::any_of(kernels.begin(), kernels.end(), FitsHost);
  std::string absent;
  for (const PreparedKernels& k : kernels) {
    if (k.spec->fit && !k.host.has_value()) absl::StrAppend(&absent, "; case '", k.spec->name, "': ", k.host_absent);
  }
  bool listed = false, module_listed = false;
  for (const FitParameter& fp : spec.parameters) {
    if (!IsRecordedHostCost(fp.name)) continue;
    listed = true;
    module_listed |= fp.name == "host.python_module";
    if (!host_cases && !step_cases) {
      return absl::InvalidArgumentError(absl::StrCat(
          spec.source_file, ": parameters: ", fp.name, ": no fit case measures it (no kineto case with host phases",
          absent, ")"));
    }
  }
  for (const PreparedKernels& k : kernels) {
    if (!FitsHost(k)) continue;
    if (module_listed && !k.host->modules.has_value()) {
      return absl::InvalidArgumentError(absl::StrCat(
          k.spec->location.ToString(), ": case '", k.spec->name, "': host.python_module cannot be fitted: the trace "
          "has no nn.Module events (record with with_stack=True) and the case gives no module_calls"));
    }
    if (!listed) continue;
    if (!k.host->modules.has_value()) {
      notes.push_back(absl::StrCat("host.python_module not fitted: case '", k.spec->name, "' has no nn.Module "
                                   "events (record with with_stack=True, or give module_calls); its forward span is "
                                   "fitted by host.dispatch alone, which then carries the module calls' Python"));
    }
    if (!k.host->inflation.has_value()) {
      notes.push_back(absl::StrCat("case '", k.spec->name, "' gives no unprofiled step time (measured.step_time_s; for one trace, --step-time): "
                                   "its host spans, and the host costs fitted to them, include the profiler's "
                                   "overhead"));
    }
  }
  for (const PreparedKernels& k : kernels) {
    if (listed && k.spec->fit && !k.host.has_value()) {
      notes.push_back(absl::StrCat("case '", k.spec->name, "': no host phases (", k.host_absent, ")"));
    }
  }
  return absl::OkStatus();
}

HostCaseResult HostResultOf(const PreparedKernels& k, const DeviceSpec& before, const DeviceSpec& after) {
  HostCaseResult r;
  r.name = k.spec->name;
  r.trace = k.m.trace;
  r.fit = k.spec->fit;
  if (!k.host.has_value()) {
    r.absent = k.host_absent;
    return r;
  }
  const HostData& h = *k.host;
  r.measured = h.m;
  r.module_source = h.module_source;
  r.module_calls = h.modules;
  r.step_time_s = k.spec->measured.step_time_s;
  r.inflation = h.inflation;
  r.forward_s = h.forward_s;
  r.backward_s = h.backward_s;
  std::tie(r.forward_before_s, r.backward_before_s) = PredictHost(h, before);
  std::tie(r.forward_after_s, r.backward_after_s) = PredictHost(h, after);
  if (h.forward_s > 0) {
    r.forward_error_before = RelError(r.forward_before_s, h.forward_s);
    r.forward_error_after = RelError(r.forward_after_s, h.forward_s);
  }
  if (h.backward_s > 0) {
    r.backward_error_before = RelError(r.backward_before_s, h.backward_s);
    r.backward_error_after = RelError(r.backward_after_s, h.backward_s);
  }
  return r;
}

// The host cases' results, with leave-one-out when >= 3 fit host cases.
absl::Status HostResults(const std::vector<Prepared>& prepared, const std::vector<PreparedKernels>& kernels,
                         const CalibrationSpec& spec, const std::vector<double>& initial, CalibrationResult& out) {
  const int fit_host = static_cast<int>(std::count_if(kernels.begin(), kernels.end(), FitsHost));
  const bool listed = std::any_of(spec.parameters.begin(), spec.parameters.end(),
                                  [](const FitParameter& fp) { return IsRecordedHostCost(fp.name); });
  for (size_t k = 0; k < kernels.size(); ++k) {
    HostCaseResult r = HostResultOf(kernels[k], out.initial_device, out.calibrated_device);
    if (listed && fit_host >= 3 && FitsHost(kernels[k])) {
      ASSIGN_OR_RETURN(Fit f, FitParameters(prepared, kernels, spec.parameters, initial, spec.prior_weight, -1,
                                            static_cast<int>(k)));
      const auto [forward, backward] =
          PredictHost(*kernels[k].host, WithParameters(out.initial_device, spec.parameters, f.values));
      if (r.forward_s > 0) r.loo_forward_error = RelError(forward, r.forward_s);
      if (r.backward_s > 0) r.loo_backward_error = RelError(backward, r.backward_s);
    }
    out.host_cases.push_back(std::move(r));
  }
  if (listed && fit_host < 3 && spec.cases.size() > 1) {  // one trace: CalibrateTrace says so
    out.notes.push_back(absl::StrCat("no leave-one-out for the host costs: ", fit_host,
                                     " fit case(s) with host phases (it needs 3)"));
  }
  return absl::OkStatus();
}


// Calibrate, with the first kineto case already loaded when `preloaded`
// is set (CalibrateTrace).
absl::StatusOr<CalibrationResult> CalibrateWith(const CalibrationSpec& spec, std::optional<PreparedKernels> preloaded) {
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
      std::optional<PreparedKernels> loaded = std::move(preloaded);
      preloaded.reset();
      if (!loaded.has_value()) {
        ASSIGN_OR_RETURN(loaded, LoadKinetoCase(c));
      }
      PreparedKernels k = *std::move(loaded);
      if (c.fit && (!k.m.ops.empty() || k.host.has_value())) ++out.fit_cases;
      if (c.fit) out.fit_ops += static_cast<int>(k.m.ops.size());
      kernels.push_back(std::move(k));
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
  RETURN_IF_ERROR(CheckHostParameters(spec, prepared, kernels, out.notes));
  const int kernel_fit_cases = static_cast<int>(std::count_if(kernels.begin(), kernels.end(), [](const PreparedKernels& k) {
    return k.spec->fit && (!k.m.ops.empty() || k.host.has_value());
  }));
  const int host_fit_cases = static_cast<int>(std::count_if(kernels.begin(), kernels.end(), FitsHost));
  const int data_points = out.fit_cases - kernel_fit_cases + out.fit_ops + 2 * host_fit_cases;
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
  RETURN_IF_ERROR(HostResults(prepared, kernels, spec, initial, out));
  out.rms_error_before = Rms(err_before);
  out.rms_error_after = Rms(err_after);
  out.loo_rms_error = Rms(err_loo);
  return out;
}

}  // namespace

absl::StatusOr<CalibrationResult> Calibrate(const CalibrationSpec& spec) { return CalibrateWith(spec, std::nullopt); }

// Note [Calibrating from one trace]: what one Kineto trace determines.
absl::StatusOr<CalibrationResult> CalibrateTrace(const std::string& path, const DeviceSpec& device,
                                                 double step_time_s) {
  CalibrationSpec spec;
  spec.source_file = path;
  spec.name = "one Kineto trace";
  CalibrationCase c;
  c.name = std::filesystem::path(path).filename().string();
  c.kineto_path = path;
  c.source = path;
  c.run.device = device;
  c.measured.step_time_s = step_time_s;
  c.location.file = path;
  spec.cases.push_back(std::move(c));
  ASSIGN_OR_RETURN(PreparedKernels k, LoadKinetoCase(spec.cases[0]));
  std::vector<std::string> refused;
  auto add = [&](std::string_view name) {
    const DeviceParameter* p = FindDeviceParameter(name);
    spec.parameters.push_back({std::string(name), p->default_min, p->default_max});
  };
  if (k.host.has_value()) {
    add("host.dispatch");
    add("host.node");
    if (k.host->modules.has_value()) {
      refused.push_back("host.python_module held at the device's value: one forward span cannot split "
                        "host.dispatch from host.python_module (a case file of several steps can)");
    }
  } else {
    refused.push_back(absl::StrCat("host.dispatch, host.node, host.python_module not fitted: ", k.host_absent));
  }
  bool gemm = false, memory = false;
  for (const KernelMeasurement& op : k.m.ops) {
    gemm |= op.kernel_class == KernelClass::kGemm;
    memory |= op.kernel_class == KernelClass::kMemory;
  }
  if (gemm) add("efficiency.matmul");
  if (memory) add("efficiency.memory");
  if (!gemm || !memory) {
    refused.push_back(absl::StrCat(!gemm ? "efficiency.matmul" : "", !gemm && !memory ? ", " : "",
                                   !memory ? "efficiency.memory" : "", " not fitted: no sized ",
                                   !gemm && !memory ? "GEMM or memory" : (!gemm ? "GEMM" : "memory"),
                                   " kernels (record_shapes=True sizes the ops; kernel_measurements.h)"));
  }
  refused.push_back("efficiency.attention, efficiency.fused_attention, efficiency.collective, launch_overhead "
                    "not fitted from one trace (a case file lists them)");
  if (spec.parameters.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": nothing to fit: ", absl::StrJoin(refused, "; ")));
  }
  ASSIGN_OR_RETURN(CalibrationResult r, CalibrateWith(spec, std::move(k)));
  r.notes.insert(r.notes.begin(), "one trace: no leave-one-out (a case file of three or more traces reports it)");
  r.notes.insert(r.notes.end(), refused.begin(), refused.end());
  return r;
}


absl::StatusOr<CalibrationResult> CalibrateFile(const std::string& path) {
  ASSIGN_OR_RETURN(CalibrationSpec spec, LoadCalibrationSpec(path));
  return Calibrate(spec);
}

}  // namespace gpusim
