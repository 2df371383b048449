// The pipeline's front-end stage: a model family's layer graph, the remat
// plan decided on it (sim/remat/apply.h ApplyRematPolicy) and the family's
// build with that plan, so that remat policies are applied outside the
// builders (which read the plan only); then the passes that decide what
// the front-end's annotations become: which loop slices are buffers
// (sim/lower/xla/loop_slices.h LowerLoopSlices) and the entry result
// tuple's table (sim/lower/xla/entry_tuple.h). PrepareStep
// (sim/step/step.h) builds through it; tests and benchmarks that want a
// Program do too.
#ifndef GPUSIM_SIM_STEP_MODEL_PROGRAM_H_
#define GPUSIM_SIM_STEP_MODEL_PROGRAM_H_

#include "absl/status/statusor.h"
#include "models/family.h"
#include "sim/config/spec.h"
#include "sim/ir/program.h"

namespace gpusim {

// `family`'s program for `spec` (no capability check: PrepareStep does that).
absl::StatusOr<Program> BuildFamilyProgram(const ModelFamily& family, const RunSpec& spec);
// The same for FamilyOf(spec) (sim/step/families.h).
absl::StatusOr<Program> BuildModelProgram(const RunSpec& spec);

}  // namespace gpusim

#endif  // GPUSIM_SIM_STEP_MODEL_PROGRAM_H_
