// Greedy by Size for offset calculation (Pisarchyk & Lee, "Efficient Memory
// Management for Deep Neural Net Inference", 2020, §4.3; TFLite GPU
// delegate tensorflow/lite/delegates/gpu/common/memory_management/
// greedy_by_size_assignment.cc). Buffers in decreasing size (ties: earlier
// first use, then input order); each takes the smallest gap, among the
// already placed buffers whose lifetimes overlap it ordered by offset, that
// fits it, else the offset after the highest of them.
#ifndef GPUSIM_SIM_ALLOC_IMPL_GREEDY_BY_SIZE_H_
#define GPUSIM_SIM_ALLOC_IMPL_GREEDY_BY_SIZE_H_

#include "sim/alloc/offline_planner.h"

namespace gpusim {

class GreedyBySizePlanner : public OfflinePlanner {
 public:
  std::string_view name() const override { return "greedy_by_size"; }
  HeapPlan PlanOffline(const std::vector<HeapBuffer>& buffers) const override;
};

}  // namespace gpusim

#endif  // GPUSIM_SIM_ALLOC_IMPL_GREEDY_BY_SIZE_H_
