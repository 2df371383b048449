// A binary buddy allocator (Knuth, TAOCP vol. 1 §2.5) over one arena the
// size of the device. The arena is cut into power-of-two roots, largest
// first (capacity's binary digits), each aligned to its size; a request
// takes a block of the next power of two ≥ max(request, min_block), the
// lowest-addressed free one of the smallest order that has any, halving
// it and freeing the upper halves; a freed block merges with its buddy
// (offset XOR size) while the buddy is free and whole, up to its root.
// `reserved` is the heap top, as for first_fit.
#ifndef GPUSIM_SIM_ALLOC_IMPL_BUDDY_H_
#define GPUSIM_SIM_ALLOC_IMPL_BUDDY_H_

#include <vector>

#include "absl/container/btree_set.h"
#include "absl/container/flat_hash_map.h"
#include "sim/alloc/allocator.h"
#include "sim/alloc/options.h"

namespace gpusim {

// Options: min_block (power of two; default 256).
absl::StatusOr<int64_t> ParseBuddyMinBlock(const AllocatorOptions& options);
const std::vector<ParamDoc>& BuddyParameters();

class BuddyAllocator : public Allocator {
 public:
  // REQUIRES: capacity >= min_block; min_block a power of two.
  explicit BuddyAllocator(Bytes capacity, int64_t min_block = 256);
  std::string_view name() const override { return "buddy"; }
  bool Alloc(BufferId id, Bytes size, StreamId stream) override;
  void Free(BufferId id) override;
  AllocatorStats stats() const override;
  AllocatorUsage usage() const override { return {stats_.allocated, stats_.reserved}; }
  std::optional<uint64_t> AddressOf(BufferId id) const override;
  std::optional<Bytes> BlockSizeOf(BufferId id) const override;

 private:
  struct Live {
    int64_t offset;
    int order;
    int64_t requested;
  };
  int64_t RootSizeAt(int64_t offset) const;

  int min_order_;
  uint64_t base_;
  std::vector<std::pair<int64_t, int64_t>> roots_;     // offset, size
  std::vector<absl::btree_set<int64_t>> free_;          // per order: offsets
  absl::flat_hash_map<BufferId, Live> live_;
  absl::btree_multiset<int64_t> ends_;
  AllocatorStats stats_;
};

}  // namespace gpusim

#endif  // GPUSIM_SIM_ALLOC_IMPL_BUDDY_H_
