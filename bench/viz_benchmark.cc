// Speed targets of viz/ at scale, on the synthetic step of 100,000 buffers
// (tests/viz_scale_step.h; tests/viz_scale_test.cc checks its output is
// bounded and well-formed):
//   BM_VizScaleSvgs       memory map + lifetimes + timeline SVGs: target 5 s
//   BM_VizScalePerfetto   timeline.json
//   BM_VizScaleActiveMemory the active memory timeline, by role (Arg 0/1)
//                         and by allocation (Arg 2: eager, 200 bands)
//   BM_VizScaleWriteCharts every chart with its PNG (WriteCharts): target 30 s
// Arg 0: eager (through the caching allocator), 1: XLA. Each reports
// target_s, the target it is held to, beside its time; they were unit-test
// asserts and failed under load (10.15 s against 5 s at load average 9).
//   build/viz_benchmark --benchmark_filter=VizScale
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "benchmark/benchmark.h"
#include "tests/viz_scale_step.h"
#include "viz/viz.h"

namespace gpusim {
namespace {

// The step once per mode (building it is not what is timed).
const StepReport* Step(bool xla) {
  static auto* steps = new absl::StatusOr<StepReport>[2]{VizScaleStep(false), VizScaleStep(true)};
  const absl::StatusOr<StepReport>& r = steps[xla ? 1 : 0];
  return r.ok() ? &*r : nullptr;
}

bool Ready(benchmark::State& state, const StepReport*& r) {
  r = Step(state.range(0) != 0);
  if (r == nullptr) state.SkipWithError("the synthetic step failed to build");
  state.SetLabel(state.range(0) ? "xla" : "eager");
  return r != nullptr;
}

void BM_VizScaleSvgs(benchmark::State& state) {
  const StepReport* r = nullptr;
  if (!Ready(state, r)) return;
  size_t bytes = 0;
  for (auto _ : state) {
    const std::string map = MemoryMapSvg(*r), life = LifetimesSvg(*r), line = TimelineSvg(*r);
    bytes = map.size() + life.size() + line.size();
    benchmark::DoNotOptimize(bytes);
  }
  state.counters["target_s"] = 5;
  state.counters["svg_bytes"] =
      benchmark::Counter(static_cast<double>(bytes), benchmark::Counter::kDefaults, benchmark::Counter::kIs1024);
}
BENCHMARK(BM_VizScaleSvgs)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_VizScaleActiveMemory(benchmark::State& state) {
  const StepReport* r = Step(state.range(0) == 1);
  if (r == nullptr) return state.SkipWithError("the synthetic step failed to build");
  VizOptions o;
  if (state.range(0) == 2) o.color_by = VizColorBy::kAllocation;
  state.SetLabel(state.range(0) == 2 ? "eager, by allocation" : state.range(0) ? "xla, by role" : "eager, by role");
  size_t bytes = 0;
  for (auto _ : state) {
    const std::string svg = ActiveMemorySvg(*r, o);
    bytes = svg.size();
    benchmark::DoNotOptimize(bytes);
  }
  state.counters["svg_bytes"] =
      benchmark::Counter(static_cast<double>(bytes), benchmark::Counter::kDefaults, benchmark::Counter::kIs1024);
}
BENCHMARK(BM_VizScaleActiveMemory)->Arg(0)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_VizScalePerfetto(benchmark::State& state) {
  const StepReport* r = nullptr;
  if (!Ready(state, r)) return;
  size_t bytes = 0;
  for (auto _ : state) {
    const std::string json = PerfettoJson(*r);
    bytes = json.size();
    benchmark::DoNotOptimize(bytes);
  }
  state.counters["json_bytes"] =
      benchmark::Counter(static_cast<double>(bytes), benchmark::Counter::kDefaults, benchmark::Counter::kIs1024);
}
BENCHMARK(BM_VizScalePerfetto)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_VizScaleWriteCharts(benchmark::State& state) {
  const StepReport* r = nullptr;
  if (!Ready(state, r)) return;
  const std::string dir = std::string(getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp") + "/gpusim_viz_benchmark_" +
                          std::to_string(getpid()) + (state.range(0) ? "_xla" : "_eager");
  for (auto _ : state) {
    const absl::Status s = WriteCharts(*r, dir);
    if (!s.ok()) {
      state.SkipWithError(std::string(s.message()).c_str());
      return;
    }
  }
  state.counters["target_s"] = 30;
  std::filesystem::remove_all(dir);
}
BENCHMARK(BM_VizScaleWriteCharts)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(1);

}  // namespace
}  // namespace gpusim
