// Benchmarks of the device timing model: one shaped matmul (tile search
// included), and re-timing the whole llama7b trace as calibration does per
// trial parameter vector.
#include "benchmark/benchmark.h"
#include "sim/config/loader.h"
#include "sim/device/matmul_tiling.h"
#include "sim/device/timing.h"
#include "sim/engine/engine.h"
#include "sim/step/step.h"

namespace gpusim {
namespace {

void BM_ChooseMatmulTiling(benchmark::State& state) {
  int64_t m = 4096;
  for (auto _ : state) {
    benchmark::DoNotOptimize(ChooseMatmulTiling(m, 11008, 4096, 1, 132));
    m = m == 4096 ? 4095 : 4096;
  }
}
BENCHMARK(BM_ChooseMatmulTiling);

void BM_RetimeLlama7bTrace(benchmark::State& state) {
  auto spec = LoadRunSpec(GPUSIM_SOURCE_DIR "/configs/llama7b.yaml", {});
  if (!spec.ok()) {
    state.SkipWithError(std::string(spec.status().message()).c_str());
    return;
  }
  auto step = SimulateStep(*spec);
  if (!step.ok()) {
    state.SkipWithError(std::string(step.status().message()).c_str());
    return;
  }
  for (auto _ : state) benchmark::DoNotOptimize(Simulate(step->lowered.trace, spec->device, nullptr));
  state.counters["events"] = static_cast<double>(step->lowered.trace.events.size());
}
BENCHMARK(BM_RetimeLlama7bTrace)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace gpusim
