// The advisor's throughput on configs/llama7b.yaml, on `jobs` worker
// threads (the argument):
//   BM_AdviseLlama7bGrid      the default grid (remat policy x loop mode x
//                             batch, 168 points)
//   BM_AdviseLlama7bGrid1000  1,000 points: 10 remat policies x rolled /
//                             unrolled x batch 1..16 x param_scan_axis 0/1 x
//                             5 devices (issue 5: "a grid of 1,000
//                             configurations of llama7b must finish in
//                             seconds on two cores"); points that differ
//                             only in device share one prepared step
//   BM_AdviseLlama7bGrid1000Distinct  1,000 points that all need their own
//                             program: the device axis replaced by
//                             seq_len 512..8192
// Wall time is the figure that matters; `cpu_s` is the process CPU time
// (all threads; Google Benchmark's CPU column counts the main thread only),
// which is steadier on a shared machine.
//   build/advise_benchmark --benchmark_filter='BM_AdviseLlama7bGrid1000/'
// Issue 35 (target: 1,000 points in at most 1 s on 2 cores): Grid1000 takes
// 2.25-2.67 s of CPU, 2.1-4.1 s wall, against main's 3.34-4.03 s CPU, 3.1-6.1
// s wall, 4 runs each interleaved at load 3.4-3.7 (the two threads seldom
// ran at once). On two idle cores that CPU is 1.1-1.3 s at best, so the
// target is not shown met here. Where the CPU went before (callgrind of a
// 30-point grid of the same shape: 879 M instructions, now 676 M):
// building, lowering and packing each group's step ~50% (heap packing 20%),
// replaying it per device ~40%, a third of that keying SimResult::time_by_op
// (Note [Kernel time by op on request]); malloc and free ~25% throughout.
#include <sys/resource.h>

#include "benchmark/benchmark.h"
#include "sim/advise/advise.h"

namespace gpusim {
namespace {

double ProcessCpuSeconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) * 1e-6;
}

void RunGrid(benchmark::State& state, const std::vector<GridAxis>& axes) {
  AdviseOptions o;
  o.config = GPUSIM_SOURCE_DIR "/configs/llama7b.yaml";
  o.axes = axes;
  o.jobs = static_cast<int>(state.range(0));
  int64_t points = 0, failed = 0;
  double cpu = 0;
  for (auto _ : state) {
    const double cpu0 = ProcessCpuSeconds();
    auto r = Advise(o);
    cpu += ProcessCpuSeconds() - cpu0;
    if (!r.ok()) {
      state.SkipWithError("advise failed");
      return;
    }
    points += static_cast<int64_t>(r->points.size());
    for (const AdvicePoint& p : r->points) failed += !p.ok;
  }
  state.counters["points"] = static_cast<double>(points) / static_cast<double>(state.iterations());
  state.counters["failed"] = static_cast<double>(failed);
  state.counters["cpu_s"] = cpu / static_cast<double>(state.iterations());
  state.counters["points/s"] = benchmark::Counter(static_cast<double>(points), benchmark::Counter::kIsRate);
}

void BM_AdviseLlama7bGrid(benchmark::State& state) { RunGrid(state, {}); }
BENCHMARK(BM_AdviseLlama7bGrid)->Arg(1)->Arg(2)->Unit(benchmark::kSecond)->Iterations(1)->UseRealTime();

std::vector<GridAxis> Grid1000() {
  return {
      {"remat.policy",
       {"none", "minimal", "save_dot_except_mlpwi", "save_dot_except_mlp", "save_qkv_proj", "save_out_proj", "full",
        "dots_saveable", "nothing_saveable", "everything_saveable"}},
      {"loop.mode", {"rolled", "unrolled"}},
      {"batch.per_device", {"1", "2", "4", "8", "16"}},
      {"model.param_scan_axis", {"0", "1"}},
      {"device", {"h100-sxm-80gb", "h100-pcie-80gb", "h200-sxm-141gb", "a100-sxm-80gb", "a100-sxm-40gb"}},
  };
}

void BM_AdviseLlama7bGrid1000(benchmark::State& state) { RunGrid(state, Grid1000()); }
BENCHMARK(BM_AdviseLlama7bGrid1000)->Arg(2)->Unit(benchmark::kSecond)->Iterations(1)->UseRealTime();

void BM_AdviseLlama7bGrid1000Distinct(benchmark::State& state) {
  std::vector<GridAxis> axes = Grid1000();
  axes.back() = {"batch.seq_len", {"512", "1024", "2048", "4096", "8192"}};
  RunGrid(state, axes);
}
BENCHMARK(BM_AdviseLlama7bGrid1000Distinct)->Arg(1)->Arg(2)->Unit(benchmark::kSecond)->Iterations(1)->UseRealTime();

}  // namespace
}  // namespace gpusim
