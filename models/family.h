// Model families: the front-ends that turn a model config into Program IR,
// picked by `model.family` (or, for a `program:` section, the "program"
// front-end). Each entry declares the settings it models, per framework;
// the capability check (sim/step/capabilities.h) refuses any other setting
// given a value that differs from what the family does (`fixed`).
//
// To add a family: a builder under models/ (NAME.h/.cc) with its layer
// graph function, an entry in family.cc, and the name in the
// `model.family` enum of sim/config/spec_parse.cc. A front-end backed by an
// importer (sim/import) registers in sim/step/families.cc instead.
#ifndef GPUSIM_MODELS_FAMILY_H_
#define GPUSIM_MODELS_FAMILY_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "sim/config/spec.h"
#include "sim/ir/layer_graph.h"
#include "sim/ir/program.h"
#include "sim/ir/remat_plan.h"
#include "sim/lower/semantics.h"

namespace gpusim {

struct ModelFamily {
  std::string name;  // model.family, or "program"
  std::string doc;   // one line, with its sources
  // Setting paths (sim/config/settings.h) the family models under
  // framework jax and under framework pytorch.
  std::vector<std::string> jax_settings, pytorch_settings;
  // Where the family's value for a setting is not the spec's default: the
  // value a run that does not write the setting runs, which the pipeline
  // writes into the spec so reports show what was simulated. For a setting
  // the family does not model it is the only value a run may give
  // ("loop.mode" → "unrolled": layers are emitted straight-line); for one it
  // models, the family's default (gpt's "model.attention" → "explicit", as
  // Korthikanti et al. count it).
  std::map<std::string, std::string> fixed;
  // Builds the step. `plan` is the remat plan the pipeline decided on
  // layer_graph's layer (sim/step/model_program.h); null when the family
  // has no layer graph. Builders read the plan, never a remat policy.
  absl::StatusOr<Program> (*build)(const RunSpec& spec, const RematPlan* plan);
  // Parameters of the whole model (the header's count); null for programs.
  int64_t (*param_count)(const ModelSpec& m);
  // Checks the values of settings it models that it cannot run (a split
  // that does not divide); null when every value runs. The capability
  // check calls it, so `--vary` values are checked before any point runs.
  absl::Status (*check)(const RunSpec& spec) = nullptr;
  // One decoder layer (sim/ir/layer_graph.h) for the remat decision
  // (sim/remat/apply.h); null for families without layers (programs, HLO).
  absl::StatusOr<LayerGraph> (*layer_graph)(const RunSpec& spec) = nullptr;

  const std::vector<std::string>& settings(const LoweringSemantics& semantics) const {
    return semantics.lowering == Lowering::kEager ? pytorch_settings : jax_settings;
  }
};

// The families models/ builds, by name. The step pipeline's registry
// (sim/step/families.h: Families, FamilyOf, ListModelFamilies) adds the
// importer-backed ones (an HLO module), which models/ may not link.
const std::vector<ModelFamily>& ModelFamilies();

}  // namespace gpusim

#endif  // GPUSIM_MODELS_FAMILY_H_
