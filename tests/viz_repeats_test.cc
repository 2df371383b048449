// Note [Repeated iterations in the charts] (viz/step_view.h): a rolled loop
// built once is charted over the time its further iterations take, as the
// loop built iteration by iteration is. Llama-7B at 12 rolled layers, built
// both ways (the threshold lowered, as tests/rolled_loop_test.cc does,
// which checks the two give the same times): in timeline.json every instant
// a stream is busy per iteration is inside a slice of the built-once
// timeline, the slices of each stream stay disjoint, and over the further
// iterations' span the live-bytes counter and the PNG timeline's live curve
// reach the per-iteration maximum.
#include <algorithm>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "models/rolled_loop.h"
#include "simdjson.h"
#include "sim/config/loader.h"
#include "sim/step/step.h"
#include "viz/step_view.h"
#include "viz/viz.h"

namespace gpusim::viz_repeats_test {
namespace {

using Intervals = std::vector<std::pair<double, double>>;  // µs

struct Timeline {
  std::map<int64_t, Intervals> slices;         // by tid: stream slices (tid 1 + stream)
  std::vector<std::pair<double, int64_t>> live;  // the "live bytes" counter
  Intervals repeats;                            // the iterations track's repeat slices
  std::vector<int64_t> repeat_iterations;
};

Timeline Parse(const std::string& json) {
  Timeline t;
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  EXPECT_FALSE(parser.parse(json).get(doc));
  simdjson::dom::array events;
  EXPECT_FALSE(doc["traceEvents"].get(events));
  for (simdjson::dom::element e : events) {
    std::string_view ph, name, cat;
    if (e["ph"].get(ph) || e["name"].get(name)) continue;  // metadata without a name is not looked at
    double ts = 0, dur = 0;
    if (ph == "X") {
      int64_t tid = 0;
      EXPECT_FALSE(e["tid"].get(tid));
      EXPECT_FALSE(e["ts"].get(ts));
      EXPECT_FALSE(e["dur"].get(dur));
      if (e["cat"].get(cat)) cat = "";
      if (tid < 100) t.slices[tid].push_back({ts, ts + dur});
      if (cat == "iteration" && name.find("more (built once)") != std::string_view::npos) {
        t.repeats.push_back({ts, ts + dur});
        int64_t n = 0;
        EXPECT_FALSE(e["args"]["iterations"].get(n));
        t.repeat_iterations.push_back(n);
      }
    } else if (ph == "C" && name == "live bytes") {
      int64_t v = 0;
      EXPECT_FALSE(e["ts"].get(ts));
      EXPECT_FALSE(e["args"]["live"].get(v));
      t.live.push_back({ts, v});
    }
  }
  return t;
}

// Time of `busy` not inside any interval of `cover`.
double Uncovered(const Intervals& busy, Intervals cover) {
  std::sort(cover.begin(), cover.end());
  Intervals merged;
  for (const auto& c : cover) {
    if (!merged.empty() && c.first <= merged.back().second) {
      merged.back().second = std::max(merged.back().second, c.second);
    } else {
      merged.push_back(c);
    }
  }
  double out = 0;
  for (const auto& [b0, b1] : busy) {
    double covered = 0;
    for (const auto& [c0, c1] : merged) covered += std::max(0.0, std::min(b1, c1) - std::max(b0, c0));
    out += (b1 - b0) - covered;
  }
  return out;
}

int64_t MaxIn(const std::vector<std::pair<double, int64_t>>& samples, double t0, double t1) {
  int64_t m = -1;
  for (const auto& [t, v] : samples) {
    if (t >= t0 && t <= t1) m = std::max(m, v);
  }
  return m;
}

StepReport Step(int64_t built_once_above) {
  const int64_t saved = RolledBuiltOnceAbove();
  SetRolledBuiltOnceAboveForTesting(built_once_above);
  auto spec = LoadRunSpec(std::string(GPUSIM_SOURCE_DIR) + "/configs/llama7b.yaml", {"model.n_layers=12"});
  EXPECT_TRUE(spec.ok()) << spec.status();
  auto r = SimulateStep(*spec);
  SetRolledBuiltOnceAboveForTesting(saved);
  EXPECT_TRUE(r.ok()) << r.status();
  return std::move(*r);
}

TEST(VizRepeatsTest, BuiltOnceIsChartedAsPerIteration) {
  const StepReport each = Step(1 << 20), once = Step(0);
  ASSERT_EQ(each.lowered.trace.repeats.size(), 0u);
  ASSERT_EQ(once.lowered.trace.repeats.size(), 2u);
  ASSERT_EQ(once.sim.repeat_periods.size(), 2u);
  ASSERT_EQ(once.sim.step_time, each.sim.step_time);
  const Timeline e = Parse(PerfettoJson(each)), o = Parse(PerfettoJson(once));

  // The forward and the backward loop: 12 - 2 × 3 edge iterations built,
  // one standing for 6, 5 more.
  ASSERT_EQ(o.repeats.size(), 2u);
  for (int64_t n : o.repeat_iterations) EXPECT_EQ(n, 12 - 2 * kRolledEdgeIterations - 1);
  EXPECT_TRUE(e.repeats.empty());

  for (const auto& [tid, busy] : e.slices) {
    SCOPED_TRACE(tid);
    ASSERT_TRUE(o.slices.count(tid));
    EXPECT_LT(Uncovered(busy, o.slices.at(tid)), 1e-6);
    Intervals s = o.slices.at(tid);
    std::sort(s.begin(), s.end());
    for (size_t k = 0; k + 1 < s.size(); ++k) EXPECT_LE(s[k].second, s[k + 1].first) << k;
  }

  const viz_internal::StepView ve = viz_internal::BuildStepView(each), vo = viz_internal::BuildStepView(once);
  std::vector<std::pair<double, int64_t>> live_e, live_o;
  for (const auto& p : ve.live) live_e.push_back({static_cast<double>(p.t.ns()) / 1e3, p.live.value()});
  for (const auto& p : vo.live) live_o.push_back({static_cast<double>(p.t.ns()) / 1e3, p.live.value()});
  ASSERT_EQ(vo.repeats.size(), 2u);
  for (const auto& [t0, t1] : o.repeats) {
    SCOPED_TRACE(t0);
    const int64_t want = MaxIn(e.live, t0, t1);
    ASSERT_GT(want, 0);
    EXPECT_EQ(MaxIn(o.live, t0, t1), want);
    EXPECT_EQ(MaxIn(live_o, t0, t1), MaxIn(live_e, t0, t1));
  }
  EXPECT_EQ(vo.live_peak, ve.live_peak);
  EXPECT_EQ(o.live.back().second, e.live.back().second);
}

}  // namespace
}  // namespace gpusim::viz_repeats_test
