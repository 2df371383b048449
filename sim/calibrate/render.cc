// Calibration reports (text, JSON) and the calibrated device file; see
// calibrate.h.
#include <algorithm>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "sim/base/file_util.h"
#include "sim/calibrate/calibrate.h"
#include "sim/base/json_writer.h"

namespace gpusim {
namespace {

std::string Pct(const std::optional<double>& v) {
  return v.has_value() ? absl::StrFormat("%+.2f%%", 100 * *v) : std::string("-");
}

std::string Rms(const std::optional<double>& v) {
  return v.has_value() ? absl::StrFormat("%.2f%%", 100 * *v) : std::string("-");
}

std::string Sec(SimTime t) { return absl::StrFormat("%.4f", t.seconds()); }

void Breakdown(JsonWriter& j, std::string_view key, const TimeBreakdown& t, Bytes bytes) {
  j.BeginObject(key);
  j.Double("step_time_s", t.step.seconds());
  j.Double("compute_s", t.compute.seconds());
  j.Double("communication_s", t.communication.seconds());
  j.Double("exposed_communication_s", t.exposed_communication.seconds());
  j.Double("recompute_s", t.recompute.seconds());
  if (bytes.value() >= 0) j.Int("peak_bytes", bytes.value()); else j.Null("peak_bytes");
  j.EndObject();
}

void OptDouble(JsonWriter& j, std::string_view key, const std::optional<double>& v) {
  if (v.has_value()) j.Double(key, *v); else j.Null(key);
}

std::string Num(double v) { return absl::StrFormat("%.10g", v); }

// A YAML double-quoted scalar.
std::string Quoted(std::string_view text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

void RenderStepCases(const CalibrationResult& r, std::string& s);
void RenderKernelCase(const KernelCaseResult& k, std::string& s);
void RenderHostCases(const CalibrationResult& r, std::string& s);

}  // namespace

std::string RenderCalibrationText(const CalibrationResult& r) {
  std::string s = absl::StrCat("gpusim calibrate: ", r.spec_file,
                               r.spec_name.empty() ? "" : absl::StrCat(" (", r.spec_name, ")"), "\n");
  absl::StrAppend(&s, "  device ", r.initial_device.name, " -> ", r.calibrated_device.name, "; ", r.fit_cases,
                  " fit case(s), ", r.parameters.size(), " parameter(s)");
  if (r.underdetermined) {
    absl::StrAppend(&s, "; underdetermined: regularised toward the device file (prior_weight ",
                    Num(r.prior_weight), ")");
  }
  if (r.fit_ops > 0) absl::StrAppend(&s, "; ", r.fit_ops, " sized op(s) from kernel traces");
  if (!r.cases.empty()) RenderStepCases(r, s); else s += "\n";
  for (const KernelCaseResult& k : r.kernel_cases) RenderKernelCase(k, s);
  RenderHostCases(r, s);
  absl::StrAppend(&s, "\nParameters        initial     fitted      bounds\n");
  for (const ParameterResult& p : r.parameters) {
    absl::StrAppend(&s, absl::StrFormat("  %-22s %-10s  %-10s  [%s, %s]%s\n", p.name, Num(p.initial),
                                        Num(p.fitted), Num(p.min), Num(p.max), p.at_bound ? "  at bound" : ""));
  }
  absl::StrAppend(&s, "  (", r.iterations, " iterations, ", r.evaluations, " evaluations)\n");
  for (const std::string& n : r.notes) absl::StrAppend(&s, "Note: ", n, "\n");
  return s;
}

namespace {

void RenderStepCases(const CalibrationResult& r, std::string& s) {
  absl::StrAppend(&s, "\n\nStep time (s)          measured  before   error    after    error    loo\n");
  for (const CaseResult& c : r.cases) {
    absl::StrAppend(&s, absl::StrFormat("  %-20s %s %-8s  %s  %-8s %s  %-8s %s\n", c.name, c.fit ? "*" : " ",
                                        c.measured.step_time_s > 0 ? Num(c.measured.step_time_s) : "-",
                                        Sec(c.before.step), Pct(c.step_error_before), Sec(c.after.step),
                                        Pct(c.step_error_after), Pct(c.loo_error)));
  }
  for (const CaseResult& c : r.cases) {
    if (c.measured.iteration_time_ms > 0) {
      absl::StrAppend(&s, absl::StrFormat("  %-20s   measured as Megatron-LM's elapsed time per iteration %s ms "
                                          "(the whole pipeline, every rank re-timed)\n",
                                          c.name, Num(c.measured.iteration_time_ms)));
    }
  }
  absl::StrAppend(&s, "  (* fitted)  RMS error over fit cases: before ", Pct(r.rms_error_before), ", after ",
                  Pct(r.rms_error_after));
  if (r.loo_rms_error.has_value()) absl::StrAppend(&s, ", leave-one-out ", Pct(r.loo_rms_error));
  absl::StrAppend(&s, "\n\nTime breakdown after the fit (s)   compute  (recompute)  communication  (exposed)\n");
  for (const CaseResult& c : r.cases) {
    absl::StrAppend(&s, absl::StrFormat("  %-32s %s   (%s)     %s         (%s)\n", c.name, Sec(c.after.compute),
                                        Sec(c.after.recompute), Sec(c.after.communication),
                                        Sec(c.after.exposed_communication)));
  }
  absl::StrAppend(&s, "\nMemory (bytes; GiB = 2^30)   metric                 measured -> predicted\n");
  for (const CaseResult& c : r.cases) {
    if (c.measured.metric == MemoryMetric::kNone) continue;
    absl::StrAppend(&s, absl::StrFormat("  %-28s %-22s %s -> %s  %s\n", c.name,
                                        std::string(MemoryMetricName(c.measured.metric)),
                                        FormatBytes(c.measured.peak_bytes), FormatBytes(c.predicted_bytes),
                                        Pct(c.bytes_error)));
  }
}

std::string Ms(SimTime t) { return absl::StrFormat("%.3f", t.seconds() * 1e3); }

void RenderKernelCase(const KernelCaseResult& k, std::string& s) {
  absl::StrAppend(&s, "\nKernels: ", k.name, k.fit ? " (fit)" : " (held out)", " from ", k.trace,
                  k.trace_device.empty() ? "" : absl::StrCat(" (recorded on ", k.trace_device, ")"), "\n");
  absl::StrAppend(&s, "  ", k.kernels, " kernels: ", k.kernels - k.skipped_kernels, " in ", k.total.ops,
                  " sized ops, ", k.skipped_kernels, " skipped (cannot be sized)\n");
  for (const auto& [reason, n] : k.skipped) absl::StrAppend(&s, "    skipped ", n, ": ", reason, "\n");
  absl::StrAppend(&s,
                  "  class        kernels  sized   ops   measured ms  before ms  error     rms      "
                  "after ms   error     rms\n");
  auto row = [&](std::string_view name, const KernelClassResult& c) {
    absl::StrAppend(&s, absl::StrFormat("  %-11s  %7d  %5d  %5d  %11s  %9s  %-8s  %-7s  %9s  %-8s  %s\n", name,
                                        c.kernels, c.sized_kernels, c.ops, Ms(c.measured), Ms(c.predicted_before),
                                        Pct(c.time_error_before), Rms(c.rms_error_before), Ms(c.predicted_after),
                                        Pct(c.time_error_after), Rms(c.rms_error_after)));
  };
  for (int i = 0; i < kNumKernelClasses; ++i) {
    row(KernelClassName(static_cast<KernelClass>(i)), k.classes[static_cast<size_t>(i)]);
  }
  row("all", k.total);
  absl::StrAppend(&s, "  (error: summed predicted / summed measured - 1; rms: of the ops' relative errors)\n");
}

std::string HostUs(double seconds) { return absl::StrFormat("%.0f", seconds * 1e6); }

// Note [Host cost fit]: per case, the counts and the spans (µs) against
// the fitted prices.
void RenderHostCases(const CalibrationResult& r, std::string& s) {
  bool any = false;
  for (const HostCaseResult& h : r.host_cases) any |= h.absent.empty();
  if (!any) return;
  absl::StrAppend(&s, "\nHost (Kineto CPU ops)  top-level  D      N      M           inflation  "
                      "forward us: span  before  after  error    loo      "
                      "backward us: span  before  after  error    loo\n");
  for (const HostCaseResult& h : r.host_cases) {
    if (!h.absent.empty()) {
      absl::StrAppend(&s, "  ", h.name, ": no host phases (", h.absent, ")\n");
      continue;
    }
    const std::string m = h.module_calls.has_value()
                              ? absl::StrCat(*h.module_calls, h.module_source == "case" ? " (case)" : "")
                              : std::string("-");
    absl::StrAppend(&s, absl::StrFormat("  %-20s %s %9d  %-6d %-6d %-11s %-9s  %17s  %6s  %5s  %-8s %-8s %18s  %6s  "
                                        "%5s  %-8s %s\n",
                                        h.name, h.fit ? "*" : " ", h.measured.top_level_ops, h.measured.dispatches,
                                        h.measured.nodes, m,
                                        h.inflation.has_value() ? absl::StrFormat("%.2f", *h.inflation) : "-",
                                        HostUs(h.forward_s), HostUs(h.forward_before_s), HostUs(h.forward_after_s),
                                        Pct(h.forward_error_after), Pct(h.loo_forward_error), HostUs(h.backward_s),
                                        HostUs(h.backward_before_s), HostUs(h.backward_after_s), Pct(h.backward_error_after),
                                        Pct(h.loo_backward_error)));
  }
  absl::StrAppend(&s, "  (* fitted; D dispatches, N autograd nodes, M module calls of the forward; spans divided by "
                      "the inflation when the case gives its unprofiled step)\n");
}

void HostPhase(JsonWriter& j, std::string_view key, double span, double before, double after,
               const std::optional<double>& error_before, const std::optional<double>& error_after,
               const std::optional<double>& loo) {
  j.BeginObject(key);
  j.Double("span_s", span);
  j.Double("predicted_before_s", before);
  j.Double("predicted_after_s", after);
  OptDouble(j, "error_before", error_before);
  OptDouble(j, "error_after", error_after);
  OptDouble(j, "leave_one_out_error", loo);
  j.EndObject();
}

// Opens a kineto case's object with what names it.
void BeginTraceCase(JsonWriter& j, const std::string& name, bool fit, const std::string& trace) {
  j.BeginObject();
  j.String("name", name);
  j.Bool("fit", fit);
  j.String("trace", trace);
}

void HostCasesJson(JsonWriter& j, const CalibrationResult& r) {
  j.BeginArray("host_cases");
  for (const HostCaseResult& h : r.host_cases) {
    BeginTraceCase(j, h.name, h.fit, h.trace);
    if (h.absent.empty()) j.Null("absent"); else j.String("absent", h.absent);
    j.Int("engine_threads", h.measured.engine_threads);
    j.Int("top_level_ops", h.measured.top_level_ops);
    j.Int("dispatches", h.measured.dispatches);
    j.Int("nodes", h.measured.nodes);
    if (h.module_calls.has_value()) j.Int("module_calls", *h.module_calls); else j.Null("module_calls");
    j.String("module_source", h.module_source);
    if (h.step_time_s > 0) j.Double("step_time_s", h.step_time_s); else j.Null("step_time_s");
    OptDouble(j, "inflation", h.inflation);
    j.BeginObject("profiled");
    j.Double("forward_s", h.measured.forward_span.seconds());
    j.Double("backward_s", h.measured.backward_span.seconds());
    j.Double("cpu_s", h.measured.cpu_span.seconds());
    j.EndObject();
    HostPhase(j, "forward", h.forward_s, h.forward_before_s, h.forward_after_s, h.forward_error_before,
              h.forward_error_after, h.loo_forward_error);
    HostPhase(j, "backward", h.backward_s, h.backward_before_s, h.backward_after_s, h.backward_error_before,
              h.backward_error_after, h.loo_backward_error);
    j.EndObject();
  }
  j.EndArray();
  j.BeginArray("notes");
  for (const std::string& n : r.notes) j.String("", n);
  j.EndArray();
}

}  // namespace

std::string RenderCalibrationJson(const CalibrationResult& r) {
  JsonWriter j;
  j.BeginObject();
  j.BeginObject("calibration");
  j.String("file", r.spec_file);
  j.String("name", r.spec_name);
  j.String("device", r.initial_device.name);
  j.String("calibrated_device", r.calibrated_device.name);
  j.Int("fit_cases", r.fit_cases);
  j.Bool("underdetermined", r.underdetermined);
  j.Double("prior_weight", r.prior_weight);
  j.Int("iterations", r.iterations);
  j.Int("evaluations", r.evaluations);
  OptDouble(j, "rms_error_before", r.rms_error_before);
  OptDouble(j, "rms_error_after", r.rms_error_after);
  OptDouble(j, "loo_rms_error", r.loo_rms_error);
  j.Int("fit_ops", r.fit_ops);
  j.EndObject();
  j.BeginObject("parameters");
  for (const ParameterResult& p : r.parameters) {
    j.BeginObject(p.name);
    j.Double("initial", p.initial);
    j.Double("fitted", p.fitted);
    j.Double("min", p.min);
    j.Double("max", p.max);
    j.Bool("at_bound", p.at_bound);
    j.EndObject();
  }
  j.EndObject();
  j.BeginArray("cases");
  for (const CaseResult& c : r.cases) {
    j.BeginObject();
    j.String("name", c.name);
    j.Bool("fit", c.fit);
    j.String("metric", MemoryMetricName(c.measured.metric));
    j.BeginObject("measured");
    if (c.measured.step_time_s > 0) j.Double("step_time_s", c.measured.step_time_s); else j.Null("step_time_s");
    if (c.measured.peak_bytes.value() >= 0) j.Int("peak_bytes", c.measured.peak_bytes.value());
    else j.Null("peak_bytes");
    if (c.measured.iteration_time_ms > 0) j.Double("iteration_time_ms", c.measured.iteration_time_ms);
    else j.Null("iteration_time_ms");
    j.EndObject();
    Breakdown(j, "predicted_before", c.before, c.predicted_bytes);
    Breakdown(j, "predicted_after", c.after, c.predicted_bytes);
    j.BeginObject("relative_error_before");
    OptDouble(j, "step_time", c.step_error_before);
    OptDouble(j, "peak_bytes", c.bytes_error);
    j.EndObject();
    j.BeginObject("relative_error_after");
    OptDouble(j, "step_time", c.step_error_after);
    OptDouble(j, "peak_bytes", c.bytes_error);
    j.EndObject();
    if (c.loo_step.has_value()) {
      j.BeginObject("leave_one_out");
      j.Double("step_time_s", c.loo_step->seconds());
      OptDouble(j, "relative_error", c.loo_error);
      j.EndObject();
    } else {
      j.Null("leave_one_out");
    }
    j.String("source", c.source);
    j.String("hardware", c.hardware);
    j.String("software", c.software);
    j.EndObject();
  }
  j.EndArray();
  j.BeginArray("kernel_cases");
  for (const KernelCaseResult& k : r.kernel_cases) {
    BeginTraceCase(j, k.name, k.fit, k.trace);
    j.String("trace_device", k.trace_device);
    j.Int("kernels", k.kernels);
    j.Int("skipped_kernels", k.skipped_kernels);
    j.BeginObject("skipped");
    for (const auto& [reason, n] : k.skipped) j.Int(reason, n);
    j.EndObject();
    j.BeginObject("classes");
    auto cls = [&](std::string_view name, const KernelClassResult& c) {
      j.BeginObject(name);
      j.Int("kernels", c.kernels);
      j.Int("sized_kernels", c.sized_kernels);
      j.Int("ops", c.ops);
      j.Double("measured_s", c.measured.seconds());
      j.Double("predicted_before_s", c.predicted_before.seconds());
      j.Double("predicted_after_s", c.predicted_after.seconds());
      OptDouble(j, "time_error_before", c.time_error_before);
      OptDouble(j, "time_error_after", c.time_error_after);
      OptDouble(j, "rms_error_before", c.rms_error_before);
      OptDouble(j, "rms_error_after", c.rms_error_after);
      j.EndObject();
    };
    for (int i = 0; i < kNumKernelClasses; ++i) {
      cls(KernelClassName(static_cast<KernelClass>(i)), k.classes[static_cast<size_t>(i)]);
    }
    cls("all", k.total);
    j.EndObject();
    j.String("source", k.source);
    j.String("hardware", k.hardware);
    j.String("software", k.software);
    j.EndObject();
  }
  j.EndArray();
  HostCasesJson(j, r);
  j.EndObject();
  return j.Finish();
}

std::string CalibratedDeviceYaml(const CalibrationResult& r) {
  const DeviceSpec& d = r.calibrated_device;
  std::string s = absl::StrCat("# ", d.name, ": ", r.initial_device.name, " (", r.initial_device.source_file,
                               ")\n# with parameters fitted by `gpusim calibrate ", r.spec_file, "`.\n");
  absl::StrAppend(&s, "# Fit cases: ", r.fit_cases, r.underdetermined ? " (underdetermined; regularised toward "
                                                                         "the device file)" : "", ".\n");
  for (const CaseResult& c : r.cases) {
    absl::StrAppend(&s, "#   ", c.name, c.fit ? " (fit)" : " (held out)", ": measured ",
                    c.measured.step_time_s > 0 ? absl::StrCat(Num(c.measured.step_time_s), " s") : "-",
                    ", predicted ", Sec(c.before.step), " s before (", Pct(c.step_error_before), "), ",
                    Sec(c.after.step), " s after (", Pct(c.step_error_after), ")\n");
  }
  for (const KernelCaseResult& k : r.kernel_cases) {
    absl::StrAppend(&s, "#   ", k.name, k.fit ? " (fit)" : " (held out)", ": ", k.total.ops,
                    " sized ops of a Kineto trace, summed kernel time error ", Pct(k.total.time_error_before),
                    " before, ", Pct(k.total.time_error_after), " after\n");
  }
  for (const HostCaseResult& h : r.host_cases) {
    if (!h.absent.empty()) continue;
    absl::StrAppend(&s, "#   ", h.name, h.fit ? " (fit)" : " (held out)", ": host spans, forward ",
                    Pct(h.forward_error_after), ", backward ", Pct(h.backward_error_after), " after\n");
  }
  for (const std::string& n : r.notes) absl::StrAppend(&s, "# Note: ", n, "\n");
  for (const ParameterResult& p : r.parameters) {
    absl::StrAppend(&s, "#   ", p.name, ": ", Num(p.initial), " -> ", Num(p.fitted), p.at_bound ? " (at bound)" : "",
                    "\n");
  }
  auto rate = [](double v) { return absl::StrFormat("%.15gGB/s", v / 1e9); };
  auto flops = [](double v) { return absl::StrFormat("%.15gTFLOP/s", v / 1e12); };
  absl::StrAppend(&s, "name: ", d.name, "\n");
  absl::StrAppend(&s, "description: ", Quoted(absl::StrCat(d.description, " (calibrated)")), "\n");
  absl::StrAppend(&s, "sms: ", d.sms, "\n");
  // Every key the device file sets (spec_parse.cc): a replayed PyTorch step
  // needs compute_capability, the timing its kernel_model.
  if (d.cc_major > 0) absl::StrAppend(&s, "compute_capability: \"", d.cc_major, ".", d.cc_minor, "\"\n");
  absl::StrAppend(&s, "max_threads_per_sm: ", d.max_threads_per_sm, "\n");
  absl::StrAppend(&s, "kernel_model: ", d.kernel_model, "\n");
  absl::StrAppend(&s, "memory:\n  cuda_total: ", d.cuda_total.value(), "\n  context_reserve: ",
                  d.context_reserve.value(), "\n");
  absl::StrAppend(&s, "hbm_bandwidth: ", rate(d.hbm_bandwidth), "\n");
  if (d.l2.value() > 0) absl::StrAppend(&s, "l2: ", d.l2.value(), "\n");
  absl::StrAppend(&s, "flops:\n  bf16: ", flops(d.peak_bf16), "\n  fp16: ", flops(d.peak_fp16), "\n  tf32: ",
                  flops(d.peak_tf32), "\n  fp32: ", flops(d.peak_fp32), "\n");
  if (d.peak_fp8 > 0) absl::StrAppend(&s, "  fp8: ", flops(d.peak_fp8), "\n");
  absl::StrAppend(&s, "links:\n  nvlink: ", rate(d.nvlink_bandwidth), "\n  pcie: ", rate(d.pcie_bandwidth),
                  "\n  network: ", rate(d.network_bandwidth), "\n  latency: ", d.link_latency.ns(), "ns\n");
  absl::StrAppend(&s, "launch_overhead: ", d.launch_overhead.ns(), "ns\n");
  absl::StrAppend(&s, "efficiency:\n  matmul: ", Num(d.matmul_efficiency), "\n  attention: ",
                  Num(d.attention_efficiency), "\n  fused_attention: ", Num(d.fused_attention_efficiency), "\n  memory: ", Num(d.memory_efficiency), "\n  collective: ",
                  Num(d.collective_efficiency), "\n");
  // A host: block only when a host cost was fitted: a device file with one
  // is refused for XLA steps (sim/step/capabilities.cc).
  // host.megatron_op / megatron_module (Note [Megatron host costs]) price
  // only a Megatron-LM launch line's step: written alone they keep the file
  // usable for XLA steps.
  const auto fitted = [&r](bool megatron) {
    return std::any_of(r.parameters.begin(), r.parameters.end(), [megatron](const ParameterResult& p) {
      return p.name.starts_with("host.") && p.name.starts_with("host.megatron_") == megatron;
    });
  };
  const bool host_fitted = fitted(false);
  const bool megatron_host = d.host_megatron_op_cost >= SimTime(0) || d.host_megatron_module_cost >= SimTime(0);
  if (host_fitted || megatron_host) absl::StrAppend(&s, "host:\n");
  if (host_fitted) {
    absl::StrAppend(&s, "  op: ", d.host_op_cost.ns(), "ns\n  module: ", d.host_module_cost.ns(),
                    "ns\n  dispatch: ", d.host_dispatch_cost.ns(), "ns\n  node: ", d.host_node_cost.ns(),
                    "ns\n  python_module: ", d.host_python_module_cost.ns(), "ns\n");
  }
  if (d.host_megatron_op_cost >= SimTime(0)) absl::StrAppend(&s, "  megatron_op: ", d.host_megatron_op_cost.ns(), "ns\n");
  if (d.host_megatron_module_cost >= SimTime(0)) {
    absl::StrAppend(&s, "  megatron_module: ", d.host_megatron_module_cost.ns(), "ns\n");
  }
  absl::StrAppend(&s, "allocator_cost:\n  malloc: ", d.malloc_cost.ns(), "ns\n  free: ", d.free_cost.ns(),
                  "ns\n  map_page: ", d.map_page_cost.ns(), "ns\n  unmap_page: ", d.unmap_page_cost.ns(), "ns\n");
  return s;
}

absl::Status WriteCalibratedDevice(const CalibrationResult& r, const std::string& path) {
  return WriteFileAtomically(path, CalibratedDeviceYaml(r));
}

}  // namespace gpusim
