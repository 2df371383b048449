// Replay throughput of each allocator strategy on one synthetic trace of
// 10 million alloc/free events (5 M buffers; fixed seed), on one core.
//
// Size mix, like an eager training step's: 55% small (1 B–1 MiB), 35%
// medium (1–32 MiB), 10% large (32–256 MiB); up to ~1,000 buffers live,
// freed mostly in reverse order of allocation (stack-like activations) with
// 25% freed at random; 1 stream in 8 allocations on a second stream. The
// device is 80 GiB. Offline planners are quadratic in the buffer count and
// run on the first 20,000 events instead.
//
// Then the XLA temp heap packer alone on deep unrolled Llama steps
// (BM_PackDeepLlamaTemps).
#include <cmath>
#include <random>
#include <vector>

#include "benchmark/benchmark.h"
#include "sim/alloc/allocator.h"
#include "sim/alloc/heap_planner.h"
#include "sim/config/loader.h"
#include "sim/step/step.h"
#include "sim/step/temp_heap.h"

namespace gpusim {
namespace {

struct Op {
  BufferId id;     // >= 0
  int64_t size;    // < 0: free
  StreamId stream;
};

const std::vector<Op>& Trace() {
  static const std::vector<Op>* trace = [] {
    auto* ops = new std::vector<Op>();
    constexpr int64_t kEvents = 10'000'000;
    ops->reserve(kEvents);
    std::mt19937_64 rng(20240611);
    std::vector<BufferId> live;
    BufferId next = 0;
    auto log_uniform = [&](int64_t lo, int64_t hi) {
      std::uniform_real_distribution<double> u(std::log(static_cast<double>(lo)), std::log(static_cast<double>(hi)));
      return static_cast<int64_t>(std::exp(u(rng)));
    };
    while (static_cast<int64_t>(ops->size()) < kEvents) {
      const size_t target = 200 + rng() % 800;
      const bool alloc = live.empty() || (live.size() < target && rng() % 2 == 0);
      const int64_t remaining = kEvents - static_cast<int64_t>(ops->size());
      if (alloc && remaining > static_cast<int64_t>(live.size())) {
        const int kind = static_cast<int>(rng() % 100);
        const int64_t size = kind < 55 ? log_uniform(1, 1 << 20)
                             : kind < 90 ? log_uniform(1 << 20, 32 << 20)
                                         : log_uniform(32 << 20, 256 << 20);
        ops->push_back({next, size, static_cast<StreamId>(rng() % 8 == 0)});
        live.push_back(next++);
      } else {
        size_t k = live.size() - 1;
        if (rng() % 4 == 0) k = rng() % live.size();
        ops->push_back({live[k], -1, 0});
        live[k] = live.back();
        live.pop_back();
      }
    }
    return ops;
  }();
  return *trace;
}

void Replay(benchmark::State& state, const AllocatorSpec& spec, size_t events) {
  const std::vector<Op>& ops = Trace();
  events = std::min(events, ops.size());
  int64_t done = 0;
  for (auto _ : state) {
    auto made = MakeAllocator(spec, Bytes(80LL << 30));
    if (!made.ok()) {
      state.SkipWithError(std::string(made.status().message()).c_str());
      return;
    }
    Allocator& a = **made;
    bool oom = false;
    std::vector<bool> live(ops.size() / 2 + 1, false);
    for (size_t i = 0; i < events; ++i) {
      const Op& op = ops[i];
      if (op.size >= 0) {
        if (!a.Alloc(op.id, Bytes(op.size), op.stream)) {
          oom = true;
          break;
        }
        live[op.id] = true;
      } else if (live[op.id]) {
        a.Free(op.id);
        live[op.id] = false;
      }
    }
    const AllocatorStats s = a.stats();
    benchmark::DoNotOptimize(s);
    if (oom) {
      state.SkipWithError("out of memory");
      return;
    }
    done += static_cast<int64_t>(events);
    state.counters["peak_reserved_GiB"] = s.peak_reserved.GiB();
    state.counters["peak_allocated_GiB"] = s.peak_allocated.GiB();
  }
  state.counters["events/s"] = benchmark::Counter(static_cast<double>(done), benchmark::Counter::kIsRate);
}

void BM_Ideal(benchmark::State& s) { Replay(s, {"ideal", {}}, SIZE_MAX); }
void BM_PyTorchCaching(benchmark::State& s) { Replay(s, {"pytorch_caching", {}}, SIZE_MAX); }
void BM_PyTorchCachingExpandable(benchmark::State& s) {
  Replay(s, {"pytorch_caching", {{"expandable_segments", "true"}}}, SIZE_MAX);
}
void BM_PyTorchCachingMaxSplit(benchmark::State& s) {
  Replay(s, {"pytorch_caching", {{"max_split_size_mb", "128"}, {"roundup_power2_divisions", "4"}}}, SIZE_MAX);
}
void BM_Bfc(benchmark::State& s) { Replay(s, {"bfc", {}}, SIZE_MAX); }
void BM_BfcGrowth(benchmark::State& s) { Replay(s, {"bfc", {{"preallocate", "false"}}}, SIZE_MAX); }
void BM_FirstFit(benchmark::State& s) { Replay(s, {"first_fit", {}}, SIZE_MAX); }
void BM_BestFit(benchmark::State& s) { Replay(s, {"best_fit", {}}, SIZE_MAX); }
void BM_Buddy(benchmark::State& s) { Replay(s, {"buddy", {}}, SIZE_MAX); }
void BM_BestOf(benchmark::State& s) { Replay(s, {"best_of", {{"members", "pytorch_caching,bfc"}}}, SIZE_MAX); }
void BM_XlaBestFit20k(benchmark::State& s) { Replay(s, {"xla_best_fit", {}}, 20'000); }
void BM_GreedyBySize20k(benchmark::State& s) { Replay(s, {"greedy_by_size", {}}, 20'000); }

BENCHMARK(BM_Ideal)->Unit(benchmark::kMillisecond)->Iterations(1);
BENCHMARK(BM_PyTorchCaching)->Unit(benchmark::kMillisecond)->Iterations(3);
BENCHMARK(BM_PyTorchCachingExpandable)->Unit(benchmark::kMillisecond)->Iterations(1);
BENCHMARK(BM_PyTorchCachingMaxSplit)->Unit(benchmark::kMillisecond)->Iterations(1);
BENCHMARK(BM_Bfc)->Unit(benchmark::kMillisecond)->Iterations(1);
BENCHMARK(BM_BfcGrowth)->Unit(benchmark::kMillisecond)->Iterations(1);
BENCHMARK(BM_FirstFit)->Unit(benchmark::kMillisecond)->Iterations(1);
BENCHMARK(BM_BestFit)->Unit(benchmark::kMillisecond)->Iterations(1);
BENCHMARK(BM_Buddy)->Unit(benchmark::kMillisecond)->Iterations(1);
BENCHMARK(BM_BestOf)->Unit(benchmark::kMillisecond)->Iterations(1);
BENCHMARK(BM_XlaBestFit20k)->Unit(benchmark::kMillisecond)->Iterations(1);
BENCHMARK(BM_GreedyBySize20k)->Unit(benchmark::kMillisecond)->Iterations(1);

// The XLA temp heap packing alone (PackBestOf, both orders) on the temps of
// an unrolled Llama-7B step deepened in memory past the loader's cap
// (kMaxLayers; sim/config/spec_parse.h), as SimulateStep packs them: what
// the cap guards against. Arg: layers. The internal::PackBestFitQuadratic
// oracle on the same buffers, both orders, for comparison (Quadratic/...).
std::vector<HeapBuffer> DeepLlamaTemps(int64_t layers) {
  auto spec = LoadRunSpec(GPUSIM_SOURCE_DIR "/configs/llama7b.yaml", {"loop.mode=unrolled"});
  if (!spec.ok()) return {};
  spec->model.n_layers = layers;
  auto step = PrepareStep(*spec);
  if (!step.ok()) return {};
  return TempHeapBuffers(step->lowered);
}

void BM_PackDeepLlamaTemps(benchmark::State& state) {
  const std::vector<HeapBuffer> temps = DeepLlamaTemps(state.range(0));
  if (temps.empty()) {
    state.SkipWithError("the deep llama step did not build");
    return;
  }
  for (auto _ : state) {
    HeapPlan p = PackBestOf(temps);
    benchmark::DoNotOptimize(p);
    state.counters["heap_GiB"] = p.heap_size.GiB();
  }
  state.counters["buffers"] = static_cast<double>(temps.size());
}
BENCHMARK(BM_PackDeepLlamaTemps)
    ->Arg(32)
    ->Arg(128)
    ->Arg(256)
    ->Arg(512)
    ->Arg(1024)
    ->Unit(benchmark::kMillisecond)
    ->Iterations(1);

void BM_PackDeepLlamaTempsQuadratic(benchmark::State& state) {
  const std::vector<HeapBuffer> temps = DeepLlamaTemps(state.range(0));
  for (auto _ : state) {
    HeapPlan s = internal::PackBestFitQuadratic(temps, HeapOrder::kSpatial);
    HeapPlan t = internal::PackBestFitQuadratic(temps, HeapOrder::kTemporal);
    benchmark::DoNotOptimize(s);
    benchmark::DoNotOptimize(t);
  }
}
BENCHMARK(BM_PackDeepLlamaTempsQuadratic)->Arg(32)->Arg(128)->Arg(256)->Unit(benchmark::kMillisecond)->Iterations(1);

}  // namespace
}  // namespace gpusim
