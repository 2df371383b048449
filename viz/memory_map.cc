// The memory map: every buffer a rectangle over (simulated time × address),
// coloured by role, or for a recording without roles by its source (the
// user's innermost Python frame, viz/alloc_source.h) and labelled by it.
//
// Addresses. XLA (framework jax): arguments stacked from 0 in buffer order,
// then the outputs that own a buffer (not aliased into a donated argument),
// then the temp heap at the offsets XLA-style packing gave (StepReport::
// temp_offsets) — so the top of the drawing is exactly the reported peak,
// argument + output − alias + temp. Eager: where the configured allocator
// places blocks, at its addresses (AllocatorPlacement); with the ideal one,
// placed for display by first fit in trace order (stated on the chart; the
// height is then ≥ the live peak). Memory live before a recorded trace
// began is a band at the bottom.
//
// Note [Scale]: the chart is 1400 × 820 px whatever the step. Beyond
// max_rects buffers, the largest by drawn area keep their own rectangle and
// the rest are merged into a 4 px coverage grid (grey cells whose opacity is
// the fraction of the cell they cover), so the SVG stays under ~1 MB and
// renders in well under a second at 100,000 buffers. Labels go to the
// largest rectangles that can hold text, max_labels of them, never
// overlapping.
#include <algorithm>
#include <cmath>
#include <map>
#include <tuple>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "sim/alloc/allocator.h"
#include "sim/alloc/graph_pools.h"
#include "sim/alloc/start_state.h"
#include "viz/alloc_source.h"
#include "viz/step_view.h"
#include "viz/svg.h"
#include "viz/viz.h"

namespace gpusim {
namespace {

using viz_internal::FitText;
using viz_internal::HumanBytes;
using viz_internal::HumanTime;
using viz_internal::Num;
using viz_internal::RoleColor;
using viz_internal::StepView;
using viz_internal::Svg;

constexpr double kMapWidth = 1400, kMapHeight = 820;
constexpr double kMapLeft = 80, kMapRight = 250, kMapTop = 56, kMapBottom = 46;
constexpr double kCell = 4;  // aggregation grid, px

// Display placement for eager steps: first fit in trace order over a free
// list of [offset, size) gaps, coalescing on free.
std::vector<int64_t> FirstFitPlacement(const StepReport& r, int64_t* height) {
  std::vector<int64_t> off(r.lowered.buffers.size(), 0);
  std::map<int64_t, int64_t> free_list;  // offset → size; the top is open-ended
  int64_t top = 0;
  for (const TraceEvent& e : r.lowered.trace.events) {
    if (e.type == EventType::kAlloc) {
      const int64_t size = std::max<int64_t>(r.lowered.buffers[static_cast<size_t>(e.buffer)].bytes.value(), 1);
      auto it = std::find_if(free_list.begin(), free_list.end(), [&](const auto& g) { return g.second >= size; });
      if (it == free_list.end()) {
        off[static_cast<size_t>(e.buffer)] = top;
        top += size;
      } else {
        const int64_t o = it->first, s = it->second;
        free_list.erase(it);
        if (s > size) free_list[o + size] = s - size;
        off[static_cast<size_t>(e.buffer)] = o;
      }
    } else if (e.type == EventType::kFree) {
      const int64_t o = off[static_cast<size_t>(e.buffer)];
      int64_t s = std::max<int64_t>(r.lowered.buffers[static_cast<size_t>(e.buffer)].bytes.value(), 1);
      auto next = free_list.lower_bound(o);
      if (next != free_list.end() && next->first == o + s) {
        s += next->second;
        free_list.erase(next);
      }
      auto prev = free_list.lower_bound(o);
      if (prev != free_list.begin()) {
        --prev;
        if (prev->first + prev->second == o) {
          prev->second += s;
          continue;
        }
      }
      free_list[o] = s;
    }
  }
  // Trim a free gap reaching the top.
  *height = top;
  return off;
}

// Eager steps whose allocator places blocks (pytorch_caching, bfc, ...):
// each buffer is drawn at the address the engine's allocator gave it (Note
// [One memory event log], sim/engine/engine.h: the engine's log, not a
// replay of the trace again). The address ranges the allocator obtained from
// the device (its segment actions, plus every block) are merged and stacked
// without the gaps between them, so the drawing's height is the device
// memory the allocator held at some point (≥ its peak reserved) and cached
// free space shows as empty area. `*base` bytes are left free below for
// memory live before the trace began. Returns false when the strategy
// places nothing (ideal), ran out of memory, or the engine kept no log.
// A CUDA graph private pool's drawn band: [lo, hi) of the stacked ranges.
struct PoolBand {
  int64_t lo = 0, hi = 0;
};

bool AllocatorPlacement(const StepReport& r, int64_t base, std::vector<int64_t>* off, int64_t* height,
                        std::string* how, std::map<int32_t, PoolBand>* pools) {
  const MemoryEventLog& log = r.sim.memory_log;
  if (!log.kept || r.sim.oom.happened) return false;
  const size_t nb = r.lowered.buffers.size();
  std::vector<uint64_t> at(nb, 0);
  std::vector<std::pair<uint64_t, uint64_t>> ranges;  // [start, end)
  // The start state's segments (Note [One start state for every command],
  // sim/alloc/start_state.cc) are device memory too.
  for (const SegmentLayout& seg : r.start.segments) {
    ranges.push_back({seg.address, seg.address + static_cast<uint64_t>(seg.size)});
  }
  for (const MemoryEventLog::Placed& p : log.placed) {
    if (!p.address.has_value()) return false;
    const TraceEvent& e = r.lowered.trace.events[static_cast<size_t>(p.event)];
    at[static_cast<size_t>(e.buffer)] = *p.address;
    ranges.push_back({*p.address, *p.address + static_cast<uint64_t>(std::max<int64_t>(e.size.value(), 1))});
  }
  for (const MemoryEventLog::Action& a : log.actions) {
    const AllocatorEvent& ev = a.action;
    if (ev.action == AllocatorAction::kSegmentAlloc || ev.action == AllocatorAction::kSegmentMap) {
      ranges.push_back({ev.addr, ev.addr + static_cast<uint64_t>(ev.size.value())});
    }
  }
  std::sort(ranges.begin(), ranges.end());
  std::vector<std::pair<uint64_t, uint64_t>> merged;
  for (const auto& rg : ranges) {
    if (!merged.empty() && rg.first <= merged.back().second) {
      merged.back().second = std::max(merged.back().second, rg.second);
    } else {
      merged.push_back(rg);
    }
  }
  std::vector<int64_t> merged_off(merged.size());
  int64_t top = base;
  for (size_t k = 0; k < merged.size(); ++k) {
    merged_off[k] = top;
    top += static_cast<int64_t>(merged[k].second - merged[k].first);
    // Note [CUDA graph private pools]: a pool's addresses lie above the main
    // pool's (sim/alloc/graph_pools.h), so its ranges stack together.
    if (const int32_t pool = GraphPoolOfAddress(merged[k].first); pool >= 0) {
      auto [it, fresh] = pools->try_emplace(pool, PoolBand{merged_off[k], top});
      if (!fresh) it->second.hi = top;
    }
  }
  off->assign(nb, 0);
  for (size_t i = 0; i < nb; ++i) {
    auto it = std::upper_bound(merged.begin(), merged.end(), std::make_pair(at[i], UINT64_MAX));
    if (it == merged.begin()) continue;  // never allocated
    const size_t k = static_cast<size_t>(it - merged.begin()) - 1;
    (*off)[i] = merged_off[k] + static_cast<int64_t>(at[i] - merged[k].first);
  }
  *height = top;
  *how = absl::StrCat("addresses: ", r.sim.allocator_name, " replay");
  return true;
}

// "; CUDA graph pool K" for a buffer a private pool served, else "".
std::string GraphPoolNote(const StepReport& r, BufferId id) {
  const GraphPoolMembers& g = r.start.graph_pools;
  if (g.empty()) return "";
  auto it = g.pool_of.find(id);
  return it == g.pool_of.end() ? "" : absl::StrCat("; CUDA graph pool ", it->second, " (allocated during capture)");
}

struct Box {
  double x, y, w, h;
  bool Overlaps(const Box& o) const {
    return x < o.x + o.w && o.x < x + w && y < o.y + o.h && o.y < y + h;
  }
};

// The boxes of the text placed so far: a label that would overprint one is
// dropped rather than drawn (FitText's width estimate: 0.6 em per code point).
struct LabelLayer {
  std::vector<Box> taken;
  static Box Of(double x, double baseline, std::string_view text, double font_px, std::string_view anchor) {
    double chars = 0;
    for (unsigned char c : text) chars += (c & 0xC0) != 0x80 ? 1 : 0;
    const double w = chars * font_px * 0.6;
    const double left = anchor == "end" ? x - w : anchor == "middle" ? x - w / 2 : x;
    return Box{left, baseline - font_px, w, font_px * 1.25};
  }
  // Takes `b` and returns true when it overlaps nothing taken.
  bool Take(const Box& b) {
    if (std::any_of(taken.begin(), taken.end(), [&](const Box& t) { return t.Overlaps(b); })) return false;
    taken.push_back(b);
    return true;
  }
};

// A label drawn at a fixed place: the capacity line's, the XLA sections'.
struct FixedLabel {
  double x, y;
  std::string text;
  bool draw = false;
};

// A buffer's rectangle in pixels; `area` ranks it (Note [Scale]).
struct MapRect {
  size_t i;
  double x, y, w, h, area;
};

// One MemoryMapSvg drawing: the placement, the pixel geometry and the SVG
// being written, shared by its steps (in drawing order: Place, the phases
// and fixed labels, the band live before the trace, the rectangles and the
// coverage grid, the graph pools, the labels, the XLA sections, capacity
// and peak, the axes, the legend).
struct MemoryMapChart {
  MemoryMapChart(const StepReport& report, const VizOptions& options)
      : r(report), o(options), v(viz_internal::BuildStepView(report)), bufs(report.lowered.buffers),
        nb(bufs.size()), sources(viz_internal::AllocSources(report)),
        by(viz_internal::ResolveColorBy(report, sources, options.color_by)), svg(kMapWidth, kMapHeight) {}

  std::string Draw();
  void Place();
  void DrawPhases();
  void DrawPreBand();
  void MakeRects();
  void DrawGrid();
  void DrawRects();
  void DrawPoolBands();
  void DrawLabels();
  void DrawSections();
  void DrawCapacityAndPeak();
  void DrawAxes();
  void DrawLegend();

  std::string color_of(size_t i) const {
    return viz_internal::BufferColor(r, sources, by, static_cast<BufferId>(i));
  }
  double X(SimTime t) const { return kMapLeft + pw * static_cast<double>(t.ns()) / tmax; }
  double Y(double bytes) const { return kMapTop + ph - ph * bytes / ymax; }

  const StepReport& r;
  const VizOptions& o;
  const StepView v;
  const std::vector<BufferInfo>& bufs;
  const size_t nb;
  const std::vector<viz_internal::AllocSource> sources;
  const VizColorBy by;

  // Addresses (Place).
  std::vector<int64_t> addr;
  int64_t height = 0;
  std::string placement = "addresses: first fit (display)";
  bool pre_band = true;  // the bytes live before the trace drawn as a band at the bottom
  std::map<int32_t, PoolBand> pool_bands;
  Bytes args{0}, outs{0};
  bool xla_offsets = false;
  bool show_capacity = false;
  double ymax = 1;
  const double pw = kMapWidth - kMapLeft - kMapRight, ph = kMapHeight - kMapTop - kMapBottom;
  double tmax = 1;

  Svg svg;
  // Text that must stay readable, in priority order: the capacity line's and
  // the XLA sections' labels (drawn over the blocks below), then the phase
  // names, then the blocks' own labels; whatever would overprint is dropped.
  LabelLayer layer;
  std::vector<FixedLabel> fixed;  // capacity, then ▲ outputs, ▼ arguments, temp heap
  // Rectangles: pixel geometry, then the largest max_rects drawn, the rest gridded.
  std::vector<MapRect> rects;
  size_t keep = 0;
  size_t aggregated = 0;
};

void MemoryMapChart::Place() {
  addr.assign(nb, 0);
  xla_offsets = v.xla && r.temp_offsets.size() == nb;
  if (xla_offsets) {
    for (const BufferInfo& b : bufs) {
      if (b.argument) {
        addr[static_cast<size_t>(b.id)] = args.value();
        args += b.bytes;
      }
    }
    for (const BufferInfo& b : bufs) {
      if (b.output && !b.argument) {
        addr[static_cast<size_t>(b.id)] = args.value() + outs.value();
        outs += b.bytes;
      }
    }
    const int64_t base = args.value() + outs.value();
    height = base + r.temp.value();
    for (const BufferInfo& b : bufs) {
      const int64_t t = r.temp_offsets[static_cast<size_t>(b.id)].value();
      if (!b.argument && !b.output && t >= 0) {
        addr[static_cast<size_t>(b.id)] = base + t;
        height = std::max(height, base + t + b.bytes.value());
      }
    }
  } else {
    // Bytes live before the trace began (a recorded trace's) sit at the
    // bottom as one band.
    // A start state (Note [One start state for every command]) holds them
    // in its segments, which the placement stacks already.
    const int64_t pre = r.lowered.trace.preexisting.value();
    const bool in_start = !r.start.empty();
    if (!AllocatorPlacement(r, in_start ? 0 : pre, &addr, &height, &placement, &pool_bands)) {
      pool_bands.clear();
      addr = FirstFitPlacement(r, &height);
      for (int64_t& x : addr) x += pre;
      height += pre;
    } else if (in_start) {
      pre_band = false;
    }
  }
  height = std::max<int64_t>(height, 1);
  // capacity <= 1.25 x height, written so that a height near INT64_MAX (a
  // huge recorded request) cannot overflow.
  show_capacity = r.capacity.value() > 0 && r.capacity.value() / 5 <= height / 4;
  ymax = static_cast<double>(show_capacity ? std::max(height, r.capacity.value()) : height) * 1.03;
  tmax = static_cast<double>(v.step_time.ns());
}

// Phase shading, then the fixed labels' places and the phase names.
void MemoryMapChart::DrawPhases() {
  for (const auto& s : v.phases) {
    svg.Rect(X(s.t0), kMapTop, std::max(X(s.t1) - X(s.t0), 0.5), ph, viz_internal::PhaseColor(s.phase));
  }
  if (show_capacity) {
    fixed.push_back({kMapLeft + pw - 4, Y(static_cast<double>(r.capacity.value())) - 4,
                     absl::StrCat("capacity ", HumanBytes(r.capacity))});
  }
  if (xla_offsets) {
    const double base = static_cast<double>(args.value() + outs.value());
    fixed.push_back({kMapLeft + pw - 4, Y(static_cast<double>(args.value())) + 11,
                     absl::StrCat("▲ outputs not aliased: ", HumanBytes(outs))});
    fixed.push_back({kMapLeft + pw - 4, Y(static_cast<double>(args.value())) - 3,
                     absl::StrCat("▼ arguments: ", HumanBytes(args))});
    fixed.push_back({kMapLeft + pw - 4, Y(base + static_cast<double>(r.temp.value())) - 3,
                     absl::StrCat("temp heap ", HumanBytes(r.temp), " (packed ", r.heap_algorithm, "; live peak ",
                                  HumanBytes(r.temp_live_peak), ")")});
  }
  for (FixedLabel& f : fixed) f.draw = layer.Take(LabelLayer::Of(f.x, f.y, f.text, 11, "end"));
  for (const auto& s : v.phases) {
    if (X(s.t1) - X(s.t0) <= 50) continue;
    const std::string label = FitText(s.label, X(s.t1) - X(s.t0) - 6, 10);
    if (layer.Take(LabelLayer::Of(X(s.t0) + 3, kMapTop + 11, label, 10, "start"))) {
      svg.Text(X(s.t0) + 3, kMapTop + 11, label, "fill=\"#777\" font-size=\"10\"");
    }
  }
}

void MemoryMapChart::DrawPreBand() {
  if (xla_offsets || !pre_band || r.lowered.trace.preexisting.value() <= 0) return;
  const Bytes pre = r.lowered.trace.preexisting;
  const double y = Y(static_cast<double>(pre.value()));
  svg.RectWithTitle(kMapLeft, y, pw, Y(0) - y, "#8c8c8c",
                    absl::StrCat(HumanBytes(pre), " live before the trace began (", WithCommas(pre.value()), " B)"),
                    "fill-opacity=\"0.35\"");
  if (Y(0) - y > 14) {
    svg.Text(kMapLeft + 6, (y + Y(0)) / 2 + 4, absl::StrCat("live before the trace began: ", HumanBytes(pre)),
             "fill=\"#333\"");
  }
}

void MemoryMapChart::MakeRects() {
  rects.reserve(nb);
  for (size_t i = 0; i < nb; ++i) {
    if (bufs[i].bytes.value() <= 0) continue;
    const double x0 = X(v.t0[i]), x1 = X(v.t1[i]);
    const double y0 = Y(static_cast<double>(addr[i] + bufs[i].bytes.value())), y1 = Y(static_cast<double>(addr[i]));
    MapRect rr{i, x0, y0, std::max(x1 - x0, 0.6), std::max(y1 - y0, 0.4), 0};
    rr.area = (x1 - x0 + 0.6) * (y1 - y0 + 0.4);
    rects.push_back(rr);
  }
  std::stable_sort(rects.begin(), rects.end(), [](const MapRect& a, const MapRect& b) { return a.area > b.area; });
  keep = std::min(rects.size(), static_cast<size_t>(std::max(o.max_rects, 0)));
}

// The rectangles past the largest `keep`: a coverage grid (Note [Scale]).
void MemoryMapChart::DrawGrid() {
  if (keep >= rects.size()) return;
  const int cols = static_cast<int>(std::ceil(pw / kCell)), rows = static_cast<int>(std::ceil(ph / kCell));
  std::vector<float> cover(static_cast<size_t>(cols) * static_cast<size_t>(rows), 0.f);
  for (size_t k = keep; k < rects.size(); ++k) {
    const MapRect& q = rects[k];
    ++aggregated;
    const int c0 = std::clamp(static_cast<int>((q.x - kMapLeft) / kCell), 0, cols - 1);
    const int c1 = std::clamp(static_cast<int>((q.x + q.w - kMapLeft) / kCell), 0, cols - 1);
    const int r0 = std::clamp(static_cast<int>((q.y - kMapTop) / kCell), 0, rows - 1);
    const int r1 = std::clamp(static_cast<int>((q.y + q.h - kMapTop) / kCell), 0, rows - 1);
    for (int rr = r0; rr <= r1; ++rr) {
      const double oy = std::min(q.y + q.h, kMapTop + (rr + 1) * kCell) - std::max(q.y, kMapTop + rr * kCell);
      for (int cc = c0; cc <= c1; ++cc) {
        const double ox = std::min(q.x + q.w, kMapLeft + (cc + 1) * kCell) - std::max(q.x, kMapLeft + cc * kCell);
        if (ox > 0 && oy > 0) cover[static_cast<size_t>(rr) * cols + cc] += static_cast<float>(ox * oy / (kCell * kCell));
      }
    }
  }
  // Quantised opacity, runs of equal cells merged per grid row.
  for (int rr = 0; rr < rows; ++rr) {
    int cc = 0;
    while (cc < cols) {
      const float f = std::min(cover[static_cast<size_t>(rr) * cols + cc], 1.f);
      const int level = f <= 0 ? 0 : std::max(1, static_cast<int>(std::lround(f * 4)));
      int end = cc + 1;
      while (end < cols) {
        const float g = std::min(cover[static_cast<size_t>(rr) * cols + end], 1.f);
        const int lg = g <= 0 ? 0 : std::max(1, static_cast<int>(std::lround(g * 4)));
        if (lg != level) break;
        ++end;
      }
      if (level > 0) {
        svg.Rect(kMapLeft + cc * kCell, kMapTop + rr * kCell, (end - cc) * kCell, kCell, "#555555",
                 absl::StrFormat("fill-opacity=\"%.2f\"", 0.25 * level));
      }
      cc = end;
    }
  }
}

// Drawn smallest first so large ones are never hidden under small ones.
void MemoryMapChart::DrawRects() {
  for (size_t k = keep; k-- > 0;) {
    const MapRect& q = rects[k];
    const BufferInfo& b = bufs[q.i];
    const std::string title = absl::StrCat(b.name, " — ", HumanBytes(b.bytes), " (", b.bytes.value(), " B), ",
                                           std::string(RoleName(b.role)), "; live ", viz_internal::WhenLabel(v, v.t0[q.i]), " → ",
                                           viz_internal::WhenLabel(v, v.t1[q.i]), b.origin.empty() ? "" : "; ", b.origin,
                                           GraphPoolNote(r, b.id),
                                           absl::StrJoin(viz_internal::SourceLines(sources[q.i]), "",
                                                         [](std::string* out, const std::string& f) {
                                                           absl::StrAppend(out, "\n", f);
                                                         }),
                                           absl::StrJoin(viz_internal::AllocFrames(r, b.id, 3), "",
                                                         [](std::string* out, const std::string& f) {
                                                           absl::StrAppend(out, "\n  at ", f);
                                                         }));
    // data-b: the buffer, for report.html's cross-chart hover.
    svg.RectWithTitle(q.x, q.y, q.w, q.h, color_of(q.i), title,
                      absl::StrCat("data-b=\"", q.i, "\"",
                                   q.h >= 3 && q.w >= 3 ? " stroke=\"#ffffff\" stroke-width=\"0.5\"" : ""));
  }
}

// CUDA graph private pools: each pool's segments, outlined across the
// step (a pool keeps them while its graph lives).
void MemoryMapChart::DrawPoolBands() {
  for (const auto& [pool, band] : pool_bands) {
    const double y_hi = Y(static_cast<double>(band.hi)), y_lo = Y(static_cast<double>(band.lo));
    svg.RectWithTitle(kMapLeft, y_hi, pw, std::max(y_lo - y_hi, 0.5), "#7b3294",
                      absl::StrCat("CUDA graph pool ", pool, ": segments of ", HumanBytes(Bytes(band.hi - band.lo)),
                                   " (", band.hi - band.lo, " B), served to the allocations of capture ", pool,
                                   " only, kept while the graph lives"),
                      "fill-opacity=\"0.06\" stroke=\"#7b3294\" stroke-dasharray=\"5,3\"");
    const std::string label = absl::StrCat("CUDA graph pool ", pool);
    if (y_lo - y_hi >= 12 && layer.Take(LabelLayer::Of(kMapLeft + pw - 4, y_hi + 11, label, 10, "end"))) {
      svg.Text(kMapLeft + pw - 4, y_hi + 11, label, "fill=\"#7b3294\" font-size=\"10\" text-anchor=\"end\"");
    }
  }
}

// Labels: the largest rectangles that hold a line of text; buffers the
// step creates first (they explain the peak), then arguments.
void MemoryMapChart::DrawLabels() {
  int labels = 0;
  std::vector<size_t> order;
  for (int pass = 0; pass < 2; ++pass) {
    for (size_t k = 0; k < keep; ++k) {
      if (bufs[rects[k].i].argument == (pass == 1)) order.push_back(k);
    }
  }
  for (size_t k : order) {
    if (labels >= o.max_labels) break;
    const MapRect& q = rects[k];
    if (q.h < 11 || q.w < 70) continue;
    const BufferInfo& b = bufs[q.i];
    const viz_internal::AllocSource& src = sources[q.i];
    // Role colouring: the name, then the source (else the origin). Source
    // or allocation colouring: the source, then its module or op.
    const std::string head = by == VizColorBy::kRole || src.label.empty() ? b.name : src.label;
    const std::string sub = by == VizColorBy::kRole ? (src.label.empty() ? b.origin : src.label)
                            : !src.module.empty() ? absl::StrCat("module ", src.module, src.op.empty() ? "" : "; ", src.op)
                            : !src.op.empty() ? src.op
                            : src.label.empty() ? "no stack recorded" : "";
    const bool two = q.h >= 24 && !sub.empty();
    const Box box{q.x, q.y + q.h / 2 - (two ? 12 : 6), q.w, two ? 24.0 : 12.0};
    if (!layer.Take(box)) continue;
    ++labels;
    const std::string color(viz_internal::TextColorOn(color_of(q.i)));
    const std::string fill = absl::StrCat("fill=\"", color, "\" font-size=\"10.5\"");
    const double room = std::min(q.w, kMapLeft + pw - q.x) - 8;
    const std::string line1 = absl::StrCat(head, "  ", HumanBytes(b.bytes));
    if (two) {
      svg.Text(q.x + 4, q.y + q.h / 2 - 2, FitText(line1, room, 10.5), fill + " font-weight=\"bold\"");
      svg.Text(q.x + 4, q.y + q.h / 2 + 10, FitText(sub, room, 10.5), fill);
    } else {
      const std::string line = sub.empty() ? line1 : absl::StrCat(line1, " — ", sub);
      svg.Text(q.x + 4, q.y + q.h / 2 + 4, FitText(line, room, 10.5), fill);
    }
  }
}

// XLA sections: arguments | outputs | temp heap.
void MemoryMapChart::DrawSections() {
  if (!xla_offsets) return;
  const double base = static_cast<double>(args.value() + outs.value());
  svg.Line(kMapLeft, Y(static_cast<double>(args.value())), kMapLeft + pw, Y(static_cast<double>(args.value())), "#333",
           "stroke-dasharray=\"2,3\"");
  svg.Line(kMapLeft, Y(base), kMapLeft + pw, Y(base), "#333", "stroke-dasharray=\"2,3\"");
  svg.Line(kMapLeft, Y(base + static_cast<double>(r.temp.value())), kMapLeft + pw,
           Y(base + static_cast<double>(r.temp.value())), "#333", "stroke-dasharray=\"2,3\"");
  const std::string a = "fill=\"#333\" font-size=\"10\" text-anchor=\"end\"";
  for (size_t k = show_capacity ? 1 : 0; k < fixed.size(); ++k) {
    if (fixed[k].draw) svg.Text(fixed[k].x, fixed[k].y, fixed[k].text, a);
  }
}

void MemoryMapChart::DrawCapacityAndPeak() {
  if (show_capacity) {
    const double yc = Y(static_cast<double>(r.capacity.value()));
    svg.Line(kMapLeft, yc, kMapLeft + pw, yc, "#c00000", "stroke-width=\"1.5\"");
    if (fixed[0].draw) svg.Text(fixed[0].x, fixed[0].y, fixed[0].text, "fill=\"#c00000\" text-anchor=\"end\"");
  }
  if (v.peak_event >= 0) {
    const double xp = X(v.peak_time);
    svg.Line(xp, kMapTop, xp, kMapTop + ph, "#c00000", "stroke-width=\"1.5\" stroke-dasharray=\"6,3\"");
    const std::string anchor = xp > kMapLeft + pw * 0.6 ? "end" : "start";
    svg.Text(anchor == "end" ? xp - 4 : xp + 4, kMapTop - 6,
             FitText(absl::StrCat("peak ", HumanBytes(r.peak), " at ", viz_internal::WhenLabel(v, v.peak_time),
                                 v.peak_op_name.empty() ? "" : absl::StrCat(" (", v.peak_op_name, ")")),
                     anchor == "end" ? xp - kMapLeft : kMapWidth - xp - 8, 12),
             absl::StrCat("fill=\"#c00000\" font-weight=\"bold\" text-anchor=\"", anchor, "\""));
  }
}

void MemoryMapChart::DrawAxes() {
  svg.Rect(kMapLeft, kMapTop, pw, ph, "none", "stroke=\"#333\"");
  viz_internal::DrawBytesAxis(svg, ymax, kMapLeft, kMapTop, pw, ph, 8, /*grid=*/false, "address");
  viz_internal::DrawTimeAxis(svg, v, tmax, kMapLeft, kMapTop, pw, ph, kMapHeight - 10);
  // Loop iterations: ticks under the axis.
  if (v.iterations.size() <= 400) {
    for (const auto& s : v.iterations) svg.Line(X(s.t0), kMapTop + ph, X(s.t0), kMapTop + ph - 5, "#777");
  }
}

void MemoryMapChart::DrawLegend() {
  double ly = kMapTop + 4;
  const double lx = kMapLeft + pw + 16;
  svg.Text(lx, ly + 6, by == VizColorBy::kRole ? "role" : absl::StrCat("colour: ", viz_internal::ColorByName(by)),
           "font-weight=\"bold\"");
  ly += 18;
  if (by == VizColorBy::kRole) {
    std::array<Bytes, kNumRoles> by_role{};
    for (const BufferInfo& b : bufs) by_role[static_cast<size_t>(b.role)] += b.bytes;
    for (Role role : viz_internal::LegendRoles()) {
      if (by_role[static_cast<size_t>(role)].value() == 0) continue;
      svg.Rect(lx, ly - 9, 12, 12, RoleColor(role));
      svg.Text(lx + 18, ly + 1, std::string(RoleName(role)));
      ly += 17;
    }
  } else if (by == VizColorBy::kSource) {
    // The sources holding the most bytes at the peak, then over the step.
    std::map<std::string, std::pair<int64_t, int64_t>> bytes_of;  // label → (at the peak, allocated)
    for (size_t i = 0; i < nb; ++i) {
      auto& [at_peak, total] = bytes_of[sources[i].label];
      total += bufs[i].bytes.value();
      if (v.peak_event >= 0 && bufs[i].alloc_event <= v.peak_event &&
          (bufs[i].free_event < 0 || bufs[i].free_event > v.peak_event)) {
        at_peak += bufs[i].bytes.value();
      }
    }
    std::vector<std::tuple<int64_t, int64_t, std::string>> ranked;
    for (const auto& [label, b] : bytes_of) ranked.push_back({-b.first, -b.second, label});
    std::sort(ranked.begin(), ranked.end());
    constexpr size_t kShown = 16;
    for (size_t k = 0; k < ranked.size() && k < kShown; ++k) {
      const std::string& label = std::get<2>(ranked[k]);
      svg.Rect(lx, ly - 9, 12, 12, label.empty() ? viz_internal::kUnknownSourceColor : viz_internal::LabelColor(label));
      svg.Text(lx + 18, ly + 1, FitText(label.empty() ? "no stack recorded" : label, kMapRight - 44, 12));
      ly += 17;
    }
    if (ranked.size() > kShown) {
      svg.Text(lx, ly + 1, absl::StrCat("… and ", ranked.size() - kShown, " more sources"), "fill=\"#444\"");
      ly += 17;
    }
  } else {
    svg.Text(lx, ly + 1, "one colour per allocation", "fill=\"#444\"");
    ly += 15;
    svg.Text(lx, ly + 1, "(no stacks or op names recorded)", "fill=\"#444\"");
    ly += 17;
  }
  if (!pool_bands.empty()) {
    svg.Rect(lx, ly - 9, 12, 12, "#7b3294", "fill-opacity=\"0.06\" stroke=\"#7b3294\" stroke-dasharray=\"3,2\"");
    svg.Text(lx + 18, ly + 1, absl::StrCat(pool_bands.size(), " CUDA graph pool", pool_bands.size() == 1 ? "" : "s"));
    ly += 17;
  }
  if (aggregated > 0) {
    svg.Rect(lx, ly - 9, 12, 12, "#555555", "fill-opacity=\"0.5\"");
    svg.Text(lx + 18, ly + 1, "small buffers (merged)");
    ly += 17;
  }
  ly += 10;
  const std::vector<std::string> notes = {
      absl::StrCat(WithCommas(static_cast<int64_t>(nb)), " buffers"),
      absl::StrCat(WithCommas(static_cast<int64_t>(keep)), " drawn, ", WithCommas(static_cast<int64_t>(aggregated)),
                   " merged"),
      absl::StrCat("peak ", HumanBytes(r.peak)),
      v.event_clock ? absl::StrCat(WithCommas(v.step_time.ns()), " memory events")
                    : absl::StrCat("step ", HumanTime(v.step_time)),
      xla_offsets ? "temps at XLA heap offsets" : placement,
      "hover a rectangle for details"};
  for (const std::string& s : notes) {
    svg.Text(lx, ly, s, "fill=\"#444\"");
    ly += 15;
  }
}

std::string MemoryMapChart::Draw() {
  Place();
  svg.Text(kMapLeft, 22,
           absl::StrCat("Memory map — ", r.program.name, " on ", r.spec.device.name, " (",
                        v.xla ? "XLA static buffer assignment" : "eager", ")"),
           "font-size=\"16\" font-weight=\"bold\"");
  DrawPhases();
  DrawPreBand();
  MakeRects();
  DrawGrid();
  DrawRects();
  DrawPoolBands();
  DrawLabels();
  DrawSections();
  DrawCapacityAndPeak();
  DrawAxes();
  DrawLegend();
  return svg.Finish();
}

}  // namespace

std::string MemoryMapSvg(const StepReport& r, const VizOptions& o) { return MemoryMapChart(r, o).Draw(); }

}  // namespace gpusim
