// ComputeGraph: the op dependency graph of a Program (Boost.Graph behind a
// small wrapper): producer→consumer edges, topological order, the last use of
// every tensor in the program's schedule, and the critical path under given
// op durations.
#ifndef GPUSIM_SIM_IR_COMPUTE_GRAPH_H_
#define GPUSIM_SIM_IR_COMPUTE_GRAPH_H_

#include <vector>

#include "absl/status/statusor.h"
#include "sim/ir/program.h"

namespace gpusim {

class ComputeGraph {
 public:
  // Fails when an op reads a tensor no earlier op produced and that is not
  // an entry parameter, or when a tensor is produced twice.
  static absl::StatusOr<ComputeGraph> Build(const Program& p);

  // A topological order of the ops (Boost's topological_sort).
  const std::vector<OpId>& topological_order() const { return topo_; }
  // The op that produces each tensor (-1 for entry parameters).
  OpId producer(TensorId t) const { return producer_[static_cast<size_t>(t)]; }
  // The last op, in program order, that reads each tensor (-1: never read).
  OpId last_use(TensorId t) const { return last_use_[static_cast<size_t>(t)]; }
  // Producer ops of an op's inputs (its direct dependencies).
  const std::vector<OpId>& deps(OpId op) const { return deps_[static_cast<size_t>(op)]; }

  // Longest path through the graph with `duration[op]` as vertex weights;
  // returns the ops on it in order.
  std::vector<OpId> CriticalPath(const std::vector<int64_t>& duration) const;

 private:
  std::vector<OpId> topo_;
  std::vector<OpId> producer_;
  std::vector<OpId> last_use_;
  std::vector<std::vector<OpId>> deps_;
};

}  // namespace gpusim

#endif  // GPUSIM_SIM_IR_COMPUTE_GRAPH_H_
