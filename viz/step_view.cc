#include "viz/step_view.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "sim/trace/frames.h"

namespace gpusim {
namespace viz_internal {
namespace {

// Time span of ops [a, b).
void SetTimes(const StepView& v, const StepReport& /*r*/, Span* s) {
  s->t0 = v.step_time;
  s->t1 = SimTime(0);
  for (int64_t k = s->op0; k < s->op1; ++k) {
    const size_t e = static_cast<size_t>(v.op_event[static_cast<size_t>(k)]);
    s->t0 = std::min(s->t0, v.start[e]);
    s->t1 = Max(s->t1, v.end[e]);
  }
  if (s->t1 < s->t0) s->t1 = s->t0;
}

// Sibling spans drawn on one track must not overlap: each ends no later
// than the next begins (a prefetch collective may run past its region).
void ClipSiblings(std::vector<Span>* spans) {
  for (size_t i = 0; i + 1 < spans->size(); ++i) {
    Span& s = (*spans)[i];
    const Span& n = (*spans)[i + 1];
    if (s.t1 > n.t0 && n.t0 >= s.t0) s.t1 = n.t0;
  }
}

// The clock the charts draw on: the simulated one, or event order for a
// trace with no timed events.
void SetClock(const StepReport& r, StepView& v) {
  v.r = &r;
  v.xla = r.semantics.accounting == Accounting::kXlaMemoryAnalysis;
  const Trace& tr = r.lowered.trace;
  const size_t n = tr.events.size();
  v.start = r.sim.start;
  v.end = r.sim.end;
  v.start.resize(n, SimTime(0));
  v.end.resize(n, SimTime(0));
  v.event_clock = n > 0 && std::none_of(tr.events.begin(), tr.events.end(),
                                        [](const TraceEvent& e) { return IsTimed(e.type); });
  if (v.event_clock) {
    for (size_t e = 0; e < n; ++e) v.start[e] = v.end[e] = SimTime(static_cast<int64_t>(e));
  }
  v.step_time = Max(v.event_clock ? SimTime(static_cast<int64_t>(n)) : r.sim.step_time, SimTime(1));
  for (size_t e = 0; e < n; ++e) v.step_time = Max(v.step_time, v.end[e]);

}

// Each op's event; returns each event's op ordinal (memory events: the
// next op), with one past the last event.
std::vector<int64_t> IndexOps(const StepReport& r, StepView& v) {
  const Trace& tr = r.lowered.trace;
  const size_t n = tr.events.size();
  std::vector<int64_t> next_op(n + 1, 0);
  for (size_t e = 0; e < n; ++e) {
    if (IsTimed(tr.events[e].type)) v.op_event.push_back(static_cast<int64_t>(e));
  }
  v.num_ops = static_cast<int64_t>(v.op_event.size());
  {
    int64_t k = v.num_ops;
    next_op[n] = k;
    for (size_t e = n; e-- > 0;) {
      if (IsTimed(tr.events[e].type)) --k;
      next_op[e] = k;
    }
  }
  return next_op;
}

// Each buffer's time and op span.
void SetBufferSpans(const StepReport& r, const std::vector<int64_t>& next_op, StepView& v) {
  auto time_of = [&](int64_t e, SimTime dflt) { return e < 0 ? dflt : v.start[static_cast<size_t>(e)]; };

  const size_t nb = r.lowered.buffers.size();
  v.t0.resize(nb);
  v.t1.resize(nb);
  v.op0.resize(nb);
  v.op1.resize(nb);
  for (size_t i = 0; i < nb; ++i) {
    const BufferInfo& b = r.lowered.buffers[i];
    v.t0[i] = time_of(b.alloc_event, SimTime(0));
    v.t1[i] = time_of(b.free_event, v.step_time);
    v.op0[i] = b.alloc_event < 0 ? 0 : next_op[static_cast<size_t>(b.alloc_event)];
    // Freed after its last reader: the op just before the free.
    v.op1[i] = b.free_event < 0 ? v.num_ops : next_op[static_cast<size_t>(b.free_event)];
    if (v.op1[i] <= v.op0[i]) v.op1[i] = std::min(v.num_ops, v.op0[i] + 1);
  }

}

// Phases: runs of one phase over ops; loops and iterations from the
// program's regions.
void SetPhasesAndRegions(const StepReport& r, StepView& v) {
  const Trace& tr = r.lowered.trace;
  const bool program_matches = static_cast<int64_t>(r.program.ops.size()) == v.num_ops;
  auto phase_of = [&](int64_t k) {
    return tr.events[static_cast<size_t>(v.op_event[static_cast<size_t>(k)])].phase;
  };
  for (int64_t k = 0; k < v.num_ops; ++k) {
    const Phase p = phase_of(k);
    if (!v.phases.empty() && v.phases.back().phase == p) {
      v.phases.back().op1 = k + 1;
      continue;
    }
    v.phases.push_back({std::string(PhaseName(p)), p, k, k + 1, SimTime(0), SimTime(0)});
  }
  for (Span& s : v.phases) SetTimes(v, r, &s);
  ClipSiblings(&v.phases);

  // Loops and iterations from the program's regions.
  if (program_matches) {
    for (const Region& g : r.program.regions) {
      Span s{g.name, phase_of(g.first), g.first, static_cast<int64_t>(g.last) + 1, SimTime(0), SimTime(0)};
      if (s.op0 < 0 || s.op1 > v.num_ops || s.op0 >= s.op1) continue;
      SetTimes(v, r, &s);
      if (g.kind == "loop") v.loops.push_back(s);
      if (g.kind == "layer") v.iterations.push_back(s);
    }
    if (v.iterations.empty()) {
      // No layer regions (a program file's scan): runs of one op.layer.
      for (int64_t k = 0; k < v.num_ops; ++k) {
        const Op& op = r.program.ops[static_cast<size_t>(k)];
        if (op.layer < 0) continue;
        if (!v.iterations.empty() && v.iterations.back().op1 == k &&
            r.program.ops[static_cast<size_t>(k - 1)].layer == op.layer &&
            v.iterations.back().phase == op.phase) {
          v.iterations.back().op1 = k + 1;
          continue;
        }
        v.iterations.push_back({absl::StrCat("iter", op.layer, ".", std::string(PhaseName(op.phase))),
                                op.phase, k, k + 1, SimTime(0), SimTime(0)});
      }
      for (Span& s : v.iterations) SetTimes(v, r, &s);
    }
    std::stable_sort(v.iterations.begin(), v.iterations.end(),
                     [](const Span& a, const Span& b) { return a.op0 < b.op0; });
    ClipSiblings(&v.iterations);
    ClipSiblings(&v.loops);
  }

}

void SetRepeats(const StepReport& r, StepView& v) {
  const Trace& tr = r.lowered.trace;
  const size_t n = tr.events.size();
  const bool program_matches = static_cast<int64_t>(r.program.ops.size()) == v.num_ops;
  // Note [Repeated iterations in the charts]: the repeats the engine
  // charged, with their periods.
  if (!v.event_clock) {
    for (size_t k = 0; k < tr.repeats.size() && k < r.sim.repeat_periods.size(); ++k) {
      const TraceRepeat& rp = tr.repeats[k];
      if (rp.times <= 1 || rp.first < 0 || rp.last < rp.first || rp.last >= static_cast<int64_t>(n)) continue;
      RepeatSpan s{rp.first,   rp.last,    rp.times, r.sim.repeat_periods[k],
                   absl::StrCat("events ", rp.first, "-", rp.last), v.step_time, SimTime(0)};
      for (int64_t e = rp.first; e <= rp.last; ++e) {
        s.t0 = std::min(s.t0, v.start[static_cast<size_t>(e)]);
        s.t1 = Max(s.t1, v.end[static_cast<size_t>(e)]);
      }
      s.t0 += s.period;
      s.t1 += s.period * (rp.times - 1);
      if (program_matches) {
        for (const Region& g : r.program.regions) {
          if (g.repeat == rp.times && g.first <= g.last && g.last < v.num_ops &&
              v.op_event[static_cast<size_t>(g.first)] >= rp.first &&
              v.op_event[static_cast<size_t>(g.last)] <= rp.last) {
            s.label = g.name;
          }
        }
      }
      v.repeats.push_back(std::move(s));
    }
  }

}

// Live bytes in trace order (the engine's ideal tracker); returns the
// event of the live peak.
int64_t SetLiveBytes(const StepReport& r, StepView& v) {
  const Trace& tr = r.lowered.trace;
  const size_t n = tr.events.size();
  Bytes cur = tr.preexisting;
  v.live_peak = cur;
  int64_t live_peak_event = -1;
  size_t rep = 0;
  Bytes rep_max(-1);
  SimTime rep_t0, rep_t1;  // the steady run's first and last memory event
  for (size_t e = 0; e < n; ++e) {
    const TraceEvent& ev = tr.events[e];
    const bool memory = ev.type == EventType::kAlloc || ev.type == EventType::kFree;
    if (memory) {
      const Bytes b = r.lowered.buffers[static_cast<size_t>(ev.buffer)].bytes;
      cur += ev.type == EventType::kAlloc ? b : Bytes(0) - b;
      v.live.push_back({v.start[e], cur, static_cast<int64_t>(e)});
      if (cur > v.live_peak) {
        v.live_peak = cur;
        live_peak_event = static_cast<int64_t>(e);
      }
    }
    if (rep >= v.repeats.size() || static_cast<int64_t>(e) < v.repeats[rep].first) continue;
    const RepeatSpan& rs = v.repeats[rep];
    if (memory) {
      if (rep_max < Bytes(0)) rep_t0 = v.start[e];
      rep_max = std::max(rep_max, cur);
      rep_t1 = v.start[e];
    }
    if (static_cast<int64_t>(e) < rs.last) continue;
    // The further iterations' memory events, each a period after the last.
    if (rep_max >= Bytes(0)) {
      v.live.push_back({rep_t0 + rs.period, rep_max, rs.last});
      v.live.push_back({rep_t1 + rs.period * (rs.times - 1), cur, rs.last});
    }
    ++rep;
    rep_max = Bytes(-1);
  }
  return live_peak_event;
}

// The peak the charts mark, and the op named at it.
void SetPeak(const StepReport& r, const std::vector<int64_t>& next_op, int64_t live_peak_event, StepView& v) {
  const Trace& tr = r.lowered.trace;
  v.peak_event = v.xla && r.temp_peak_event >= 0 ? r.temp_peak_event : live_peak_event;
  if (v.peak_event >= 0) {
    v.peak_time = v.start[static_cast<size_t>(v.peak_event)];
    v.peak_op = std::min(next_op[static_cast<size_t>(v.peak_event)], std::max<int64_t>(v.num_ops - 1, 0));
    // Named as `explain` names it: the op at or before the peak event.
    for (int64_t e = v.peak_event; e >= 0; --e) {
      if (IsTimed(tr.events[static_cast<size_t>(e)].type)) {
        v.peak_op_name = tr.events[static_cast<size_t>(e)].name;
        break;
      }
    }
  }
}

}  // namespace

StepView BuildStepView(const StepReport& r) {
  StepView v;
  SetClock(r, v);
  const std::vector<int64_t> next_op = IndexOps(r, v);
  SetBufferSpans(r, next_op, v);
  SetPhasesAndRegions(r, v);
  SetRepeats(r, v);
  const int64_t live_peak_event = SetLiveBytes(r, v);
  SetPeak(r, next_op, live_peak_event, v);
  return v;
}

std::vector<std::string> AllocFrames(const StepReport& r, BufferId id, size_t max_frames) {
  if (id < 0 || static_cast<size_t>(id) >= r.lowered.buffers.size()) return {};
  const int64_t e = r.lowered.buffers[static_cast<size_t>(id)].alloc_event;
  const Trace& tr = r.lowered.trace;
  if (e < 0 || static_cast<size_t>(e) >= tr.events.size()) return {};
  // Note [memory_viz's frame filter] (sim/trace/frames.h).
  std::vector<std::string> out = ShownFrameLines(tr.frames, tr.events[static_cast<size_t>(e)].stack, max_frames);
  if (!out.empty() && out.size() > max_frames) {
    out.back().replace(0, 3, "…");  // "... N more frames" → "… N more frames"
  }
  return out;
}

std::string WhenLabel(const StepView& v, SimTime t) {
  return v.event_clock ? absl::StrCat("event ", WithCommas(t.ns())) : HumanTime(t);
}

TimeAxis TimeAxisFor(const StepView& v) {
  if (v.event_clock) return {"memory event (the trace has no timed events)", 1};
  const bool in_ms = v.step_time.ns() >= 1000000;
  return {absl::StrCat("simulated time (", in_ms ? "ms" : "us", ")"), in_ms ? 1e6 : 1e3};
}

void DrawTimeAxis(Svg& svg, const StepView& v, double tmax, double left, double top, double pw, double ph,
                  double title_y) {
  const TimeAxis axis = TimeAxisFor(v);
  const double span = tmax / axis.divisor;
  const double xstep = NiceStep(span, 10);
  for (double t = 0; t <= span + 1e-9; t += xstep) {
    const double x = left + pw * t / span;
    svg.Line(x, top + ph, x, top + ph + 4, "#333");
    svg.Text(x, top + ph + 16, absl::StrFormat("%g", t), "text-anchor=\"middle\"");
  }
  svg.Text(left + pw / 2, title_y, axis.title, "text-anchor=\"middle\"");
}

void DrawBytesAxis(Svg& svg, double ymax, double left, double top, double pw, double ph, int ticks, bool grid,
                   std::string_view what) {
  const double gib = static_cast<double>(1LL << 30);
  const double unit = ymax >= gib ? gib : ymax >= (1 << 20) ? static_cast<double>(1 << 20) : 1024.0;
  const char* unit_name = ymax >= gib ? "GiB" : ymax >= (1 << 20) ? "MiB" : "KiB";
  const double ystep = NiceStep(ymax / unit, ticks);
  for (double t = 0; t * unit <= ymax; t += ystep) {
    const double y = top + ph - ph * t * unit / ymax;
    svg.Line(left - 4, y, left, y, "#333");
    if (grid) svg.Line(left, y, left + pw, y, "#000", "stroke-opacity=\"0.08\"");
    svg.Text(left - 6, y + 4, absl::StrFormat("%g", t), "text-anchor=\"end\"");
  }
  svg.Text(18, top + ph / 2, absl::StrCat(std::string(what), " (", unit_name, ")"),
           absl::StrCat("transform=\"rotate(-90 18 ", Num(top + ph / 2), ")\" text-anchor=\"middle\""));
}

std::string_view RoleColor(Role role) {
  switch (role) {
    case Role::kParameter: return "#4e79a7";
    case Role::kOptimizerState: return "#9c755f";
    case Role::kGradient: return "#e15759";
    case Role::kActivation: return "#59a14f";
    case Role::kResidual: return "#f28e2b";
    case Role::kTemporary: return "#bab0ac";
    case Role::kWorkspace: return "#76b7b2";
    case Role::kInputBatch: return "#edc948";
    case Role::kLoopState: return "#b07aa1";
    case Role::kScalar: return "#ff9da7";
  }
  return "#000000";
}

const std::vector<Role>& LegendRoles() {
  static const auto* roles = new std::vector<Role>{
      Role::kParameter, Role::kOptimizerState, Role::kGradient,  Role::kActivation, Role::kResidual,
      Role::kLoopState, Role::kTemporary,      Role::kWorkspace, Role::kInputBatch, Role::kScalar};
  return *roles;
}

std::string_view PhaseColor(Phase p) {
  switch (p) {
    case Phase::kForward: return "#e8f0fa";
    case Phase::kBackward: return "#fbeee2";
    case Phase::kOptimizer: return "#e6f3e4";
    case Phase::kOther: return "#f4f4f4";
  }
  return "#ffffff";
}

std::string HumanBytes(Bytes b) {
  const int64_t v = b.value();
  const double a = static_cast<double>(v < 0 ? -v : v);
  if (a < 1024) return absl::StrCat(v, " B");
  static const char* kUnits[] = {"KiB", "MiB", "GiB", "TiB"};
  double x = static_cast<double>(v) / 1024;
  int u = 0;
  while ((x >= 1024 || x <= -1024) && u < 3) {
    x /= 1024;
    ++u;
  }
  const double ax = x < 0 ? -x : x;
  return absl::StrFormat("%.*f %s", ax >= 100 ? 0 : ax >= 10 ? 1 : 2, x, kUnits[u]);
}

std::string HumanTime(SimTime t) {
  const double ns = static_cast<double>(t.ns());
  if (ns >= 1e9) return absl::StrFormat("%.3f s", ns / 1e9);
  if (ns >= 1e6) return absl::StrFormat("%.1f ms", ns / 1e6);
  if (ns >= 1e3) return absl::StrFormat("%.1f us", ns / 1e3);
  return absl::StrFormat("%d ns", t.ns());
}

}  // namespace viz_internal
}  // namespace gpusim
