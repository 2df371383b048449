#include "sim/step/model_program.h"

#include "sim/base/status.h"
#include "sim/remat/apply.h"

namespace gpusim {

absl::StatusOr<Program> BuildFamilyProgram(const ModelFamily& family, const RunSpec& spec) {
  if (family.layer_graph == nullptr) return family.build(spec, nullptr);
  ASSIGN_OR_RETURN(const LayerGraph graph, family.layer_graph(spec));
  ASSIGN_OR_RETURN(const RematPlan plan, ApplyRematPolicy(graph, spec.remat));
  return family.build(spec, &plan);
}

absl::StatusOr<Program> BuildModelProgram(const RunSpec& spec) {
  ASSIGN_OR_RETURN(const ModelFamily* family, FamilyOf(spec));
  return BuildFamilyProgram(*family, spec);
}

}  // namespace gpusim
