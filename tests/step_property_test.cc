// Property test (issue 17): for random valid run configs (fixed seeds) —
// llama and gpt families, flash or explicit attention, remat policies, loop
// modes, framework semantics, allocators, devices large and small enough to
// run out of memory — every reported byte figure is non-negative, the peak
// is at least every live set, reserved >= allocated, and fragmentation is
// non-negative (tests/fuzz/step_invariants.h, shared with the fuzzers).
#include <random>
#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "sim/config/loader.h"
#include "sim/step/step.h"
#include "tests/fuzz/step_invariants.h"

namespace gpusim::step_property_test {
namespace {

template <typename T, size_t N>
const T& Pick(std::mt19937_64& rng, const T (&choices)[N]) {
  return choices[rng() % N];
}

std::string RandomConfig(std::mt19937_64& rng) {
  const bool llama = rng() % 2 == 0;
  const int heads = Pick(rng, {2, 4, 8});
  const int head_dim = Pick(rng, {16, 32, 64});
  const int kv = llama ? Pick(rng, {1, 2}) : heads;
  const int d_model = heads * head_dim;
  const bool jax = rng() % 2 == 0;
  std::string y = absl::StrCat("framework: ", jax ? "jax" : "pytorch", "\n");
  absl::StrAppend(&y, "device: ", Pick(rng, {"h100-sxm-80gb", "a100-sxm-80gb"}), "\n");
  absl::StrAppend(&y, "model:\n  family: ", llama ? "llama" : "gpt", "\n  d_model: ", d_model,
                  "\n  n_layers: ", 1 + rng() % 3, "\n  n_heads: ", heads, "\n  n_kv_heads: ", kv,
                  "\n  head_dim: ", head_dim, "\n  mlp_dim: ", d_model * Pick(rng, {2, 4}),
                  "\n  vocab: ", Pick(rng, {256, 1000, 32000}), "\n");
  // Only settings the family models (sim/step/capabilities refuses the
  // rest by name): both model the attention kernel; layer scan and loop
  // mode are Llama's under jax (XLA-only settings under pytorch, Note
  // [Framework semantics] in sim/lower/semantics.h).
  absl::StrAppend(&y, "  attention: ", Pick(rng, {"flash", "explicit"}), "\n");
  if (llama && jax) {
    absl::StrAppend(&y, "  scan_layers: ", Pick(rng, {"true", "false"}), "\n");
    absl::StrAppend(&y, "loop: {mode: ", Pick(rng, {"rolled", "unrolled"}), "}\n");
  }
  absl::StrAppend(&y, "remat: {policy: ", Pick(rng, {"none", "full", "minimal"}), "}\n");
  absl::StrAppend(&y, "batch: {per_device: ", Pick(rng, {1, 2, 8, 512}), ", seq_len: ", Pick(rng, {16, 128, 2048}),
                  "}\n");
  // A JAX step runs in JAX's BFC arena (or the ideal bound); runtime
  // allocators are for eager steps (sim/step/capabilities).
  absl::StrAppend(&y, "allocator: {impl: ",
                  jax ? Pick(rng, {"ideal", "bfc"}) : Pick(rng, {"ideal", "pytorch_caching", "bfc", "best_fit", "buddy"}),
                  "}\n");
  return y;
}

TEST(StepPropertyTest, ByteFiguresPeaksAndReservedHoldOnRandomConfigs) {
  std::mt19937_64 rng(17);
  int simulated = 0, out_of_memory = 0;
  constexpr int kConfigs = 60;
  for (int i = 0; i < kConfigs; ++i) {
    const std::string yaml = RandomConfig(rng);
    // Half of them on a 4 GiB device, so that many steps run out of memory.
    std::vector<std::string> sets;
    if (rng() % 2 == 0) sets = {"device.memory.cuda_total=4GiB", "device.memory.context_reserve=256MiB"};
    absl::StatusOr<RunSpec> spec = ParseRunSpec(yaml, "random.yaml", sets);
    ASSERT_TRUE(spec.ok()) << spec.status() << "\n" << yaml;
    absl::StatusOr<StepReport> r = SimulateStep(*spec);
    if (!r.ok()) {
      // A combination a family does not model is refused by name, never a crash.
      EXPECT_TRUE(r.status().code() == absl::StatusCode::kInvalidArgument ||
                  r.status().code() == absl::StatusCode::kUnimplemented)
          << r.status() << "\n" << yaml;
      continue;
    }
    ++simulated;
    out_of_memory += r->sim.oom.happened;
    EXPECT_EQ(fuzz::SimInvariantViolation(r->lowered.trace, r->sim), "") << yaml;
    for (Bytes b : {r->peak, r->argument, r->output, r->alias, r->temp, r->temp_live_peak, r->capacity}) {
      EXPECT_GE(b, Bytes(0)) << yaml;
    }
  }
  // The properties were exercised, on steps that fit and on steps that did not.
  EXPECT_GE(simulated, kConfigs / 2);
  EXPECT_GE(out_of_memory, 3);
  EXPECT_LT(out_of_memory, simulated);
}

}  // namespace
}  // namespace gpusim::step_property_test
