// The HLO front-end of a run: `program_hlo: FILE` in a run config, or
// `gpusim run STEP.hlo --device NAME`: the "hlo" entry of the model-family
// registry (models/family.cc), which declares the settings it models
// (framework jax, loop.trip_count); the capability check refuses the others
// (the module fixes the model, batch, loop mode, remat and parallelism).
#ifndef GPUSIM_SIM_IMPORT_HLO_HLO_FRONT_END_H_
#define GPUSIM_SIM_IMPORT_HLO_HLO_FRONT_END_H_

#include "absl/status/statusor.h"
#include "sim/config/spec.h"
#include "sim/ir/program.h"

namespace gpusim {

// REQUIRES: !spec.program_hlo.empty(). Uses loop.trip_count (for loops
// whose count the module does not give).
absl::StatusOr<Program> BuildHloProgram(const RunSpec& spec);

}  // namespace gpusim

#endif  // GPUSIM_SIM_IMPORT_HLO_HLO_FRONT_END_H_
