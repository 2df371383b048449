#include "sim/ir/compute_graph.h"

#include <algorithm>
#include <iterator>

#include "absl/strings/str_cat.h"
#include "boost/graph/adjacency_list.hpp"
#include "boost/graph/topological_sort.hpp"

namespace gpusim {

absl::StatusOr<ComputeGraph> ComputeGraph::Build(const Program& p) {
  ComputeGraph g;
  const size_t nt = p.tensors.size(), no = p.ops.size();
  g.producer_.assign(nt, -1);
  g.last_use_.assign(nt, -1);
  g.deps_.assign(no, {});
  using Graph = boost::adjacency_list<boost::vecS, boost::vecS, boost::directedS>;
  Graph graph(no);
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
        boost::add_edge(static_cast<size_t>(prod), static_cast<size_t>(op.id), graph);
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
  std::vector<size_t> rev;
  boost::topological_sort(graph, std::back_inserter(rev));
  g.topo_.assign(rev.rbegin(), rev.rend());
  return g;
}

std::vector<OpId> ComputeGraph::CriticalPath(const std::vector<int64_t>& duration) const {
  const size_t n = deps_.size();
  std::vector<int64_t> finish(n, 0);
  std::vector<OpId> via(n, -1);
  for (OpId op : topo_) {
    int64_t start = 0;
    for (OpId d : deps_[static_cast<size_t>(op)]) {
      if (finish[static_cast<size_t>(d)] > start) {
        start = finish[static_cast<size_t>(d)];
        via[static_cast<size_t>(op)] = d;
      }
    }
    finish[static_cast<size_t>(op)] = start + duration[static_cast<size_t>(op)];
  }
  if (n == 0) return {};
  OpId end = static_cast<OpId>(std::max_element(finish.begin(), finish.end()) - finish.begin());
  std::vector<OpId> path;
  for (OpId o = end; o >= 0; o = via[static_cast<size_t>(o)]) path.push_back(o);
  std::reverse(path.begin(), path.end());
  return path;
}

}  // namespace gpusim
