// Benchmarks of the main path for configs/llama7b.yaml: the whole step
// (build + lower + simulate + heap packing), each stage on its own (config
// load, model build, lowering, engine, XLA temp heap packing, report), and
// native trace write/read throughput. The stage figures say where an
// advisor grid point's time goes.
#include <memory>
#include <sstream>

#include "benchmark/benchmark.h"
#include "models/llama.h"
#include "sim/alloc/allocator.h"
#include "sim/alloc/heap_planner.h"
#include "sim/config/loader.h"
#include "sim/report/render.h"
#include "sim/step/step.h"
#include "sim/step/temp_heap.h"
#include "sim/trace/trace_io.h"
#include "sim/step/model_program.h"

namespace gpusim {
namespace {

constexpr char kLlama7b[] = GPUSIM_SOURCE_DIR "/configs/llama7b.yaml";

void BM_SimulateLlama7bStep(benchmark::State& state) {
  auto spec = LoadRunSpec(kLlama7b, {});
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

// The whole step for deep Llama-7B stacks (kMaxLayers unrolled,
// kMaxRolledLayers rolled; sim/config/spec_parse.h): the spec is deepened
// in memory after loading, so the unrolled figures past 256 say what that
// cap guards against. Rolled scans deeper than 1,024 layers are built once
// (Note [Rolled loop built once], sim/lower/lower.h): 4,096 and 100,000
// layers cost what a few layers do, plus one report row per layer.
// Args: layers, rolled (1) or unrolled (0).
void BM_SimulateDeepLlama(benchmark::State& state) {
  auto spec = LoadRunSpec(kLlama7b, {state.range(1) ? "loop.mode=rolled" : "loop.mode=unrolled"});
  if (!spec.ok()) {
    state.SkipWithError(std::string(spec.status().message()).c_str());
    return;
  }
  spec->model.n_layers = state.range(0);
  for (auto _ : state) {
    auto r = SimulateStep(*spec);
    if (!r.ok()) {
      state.SkipWithError(std::string(r.status().message()).c_str());
      return;
    }
    benchmark::DoNotOptimize(r);
  }
}
BENCHMARK(BM_SimulateDeepLlama)
    ->Args({64, 0})
    ->Args({128, 0})
    ->Args({256, 0})
    ->Args({512, 0})
    ->Args({1024, 0})
    ->Args({64, 1})
    ->Args({256, 1})
    ->Args({1024, 1})
    ->Args({1025, 1})
    ->Args({4096, 1})
    ->Args({100000, 1})
    ->Unit(benchmark::kMillisecond)
    ->Iterations(1);

// Stage: YAML run config + device + model files → RunSpec (what the
// advisor does once per grid point, with that point's --set overrides).
void BM_Stage1LoadRunSpec(benchmark::State& state) {
  for (auto _ : state) {
    auto spec = LoadRunSpec(kLlama7b, {"remat.policy=full", "batch.per_device=4"});
    benchmark::DoNotOptimize(spec);
  }
}
BENCHMARK(BM_Stage1LoadRunSpec)->Unit(benchmark::kMillisecond);

void BM_Stage2BuildProgram(benchmark::State& state) {
  auto spec = LoadRunSpec(kLlama7b, {});
  for (auto _ : state) {
    auto p = BuildModelProgram(*spec);
    benchmark::DoNotOptimize(p);
  }
}
BENCHMARK(BM_Stage2BuildProgram)->Unit(benchmark::kMillisecond);

void BM_Stage3Lower(benchmark::State& state) {
  auto spec = LoadRunSpec(kLlama7b, {});
  auto p = BuildModelProgram(*spec);
  LowerOptions o;
  o.reuse_operand_buffers = true;
  for (auto _ : state) {
    auto l = LowerEager(*p, o);
    benchmark::DoNotOptimize(l);
  }
}
BENCHMARK(BM_Stage3Lower)->Unit(benchmark::kMillisecond);

void BM_Stage4Engine(benchmark::State& state) {
  auto spec = LoadRunSpec(kLlama7b, {});
  auto r = SimulateStep(*spec);
  for (auto _ : state) {
    auto alloc = MakeAllocator(spec->allocator, spec->device.usable());
    auto sim = Simulate(r->lowered.trace, spec->device, alloc->get());
    benchmark::DoNotOptimize(sim);
  }
}
BENCHMARK(BM_Stage4Engine)->Unit(benchmark::kMillisecond);

// The temps of the llama7b step (XLA semantics) as SimulateStep packs them;
// range(0) = 0: the config's rolled layer scan, 1: unrolled (more buffers,
// about 3.5x the overlaps in time).
std::vector<HeapBuffer> Llama7bTemps(const benchmark::State& state) {
  auto spec = LoadRunSpec(kLlama7b, {state.range(0) ? "loop.mode=unrolled" : "loop.mode=rolled"});
  auto r = SimulateStep(*spec);
  return TempHeapBuffers(r->lowered);
}

void BM_Stage5HeapPackBestOf(benchmark::State& state) {
  const std::vector<HeapBuffer> temps = Llama7bTemps(state);
  for (auto _ : state) {
    HeapPlan p = PackBestOf(temps);
    benchmark::DoNotOptimize(p);
  }
  state.counters["buffers"] = static_cast<double>(temps.size());
}
BENCHMARK(BM_Stage5HeapPackBestOf)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond);

// The first O(n^2) planner on the same buffers (both orders), for comparison.
void BM_Stage5HeapPackQuadratic(benchmark::State& state) {
  const std::vector<HeapBuffer> temps = Llama7bTemps(state);
  for (auto _ : state) {
    HeapPlan s = internal::PackBestFitQuadratic(temps, HeapOrder::kSpatial);
    HeapPlan t = internal::PackBestFitQuadratic(temps, HeapOrder::kTemporal);
    benchmark::DoNotOptimize(s);
    benchmark::DoNotOptimize(t);
  }
}
BENCHMARK(BM_Stage5HeapPackQuadratic)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond);

void BM_Stage6RenderJson(benchmark::State& state) {
  auto spec = LoadRunSpec(kLlama7b, {});
  auto r = SimulateStep(*spec);
  for (auto _ : state) {
    std::string j = RenderJson(*r);
    benchmark::DoNotOptimize(j);
  }
}
BENCHMARK(BM_Stage6RenderJson)->Unit(benchmark::kMillisecond);

void BM_TraceWriteRead(benchmark::State& state) {
  auto spec = LoadRunSpec(kLlama7b, {});
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
