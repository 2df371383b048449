// The advisor's throughput: grid points of configs/llama7b.yaml simulated
// per second (remat policy x loop mode x batch), on all cores.
#include "benchmark/benchmark.h"
#include "sim/advise/advise.h"

namespace gpusim {
namespace {

void BM_AdviseLlama7bGrid(benchmark::State& state) {
  AdviseOptions o;
  o.config = GPUSIM_SOURCE_DIR "/configs/llama7b.yaml";
  o.jobs = static_cast<int>(state.range(0));
  int64_t points = 0;
  for (auto _ : state) {
    auto r = Advise(o);
    if (!r.ok()) {
      state.SkipWithError("advise failed");
      return;
    }
    points += static_cast<int64_t>(r->points.size());
  }
  state.counters["points/s"] = benchmark::Counter(static_cast<double>(points), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_AdviseLlama7bGrid)->Arg(1)->Arg(2)->Unit(benchmark::kSecond)->Iterations(1)->UseRealTime();

}  // namespace
}  // namespace gpusim
