// See names.h.
#include "sim/base/names.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace gpusim {

int EditDistance(absl::string_view a, absl::string_view b) {
  std::vector<int> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = static_cast<int>(j);
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = static_cast<int>(i);
    for (size_t j = 1; j <= b.size(); ++j) {
      int subst = prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1);
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, subst});
    }
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

std::string NearestName(absl::string_view name, const std::vector<std::string>& candidates) {
  const int limit = std::max<int>(2, static_cast<int>(name.size()) / 2);
  std::string best;
  int best_distance = limit + 1;
  for (const std::string& c : candidates) {
    const int d = EditDistance(name, c);
    if (d < best_distance) {
      best_distance = d;
      best = c;
    }
  }
  return best;
}

std::string UnknownNameMessage(absl::string_view what, absl::string_view name,
                               const std::vector<std::string>& candidates) {
  std::string msg = absl::StrCat("unknown ", what, " '", name, "'");
  const std::string near = NearestName(name, candidates);
  if (!near.empty()) absl::StrAppend(&msg, " (did you mean '", near, "'?)");
  absl::StrAppend(&msg, "; available: ", absl::StrJoin(candidates, ", "));
  return msg;
}

}  // namespace gpusim
