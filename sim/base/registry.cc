// See registry.h.
#include "sim/base/registry.h"

#include "absl/strings/str_cat.h"
#include "sim/base/names.h"

namespace gpusim {

std::string UnknownEntryMessage(absl::string_view key, absl::string_view what, absl::string_view name,
                                const std::vector<RegistryEntry>& entries) {
  std::vector<std::string> names;
  names.reserve(entries.size());
  for (const RegistryEntry& e : entries) names.push_back(e.name);
  return absl::StrCat(key.empty() ? "" : absl::StrCat(key, ": "), UnknownNameMessage(what, name, names));
}

std::string DescribeParam(const ParamDoc& p) {
  std::string out = absl::StrCat(p.name, " (", p.type);
  if (!p.unit.empty()) absl::StrAppend(&out, ", ", p.unit);
  if (!p.default_value.empty()) absl::StrAppend(&out, "; default ", p.default_value);
  if (!p.range.empty()) absl::StrAppend(&out, "; ", p.range);
  absl::StrAppend(&out, ")");
  if (!p.doc.empty()) absl::StrAppend(&out, ": ", p.doc);
  return out;
}

}  // namespace gpusim
