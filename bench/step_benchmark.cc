// Benchmarks of the main path: config load + build + lower + simulate for
// configs/llama7b.yaml, and native trace write/read throughput.
#include <sstream>

#include "benchmark/benchmark.h"
#include "sim/config/loader.h"
#include "sim/report/step.h"
#include "sim/trace/trace_io.h"

namespace gpusim {
namespace {

void BM_SimulateLlama7bStep(benchmark::State& state) {
  auto spec = LoadRunSpec(GPUSIM_SOURCE_DIR "/configs/llama7b.yaml", {});
  if (!spec.ok()) {
    state.SkipWithError(std::string(spec.status().message()).c_str());
    return;
  }
  int64_t events = 0;
  for (auto _ : state) {
    auto r = SimulateStep(*spec);
    benchmark::DoNotOptimize(r);
    events += static_cast<int64_t>(r->lowered.trace.events.size());
  }
  state.counters["events/s"] = benchmark::Counter(static_cast<double>(events), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_SimulateLlama7bStep)->Unit(benchmark::kMillisecond);

void BM_TraceWriteRead(benchmark::State& state) {
  auto spec = LoadRunSpec(GPUSIM_SOURCE_DIR "/configs/llama7b.yaml", {});
  auto r = SimulateStep(*spec);
  int64_t bytes = 0;
  for (auto _ : state) {
    std::stringstream ss;
    (void)WriteTrace(r->lowered.trace, ss);
    bytes += static_cast<int64_t>(ss.str().size());
    auto t = ReadTrace(ss, "bench");
    benchmark::DoNotOptimize(t);
  }
  state.SetBytesProcessed(bytes);
}
BENCHMARK(BM_TraceWriteRead)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace gpusim
