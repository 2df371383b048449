#include "sim/alloc/impl/xla_best_fit.h"

namespace gpusim {

HeapPlan XlaBestFitPlanner::PlanOffline(const std::vector<HeapBuffer>& buffers) const {
  switch (order_) {
    case XlaBestFitOrder::kSpatial: return PackBestFit(buffers, HeapOrder::kSpatial);
    case XlaBestFitOrder::kTemporal: return PackBestFit(buffers, HeapOrder::kTemporal);
    case XlaBestFitOrder::kBest: break;
  }
  return PackBestOf(buffers);
}

}  // namespace gpusim
