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

// "unknown WHAT 'x' (did you mean 'y'?); available: a, b, c": the
// suggestion omitted when none is close.
std::string UnknownNameMessage(absl::string_view what, absl::string_view name,
                               const std::vector<std::string>& candidates);

}  // namespace gpusim

#endif  // GPUSIM_SIM_BASE_NAMES_H_
