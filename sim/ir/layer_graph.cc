#include "sim/ir/layer_graph.h"

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

}  // namespace gpusim
