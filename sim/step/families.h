// The model-family registry the step pipeline reads: the families models/
// builds (models/family.h ModelFamilies) and, after them, the front-ends
// backed by an importer (an HLO module, sim/import/hlo/hlo_front_end.h),
// which sit above models/ in the layering (tools/layering.cmake).
#ifndef GPUSIM_SIM_STEP_FAMILIES_H_
#define GPUSIM_SIM_STEP_FAMILIES_H_

#include <vector>

#include "absl/status/statusor.h"
#include "models/family.h"
#include "sim/base/registry.h"
#include "sim/config/spec.h"

namespace gpusim {

// Every family, by name: models/'s, then "hlo".
const std::vector<ModelFamily>& Families();
// Their registry entries (sim/base/registry.h) for `gpusim list models`:
// the settings each models as parameters (with the setting table's doc and
// default), and notes naming the settings per framework and the values it
// runs unmodelled settings at.
std::vector<RegistryEntry> ListModelFamilies();
// The family a run uses: "hlo" for program_hlo, "program" when
// spec.program.present, otherwise
// spec.model.family. Unknown: "model.family: unknown family 'x' (did you
// mean 'y'?)".
absl::StatusOr<const ModelFamily*> FamilyOf(const RunSpec& spec);

}  // namespace gpusim

#endif  // GPUSIM_SIM_STEP_FAMILIES_H_
