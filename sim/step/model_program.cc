#include "sim/step/model_program.h"

#include "sim/base/status.h"
#include "sim/lower/xla/entry_tuple.h"
#include "sim/lower/xla/loop_slices.h"
#include "sim/remat/apply.h"
#include "sim/step/families.h"

namespace gpusim {

namespace {

absl::StatusOr<Program> FrontEnd(const ModelFamily& family, const RunSpec& spec) {
  if (family.layer_graph == nullptr) return family.build(spec, nullptr);
  ASSIGN_OR_RETURN(const LayerGraph graph, family.layer_graph(spec));
  ASSIGN_OR_RETURN(const RematPlan plan, ApplyRematPolicy(graph, spec.remat));
  return family.build(spec, &plan);
}

}  // namespace

absl::StatusOr<Program> BuildFamilyProgram(const ModelFamily& family, const RunSpec& spec) {
  ASSIGN_OR_RETURN(Program p, FrontEnd(family, spec));
  LowerLoopSlices(spec.xla, &p);  // Note [Materialised loop slices]
  AddEntryTupleTable(&p);         // Note [Entry result tuple]
  return p;
}

absl::StatusOr<Program> BuildModelProgram(const RunSpec& spec) {
  ASSIGN_OR_RETURN(const ModelFamily* family, FamilyOf(spec));
  return BuildFamilyProgram(*family, spec);
}

}  // namespace gpusim
