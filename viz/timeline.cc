// The memory timeline over simulated time: live bytes (the engine's
// no-fragmentation tracker) filled; the configured allocator's allocated and
// reserved bytes (SimResult::allocator_curve) as solid lines; a replayed
// trace's recorded "Total Allocated" / "Total Reserved" (VizOptions::
// recorded_memory) as dashed lines; the device capacity, the reported peak
// (under XLA the packed heap makes it ≥ the live peak) and the phases shaded.
//
// What the two allocator curves mean (torch.cuda.memory_allocated() and
// memory_reserved(), PyTorch c10/cuda/CUDACachingAllocator.cpp
// DeviceStats::allocated_bytes / reserved_bytes): allocated is the sum of
// the blocks handed out, each request rounded up (512 B, kMinBlockSize);
// reserved is what the allocator holds from the device (segments), cached
// blocks included, so reserved ≥ allocated ≥ live.
//
// Scale: every curve is reduced to one point per pixel column holding the
// column's maximum, so a transient peak is never lost and the SVG has at
// most ~2 × width points per curve whatever the number of memory events.
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "viz/step_view.h"
#include "viz/svg.h"
#include "viz/viz.h"

namespace gpusim {
namespace {

using viz_internal::HumanBytes;
using viz_internal::HumanTime;
using viz_internal::Num;
using viz_internal::StepView;
using viz_internal::Svg;

constexpr double kTimelineWidth = 1400, kTimelineHeight = 560;
constexpr double kTimelineLeft = 80, kTimelineRight = 30, kTimelineTop = 56, kTimelineBottom = 84;

// A step curve: value after each point, in time order; `initial` before the
// first (-1: unknown, nothing drawn there).
struct Curve {
  std::vector<std::pair<SimTime, int64_t>> points;
  int64_t initial = -1;
  int64_t peak = -1;
  SimTime peak_time;
};

void AddPoint(Curve* c, SimTime t, int64_t v) {
  c->points.push_back({t, v});
  if (v > c->peak) {
    c->peak = v;
    c->peak_time = t;
  }
}

// Per pixel column of `cols` over [0, tmax]: the curve's maximum in it
// (-1 where it is unknown).
std::vector<int64_t> ColumnMax(const Curve& c, double tmax, int cols) {
  std::vector<int64_t> col(static_cast<size_t>(cols), -1);
  int64_t carry = c.initial;
  size_t p = 0;
  for (int k = 0; k < cols; ++k) {
    const double t_end = tmax * (k + 1) / cols;
    int64_t m = carry;
    while (p < c.points.size() && (static_cast<double>(c.points[p].first.ns()) < t_end || k == cols - 1)) {
      m = std::max(m, c.points[p].second);
      carry = c.points[p].second;
      ++p;
    }
    col[static_cast<size_t>(k)] = m;
  }
  return col;
}

struct Series {
  std::string label;
  std::string color;
  std::string dash;  // stroke-dasharray; empty = solid
  double width = 1.5;
  Curve curve;
};

// The curves besides live: the allocator's allocated and reserved, and the
// recorded ones.
std::vector<Series> OtherSeries(const StepReport& r, const VizOptions& o, const StepView& v) {
  std::vector<Series> lines;
  const bool ideal = r.sim.allocator_name.empty() || r.sim.allocator_name == "ideal";
  if (!ideal && !r.sim.allocator_curve.empty()) {
    Series alloc{absl::StrCat("allocated (", r.sim.allocator_name, ")"), "#1f5f99", "", 1.3, {}};
    Series resv{absl::StrCat("reserved (", r.sim.allocator_name, ")"), "#e07b00", "", 2.0, {}};
    // Bytes live before the trace began never passed through the replayed
    // allocator; they are counted as allocated and reserved, as they were
    // in the recorded run.
    // A start state holds them already (Note [One start state for every
    // command], sim/alloc/start_state.cc).
    const int64_t pre = r.sim.preexisting_in_allocator ? 0 : r.lowered.trace.preexisting.value();
    for (const AllocatorSample& s : r.sim.allocator_curve) {
      const SimTime t = v.start[static_cast<size_t>(s.event)];
      AddPoint(&alloc.curve, t, pre + s.allocated.value());
      AddPoint(&resv.curve, t, pre + s.reserved.value());
    }
    alloc.curve.initial = resv.curve.initial = pre;
    lines.push_back(std::move(resv));
    lines.push_back(std::move(alloc));
  }
  if (o.recorded_memory != nullptr && !o.recorded_memory->empty()) {
    Series alloc{"recorded Total Allocated", "#2a8a3e", "7,4", 1.6, {}};
    Series resv{"recorded Total Reserved", "#8e44ad", "2,3", 2.2, {}};
    for (const RecordedMemorySample& s : *o.recorded_memory) {
      if (s.event < 0 || s.event >= static_cast<int64_t>(v.start.size())) continue;
      const SimTime t = v.start[static_cast<size_t>(s.event)];
      if (s.allocated.has_value()) AddPoint(&alloc.curve, t, s.allocated->value());
      if (s.reserved.has_value()) AddPoint(&resv.curve, t, s.reserved->value());
    }
    if (!resv.curve.points.empty()) lines.push_back(std::move(resv));
    if (!alloc.curve.points.empty()) lines.push_back(std::move(alloc));
  }
  return lines;
}

// Legend under the axis, wrapping to a second row: swatch, label and peak
// of each curve.
void DrawLegend(Svg& svg, const StepView& v, const std::vector<Series>& lines) {
  double lx = kTimelineLeft, ly = kTimelineHeight - 30;
  auto legend = [&](const std::string& label, auto swatch) {
    const double w = 30 + 6.6 * static_cast<double>(label.size()) + 24;
    if (lx > kTimelineLeft && lx + w > kTimelineWidth - kTimelineRight) {
      lx = kTimelineLeft;
      ly += 18;
    }
    svg.Raw(swatch(lx, ly));
    svg.Text(lx + 30, ly + 4, label);
    lx += w;
  };
  legend(absl::StrCat("live, no fragmentation (peak ", HumanBytes(v.live_peak), ")"), [](double x, double y) {
    return absl::StrCat("<rect x=\"", Num(x), "\" y=\"", Num(y - 5), "\" width=\"24\" height=\"10\" fill=\"#4e79a7\" "
                        "fill-opacity=\"0.45\" stroke=\"#2b4f7a\" stroke-width=\"0.8\"/>\n");
  });
  for (const Series& s : lines) {
    legend(absl::StrCat(s.label, " (peak ", HumanBytes(Bytes(s.curve.peak)), ")"), [&](double x, double y) {
      return absl::StrCat("<line x1=\"", Num(x), "\" y1=\"", Num(y), "\" x2=\"", Num(x + 24), "\" y2=\"", Num(y),
                          "\" stroke=\"", s.color, "\" stroke-width=\"", Num(s.width + 0.5), "\"",
                          s.dash.empty() ? "" : absl::StrCat(" stroke-dasharray=\"", s.dash, "\""), "/>\n");
    });
  }
}

}  // namespace

std::string TimelineSvg(const StepReport& r, const VizOptions& o) {
  const StepView v = viz_internal::BuildStepView(r);
  const double pw = kTimelineWidth - kTimelineLeft - kTimelineRight;
  const double ph = kTimelineHeight - kTimelineTop - kTimelineBottom;
  const double tmax = static_cast<double>(v.step_time.ns());
  const int cols = static_cast<int>(pw);

  const std::vector<Series> lines = OtherSeries(r, o, v);
  const bool ideal = r.sim.allocator_name.empty() || r.sim.allocator_name == "ideal";

  double top_bytes = static_cast<double>(std::max({v.live_peak.value(), r.peak.value(), int64_t{1}}));
  for (const Series& s : lines) top_bytes = std::max(top_bytes, static_cast<double>(s.curve.peak));
  const bool show_capacity = r.capacity.value() > 0 && static_cast<double>(r.capacity.value()) <= top_bytes * 1.6;
  const double ymax = std::max(top_bytes, show_capacity ? static_cast<double>(r.capacity.value()) : 0.0) * 1.08;
  auto X = [&](SimTime t) { return kTimelineLeft + pw * static_cast<double>(t.ns()) / tmax; };
  auto Y = [&](double b) { return kTimelineTop + ph - ph * b / ymax; };

  Svg svg(kTimelineWidth, kTimelineHeight);
  svg.Text(kTimelineLeft, 22,
           viz_internal::FitText(absl::StrCat("Memory timeline — ", r.program.name, " on ", r.spec.device.name),
                                 pw, 16),
           "font-size=\"16\" font-weight=\"bold\"");
  svg.Text(kTimelineLeft, 40,
           absl::StrCat("bytes on the device over ",
                        v.event_clock ? absl::StrCat("the trace's ", WithCommas(v.step_time.ns()), " memory events")
                                      : absl::StrCat("simulated time; step ", HumanTime(v.step_time)),
                        ideal ? "; ideal allocator: allocated = reserved = live" : "",
                        !ideal && r.lowered.trace.preexisting.value() > 0
                            ? absl::StrCat("; allocator curves include the ", HumanBytes(r.lowered.trace.preexisting),
                                           " live before the trace began",
                                           r.sim.preexisting_in_allocator ? " (in the replay's start state)" : "")
                            : ""),
           "fill=\"#555\"");
  for (const auto& s : v.phases) {
    svg.Rect(X(s.t0), kTimelineTop, std::max(X(s.t1) - X(s.t0), 0.5), ph, viz_internal::PhaseColor(s.phase));
    if (X(s.t1) - X(s.t0) > 50) svg.Text(X(s.t0) + 3, kTimelineTop + 12, s.label, "fill=\"#777\" font-size=\"10\"");
  }
  if (v.iterations.size() <= 400) {
    for (const auto& s : v.iterations) svg.Line(X(s.t0), kTimelineTop + ph, X(s.t0), kTimelineTop + ph - 6, "#333");
  }

  // Live bytes, filled.
  Curve live;
  live.initial = r.lowered.trace.preexisting.value();
  for (const auto& lp : v.live) AddPoint(&live, lp.t, lp.live.value());
  const std::vector<int64_t> live_col = ColumnMax(live, tmax, cols);
  std::string path = absl::StrCat("<path d=\"M", Num(kTimelineLeft), " ", Num(Y(0)));
  for (int c = 0; c < cols; ++c) {
    const double y = Y(static_cast<double>(std::max<int64_t>(live_col[static_cast<size_t>(c)], 0)));
    absl::StrAppend(&path, " L", Num(kTimelineLeft + c), " ", Num(y), " L", Num(kTimelineLeft + c + 1), " ", Num(y));
  }
  absl::StrAppend(&path, " L", Num(kTimelineLeft + pw), " ", Num(Y(0)),
                  " Z\" fill=\"#4e79a7\" fill-opacity=\"0.45\" stroke=\"#2b4f7a\" stroke-width=\"0.8\"/>\n");
  svg.Raw(path);

  // The other curves, as step lines over their known columns.
  for (const Series& s : lines) {
    const std::vector<int64_t> col = ColumnMax(s.curve, tmax, cols);
    std::string d;
    bool open = false;
    for (int c = 0; c < cols; ++c) {
      const int64_t b = col[static_cast<size_t>(c)];
      if (b < 0) {
        open = false;
        continue;
      }
      const double y = Y(static_cast<double>(b));
      absl::StrAppend(&d, open ? " L" : " M", Num(kTimelineLeft + c), " ", Num(y), " L", Num(kTimelineLeft + c + 1), " ",
                      Num(y));
      open = true;
    }
    if (d.empty()) continue;
    svg.Raw(absl::StrCat("<path d=\"", d.substr(1), "\" fill=\"none\" stroke=\"", s.color, "\" stroke-width=\"",
                         Num(s.width), "\"", s.dash.empty() ? "" : absl::StrCat(" stroke-dasharray=\"", s.dash, "\""),
                         " stroke-linejoin=\"round\"/>\n"));
  }

  // Capacity, reported peak, live peak.
  if (show_capacity) {
    const double yc = Y(static_cast<double>(r.capacity.value()));
    svg.Line(kTimelineLeft, yc, kTimelineLeft + pw, yc, "#c00000", "stroke-width=\"1.5\"");
    svg.Text(kTimelineLeft + pw - 4, yc - 4, absl::StrCat("capacity ", HumanBytes(r.capacity)),
             "fill=\"#c00000\" text-anchor=\"end\"");
  }
  if (r.peak != v.live_peak) {
    const double yp = Y(static_cast<double>(r.peak.value()));
    svg.Line(kTimelineLeft, yp, kTimelineLeft + pw, yp, "#7a3e9d", "stroke-dasharray=\"6,3\"");
    svg.Text(kTimelineLeft + 4, yp - 4,
             absl::StrCat("reported peak ", HumanBytes(r.peak),
                          v.xla ? " = argument + output − alias + packed temp heap" : ""),
             "fill=\"#7a3e9d\"");
  }
  auto mark_peak = [&](const Curve& c, const std::string& what, const std::string& color, double dy) {
    const double xp = X(c.peak_time), yp = Y(static_cast<double>(c.peak));
    svg.Raw(absl::StrCat("<circle cx=\"", Num(xp), "\" cy=\"", Num(yp), "\" r=\"4\" fill=\"", color, "\"/>\n"));
    const bool right = xp > kTimelineLeft + pw * 0.6;
    svg.Text(right ? xp - 8 : xp + 8, yp + dy,
             absl::StrCat(what, " ", HumanBytes(Bytes(c.peak)), " at ", viz_internal::WhenLabel(v, c.peak_time)),
             absl::StrCat("fill=\"", color, "\" font-weight=\"bold\" text-anchor=\"", right ? "end" : "start", "\""));
  };
  // The simulated reserved peak, when it differs from the live one.
  if (!lines.empty() && !ideal && lines[0].curve.peak > v.live_peak.value()) {
    mark_peak(lines[0].curve, "reserved peak", lines[0].color, -6);
  }
  mark_peak(live, "live peak", "#c00000", 14);

  // Axes.
  svg.Rect(kTimelineLeft, kTimelineTop, pw, ph, "none", "stroke=\"#333\"");
  viz_internal::DrawBytesAxis(svg, ymax, kTimelineLeft, kTimelineTop, pw, ph, 6, /*grid=*/true, "bytes");
  viz_internal::DrawTimeAxis(svg, v, tmax, kTimelineLeft, kTimelineTop, pw, ph, kTimelineTop + ph + 34);

  DrawLegend(svg, v, lines);
  return svg.Finish();
}

}  // namespace gpusim
