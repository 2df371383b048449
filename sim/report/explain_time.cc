// `gpusim explain --time`: the critical path summed by class, layer and
// gate (Note [Time classes], Note [Time layers] in explain_time.h).
#include "sim/report/explain_time.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <regex>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "sim/base/json_writer.h"
#include "sim/device/timing.h"

namespace gpusim {
namespace {


// tools/collect/kineto_classes.py PREDICTED_CONV_OPS: the convolution ops
// python/gpusim_torch/ops.py records as kind matmul.
bool IsConvolutionOp(std::string_view op) {
  for (std::string_view c : {"convolution", "_convolution", "cudnn_convolution", "convolution_overrideable",
                             "mkldnn_convolution", "convolution_backward", "convolution_backward_overrideable",
                             "cudnn_convolution_backward"}) {
    if (op == c) return true;
  }
  return false;
}

// A recorded event's module path (`MODULE:op`) up to its first numeric
// component (Note [Time layers]); empty when the name has no module.
std::string ModuleLayer(std::string_view name) {
  const size_t colon = name.find(':');
  if (colon == std::string_view::npos || colon == 0) return "";
  const std::string_view module = name.substr(0, colon);
  // A module path is dotted Python identifiers (a kernel's C++ name, as a
  // Kineto trace records it, is not: `void at::native::...`).
  if (colon + 1 < name.size() && name[colon + 1] == ':') return "";
  for (char c : module) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '.') return "";
  }
  size_t begin = 0;
  while (begin <= module.size()) {
    size_t dot = module.find('.', begin);
    if (dot == std::string_view::npos) dot = module.size();
    const std::string_view part = module.substr(begin, dot - begin);
    if (!part.empty() && std::all_of(part.begin(), part.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); })) {
      return std::string(module.substr(0, dot));
    }
    begin = dot + 1;
  }
  return std::string(module);
}

std::string RegionLabel(const Region& reg) {
  if (reg.kind != "layer") return reg.name;
  if (reg.repeat > 1) return absl::StrCat("layers ", reg.layer, "-", reg.layer + reg.repeat - 1);
  return absl::StrCat("layer ", reg.layer);
}

// Region precedence: a decoder layer over a rolled iteration over a loop
// (a scan or an HLO while: its body's events, where nothing finer names
// them) over a phase region; pipeline slots hold layers and are not one.
int RegionRank(const Region& reg) {
  if (reg.kind == "layer") return 4;
  if (reg.kind == "iteration") return 3;
  if (reg.kind == "loop") return 2;
  if (reg.kind == "phase") return 1;
  return 0;
}

std::string PathMs(SimTime t) { return absl::StrFormat("%.3f ms", static_cast<double>(t.ns()) / 1e6); }
std::string PathPct(SimTime part, SimTime whole) {
  return whole.ns() <= 0 ? "-" : absl::StrFormat("%.1f%%", 100.0 * static_cast<double>(part.ns()) /
                                                             static_cast<double>(whole.ns()));
}

// A name cut for a text line (a kernel's C++ name runs to hundreds of
// characters); the JSON keeps it whole.
std::string Shortened(const std::string& name) {
  constexpr size_t kMax = 72;
  return name.size() <= kMax ? name : name.substr(0, kMax - 3) + "...";
}

std::string_view SegmentKindName(PathSegment::Kind k) {
  switch (k) {
    case PathSegment::Kind::kEvent: return "event";
    case PathSegment::Kind::kHostIssue: return "host_issue";
    case PathSegment::Kind::kRepeatedIterations: return "repeated_iterations";
    case PathSegment::Kind::kGap: return "gap";
  }
  return "gap";
}

// Rows in the order the path first reaches them (equal times stay in time
// order: layer 1 before layer 10), then largest first.
struct Rows {
  std::vector<TimeRow> rows;
  std::map<std::string, size_t> index;
  void Add(const std::string& name, SimTime d, bool host) {
    auto [it, added] = index.try_emplace(name, rows.size());
    if (added) rows.push_back(TimeRow{name, SimTime(0), SimTime(0), 0});
    TimeRow& row = rows[it->second];
    row.time += d;
    if (host) row.host += d;
    ++row.segments;
  }
  std::vector<TimeRow> Sorted() && {
    std::stable_sort(rows.begin(), rows.end(), [](const TimeRow& a, const TimeRow& b) { return a.time > b.time; });
    return std::move(rows);
  }
};

// tools/collect/kineto_classes.py KINETO_RULES (Note [Kernel classes]): a
// recorded kernel's class by its name, the first rule that matches; Kineto's
// memcpy / memset ops are copies. (Its rule moving GEMM-named kernels that
// a convolution launched to `conv` reads the launching CPU op, which the
// imported trace does not keep.)
std::string KinetoKernelClass(const TraceEvent& e) {
  static const std::vector<std::pair<std::string, std::regex>>* const kRules = [] {
    auto* rules = new std::vector<std::pair<std::string, std::regex>>;
    for (const auto& [cls, pattern] : std::vector<std::pair<const char*, const char*>>{
             {"attention", "sdpa|flash|fmha|cutlassF|cutlassB|attention|cudnn::fusion|unpack_cudnn"},
             {"conv", "conv|fprop|dgrad|wgrad|winograd|implicit|nchwToNhwc|nhwcToNchw|cudnn"},
             {"gemm", "gemm|nvjet|cutlass|xmma|gemv|splitK|cublas|Kernel2"},
             {"optimizer", "multi_tensor_apply|fused_adam|FusedAdam|fused_sgd|_foreach"},
             {"norm_reduce", "layer_norm|LayerNorm|GammaBeta|rms_norm|RmsNorm|batch_norm|batchnorm|bn_fw|bn_bw|"
                             "welford|Welford|group_norm|GroupNorm|[sS]oft[mM]ax|nll_loss|cross_entropy|"
                             "reduce_kernel|Reduce|pool"},
             {"copy", "^Memcpy|^Memset|copy_kernel|CatArrayBatchedCopy|triu_tril"},
             {"elementwise", "elementwise_kernel|fused_dropout|masked_scale|FillFunctor|distribution_"}}) {
      rules->emplace_back(cls, std::regex(pattern));
    }
    return rules;
  }();
  if (e.type == EventType::kCopy || absl::StartsWith(e.name, "Memset")) return "copy";
  for (const auto& [cls, rx] : *kRules) {
    if (std::regex_search(e.name, rx)) return cls;
  }
  return "other";
}

// The host-bound runs: consecutive host-issue segments.
std::vector<HostBoundSpan> HostSpans(const std::vector<PathSegment>& path, const Trace& tr,
                                     const std::vector<std::string>& layers) {
  std::vector<HostBoundSpan> out;
  for (const PathSegment& s : path) {
    if (s.kind != PathSegment::Kind::kHostIssue) continue;
    const size_t e = static_cast<size_t>(s.event);
    if (out.empty() || out.back().end != s.start) {
      out.push_back({s.start, s.end, s.event, s.event, tr.events[e].name, tr.events[e].name, layers[e], layers[e]});
    } else {
      HostBoundSpan& h = out.back();
      h.end = s.end;
      h.last_event = s.event;
      h.last = tr.events[e].name;
      h.last_layer = layers[e];
    }
  }
  return out;
}

}  // namespace

std::string TimeClassOf(const TraceEvent& e) {
  if (e.type == EventType::kCollective) return "collective";
  if (e.type == EventType::kAlloc) return "allocator";
  // A kernel a Kineto trace recorded: named by the kernel, no framework op.
  if (e.recorded_duration.ns() >= 0 && e.op.empty()) return KinetoKernelClass(e);
  if (e.type == EventType::kCopy) return "copy";
  // tools/collect/kineto_classes.py predicted_class.
  const std::string op = EventOpName(e);
  const std::string_view kind = OpKindName(e.kind);
  if (kind == "matmul" && IsConvolutionOp(op)) return "conv";
  if (absl::StartsWith(op, "_foreach_") || absl::StartsWith(op, "_fused_")) return "optimizer";
  if (absl::StartsWith(op, "nll_loss") || absl::StartsWith(op, "cross_entropy")) return "norm_reduce";
  if (kind == "matmul") return "gemm";
  if (kind == "attention") return "attention";
  if (kind == "elementwise") return "elementwise";
  if (kind == "reduce") return "norm_reduce";
  if (kind == "copy" || kind == "convert" || kind == "transpose") return "copy";
  return "other";
}

std::vector<std::string> EventLayers(const StepReport& r) {
  const Trace& tr = r.lowered.trace;
  std::vector<std::string> out(tr.events.size());
  std::vector<int> rank(tr.events.size(), -1);
  if (r.lowered.op_event.size() == r.program.ops.size()) {
    for (const Region& reg : r.program.regions) {
      const int k = RegionRank(reg);
      if (k == 0) continue;
      for (OpId op = reg.first; op <= reg.last && op < static_cast<OpId>(r.program.ops.size()); ++op) {
        const int64_t e = r.lowered.op_event[static_cast<size_t>(op)];
        if (e < 0 || rank[static_cast<size_t>(e)] >= k) continue;
        rank[static_cast<size_t>(e)] = k;
        out[static_cast<size_t>(e)] = RegionLabel(reg);
      }
    }
  }
  for (size_t i = 0; i < tr.events.size(); ++i) {
    if (!out[i].empty()) continue;
    out[i] = ModuleLayer(tr.events[i].name);
    if (out[i].empty()) out[i] = std::string(PhaseName(tr.events[i].phase));
  }
  return out;
}

TimeExplanation ExplainTime(const StepReport& r, const SimResult& path, int top) {
  TimeExplanation t;
  t.program = r.program.name;
  t.device = r.spec.device.name;
  t.framework = r.spec.framework;
  t.step_time = r.sim.step_time;
  t.path_time = path.step_time;
  if (t.step_time != t.path_time) {
    // A Megatron-LM launch line's rank view holds the pipeline schedule's
    // step time (sim/step/megatron_step.h PeakRankView).
    t.note = absl::StrCat("the step time ", PathMs(t.step_time), " is not this step's own replay (",
                          PathMs(t.path_time), ", as a launch line's pipeline schedule replaces it): the path below is "
                          "the replay's");
  }
  const Trace& tr = r.lowered.trace;
  const std::vector<std::string> layers = EventLayers(r);
  Rows by_class, by_layer, by_gate;
  std::vector<TimeContributor> all;
  for (const PathSegment& s : path.critical_path) {
    const SimTime d = s.end - s.start;
    const bool host = s.kind == PathSegment::Kind::kHostIssue;
    const TraceEvent& e = tr.events[static_cast<size_t>(s.event)];
    std::string cls = host ? "host_issue"
                      : s.kind == PathSegment::Kind::kRepeatedIterations ? "repeated_iterations"
                      : s.kind == PathSegment::Kind::kGap ? (s.gate == PathGate::kAllocatorDrain ? "allocator"
                                                             : s.gate == PathGate::kHostSync ? "host_sync"
                                                                                             : "idle")
                                                          : TimeClassOf(e);
    by_class.Add(cls, d, host);
    by_layer.Add(layers[static_cast<size_t>(s.event)], d, host);
    by_gate.Add(std::string(PathGateName(s.gate)), d, host);
    if (host) t.host_bound += d;
    if (s.kind == PathSegment::Kind::kEvent && e.type == EventType::kCollective) t.communication_on_path += d;
    all.push_back({std::string(SegmentKindName(s.kind)), s.event, e.name, std::move(cls),
                   layers[static_cast<size_t>(s.event)], std::string(PathGateName(s.gate)), s.start, d});
  }
  t.segments = static_cast<int64_t>(all.size());
  t.by_class = std::move(by_class).Sorted();
  t.by_layer = std::move(by_layer).Sorted();
  t.by_gate = std::move(by_gate).Sorted();
  std::stable_sort(all.begin(), all.end(),
                   [](const TimeContributor& a, const TimeContributor& b) { return a.time > b.time; });
  for (size_t i = 0; i < all.size(); ++i) {
    if (static_cast<int>(i) < top) {
      t.top.push_back(all[i]);
    } else {
      ++t.rest_segments;
      t.rest_time += all[i].time;
    }
  }
  t.host_spans = HostSpans(path.critical_path, tr, layers);
  t.host_busy = path.host_busy;
  t.host_wait = path.host_wait;
  t.communication = path.collective_busy;
  t.exposed_communication = path.exposed_communication;
  t.overlapped_communication = path.collective_busy - path.exposed_communication;
  return t;
}

std::string RenderExplainTime(const TimeExplanation& t) {
  std::string o = absl::StrFormat("Step time %s (%s on %s, %s): critical path of %d segments, %s\n", PathMs(t.step_time),
                                  t.program, t.device, t.framework, t.segments, PathMs(t.path_time));
  if (!t.note.empty()) absl::StrAppend(&o, "note: ", t.note, "\n");
  if (t.host_busy <= SimTime(0)) {
    absl::StrAppend(&o, "host-bound: none (no host issue time is modelled for this step: Note [Host timeline])\n");
  } else {
    absl::StrAppendFormat(&o, "host-bound: %s of the path (%s) the GPU waited for the host to issue ops",
                          PathMs(t.host_bound), PathPct(t.host_bound, t.path_time));
    absl::StrAppendFormat(&o, "; host issue %s in all, kernels waited %s for it\n", PathMs(t.host_busy),
                          PathMs(t.host_wait));
  }
  for (const HostBoundSpan& h : t.host_spans) {
    absl::StrAppendFormat(&o, "  %s -> %s  events %d (%s, %s) .. %d (%s, %s)\n", PathMs(h.start), PathMs(h.end),
                          h.first_event, Shortened(h.first), h.first_layer, h.last_event, Shortened(h.last),
                          h.last_layer);
  }
  absl::StrAppendFormat(&o, "communication: %s, exposed %s, overlapped with compute %s; on the path %s\n",
                        PathMs(t.communication), PathMs(t.exposed_communication), PathMs(t.overlapped_communication),
                        PathMs(t.communication_on_path));
  auto table = [&](const char* title, const std::vector<TimeRow>& rows, size_t limit) {
    absl::StrAppendFormat(&o, "\n%s\n", title);
    SimTime rest(0);
    for (size_t i = 0; i < rows.size(); ++i) {
      if (i >= limit) {
        rest += rows[i].time;
        continue;
      }
      absl::StrAppendFormat(&o, "  %-28s %14s %7s  host %s\n", rows[i].name, PathMs(rows[i].time),
                            PathPct(rows[i].time, t.path_time), PathMs(rows[i].host));
    }
    if (rows.size() > limit) absl::StrAppendFormat(&o, "  ... %d more, %s\n", rows.size() - limit, PathMs(rest));
  };
  const size_t limit = std::max<size_t>(t.top.size(), 1);
  table("By op class (Note [Time classes]):", t.by_class, t.by_class.size());
  table("By layer (Note [Time layers]):", t.by_layer, limit);
  table("By what each start waited for:", t.by_gate, t.by_gate.size());
  absl::StrAppend(&o, "\nLargest contributors:\n");
  for (size_t i = 0; i < t.top.size(); ++i) {
    const TimeContributor& c = t.top[i];
    absl::StrAppendFormat(&o, "%3d. %12s  %-12s %s%s  [%s, event %d%s]\n", i + 1, PathMs(c.time), c.op_class,
                          c.kind == "event" ? "" : absl::StrCat(c.kind, " of "), Shortened(c.name), c.layer, c.event,
                          c.kind == "event" ? absl::StrCat(", waited for ", c.gate) : "");
  }
  if (t.rest_segments > 0) {
    absl::StrAppendFormat(&o, "     ... and %d smaller segments, %s\n", t.rest_segments, PathMs(t.rest_time));
  }
  return o;
}

std::string RenderExplainTimeJson(const TimeExplanation& t) {
  JsonWriter j;
  j.BeginObject()
      .String("program", t.program)
      .String("device", t.device)
      .String("framework", t.framework)
      .Int("step_time_ns", t.step_time.ns())
      .Int("path_time_ns", t.path_time.ns())
      .String("note", t.note)
      .Int("segments", t.segments)
      .Int("host_bound_ns", t.host_bound.ns())
      .Int("host_busy_ns", t.host_busy.ns())
      .Int("host_wait_ns", t.host_wait.ns());
  j.BeginObject("communication")
      .Int("busy_ns", t.communication.ns())
      .Int("exposed_ns", t.exposed_communication.ns())
      .Int("overlapped_ns", t.overlapped_communication.ns())
      .Int("on_path_ns", t.communication_on_path.ns())
      .EndObject();
  j.BeginArray("host_bound_spans");
  for (const HostBoundSpan& h : t.host_spans) {
    j.BeginObject()
        .Int("start_ns", h.start.ns())
        .Int("end_ns", h.end.ns())
        .Int("first_event", h.first_event)
        .String("first", h.first)
        .String("first_layer", h.first_layer)
        .Int("last_event", h.last_event)
        .String("last", h.last)
        .String("last_layer", h.last_layer)
        .EndObject();
  }
  j.EndArray();
  for (const auto& [key, rows] : {std::pair<const char*, const std::vector<TimeRow>*>{"by_class", &t.by_class},
                                  {"by_layer", &t.by_layer},
                                  {"by_gate", &t.by_gate}}) {
    j.BeginArray(key);
    for (const TimeRow& row : *rows) {
      j.BeginObject()
          .String("name", row.name)
          .Int("time_ns", row.time.ns())
          .Int("host_ns", row.host.ns())
          .Int("segments", row.segments)
          .EndObject();
    }
    j.EndArray();
  }
  j.BeginArray("top");
  for (const TimeContributor& c : t.top) {
    j.BeginObject()
        .String("kind", c.kind)
        .Int("event", c.event)
        .String("name", c.name)
        .String("class", c.op_class)
        .String("layer", c.layer)
        .String("gate", c.gate)
        .Int("start_ns", c.start.ns())
        .Int("time_ns", c.time.ns())
        .EndObject();
  }
  j.EndArray().Int("rest_segments", t.rest_segments).Int("rest_ns", t.rest_time.ns()).EndObject();
  return j.Finish();
}

}  // namespace gpusim
