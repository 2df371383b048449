// The lifetime chart: one bar per buffer over the op timeline (x = op
// ordinal in program order, so short ops are as visible as long ones),
// grouped by role, with the phases shaded, loops and loop iterations marked
// above the plot and the peak drawn as a dashed line.
//
// Scale: the max_bars largest buffers get a bar; every role's remaining
// buffers share one row drawn as a sparkline of their live bytes, so the
// chart is at most max_bars + 2 × kNumRoles rows whatever the step.
#include <algorithm>
#include <numeric>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "viz/alloc_source.h"
#include "viz/step_view.h"
#include "viz/svg.h"
#include "viz/viz.h"

namespace gpusim {
namespace {

using viz_internal::FitText;
using viz_internal::HumanBytes;
using viz_internal::Num;
using viz_internal::RoleColor;
using viz_internal::StepView;
using viz_internal::Svg;

constexpr double kChartWidth = 1400;
constexpr double kChartLabel = 330, kChartRight = 20, kChartTop = 78, kChartBottom = 56, kChartRow = 15;

// The x axis: op ordinals, or for a trace with no ops (a memory snapshot)
// memory-event ordinals in trace order, so each block's bar spans its
// alloc to its free.
struct LifetimeAxis {
  bool by_events = false;
  std::vector<int64_t> x0, x1;  // per buffer
  int64_t peak_x = 0;
  int64_t nx = 0;
  int64_t nops = 1;  // nx, at least 1
  double pw = kChartWidth - kChartLabel - kChartRight;
  double X(int64_t op) const { return kChartLabel + pw * static_cast<double>(op) / static_cast<double>(nops); }
};

LifetimeAxis LifetimeAxisOf(const StepReport& r, const StepView& v) {
  const auto& bufs = r.lowered.buffers;
  LifetimeAxis a;
  a.by_events = v.num_ops == 0;
  a.x0 = v.op0;
  a.x1 = v.op1;
  a.peak_x = v.peak_op;
  a.nx = v.num_ops;
  if (a.by_events) {
    const auto& events = r.lowered.trace.events;
    std::vector<int64_t> ord(events.size(), 0);
    a.nx = 0;
    for (size_t e = 0; e < events.size(); ++e) {
      ord[e] = a.nx;
      if (events[e].type == EventType::kAlloc || events[e].type == EventType::kFree) ++a.nx;
    }
    for (size_t i = 0; i < bufs.size(); ++i) {
      a.x0[i] = bufs[i].alloc_event >= 0 ? ord[static_cast<size_t>(bufs[i].alloc_event)] : 0;
      a.x1[i] = bufs[i].free_event >= 0 ? ord[static_cast<size_t>(bufs[i].free_event)] + 1 : a.nx;
    }
    a.peak_x = v.peak_event >= 0 ? ord[static_cast<size_t>(v.peak_event)] : 0;
  }
  a.nops = std::max<int64_t>(a.nx, 1);
  return a;
}

// One role's rows: its buffers with bars, and the rest merged.
struct RoleGroup {
  Role role;
  std::vector<size_t> bars;
  std::vector<size_t> rest;
  Bytes total, rest_bytes;
};

// The largest max_bars buffers get bars.
std::vector<bool> Barred(const std::vector<BufferInfo>& bufs, const VizOptions& o) {
  const size_t nb = bufs.size();
  std::vector<size_t> idx(nb);
  std::iota(idx.begin(), idx.end(), 0);
  std::stable_sort(idx.begin(), idx.end(), [&](size_t a, size_t b) { return bufs[a].bytes > bufs[b].bytes; });
  std::vector<bool> barred(nb, false);
  for (size_t k = 0; k < idx.size() && k < static_cast<size_t>(std::max(o.max_bars, 0)); ++k) barred[idx[k]] = true;
  return barred;
}

// The buffers grouped by role in legend order, each group's bars by when
// they start.
std::vector<RoleGroup> RoleGroups(const std::vector<BufferInfo>& bufs, const std::vector<bool>& barred,
                                  const std::vector<int64_t>& x0) {
  const size_t nb = bufs.size();
  std::vector<RoleGroup> groups;
  for (Role role : viz_internal::LegendRoles()) {
    RoleGroup g{role, {}, {}, Bytes(0), Bytes(0)};
    for (size_t i = 0; i < nb; ++i) {
      if (bufs[i].role != role) continue;
      g.total += bufs[i].bytes;
      if (barred[i]) {
        g.bars.push_back(i);
      } else {
        g.rest.push_back(i);
        g.rest_bytes += bufs[i].bytes;
      }
    }
    if (g.bars.empty() && g.rest.empty()) continue;
    std::stable_sort(g.bars.begin(), g.bars.end(), [&](size_t a, size_t b) {
      if (x0[a] != x0[b]) return x0[a] < x0[b];
      return a < b;
    });
    groups.push_back(std::move(g));
  }
  return groups;
}

// Phases, loops, iterations.
void DrawProgramBands(Svg& svg, const StepView& v, const LifetimeAxis& a, double ph) {
  auto X = [&](int64_t op) { return a.X(op); };
  for (const auto& s : v.phases) {
    svg.Rect(X(s.op0), kChartTop, std::max(X(s.op1) - X(s.op0), 0.5), ph, viz_internal::PhaseColor(s.phase));
    if (X(s.op1) - X(s.op0) > 40) {
      svg.Text(X(s.op0) + 3, kChartTop - 4, FitText(s.label, X(s.op1) - X(s.op0) - 6, 10), "fill=\"#666\" font-size=\"10\"");
    }
  }
  for (const auto& s : v.loops) {
    svg.Rect(X(s.op0), 44, std::max(X(s.op1) - X(s.op0), 1.0), 10, "#d9d9d9", "stroke=\"#999\" stroke-width=\"0.5\"");
    svg.Text(X(s.op0) + 3, 52.5, FitText(absl::StrCat("loop: ", s.label), X(s.op1) - X(s.op0) - 4, 9),
             "font-size=\"9\"");
  }
  const bool iter_lines = v.iterations.size() <= 300;
  for (const auto& s : v.iterations) {
    const double x0 = X(s.op0), x1 = X(s.op1);
    svg.Rect(x0, 57, std::max(x1 - x0, 0.5), 9, s.phase == Phase::kBackward ? "#f6c9a0" : "#b9cfe8",
             "stroke=\"#fff\" stroke-width=\"0.5\"");
    const std::string t = FitText(s.label, x1 - x0 - 2, 8);
    if (!t.empty()) svg.Text(x0 + 1, 64, t, "font-size=\"8\"");
    if (iter_lines) svg.Line(x0, kChartTop, x0, kChartTop + ph, "#cccccc", "stroke-width=\"0.5\"");
  }
  if (!v.iterations.empty()) svg.Text(kChartLabel - 6, 64, "loop iterations", "font-size=\"9\" text-anchor=\"end\"");
  if (!v.loops.empty()) svg.Text(kChartLabel - 6, 52, "loops", "font-size=\"9\" text-anchor=\"end\"");
}

// A group's merged row at `y`: its label, and the live bytes of the merged
// buffers per op, then per 2 px bin (max).
void DrawMergedRow(Svg& svg, const RoleGroup& g, const std::vector<BufferInfo>& bufs, const LifetimeAxis& a,
                   const std::string& color, double y) {
  const int64_t nops = a.nops;
  const double pw = a.pw;
  svg.Text(10, y + 11,
           FitText(absl::StrCat("+ ", WithCommas(static_cast<int64_t>(g.rest.size())), " smaller (",
                                HumanBytes(g.rest_bytes), ")"),
                   310, 11),
           "fill=\"#555\" font-style=\"italic\"");
  std::vector<int64_t> delta(static_cast<size_t>(nops) + 1, 0);
  for (size_t i : g.rest) {
    delta[static_cast<size_t>(std::clamp<int64_t>(a.x0[i], 0, nops))] += bufs[i].bytes.value();
    delta[static_cast<size_t>(std::clamp<int64_t>(a.x1[i], 0, nops))] -= bufs[i].bytes.value();
  }
  const int bins = static_cast<int>(pw / 2);
  std::vector<int64_t> bin(static_cast<size_t>(bins), 0);
  int64_t cur = 0, mx = 1;
  for (int64_t k = 0; k < nops; ++k) {
    cur += delta[static_cast<size_t>(k)];
    const int b = std::min(bins - 1, static_cast<int>(static_cast<double>(k) * bins / static_cast<double>(nops)));
    bin[static_cast<size_t>(b)] = std::max(bin[static_cast<size_t>(b)], cur);
    mx = std::max(mx, cur);
  }
  std::string path = absl::StrCat("<path d=\"M", Num(kChartLabel), " ", Num(y + kChartRow - 1));
  for (int b = 0; b < bins; ++b) {
    const double yy = y + kChartRow - 1 - (kChartRow - 3) * static_cast<double>(bin[static_cast<size_t>(b)]) / static_cast<double>(mx);
    absl::StrAppend(&path, " L", Num(kChartLabel + 2.0 * b), " ", Num(yy), " L", Num(kChartLabel + 2.0 * (b + 1)), " ",
                    Num(yy));
  }
  absl::StrAppend(&path, " L", Num(kChartLabel + pw), " ", Num(y + kChartRow - 1), " Z\" fill=\"", color,
                  "\" fill-opacity=\"0.6\"><title>", viz_internal::XmlEscape(absl::StrCat(
                      "live bytes of the ", g.rest.size(), " merged ", std::string(RoleName(g.role)), " buffers; max ",
                      HumanBytes(Bytes(mx)))),
                  "</title></path>\n");
  svg.Raw(path);
}

// Peak, frame, axis.
void DrawPeakAndAxis(Svg& svg, const StepView& v, const LifetimeAxis& a, double ph) {
  const double pw = a.pw;
  const int64_t nops = a.nops;
  if (v.peak_event >= 0) {
    // On its own row under the axis title, so the two never overprint.
    const double xp = a.X(a.peak_x);
    svg.Line(xp, kChartTop, xp, kChartTop + ph, "#c00000", "stroke-width=\"1.2\" stroke-dasharray=\"5,3\"");
    const bool right = xp > kChartLabel + pw * 0.6;
    svg.Text(right ? xp - 3 : xp + 3, kChartTop + ph + 48,
             FitText(v.peak_op_name.empty() ? "peak" : absl::StrCat("peak (", v.peak_op_name, ")"),
                     right ? xp - 10 : kChartWidth - xp - 10, 11),
             right ? "fill=\"#c00000\" text-anchor=\"end\"" : "fill=\"#c00000\"");
  }
  svg.Rect(kChartLabel, kChartTop, pw, ph, "none", "stroke=\"#333\"");
  const double step = viz_internal::NiceStep(static_cast<double>(nops), 10);
  for (double t = 0; t <= static_cast<double>(nops); t += step) {
    const double x = kChartLabel + pw * t / static_cast<double>(nops);
    svg.Line(x, kChartTop + ph, x, kChartTop + ph + 4, "#333");
    svg.Text(x, kChartTop + ph + 15, absl::StrFormat("%g", t), "text-anchor=\"middle\"");
  }
  svg.Text(kChartLabel + pw / 2, kChartTop + ph + 32, a.by_events ? "memory event (trace order)" : "op (program order)",
           "text-anchor=\"middle\"");
}

}  // namespace

std::string LifetimesSvg(const StepReport& r, const VizOptions& o) {
  const StepView v = viz_internal::BuildStepView(r);
  const auto& bufs = r.lowered.buffers;
  const size_t nb = bufs.size();
  // Rows are grouped by role; a bar is coloured and named as the memory map
  // colours and labels its block (viz/alloc_source.h).
  const std::vector<viz_internal::AllocSource> sources = viz_internal::AllocSources(r);
  const VizColorBy by = viz_internal::ResolveColorBy(r, sources, o.color_by);
  auto row_name = [&](size_t i) { return by == VizColorBy::kRole || sources[i].label.empty() ? bufs[i].name : sources[i].label; };
  const LifetimeAxis a = LifetimeAxisOf(r, v);
  const bool by_events = a.by_events;
  const std::vector<int64_t>& x0 = a.x0;
  const std::vector<int64_t>& x1 = a.x1;

  const std::vector<bool> barred = Barred(bufs, o);
  const std::vector<RoleGroup> groups = RoleGroups(bufs, barred, x0);
  absl::flat_hash_map<std::string, int> name_count;  // among the bars
  for (size_t i = 0; i < nb; ++i) {
    if (barred[i]) ++name_count[row_name(i)];
  }
  size_t rows = 0;
  for (const RoleGroup& g : groups) rows += 1 + g.bars.size() + (g.rest.empty() ? 0 : 1);

  const double height = kChartTop + static_cast<double>(rows) * kChartRow + kChartBottom;
  const double ph = static_cast<double>(rows) * kChartRow;

  Svg svg(kChartWidth, height);
  svg.Text(10, 20,
           absl::StrCat("Buffer lifetimes — ", r.program.name, " (", WithCommas(static_cast<int64_t>(nb)),
                        " buffers, ", WithCommas(a.nx), by_events ? " memory events)" : " ops)"),
           "font-size=\"16\" font-weight=\"bold\"");
  svg.Text(10, 38, absl::StrCat("largest ", std::min<size_t>(nb, static_cast<size_t>(std::max(o.max_bars, 0))),
                                " buffers as bars, grouped by role; the rest merged per role (live bytes)"),
           "fill=\"#555\"");
  DrawProgramBands(svg, v, a, ph);

  // Rows.
  double y = kChartTop;
  for (const RoleGroup& g : groups) {
    const std::string color(RoleColor(g.role));
    svg.Rect(0, y, kChartLabel - 4, kChartRow, color, "fill-opacity=\"0.18\"");
    svg.Text(6, y + 11,
             absl::StrCat(std::string(RoleName(g.role)), " — ", WithCommas(static_cast<int64_t>(g.bars.size() + g.rest.size())),
                          " buffers, ", HumanBytes(g.total)),
             "font-weight=\"bold\"");
    y += kChartRow;
    for (size_t i : g.bars) {
      const BufferInfo& b = bufs[i];
      // A recorded trace names blocks by address, which repeats: such
      // labels also say where the bar lies, so every row reads apart.
      const std::string name = row_name(i);
      const bool repeated = name_count[name] > 1;
      svg.Text(10, y + 11,
               FitText(repeated ? absl::StrCat(name, by_events ? " @ events " : " @ ops ", x0[i], "–", x1[i]) : name,
                       245, 11));
      svg.Text(kChartLabel - 8, y + 11, HumanBytes(b.bytes), "text-anchor=\"end\" fill=\"#444\"");
      const double left = a.X(x0[i]), w = std::max(a.X(x1[i]) - left, 1.0);
      std::string title = absl::StrCat(b.name, " — ", HumanBytes(b.bytes), " (", b.bytes.value(), " B); ",
                                       by_events ? "memory events " : "ops ", x0[i], "–", x1[i],
                                       b.origin.empty() ? "" : "; ", b.origin);
      if (by != VizColorBy::kRole || !sources[i].label.empty()) {
        for (const std::string& line : viz_internal::SourceLines(sources[i])) absl::StrAppend(&title, "\n", line);
      }
      svg.RectWithTitle(left, y + 2, w, kChartRow - 4,
                        by == VizColorBy::kRole ? color : viz_internal::BufferColor(r, sources, by, b.id), title,
                        absl::StrCat("data-b=\"", i, "\""));  // report.html's cross-chart hover
      y += kChartRow;
    }
    if (!g.rest.empty()) {
      DrawMergedRow(svg, g, bufs, a, color, y);
      y += kChartRow;
    }
  }
  DrawPeakAndAxis(svg, v, a, ph);
  return svg.Finish();
}

}  // namespace gpusim
