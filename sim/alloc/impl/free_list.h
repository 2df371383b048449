// Classic address-ordered free-list allocators over one arena the size of
// the device (`first_fit`, `best_fit`): no caching, no pools, no streams.
// Requests round up to `alignment` (default 256 B); a request takes the
// lowest-addressed free range that fits (first fit) or the smallest one,
// lowest address on ties (best fit), from its low end; frees coalesce with
// free neighbours. The arena is one segment at a DeviceAddressSpace address;
// `reserved` is the heap top (end of the highest live block), so
// peak_reserved is the arena a placement of these calls needs.
#ifndef GPUSIM_SIM_ALLOC_IMPL_FREE_LIST_H_
#define GPUSIM_SIM_ALLOC_IMPL_FREE_LIST_H_

#include <map>

#include "absl/container/btree_set.h"
#include "absl/container/flat_hash_map.h"
#include "sim/alloc/allocator.h"
#include "sim/alloc/options.h"

namespace gpusim {

enum class FitPolicy { kFirstFit, kBestFit };

// Options: alignment (power of two; default 256).
absl::StatusOr<int64_t> ParseArenaAlignment(std::string_view impl, const AllocatorOptions& options);
const std::vector<ParamDoc>& ArenaParameters();

class FreeListAllocator : public Allocator {
 public:
  // REQUIRES: capacity > 0; alignment a power of two.
  FreeListAllocator(Bytes capacity, FitPolicy policy, int64_t alignment = 256);
  std::string_view name() const override { return policy_ == FitPolicy::kFirstFit ? "first_fit" : "best_fit"; }
  bool Alloc(BufferId id, Bytes size, StreamId stream) override;
  void Free(BufferId id) override;
  AllocatorStats stats() const override;
  AllocatorUsage usage() const override { return {stats_.allocated, stats_.reserved}; }
  std::optional<uint64_t> AddressOf(BufferId id) const override;
  std::optional<Bytes> BlockSizeOf(BufferId id) const override;

 private:
  void AddFree(int64_t offset, int64_t size);
  void RemoveFree(std::map<int64_t, int64_t>::iterator it);

  FitPolicy policy_;
  int64_t alignment_;
  int64_t capacity_;
  uint64_t base_;
  std::map<int64_t, int64_t> free_;              // offset → size, address order
  absl::btree_set<std::pair<int64_t, int64_t>> by_size_;  // (size, offset), best fit only
  struct Live {
    int64_t offset, size, requested;
  };
  absl::flat_hash_map<BufferId, Live> live_;
  absl::btree_multiset<int64_t> ends_;           // live block ends: the heap top
  AllocatorStats stats_;
};

}  // namespace gpusim

#endif  // GPUSIM_SIM_ALLOC_IMPL_FREE_LIST_H_
