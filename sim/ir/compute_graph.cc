#include "sim/ir/compute_graph.h"

#include <algorithm>
#include <iterator>

#include "absl/strings/str_cat.h"

namespace gpusim {

absl::StatusOr<ComputeGraph> ComputeGraph::Build(const Program& p) {
  ComputeGraph g;
  const size_t nt = p.tensors.size(), no = p.ops.size();
  g.producer_.assign(nt, -1);
  g.last_use_.assign(nt, -1);
  g.deps_.assign(no, {});
  for (const Op& op : p.ops) {
    for (TensorId t : op.inputs) {
      const Tensor& tensor = p.tensor(t);
      OpId prod = g.producer_[static_cast<size_t>(t)];
      if (prod < 0 && !tensor.entry_parameter) {
        return absl::InvalidArgumentError(absl::StrCat("op ", op.id, " (", op.name, ") reads tensor '",
                                                       tensor.name, "' before any op produces it"));
      }
      g.last_use_[static_cast<size_t>(t)] = op.id;
      if (prod >= 0 && std::find(g.deps_[static_cast<size_t>(op.id)].begin(),
                                 g.deps_[static_cast<size_t>(op.id)].end(),
                                 prod) == g.deps_[static_cast<size_t>(op.id)].end()) {
        g.deps_[static_cast<size_t>(op.id)].push_back(prod);
      }
    }
    for (TensorId t : op.outputs) {
      if (g.producer_[static_cast<size_t>(t)] >= 0 || p.tensor(t).entry_parameter) {
        return absl::InvalidArgumentError(
            absl::StrCat("op ", op.id, " (", op.name, ") writes tensor '", p.tensor(t).name,
                         "' which already has a producer"));
      }
      g.producer_[static_cast<size_t>(t)] = op.id;
    }
  }
  return g;
}

}  // namespace gpusim
