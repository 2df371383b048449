// XLA's GlobalDecreasingSizeBestFitHeap as an offline planner
// (xla/service/heap_simulator/heap_simulator.{h,cc}; the packing itself is
// sim/alloc/heap_planner.h): `order: spatial` sorts by decreasing size,
// `temporal` by decreasing lifetime, `best` (default) runs both and keeps
// the smaller heap (ChooseBestHeapAlgorithm).
#ifndef GPUSIM_SIM_ALLOC_IMPL_XLA_BEST_FIT_H_
#define GPUSIM_SIM_ALLOC_IMPL_XLA_BEST_FIT_H_

#include "sim/alloc/offline_planner.h"

namespace gpusim {

enum class XlaBestFitOrder { kSpatial, kTemporal, kBest };

class XlaBestFitPlanner : public OfflinePlanner {
 public:
  explicit XlaBestFitPlanner(XlaBestFitOrder order = XlaBestFitOrder::kBest) : order_(order) {}
  std::string_view name() const override { return "xla_best_fit"; }
  HeapPlan PlanOffline(const std::vector<HeapBuffer>& buffers) const override;

 private:
  XlaBestFitOrder order_;
};

}  // namespace gpusim

#endif  // GPUSIM_SIM_ALLOC_IMPL_XLA_BEST_FIT_H_
