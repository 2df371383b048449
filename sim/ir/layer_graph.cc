#include "sim/ir/layer_graph.h"

#include <set>

#include "absl/strings/str_cat.h"

namespace gpusim {

std::string LayerValue::param() const {
  for (const std::string& in : inputs) {
    if (IsParamInput(in)) return ParamOfInput(in);
  }
  return std::string();
}

const LayerValue* LayerGraph::Find(std::string_view name) const {
  for (const LayerValue& v : values) {
    if (v.name == name) return &v;
  }
  return nullptr;
}

absl::Status LayerGraph::Validate() const {
  std::set<std::string> seen;
  for (const LayerValue& v : values) {
    if (v.name == input || !seen.insert(v.name).second) {
      return absl::InternalError(absl::StrCat("layer graph: value '", v.name, "' is defined twice"));
    }
    for (const std::string& in : v.inputs) {
      if (in != input && !IsParamInput(in) && (in == v.name || !seen.count(in))) {
        return absl::InternalError(
            absl::StrCat("layer graph: value '", v.name, "' reads '", in, "', which is not an earlier value"));
      }
    }
  }
  for (const LayerValue& v : values) {
    if (!v.kernel_of.empty()) {
      const LayerValue* k = Find(v.kernel_of);
      if (k == nullptr || k == &v || !k->kernel_of.empty()) {
        return absl::InternalError(absl::StrCat("layer graph: value '", v.name, "' is an output of the kernel of '",
                                                v.kernel_of, "', which is no value with a kernel of its own"));
      }
    }
    for (const std::string& need : v.needs) {
      if (need != input && !seen.count(need)) {
        return absl::InternalError(
            absl::StrCat("layer graph: the backward rule of '", v.name, "' needs '", need, "', which is no value"));
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace gpusim
