#include "sim/step/families.h"

#include <set>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "sim/base/names.h"
#include "sim/config/settings.h"
#include "sim/import/hlo/hlo_front_end.h"

namespace gpusim {
namespace {

std::vector<ModelFamily>* MakeFamilies() {
  auto* f = new std::vector<ModelFamily>(ModelFamilies());
  // sim/import/hlo/hlo_front_end.h: an HLO module jax.jit(...).lower() printed.
  f->push_back({"hlo",
                "an imported HLO module (program_hlo: FILE, gpusim run STEP.hlo): XLA-GPU fusion, while-loop state, "
                "donation (sim/import/hlo, sim/lower/xla/fusion.cc)",
                {"framework", "loop.trip_count"},
                {},
                {},
                [](const RunSpec& s, const RematPlan*) { return BuildHloProgram(s); },
                nullptr});
  return f;
}

// A setting's type, read off its default as the settings table writes it.
std::string TypeOfDefault(const std::string& v) {
  if (v == "true" || v == "false") return "bool";
  if (!v.empty() && v.front() == '[') return "list";
  if (!v.empty() && v.find_first_not_of("-0123456789") == std::string::npos) return "int";
  if (!v.empty() && v.find_first_not_of("-0123456789.e") == std::string::npos) return "double";
  return "string";
}

}  // namespace

const std::vector<ModelFamily>& Families() {
  static const std::vector<ModelFamily>* const kFamilies = MakeFamilies();
  return *kFamilies;
}

std::vector<RegistryEntry> ListModelFamilies() {
  const RunSpec defaults;
  std::vector<RegistryEntry> out;
  for (const ModelFamily& f : Families()) {
    RegistryEntry e{f.name, f.doc, {}, {}};
    std::set<std::string> seen;
    for (const std::vector<std::string>* list : {&f.jax_settings, &f.pytorch_settings}) {
      for (const std::string& path : *list) {
        if (!seen.insert(path).second) continue;
        const SettingInfo* s = FindSetting(path);
        if (s == nullptr) {
          e.params.push_back({path, "string", "", "", "", ""});
          continue;
        }
        // The family's default where it has one (ModelFamily::fixed).
        auto own = f.fixed.find(path);
        const std::string def = own != f.fixed.end() ? own->second : s->default_value(defaults);
        e.params.push_back({path, TypeOfDefault(def), "", def, "", s->doc});
      }
    }
    std::string fixed;  // the values of settings it does not model
    for (const auto& [path, value] : f.fixed) {
      if (seen.count(path) > 0) continue;
      absl::StrAppend(&fixed, fixed.empty() ? "" : ", ", path, " = ", value);
    }
    e.notes = {{"models under jax", absl::StrJoin(f.jax_settings, ", ")},
               {"models under pytorch", absl::StrJoin(f.pytorch_settings, ", ")},
               {"runs as", fixed}};
    out.push_back(std::move(e));
  }
  return out;
}

absl::StatusOr<const ModelFamily*> FamilyOf(const RunSpec& spec) {
  const std::string name = !spec.program_hlo.empty() ? "hlo"
                           : spec.program.present   ? "program"
                           : spec.megatron.present  ? "megatron"
                                                    : spec.model.family;
  std::vector<std::string> names;
  for (const ModelFamily& f : Families()) {
    if (f.name == name) return &f;
    if (f.name != "program" && f.name != "hlo" && f.name != "megatron") names.push_back(f.name);
  }
  return absl::InvalidArgumentError(absl::StrCat("model.family: ", UnknownNameMessage("model family", name, names)));
}

}  // namespace gpusim
