// The capability contract: a run may give a non-default value only to
// settings its model family (models/family.h), framework (lowering) and
// allocator model. Anything else is refused by name, where it was written:
//
//   FILE:LINE:COL: parallelism.tensor: not modelled for model family 'llama'
//   under framework 'jax' (this family models: ...)
//   --set loop.unroll=2: loop.unroll: not modelled for ...
//
// A setting the family does not model and the run does not write takes the
// value the family behaves as (ModelFamily::fixed), so reports print what
// was simulated, never a setting that had no effect.
#ifndef GPUSIM_SIM_STEP_CAPABILITIES_H_
#define GPUSIM_SIM_STEP_CAPABILITIES_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "sim/config/spec.h"

namespace gpusim {

// The spec as it will be simulated: refused settings are an
// InvalidArgument error as above; unwritten unmodelled settings take the
// family's fixed value.
absl::StatusOr<RunSpec> ApplyCapabilities(const RunSpec& spec);

// The setting paths the run's family models under its framework (the
// report's header prints only these). REQUIRES: the family exists.
std::vector<std::string> ModelledSettings(const RunSpec& spec);

// Allocators a jax step (model family) can be checked against: XLA's buffer
// assignment gives the footprint; the runtime question is JAX's BFC arena
// (sim/step/step.cc, Note [JAX arena]).
inline constexpr const char* kJaxAllocators[] = {"ideal", "bfc"};

}  // namespace gpusim

#endif  // GPUSIM_SIM_STEP_CAPABILITIES_H_
