// The ideal allocator: no fragmentation, no rounding, no caching. Allocated
// equals reserved equals the sum of live requests; it is the lower bound
// every other strategy is measured against (XLA's NoFragmentationStatsHeap).
#ifndef GPUSIM_SIM_ALLOC_IMPL_IDEAL_H_
#define GPUSIM_SIM_ALLOC_IMPL_IDEAL_H_

#include "absl/container/flat_hash_map.h"
#include "sim/alloc/allocator.h"

namespace gpusim {

class IdealAllocator : public Allocator {
 public:
  explicit IdealAllocator(Bytes capacity) : capacity_(capacity) {}
  std::string_view name() const override { return "ideal"; }
  bool Alloc(BufferId id, Bytes size, StreamId stream) override;
  void Free(BufferId id) override;
  AllocatorStats stats() const override { return stats_; }

 private:
  Bytes capacity_;
  AllocatorStats stats_;
  absl::flat_hash_map<BufferId, Bytes> live_;
};

}  // namespace gpusim

#endif  // GPUSIM_SIM_ALLOC_IMPL_IDEAL_H_
