// See names.h.
#include "sim/base/names.h"

#include <algorithm>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
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

std::string CaseFoldedName(absl::string_view name, const std::vector<std::string>& candidates) {
  std::string found;
  for (const std::string& c : candidates) {
    if (!absl::EqualsIgnoreCase(c, name)) continue;
    if (!found.empty()) return "";  // two differ only by case: not one
    found = c;
  }
  return found;
}

std::vector<std::string> MeantNames(absl::string_view name, const std::vector<std::string>& candidates) {
  constexpr size_t kMost = 4;
  const std::string folded = CaseFoldedName(name, candidates);
  if (!folded.empty()) return {folded};
  const std::string lower = absl::AsciiStrToLower(name);
  std::vector<std::string> out;
  if (lower.size() >= 2) {
    for (const std::string& c : candidates) {
      const std::string lc = absl::AsciiStrToLower(c);
      // An abbreviation: the start of the name or of one of its parts.
      size_t at = lc.find(lower);
      bool part = false;
      while (at != std::string::npos && !part) {
        part = at == 0 || lc[at - 1] == '-' || lc[at - 1] == '_' || lc[at - 1] == '.';
        at = lc.find(lower, at + 1);
      }
      if (part && out.size() < kMost) out.push_back(c);
    }
  }
  if (!out.empty()) return out;
  std::vector<std::string> lowered;
  for (const std::string& c : candidates) lowered.push_back(absl::AsciiStrToLower(c));
  const std::string near = NearestName(lower, lowered);
  for (size_t i = 0; i < lowered.size() && !near.empty(); ++i) {
    if (lowered[i] == near) return {candidates[i]};
  }
  return {};
}

std::string UnknownNameMessage(absl::string_view what, absl::string_view name,
                               const std::vector<std::string>& candidates) {
  std::string msg = absl::StrCat("unknown ", what, " '", name, "'");
  const std::vector<std::string> meant = MeantNames(name, candidates);
  if (!meant.empty()) {
    std::vector<std::string> quoted;
    for (const std::string& m : meant) quoted.push_back(absl::StrCat("'", m, "'"));
    absl::StrAppend(&msg, " (did you mean ", absl::StrJoin(quoted, " or "), "?)");
  }
  absl::StrAppend(&msg, "; available: ", absl::StrJoin(candidates, ", "));
  return msg;
}

}  // namespace gpusim
