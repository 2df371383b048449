// Benchmarks of the HLO front-end on a Llama2-7B train step exported from
// JAX (traces/hlo/): parsing the module text, importing it into Program IR
// (fusion, loop expansion), and the whole `gpusim run STEP.hlo` step
// (import + lowering + heap packing + engine).
#include <string>

#include "benchmark/benchmark.h"
#include "sim/config/loader.h"
#include "sim/import/hlo/hlo_parser.h"
#include "sim/import/hlo/hlo_to_program.h"
#include "sim/step/step.h"

namespace gpusim {
namespace {

const char* Module(int64_t i) {
  return i == 0 ? GPUSIM_SOURCE_DIR "/traces/hlo/llama7b_axis0_rolled.hlo.gz"
                : GPUSIM_SOURCE_DIR "/traces/hlo/llama7b_axis0_unrolled.hlo.gz";
}

void BM_ParseHlo(benchmark::State& state) {
  size_t instructions = 0;
  for (auto _ : state) {
    auto m = ReadHloModule(Module(state.range(0)));
    if (!m.ok()) {
      state.SkipWithError(std::string(m.status().message()).c_str());
      return;
    }
    instructions = m->InstructionCount();
    benchmark::DoNotOptimize(m);
  }
  state.counters["instructions"] = static_cast<double>(instructions);
}
BENCHMARK(BM_ParseHlo)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond);

void BM_ImportHlo(benchmark::State& state) {
  auto m = ReadHloModule(Module(state.range(0)));
  if (!m.ok()) {
    state.SkipWithError(std::string(m.status().message()).c_str());
    return;
  }
  size_t ops = 0;
  for (auto _ : state) {
    auto p = HloToProgram(*m, {});
    ops = p->ops.size();
    benchmark::DoNotOptimize(p);
  }
  state.counters["ops"] = static_cast<double>(ops);
}
BENCHMARK(BM_ImportHlo)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond);

void BM_RunHloStep(benchmark::State& state) {
  const std::string yaml = std::string("framework: jax\ndevice: h100-sxm-80gb\nprogram_hlo: \"") +
                           Module(state.range(0)) + "\"\n";
  auto spec = ParseRunSpec(yaml, "");
  if (!spec.ok()) {
    state.SkipWithError(std::string(spec.status().message()).c_str());
    return;
  }
  for (auto _ : state) {
    auto r = SimulateStep(*spec);
    if (!r.ok()) {
      state.SkipWithError(std::string(r.status().message()).c_str());
      return;
    }
    benchmark::DoNotOptimize(r);
  }
}
BENCHMARK(BM_RunHloStep)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace gpusim
