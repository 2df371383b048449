// libFuzzer target: a run config (YAML, in memory) through the whole
// pipeline — config → model family or program → lowering → engine →
// allocator → report (text and JSON). Rejections must be InvalidArgument
// (or NotFound for a referenced file) naming the input; a step that
// simulates must keep tests/fuzz/step_invariants.h. Seeds: tests/fuzz/pipeline/.
// It lives in tests/fuzz/, not beside a library folder: it drives every
// layer up to the report (sim/step, sim/report), which no folder below
// sim/report may include (tools/layering.cmake).
#include <cstddef>
#include <cstdint>
#include <string>

#include "sim/config/loader.h"
#include "sim/report/render.h"
#include "sim/step/step.h"
#include "tests/fuzz/fuzz_support.h"
#include "tests/fuzz/step_invariants.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace gpusim;
  const std::string yaml(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<RunSpec> spec = ParseRunSpec(yaml, "fuzz/run.yaml");
  if (!spec.ok()) {
    fuzz::CheckRejection(spec.status(), {absl::StatusCode::kInvalidArgument, absl::StatusCode::kNotFound},
                         {"fuzz/run.yaml", ".yaml"});
    return 0;
  }
  // The cost of a step grows with its ops; deep models and long loops are
  // valid but would only make every execution slow (not a finding).
  if (spec->model.n_layers > 4 || spec->loop.trip_count > 64 || spec->loop.unroll > 8) return 0;
  absl::StatusOr<StepReport> r = SimulateStep(*spec);
  if (!r.ok()) {
    if (r.status().code() != absl::StatusCode::kInvalidArgument &&
        r.status().code() != absl::StatusCode::kUnimplemented) {
      fuzz::Fail("SimulateStep", r.status());
    }
    return 0;
  }
  const std::string why = fuzz::SimInvariantViolation(r->lowered.trace, r->sim);
  if (!why.empty()) fuzz::Fail(why, absl::InternalError("step invariant"));
  if (r->peak < Bytes(0) || r->temp < Bytes(0) || r->argument < Bytes(0)) {
    fuzz::Fail("negative memory figure", absl::InternalError("step"));
  }
  (void)RenderText(*r);
  (void)RenderJson(*r);
  return 0;
}
