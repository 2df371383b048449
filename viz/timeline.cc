// The memory timeline: live bytes (the engine's no-fragmentation tracker)
// over simulated time, with the device capacity, the reported peak (under
// XLA the packed heap makes it ≥ the live peak) and the phases shaded.
//
// Scale: the curve is reduced to one point per pixel column holding the
// column's maximum, so a transient peak is never lost and the SVG has at
// most ~2 × width points whatever the number of memory events.
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

constexpr double kWidth = 1400, kHeight = 520;
constexpr double kLeft = 80, kRight = 30, kTop = 56, kBottom = 46;

}  // namespace

std::string TimelineSvg(const StepReport& r, const VizOptions&) {
  const StepView v = viz_internal::BuildStepView(r);
  const double pw = kWidth - kLeft - kRight, ph = kHeight - kTop - kBottom;
  const double tmax = static_cast<double>(v.step_time.ns());
  const double top_bytes = static_cast<double>(std::max({v.live_peak.value(), r.peak.value(), int64_t{1}}));
  const bool show_capacity = r.capacity.value() > 0 && static_cast<double>(r.capacity.value()) <= top_bytes * 1.6;
  const double ymax = std::max(top_bytes, show_capacity ? static_cast<double>(r.capacity.value()) : 0.0) * 1.08;
  auto X = [&](SimTime t) { return kLeft + pw * static_cast<double>(t.ns()) / tmax; };
  auto Y = [&](double b) { return kTop + ph - ph * b / ymax; };

  Svg svg(kWidth, kHeight);
  svg.Text(kLeft, 22, absl::StrCat("Memory timeline — ", r.program.name, " on ", r.spec.device.name),
           "font-size=\"16\" font-weight=\"bold\"");
  svg.Text(kLeft, 40,
           absl::StrCat("live bytes (no-fragmentation tracker) over simulated time; step ", HumanTime(v.step_time)),
           "fill=\"#555\"");
  for (const auto& s : v.phases) {
    svg.Rect(X(s.t0), kTop, std::max(X(s.t1) - X(s.t0), 0.5), ph, viz_internal::PhaseColor(s.phase));
    if (X(s.t1) - X(s.t0) > 50) svg.Text(X(s.t0) + 3, kTop + 12, s.label, "fill=\"#777\" font-size=\"10\"");
  }
  if (v.iterations.size() <= 400) {
    for (const auto& s : v.iterations) svg.Line(X(s.t0), kTop + ph, X(s.t0), kTop + ph - 6, "#333");
  }

  // Column maxima: each column starts at the value carried into it.
  const int cols = static_cast<int>(pw);
  std::vector<int64_t> col(static_cast<size_t>(cols), -1);
  int64_t carry = r.lowered.trace.preexisting.value();
  size_t p = 0;
  for (int c = 0; c < cols; ++c) {
    const double t_end = tmax * (c + 1) / cols;
    int64_t m = carry;
    while (p < v.live.size() && (static_cast<double>(v.live[p].t.ns()) < t_end || c == cols - 1)) {
      m = std::max(m, v.live[p].live.value());
      carry = v.live[p].live.value();
      ++p;
    }
    col[static_cast<size_t>(c)] = m;
  }
  std::string path = absl::StrCat("<path d=\"M", Num(kLeft), " ", Num(Y(0)));
  for (int c = 0; c < cols; ++c) {
    const double y = Y(static_cast<double>(col[static_cast<size_t>(c)]));
    absl::StrAppend(&path, " L", Num(kLeft + c), " ", Num(y), " L", Num(kLeft + c + 1), " ", Num(y));
  }
  absl::StrAppend(&path, " L", Num(kLeft + pw), " ", Num(Y(0)),
                  " Z\" fill=\"#4e79a7\" fill-opacity=\"0.55\" stroke=\"#2b4f7a\" stroke-width=\"0.8\"/>\n");
  svg.Raw(path);

  // Capacity, reported peak, live peak.
  if (show_capacity) {
    const double yc = Y(static_cast<double>(r.capacity.value()));
    svg.Line(kLeft, yc, kLeft + pw, yc, "#c00000", "stroke-width=\"1.5\"");
    svg.Text(kLeft + pw - 4, yc - 4, absl::StrCat("capacity ", HumanBytes(r.capacity)),
             "fill=\"#c00000\" text-anchor=\"end\"");
  }
  if (r.peak != v.live_peak) {
    const double yp = Y(static_cast<double>(r.peak.value()));
    svg.Line(kLeft, yp, kLeft + pw, yp, "#7a3e9d", "stroke-dasharray=\"6,3\"");
    svg.Text(kLeft + 4, yp - 4,
             absl::StrCat("reported peak ", HumanBytes(r.peak),
                          v.xla ? " = argument + output − alias + packed temp heap" : ""),
             "fill=\"#7a3e9d\"");
  }
  SimTime t_peak;
  for (const auto& lp : v.live) {
    if (lp.live == v.live_peak) {
      t_peak = lp.t;
      break;
    }
  }
  const double xp = X(t_peak), yp = Y(static_cast<double>(v.live_peak.value()));
  svg.Raw(absl::StrCat("<circle cx=\"", Num(xp), "\" cy=\"", Num(yp), "\" r=\"4\" fill=\"#c00000\"/>\n"));
  const bool right = xp > kLeft + pw * 0.6;
  svg.Text(right ? xp - 8 : xp + 8, yp + 14,
           absl::StrCat("live peak ", HumanBytes(v.live_peak), " at ", HumanTime(t_peak)),
           absl::StrCat("fill=\"#c00000\" font-weight=\"bold\" text-anchor=\"", right ? "end" : "start", "\""));

  // Axes.
  svg.Rect(kLeft, kTop, pw, ph, "none", "stroke=\"#333\"");
  const double gib = static_cast<double>(1LL << 30);
  const double unit = ymax >= gib ? gib : ymax >= (1 << 20) ? static_cast<double>(1 << 20) : 1024.0;
  const char* unit_name = ymax >= gib ? "GiB" : ymax >= (1 << 20) ? "MiB" : "KiB";
  const double ystep = viz_internal::NiceStep(ymax / unit, 6);
  for (double t = 0; t * unit <= ymax; t += ystep) {
    svg.Line(kLeft - 4, Y(t * unit), kLeft, Y(t * unit), "#333");
    svg.Line(kLeft, Y(t * unit), kLeft + pw, Y(t * unit), "#000", "stroke-opacity=\"0.08\"");
    svg.Text(kLeft - 6, Y(t * unit) + 4, absl::StrFormat("%g", t), "text-anchor=\"end\"");
  }
  svg.Text(18, kTop + ph / 2, absl::StrCat("live (", unit_name, ")"),
           absl::StrCat("transform=\"rotate(-90 18 ", Num(kTop + ph / 2), ")\" text-anchor=\"middle\""));
  const bool in_ms = tmax >= 1e6;
  const double span = in_ms ? tmax / 1e6 : tmax / 1e3;
  const double xstep = viz_internal::NiceStep(span, 10);
  for (double t = 0; t <= span + 1e-9; t += xstep) {
    const double x = kLeft + pw * t / span;
    svg.Line(x, kTop + ph, x, kTop + ph + 4, "#333");
    svg.Text(x, kTop + ph + 16, absl::StrFormat("%g", t), "text-anchor=\"middle\"");
  }
  svg.Text(kLeft + pw / 2, kHeight - 10, absl::StrCat("simulated time (", in_ms ? "ms" : "us", ")"),
           "text-anchor=\"middle\"");
  return svg.Finish();
}

}  // namespace gpusim
