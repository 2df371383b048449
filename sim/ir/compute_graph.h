// ComputeGraph: the op dependency graph of a Program: producer→consumer
// edges (each op's direct dependencies), each tensor's producer and its last
// use in the program's schedule — what lowering needs to free a buffer after
// its last reader and to check in-place alias chains (sim/lower/lower.cc).
//
// Note [Why not Boost.Graph]
// This was a boost::adjacency_list with boost::topological_sort and a
// longest-path critical path, and nothing called either: the structure the
// simulator needs is simpler than a general graph.
//  - Topological order: a Program is acyclic by construction — Build refuses
//    an op that reads a tensor no earlier op produced — so program order is
//    already a topological order; so is trace order for a native trace,
//    whose `after=` may only name earlier events (sim/trace/validate.h). A
//    cycle cannot be written down in either format, so there is no cycle to
//    detect or name.
//  - Critical path: the one `gpusim run` prints is the engine's
//    (sim/engine/engine.cc), found in its single forward pass in trace order
//    by remembering which predecessor each event waited for — stream order,
//    `after=` dependencies and device-allocation charges alike. A graph
//    longest path over op dependencies alone would miss the stream and
//    allocator constraints that decide the step time.
// So the graph is flat vectors indexed by op and tensor id, built in one
// pass, and the Boost.Graph dependency is gone.
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

  // The op that produces each tensor (-1 for entry parameters).
  OpId producer(TensorId t) const { return producer_[static_cast<size_t>(t)]; }
  // The last op, in program order, that reads each tensor (-1: never read).
  OpId last_use(TensorId t) const { return last_use_[static_cast<size_t>(t)]; }
  // Producer ops of an op's inputs (its direct dependencies).
  const std::vector<OpId>& deps(OpId op) const { return deps_[static_cast<size_t>(op)]; }

 private:
  std::vector<OpId> producer_;
  std::vector<OpId> last_use_;
  std::vector<std::vector<OpId>> deps_;
};

}  // namespace gpusim

#endif  // GPUSIM_SIM_IR_COMPUTE_GRAPH_H_
