// Names chosen from a list (registries, config keys): the nearest match for
// a misspelling and the one "unknown ... (did you mean ...?)" message style
// every registry uses.
#ifndef GPUSIM_SIM_BASE_NAMES_H_
#define GPUSIM_SIM_BASE_NAMES_H_

#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace gpusim {

// Levenshtein distance.
int EditDistance(absl::string_view a, absl::string_view b);

// The nearest of `candidates` to `name`, or "" when none is within
// max(2, name.size() / 2) edits. Ties go to the earlier candidate.
std::string NearestName(absl::string_view name, const std::vector<std::string>& candidates);

// Every candidate a user may have meant by `name`, best first (at most 4):
// the one equal to it but for case; else those it abbreviates (a prefix or
// a part between '-', '_' or '.', case folded: "h100" names both H100
// devices); else the nearest by edit distance, case folded.
std::vector<std::string> MeantNames(absl::string_view name, const std::vector<std::string>& candidates);

// The one candidate equal to `name` but for case, or "".
std::string CaseFoldedName(absl::string_view name, const std::vector<std::string>& candidates);

// Note [Registry names fold case]: a registry key written in another case
// is the registered one ("FULL" -> "full", "PyTorch_Caching" ->
// "pytorch_caching") when exactly one key folds to it; otherwise `name`
// unchanged, for the lookup to report with its did-you-mean. `registry`:
// a map keyed by name.
template <typename Map>
std::string FoldRegistryName(const std::string& name, const Map& registry) {
  if (registry.count(name) > 0) return name;
  std::vector<std::string> keys;
  for (const auto& entry : registry) keys.push_back(entry.first);
  const std::string folded = CaseFoldedName(name, keys);
  return folded.empty() ? name : folded;
}

// "unknown WHAT 'x' (did you mean 'y'?); available: a, b, c": the
// suggestion (MeantNames, "'y' or 'z'") omitted when none is close.
std::string UnknownNameMessage(absl::string_view what, absl::string_view name,
                               const std::vector<std::string>& candidates);

}  // namespace gpusim

#endif  // GPUSIM_SIM_BASE_NAMES_H_
