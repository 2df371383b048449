// Note [Rolled loop built once] (sim/lower/lower.h): a rolled layer scan
// built with one steady iteration standing for the others gives the same
// result, figure for figure, as the scan built iteration by iteration. The
// JSON report (memory, allocator, time, per-layer times, critical path,
// exposed communication, XLA entry schedule, breakdown) is compared whole.
#include <cstdlib>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "models/rolled_loop.h"
#include "sim/config/loader.h"
#include "sim/report/explain.h"
#include "sim/report/render.h"
#include "sim/step/step.h"

namespace gpusim::rolled_loop_test {
namespace {

// The packed temp heap of a loop built once is within 0.2% of the loop
// built iteration by iteration (the live peak is exact).
int64_t HeapSlack(int64_t temp) { return temp / 500; }

// Restores the depth above which scans are built once.
class BuiltOnceAbove {
 public:
  explicit BuiltOnceAbove(int64_t layers) : saved_(RolledBuiltOnceAbove()) {
    SetRolledBuiltOnceAboveForTesting(layers);
  }
  ~BuiltOnceAbove() { SetRolledBuiltOnceAboveForTesting(saved_); }

 private:
  int64_t saved_;
};

struct Built {
  std::string json;
  std::string text;     // gpusim run's text report
  std::string explain;  // gpusim explain
  size_t ops = 0;
  size_t events = 0;
  size_t repeats = 0;
  int64_t temp = 0;
};

// The JSON without what depends on the trace as built rather than on the
// step: the donated allocations' decisions (which name the built iterations' temps placed in an idle
// donated buffer) and the figures of the packed temp heap, which the
// best-fit packer sizes from the buffers it is given (compared within a
// bound below).
std::string Comparable(std::string json) {
  for (const char* key : {"\"temp_bytes\"", "\"donated_allocation_decisions\"",
                          "\"output_plus_temp_bytes\"", "\"peak_bytes\"", "\"jax_arena_needed_fraction\"",
                          "\"need_bytes\"", "\"line\""}) {
    for (size_t at = json.find(key); at != std::string::npos; at = json.find(key, at + 1)) {
      const size_t colon = json.find(':', at);
      const size_t end = json[colon + 2] == '[' ? json.find(']', colon) + 1 : json.find_first_of(",\n}", colon);
      json.replace(colon + 1, end - colon - 1, " -");
    }
  }
  return json;
}

Built RunStep(const std::string& config, std::vector<std::string> sets, int64_t built_once_above) {
  BuiltOnceAbove scope(built_once_above);
  auto spec = LoadRunSpec(std::string(GPUSIM_SOURCE_DIR) + "/" + config, sets);
  EXPECT_TRUE(spec.ok()) << spec.status();
  if (!spec.ok()) return {};
  auto r = SimulateStep(*spec);
  EXPECT_TRUE(r.ok()) << r.status();
  if (!r.ok()) return {};
  return {RenderJson(*r), RenderText(*r), RenderExplain(*r, 20), r->program.ops.size(), r->lowered.trace.events.size(), r->lowered.trace.repeats.size(),
          r->temp.value()};
}

void ExpectSameAsPerIteration(const std::string& config, std::vector<std::string> sets, int64_t layers) {
  sets.push_back("model.n_layers=" + std::to_string(layers));
  SCOPED_TRACE(config + " at " + std::to_string(layers) + " layers");
  const Built each = RunStep(config, sets, /*built_once_above=*/1 << 20);
  const Built once = RunStep(config, sets, /*built_once_above=*/0);
  EXPECT_EQ(each.repeats, 0u);
  EXPECT_EQ(once.repeats, 2u);  // the forward and the backward scan
  EXPECT_LT(once.ops, each.ops);
  EXPECT_LT(once.events, each.events);
  EXPECT_EQ(Comparable(once.json), Comparable(each.json));
  // Note [Rolled loop built once]: the live peak (temp_live_peak_bytes,
  // live_peak_bytes, compared above) is exact; the best-fit heap of the
  // loop as built once places the few small buffers of the built
  // iterations, not of all, so its size may differ by a few of them.
  EXPECT_LE(std::abs(once.temp - each.temp), HeapSlack(each.temp))
      << "built once " << once.temp << ", each " << each.temp;
}

TEST(RolledLoopTest, Llama7bAsPerIteration) {
  for (int64_t layers : {8, 9, 12, 32}) ExpectSameAsPerIteration("configs/llama7b.yaml", {}, layers);
}

TEST(RolledLoopTest, RematAndOffloadAsPerIteration) {
  ExpectSameAsPerIteration("examples/remat_llama7b.yaml", {}, 10);
  ExpectSameAsPerIteration("examples/remat_llama7b.yaml", {"remat.policy=custom"}, 10);
  ExpectSameAsPerIteration("configs/llama7b.yaml", {"remat.policy=minimal_offloaded"}, 8);
  ExpectSameAsPerIteration("configs/llama7b.yaml", {"remat.policy=none"}, 8);
}

TEST(RolledLoopTest, ShardingAsPerIteration) {
  ExpectSameAsPerIteration("configs/llama7b.yaml", {"parallelism.fsdp=1"}, 8);
  ExpectSameAsPerIteration("configs/llama7b.yaml", {"parallelism.tensor=2"}, 8);
  ExpectSameAsPerIteration("configs/llama7b.yaml", {"parallelism.tensor=2", "parallelism.sequence_parallel=true"},
                           8);
  ExpectSameAsPerIteration("configs/llama7b.yaml", {"model.param_scan_axis=0"}, 8);
}

TEST(RolledLoopTest, ScanCarryProgramAsPerIteration) {
  for (int64_t trips : {8, 11}) {
    SCOPED_TRACE(trips);
    const std::vector<std::string> sets = {"loop.trip_count=" + std::to_string(trips)};
    const Built each = RunStep("examples/scan_carry.yaml", sets, 1 << 20);
    const Built once = RunStep("examples/scan_carry.yaml", sets, 0);
    EXPECT_EQ(each.repeats, 0u);
    EXPECT_EQ(once.repeats, 2u);
    EXPECT_LT(once.ops, each.ops);
    EXPECT_EQ(Comparable(once.json), Comparable(each.json));
    EXPECT_LE(std::abs(once.temp - each.temp), HeapSlack(each.temp));
  }
}

// The seeds' trip counts 1-4 (examples/scan_carry.yaml is the scan of
// ../shared/seeds/scan_vs_unroll.txt; Llama-7B's layer scan is the one of
// param_scan_axis.txt): whichever depth the loops are built once above,
// every output, JSON, text and explain, is byte for byte the loop built
// iteration by iteration.
void ExpectIdentical(const std::string& config, std::vector<std::string> sets) {
  const Built each = RunStep(config, sets, /*built_once_above=*/1 << 20);
  const Built once = RunStep(config, sets, /*built_once_above=*/0);
  EXPECT_FALSE(each.json.empty());
  EXPECT_EQ(once.json, each.json);
  EXPECT_EQ(once.text, each.text);
  EXPECT_EQ(once.explain, each.explain);
}

TEST(RolledLoopTest, TripCountsOneToFourAreIdentical) {
  for (int64_t trips = 1; trips <= 4; ++trips) {
    SCOPED_TRACE(trips);
    ExpectIdentical("examples/scan_carry.yaml", {"loop.trip_count=" + std::to_string(trips)});
    ExpectIdentical("configs/llama7b.yaml", {"model.n_layers=" + std::to_string(trips)});
    ExpectIdentical("configs/llama7b.yaml", {"model.n_layers=" + std::to_string(trips), "model.param_scan_axis=0"});
  }
}

// Where the packed heap of the loop built once is the heap of the loop
// built iteration by iteration (Llama-7B with param_scan_axis 0: no small
// buffer of the steady iterations lies above the large ones), every
// output is identical, event indices included: reports number events as
// the loop runs them (ExecutedEventIndex, sim/trace/trace.h), and a
// per-iteration slice built once counts once per iteration it stands for.
TEST(RolledLoopTest, ParamScanAxisSeedIsIdentical) {
  for (int64_t layers : {8, 9, 12, 32}) {
    SCOPED_TRACE(layers);
    ExpectIdentical("configs/llama7b.yaml", {"model.n_layers=" + std::to_string(layers), "model.param_scan_axis=0"});
  }
}

// Note [What a loop built once does not give] (models/rolled_loop.h): on
// Llama-7B the best-fit placements of the steady iterations alternate
// (period two), so one steady iteration standing for an odd number of them
// packs the heap exactly, and then every output is identical; with an even
// number the heap may differ (HeapSlack, above).
TEST(RolledLoopTest, OddSteadyCountIsIdentical) {
  for (int64_t layers : {9, 13, 33}) {
    SCOPED_TRACE(layers);
    ASSERT_EQ((layers - 2 * kRolledEdgeIterations) % 2, 1);
    ExpectIdentical("configs/llama7b.yaml", {"model.n_layers=" + std::to_string(layers)});
  }
}

// Note [Rolled loop built once] (sim/lower/lower.h): the explain report of a
// loop built once names the same peak event and counts the same
// materialised slices as the loop built iteration by iteration; only the
// packed heap's figures may differ (HeapSlack).
TEST(RolledLoopTest, ExplainAsPerIteration) {
  const std::vector<std::string> sets = {"model.n_layers=12"};
  const Built each = RunStep("configs/llama7b.yaml", sets, 1 << 20);
  const Built once = RunStep("configs/llama7b.yaml", sets, 0);
  auto without_heap = [](std::string text) {
    const size_t at = text.find("; temp heap ");
    if (at != std::string::npos) text.erase(at, text.find(')', at) - at);
    return text;
  };
  EXPECT_NE(each.explain.find("materialised: 12 x per-iteration slice"), std::string::npos) << each.explain;
  EXPECT_EQ(without_heap(once.explain), without_heap(each.explain));
}

// A deep loop is built once by default: its size does not grow with the
// trips, and each further trip adds the same bytes (its stacks' slices)
// and time (one steady iteration; the steps outside the loop over [L, ...]
// stacks round to the nanosecond, hence the 100 ns).
void ExpectBuiltOnce(const std::string& config, const std::string& key, size_t repeat_with_times) {
  auto run = [&](int64_t trips) {
    auto spec = LoadRunSpec(std::string(GPUSIM_SOURCE_DIR) + "/" + config, {key + "=" + std::to_string(trips)});
    EXPECT_TRUE(spec.ok()) << spec.status();
    auto r = SimulateStep(*spec);
    EXPECT_TRUE(r.ok()) << r.status();
    return *r;
  };
  const StepReport a = run(2000), b = run(2001), c = run(99999), d = run(100000);
  EXPECT_EQ(a.program.ops.size(), d.program.ops.size());
  ASSERT_EQ(d.lowered.trace.repeats.size(), 2u);
  EXPECT_EQ(d.lowered.trace.repeats[repeat_with_times].times, 100000 - 2 * kRolledEdgeIterations);
  EXPECT_GT((b.temp - a.temp).value(), 0);
  EXPECT_NEAR((b.temp - a.temp).value(), (d.temp - c.temp).value(), HeapSlack((b.temp - a.temp).value()));
  EXPECT_NEAR((b.sim.step_time - a.sim.step_time).ns(), (d.sim.step_time - c.sim.step_time).ns(), 100);
}

TEST(RolledLoopTest, DeepScanIsBuiltOnce) {
  ExpectBuiltOnce("configs/llama7b.yaml", "model.n_layers", 0);
  auto spec = LoadRunSpec(GPUSIM_SOURCE_DIR "/configs/llama7b.yaml", {"model.n_layers=100000"});
  ASSERT_TRUE(spec.ok()) << spec.status();
  auto r = SimulateStep(*spec);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->layer_times.size(), 100000u);
}

TEST(RolledLoopTest, DeepScanCarryIsBuiltOnce) { ExpectBuiltOnce("examples/scan_carry.yaml", "loop.trip_count", 1); }

}  // namespace
}  // namespace gpusim::rolled_loop_test
