// The active memory timeline: the bytes live on the device over time,
// stacked into bands, as PyTorch memory_viz's "Active Memory Timeline"
// draws a snapshot (torch/utils/viz/MemoryViz.js, process_alloc_data and
// MemoryPlot).
//
//   by role        one band per role, in the legend order of the memory map:
//                  a simulated step's, or a recording whose roles are known
//                  (gpusim_torch);
//   by allocation  one band per allocation, stacked in allocation order, so
//                  a freed block's band ends and the ones above it drop, as
//                  memory_viz draws it; the max_active_allocations largest
//                  get their own band (memory_viz's max_entries), the rest
//                  are merged per source into bands on top (memory_viz
//                  merges them all into one, "summarized"), up to 24
//                  sources, then one grey band; each band coloured as the
//                  memory map colours the block.
// Bytes live before the trace began are a band at the bottom.
//
// Note [Stacked bands per pixel column]
// The chart is a fixed 1400 px whatever the step. Per pixel column, the
// bands are drawn as they stood at the memory event where the column's
// total was largest (so no peak is lost between columns, as the timeline's
// per-column maximum keeps it), and a column with no event keeps the state
// after the last event before it. Memory events are placed on the memory
// clock of timeline.json (the running maximum of their issue times, Note
// [Memory counters in time order] in viz/perfetto.cc), and a rolled loop's
// further iterations (Note [Repeated iterations in the charts]) on their
// span at the steady iteration's largest state, then its end state. Each
// band is one path per run of columns it is live in, with a vertex only
// where its edge moves, so the SVG stays small: at most columns × bands
// values are computed, and far fewer vertices written.
#include <algorithm>
#include <array>
#include <map>

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
using viz_internal::StepView;
using viz_internal::Svg;

constexpr double kActiveWidth = 1400, kActiveHeight = 560;
constexpr double kActiveLeft = 80, kActiveRight = 290, kActiveTop = 56, kActiveBottom = 50;
constexpr char kSummarizedColor[] = "#6b6b6b";
constexpr char kBeforeColor[] = "#8c8c8c";
constexpr size_t kLegendSources = 14;
constexpr size_t kMaxSourceBands = 24;  // the rest of the allocations, merged per source

struct Band {
  std::string label;
  std::string color;
  BufferId buffer = -1;  // a band of one allocation
  std::string title;
};

// A moment the chart samples: its time and the event whose state it shows.
struct Sample {
  SimTime t;
  int64_t event = -1;  // state after this event; -1 = before any
  int64_t total = 0;
};

// One ActiveMemorySvg drawing: the bands, the samples and columns of Note
// [Stacked bands per pixel column], and the SVG being written, shared by its
// steps (MakeBands, SampleMemoryClock, ChooseColumns, then the drawing).
struct ActiveMemoryChart {
  ActiveMemoryChart(const StepReport& report, const VizOptions& options)
      : r(report), o(options), v(viz_internal::BuildStepView(report)), tr(report.lowered.trace),
        bufs(report.lowered.buffers), nb(bufs.size()), n(tr.events.size()),
        sources(viz_internal::AllocSources(report)),
        by(viz_internal::ResolveColorBy(report, sources, options.color_by)), by_role(by == VizColorBy::kRole),
        before(tr.preexisting.value()), tmax(static_cast<double>(v.step_time.ns())), svg(kActiveWidth, kActiveHeight) {}

  std::string Draw();
  void MakeBands();
  void MakeRoleBands();
  void MakeAllocationBands();
  void SampleMemoryClock();
  void ChooseColumns();
  void DrawTitle();
  void DrawBands();
  void DrawPeak();
  void DrawLegend();

  double Y(int64_t b) const { return kActiveTop + ph - ph * static_cast<double>(b) / ymax; }
  static double X(int c) { return kActiveLeft + c; }

  const StepReport& r;
  const VizOptions& o;
  const StepView v;
  const Trace& tr;
  const std::vector<BufferInfo>& bufs;
  const size_t nb, n;
  const std::vector<viz_internal::AllocSource> sources;
  const VizColorBy by;
  const bool by_role;
  const int64_t before;

  // Bands, bottom to top.
  std::vector<Band> bands;
  std::vector<int32_t> band_of;
  size_t drawn = 0, summarized = 0;

  // The memory clock and the totals (Note [Stacked bands per pixel column]).
  std::vector<Sample> samples;
  std::vector<int64_t> total_after;

  const double pw = kActiveWidth - kActiveLeft - kActiveRight, ph = kActiveHeight - kActiveTop - kActiveBottom;
  const int cols = static_cast<int>(pw);
  const double tmax;
  // Per column: the event whose state it draws (-1: before any event).
  std::vector<int64_t> show;
  std::map<int64_t, std::vector<int64_t>> state;  // event → band values
  std::vector<const std::vector<int64_t>*> at;    // per column: its band values
  int64_t top = 1, peak_col = 0;
  double ymax = 1;

  Svg svg;
};

void ActiveMemoryChart::MakeBands() {
  band_of.assign(nb, -1);
  if (before > 0) {
    bands.push_back({"live before the trace began", kBeforeColor, -1,
                     absl::StrCat(HumanBytes(tr.preexisting), " live before the trace began")});
  }
  if (by_role) {
    MakeRoleBands();
  } else {
    MakeAllocationBands();
  }
}

void ActiveMemoryChart::MakeRoleBands() {
  std::array<int32_t, kNumRoles> role_band;
  role_band.fill(-1);
  for (Role role : viz_internal::LegendRoles()) {
    if (std::none_of(bufs.begin(), bufs.end(), [&](const BufferInfo& b) { return b.role == role; })) continue;
    role_band[static_cast<size_t>(role)] = static_cast<int32_t>(bands.size());
    bands.push_back({std::string(RoleName(role)), std::string(viz_internal::RoleColor(role)), -1,
                     std::string(RoleName(role))});
  }
  for (size_t i = 0; i < nb; ++i) band_of[i] = role_band[static_cast<size_t>(bufs[i].role)];
}

void ActiveMemoryChart::MakeAllocationBands() {
  std::vector<size_t> order;
  for (size_t i = 0; i < nb; ++i) {
    if (bufs[i].bytes.value() > 0) order.push_back(i);
  }
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return bufs[a].bytes > bufs[b].bytes; });
  const size_t keep = std::min(order.size(), static_cast<size_t>(std::max(o.max_active_allocations, 0)));
  std::vector<size_t> kept(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(keep));
  std::stable_sort(kept.begin(), kept.end(),
                   [&](size_t a, size_t b) { return bufs[a].alloc_event < bufs[b].alloc_event; });
  for (size_t i : kept) {
    band_of[i] = static_cast<int32_t>(bands.size());
    const viz_internal::AllocSource& s = sources[i];
    std::string title = absl::StrCat(bufs[i].name, " — ", HumanBytes(bufs[i].bytes), " (", bufs[i].bytes.value(),
                                     " B); live ", viz_internal::WhenLabel(v, v.t0[i]), " → ",
                                     viz_internal::WhenLabel(v, v.t1[i]));
    for (const std::string& line : viz_internal::SourceLines(s)) absl::StrAppend(&title, "\n", line);
    bands.push_back({s.label.empty() ? bufs[i].name : s.label,
                     viz_internal::BufferColor(r, sources, by, static_cast<BufferId>(i)), static_cast<BufferId>(i),
                     std::move(title)});
  }
  drawn = keep;
  summarized = order.size() - keep;
  // The rest: coloured by source, one band per source (the sources with
  // the most bytes, kMaxSourceBands of them) on top, so what they are
  // still shows; whatever is left, one grey band above them.
  std::map<std::string, std::vector<size_t>> by_source;
  for (size_t k = keep; k < order.size(); ++k) {
    by_source[by == VizColorBy::kSource ? sources[order[k]].label : std::string("\x01")].push_back(order[k]);
  }
  std::vector<std::pair<int64_t, std::string>> groups;  // (-bytes, label)
  for (const auto& [label, members] : by_source) {
    int64_t bytes = 0;
    for (size_t i : members) bytes += bufs[i].bytes.value();
    groups.push_back({-bytes, label});
  }
  std::sort(groups.begin(), groups.end());
  std::vector<size_t> rest;
  for (size_t g = 0; g < groups.size(); ++g) {
    const std::string& label = groups[g].second;
    const std::vector<size_t>& members = by_source[label];
    if (by != VizColorBy::kSource || g >= kMaxSourceBands) {
      rest.insert(rest.end(), members.begin(), members.end());
      continue;
    }
    const std::string name = label.empty() ? "no stack recorded" : label;
    for (size_t i : members) band_of[i] = static_cast<int32_t>(bands.size());
    bands.push_back({absl::StrCat(name, " (", WithCommas(static_cast<int64_t>(members.size())), " smaller)"),
                     label.empty() ? viz_internal::kUnknownSourceColor : viz_internal::LabelColor(label), -1,
                     absl::StrCat(WithCommas(static_cast<int64_t>(members.size())), " smaller allocations from ",
                                  name, ", merged: ", HumanBytes(Bytes(-groups[g].first)), " allocated")});
  }
  if (!rest.empty()) {
    for (size_t i : rest) band_of[i] = static_cast<int32_t>(bands.size());
    bands.push_back({absl::StrCat(WithCommas(static_cast<int64_t>(rest.size())), " smaller allocations"),
                     kSummarizedColor, -1,
                     absl::StrCat(WithCommas(static_cast<int64_t>(rest.size())),
                                  " smaller allocations, summarized (max_active_allocations ",
                                  o.max_active_allocations, ")")});
  }
}

// The memory clock and the totals (Note [Stacked bands per pixel column]).
void ActiveMemoryChart::SampleMemoryClock() {
  total_after.assign(n, before);
  SimTime clock(0);
  int64_t cur = before;
  size_t rep = 0;
  Sample rep_max{SimTime(0), -1, -1}, rep_last{SimTime(0), -1, -1};
  for (size_t e = 0; e < n; ++e) {
    const TraceEvent& ev = tr.events[e];
    const bool memory = ev.type == EventType::kAlloc || ev.type == EventType::kFree;
    if (memory) {
      const int64_t b = bufs[static_cast<size_t>(ev.buffer)].bytes.value();
      cur += ev.type == EventType::kAlloc ? b : -b;
      clock = std::max(clock, v.start[e]);
      samples.push_back({clock, static_cast<int64_t>(e), cur});
    }
    total_after[e] = cur;
    if (rep >= v.repeats.size() || static_cast<int64_t>(e) < v.repeats[rep].first) continue;
    const viz_internal::RepeatSpan& rs = v.repeats[rep];
    if (memory) {
      if (cur > rep_max.total) rep_max = {SimTime(0), static_cast<int64_t>(e), cur};
      rep_last = {SimTime(0), static_cast<int64_t>(e), cur};
    }
    if (static_cast<int64_t>(e) < rs.last) continue;
    if (rep_max.event >= 0) {
      samples.push_back({std::max(clock, rs.t0), rep_max.event, rep_max.total});
      samples.push_back({std::max(clock, rs.t1), rep_last.event, rep_last.total});
      clock = std::max(clock, rs.t1);
    }
    ++rep;
    rep_max = rep_last = {SimTime(0), -1, -1};
  }
  std::stable_sort(samples.begin(), samples.end(), [](const Sample& a, const Sample& b) { return a.t < b.t; });
}

// Per column, the event whose state it draws and that state's band values;
// the tallest column (the peak) and the y scale.
void ActiveMemoryChart::ChooseColumns() {
  show.assign(static_cast<size_t>(cols), -1);
  {
    int64_t carry = -1;
    size_t p = 0;
    for (int c = 0; c < cols; ++c) {
      const double t_end = tmax * (c + 1) / cols;
      int64_t best = carry, best_total = -1;
      while (p < samples.size() && (static_cast<double>(samples[p].t.ns()) < t_end || c == cols - 1)) {
        if (samples[p].total >= best_total) {
          best = samples[p].event;
          best_total = samples[p].total;
        }
        carry = samples[p].event;
        ++p;
      }
      show[static_cast<size_t>(c)] = best;
    }
  }
  // The band values at each shown event, in one pass.
  std::vector<int64_t> needed(show.begin(), show.end());
  std::sort(needed.begin(), needed.end());
  needed.erase(std::unique(needed.begin(), needed.end()), needed.end());
  {
    std::vector<int64_t> cur(bands.size(), 0);
    if (before > 0) cur[0] = before;
    size_t k = 0;
    while (k < needed.size() && needed[k] < 0) state[needed[k++]] = cur;
    for (size_t e = 0; e < n && k < needed.size(); ++e) {
      const TraceEvent& ev = tr.events[e];
      if (ev.type == EventType::kAlloc || ev.type == EventType::kFree) {
        const size_t i = static_cast<size_t>(ev.buffer);
        if (band_of[i] >= 0) {
          const int64_t b = bufs[i].bytes.value();
          cur[static_cast<size_t>(band_of[i])] += ev.type == EventType::kAlloc ? b : -b;
        }
      }
      while (k < needed.size() && needed[k] == static_cast<int64_t>(e)) state[needed[k++]] = cur;
    }
  }
  at.resize(static_cast<size_t>(cols));
  for (int c = 0; c < cols; ++c) at[static_cast<size_t>(c)] = &state[show[static_cast<size_t>(c)]];
  for (int c = 0; c < cols; ++c) {
    const std::vector<int64_t>& s = *at[static_cast<size_t>(c)];
    int64_t sum = 0;
    for (int64_t x : s) sum += std::max<int64_t>(x, 0);
    if (sum > top) {
      top = sum;
      peak_col = c;
    }
  }
  ymax = static_cast<double>(top) * 1.08;
}

// The title, the subtitle saying what a band is, and the phase shading.
void ActiveMemoryChart::DrawTitle() {
  svg.Text(kActiveLeft, 22,
           FitText(absl::StrCat("Active memory timeline — ", r.program.name, ": live bytes by ",
                                by_role ? "role" : "allocation"),
                   pw, 16),
           "font-size=\"16\" font-weight=\"bold\"");
  svg.Text(kActiveLeft, 40,
           FitText(by_role ? "each band the bytes live of one role, stacked"
                           : absl::StrCat("each allocation a band, stacked in allocation order (as memory_viz): the ",
                                          WithCommas(static_cast<int64_t>(drawn)), " largest",
                                          summarized > 0 ? absl::StrCat("; ", WithCommas(static_cast<int64_t>(summarized)),
                                                                        by == VizColorBy::kSource ? " smaller ones merged per source on top" : " smaller ones as one band on top")
                                                         : ""),
                   pw, 12),
           "fill=\"#555\"");
  for (const auto& s : v.phases) {
    const double x0 = kActiveLeft + pw * static_cast<double>(s.t0.ns()) / tmax;
    const double x1 = kActiveLeft + pw * static_cast<double>(s.t1.ns()) / tmax;
    svg.Rect(x0, kActiveTop, std::max(x1 - x0, 0.5), ph, viz_internal::PhaseColor(s.phase));
  }
}

// Bands: per band, its (lo, hi) per column, then one path per live run.
void ActiveMemoryChart::DrawBands() {
  std::vector<int64_t> lo(static_cast<size_t>(cols)), hi(static_cast<size_t>(cols));
  std::vector<int64_t> cum(static_cast<size_t>(cols), 0);
  for (size_t b = 0; b < bands.size(); ++b) {
    for (int c = 0; c < cols; ++c) {
      const int64_t val = std::max<int64_t>((*at[static_cast<size_t>(c)])[b], 0);
      lo[static_cast<size_t>(c)] = cum[static_cast<size_t>(c)];
      hi[static_cast<size_t>(c)] = cum[static_cast<size_t>(c)] + val;
      cum[static_cast<size_t>(c)] += val;
    }
    const Band& band = bands[b];
    const std::string attrs =
        band.buffer >= 0 ? absl::StrCat(" data-b=\"", band.buffer, "\"") : std::string();
    for (int c0 = 0; c0 < cols;) {
      if (hi[static_cast<size_t>(c0)] == lo[static_cast<size_t>(c0)]) {
        ++c0;
        continue;
      }
      int c1 = c0;
      while (c1 + 1 < cols && hi[static_cast<size_t>(c1 + 1)] > lo[static_cast<size_t>(c1 + 1)]) ++c1;
      std::string d = absl::StrCat("M", Num(X(c0)), " ", Num(Y(hi[static_cast<size_t>(c0)])));
      for (int c = c0 + 1; c <= c1; ++c) {
        if (Num(Y(hi[static_cast<size_t>(c)])) != Num(Y(hi[static_cast<size_t>(c - 1)]))) {
          absl::StrAppend(&d, "H", Num(X(c)), "V", Num(Y(hi[static_cast<size_t>(c)])));
        }
      }
      absl::StrAppend(&d, "H", Num(X(c1 + 1)), "V", Num(Y(lo[static_cast<size_t>(c1)])));
      for (int c = c1 - 1; c >= c0; --c) {
        if (Num(Y(lo[static_cast<size_t>(c)])) != Num(Y(lo[static_cast<size_t>(c + 1)]))) {
          absl::StrAppend(&d, "H", Num(X(c + 1)), "V", Num(Y(lo[static_cast<size_t>(c)])));
        }
      }
      absl::StrAppend(&d, "H", Num(X(c0)), "Z");
      svg.Raw(absl::StrCat("<path d=\"", d, "\" fill=\"", band.color, "\"", attrs,
                           band.color == kSummarizedColor ? " fill-opacity=\"0.7\"" : "", "><title>",
                           viz_internal::XmlEscape(band.title), "</title></path>\n"));
      c0 = c1 + 1;
    }
  }
}

void ActiveMemoryChart::DrawPeak() {
  const double xp = X(peak_col) + 0.5, yp = Y(top);
  svg.Line(xp, kActiveTop, xp, kActiveTop + ph, "#c00000", "stroke-width=\"1.2\" stroke-dasharray=\"6,3\"");
  const bool right = xp > kActiveLeft + pw * 0.6;
  const int64_t ev = show[static_cast<size_t>(peak_col)];
  const std::string when = ev >= 0 ? viz_internal::WhenLabel(v, v.start[static_cast<size_t>(ev)]) : "the start";
  svg.Text(right ? xp - 6 : xp + 6, std::max(yp - 6, kActiveTop + 12),
           absl::StrCat("peak ", HumanBytes(Bytes(top)), " at ", when),
           absl::StrCat("fill=\"#c00000\" font-weight=\"bold\" text-anchor=\"", right ? "end" : "start", "\""));
}

// Legend: the roles, or the sources with the most bytes drawn.
void ActiveMemoryChart::DrawLegend() {
  double ly = kActiveTop + 4;
  const double lx = kActiveLeft + pw + 16, lw = kActiveRight - 24;
  svg.Text(lx, ly + 6, by_role ? "role" : absl::StrCat("colour: ", viz_internal::ColorByName(by)),
           "font-weight=\"bold\"");
  ly += 20;
  auto entry = [&](const std::string& color, const std::string& text, std::string_view extra = "") {
    svg.Rect(lx, ly - 9, 12, 12, color, extra);
    svg.Text(lx + 18, ly + 1, FitText(text, lw - 18, 12));
    ly += 17;
  };
  if (by_role) {
    for (const Band& b : bands) entry(b.color, b.label);
  } else {
    if (before > 0) entry(kBeforeColor, bands[0].label);
    if (by == VizColorBy::kSource) {
      std::map<std::string, int64_t> bytes_of;  // every allocation coloured by its source
      for (size_t i = 0; i < nb; ++i) {
        if (band_of[i] >= 0 && bands[static_cast<size_t>(band_of[i])].color != kSummarizedColor) {
          bytes_of[sources[i].label] += bufs[i].bytes.value();
        }
      }
      std::vector<std::pair<int64_t, std::string>> ranked;
      for (const auto& [label, bytes] : bytes_of) ranked.push_back({-bytes, label});
      std::sort(ranked.begin(), ranked.end());
      for (size_t k = 0; k < ranked.size() && k < kLegendSources; ++k) {
        const std::string& label = ranked[k].second;
        entry(label.empty() ? viz_internal::kUnknownSourceColor : viz_internal::LabelColor(label),
              label.empty() ? "no stack recorded" : label);
      }
      if (ranked.size() > kLegendSources) {
        svg.Text(lx, ly + 1, absl::StrCat("… and ", ranked.size() - kLegendSources, " more sources"), "fill=\"#444\"");
        ly += 17;
      }
    } else if (by == VizColorBy::kAllocation) {
      svg.Text(lx, ly + 1, FitText("one colour per allocation", lw, 12), "fill=\"#444\"");
      ly += 15;
      svg.Text(lx, ly + 1, FitText("(no stacks or op names recorded)", lw, 12), "fill=\"#444\"");
      ly += 17;
    }
    if (bands.back().color == kSummarizedColor) entry(kSummarizedColor, bands.back().label, "fill-opacity=\"0.7\"");
  }
  ly += 8;
  svg.Text(lx, ly, "hover a band for details", "fill=\"#444\"");
}

std::string ActiveMemoryChart::Draw() {
  MakeBands();
  SampleMemoryClock();
  ChooseColumns();
  DrawTitle();
  DrawBands();
  DrawPeak();
  // Axes.
  svg.Rect(kActiveLeft, kActiveTop, pw, ph, "none", "stroke=\"#333\"");
  viz_internal::DrawBytesAxis(svg, ymax, kActiveLeft, kActiveTop, pw, ph, 6, /*grid=*/true, "live bytes");
  viz_internal::DrawTimeAxis(svg, v, tmax, kActiveLeft, kActiveTop, pw, ph, kActiveHeight - 10);
  DrawLegend();
  return svg.Finish();
}

}  // namespace

std::string ActiveMemorySvg(const StepReport& r, const VizOptions& o) { return ActiveMemoryChart(r, o).Draw(); }

}  // namespace gpusim
