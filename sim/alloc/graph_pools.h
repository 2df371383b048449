// CUDA graph private pools around one allocator (Note [CUDA graph private
// pools] in sim/replay/replay.cc): the allocator every call goes to, plus one
// allocator of the same kind per private pool, which serves the allocations
// made while its graph was captured and keeps their blocks and segments for
// that graph alone.
//
// PyTorch c10/cuda/CUDACachingAllocator.cpp: beginAllocateToPool(device,
// mempool_id, filter) makes (or reuses) the PrivatePool of the capture's
// MempoolId and routes every request its filter accepts to it
// (get_pool: captures_underway); endAllocateToPool stops the routing;
// releasePool drops the graph's use of the pool, and only then
// release_cached_blocks may free the pool's segments. A PrivatePool has its
// own large and small BlockPools, so a block freed into it is found by that
// pool's later requests only (free_block returns it to block->pool), and a
// request outside the capture never sees it. A recording does not show
// graphs being destroyed, so a pool here keeps its segments to the end:
// ReleaseCache() (empty_cache) releases the main pool's cache only.
//
// Both `gpusim replay` (sim/replay/replay_core.cc, which routes by capture
// window: AllocInPool) and the engine's replay that viz draws (the report's
// start state names each pool's buffers: GraphPoolMembers, Alloc routes by
// it) run this class, so the two agree by construction.
//
// Device memory is shared: an allocation, in the main pool or a private one,
// that would take the reserved bytes of all pools together past the
// capacity is undone, as the cudaMalloc for its segment failing: the
// allocator that took the segment releases its cache (a pool made for this
// request is dropped), the main pool releases its cache
// (release_cached_blocks, which spares pools in use) and the request is
// tried once more, then fails (an out-of-memory result). Releasing a
// pool's cache there drops its other unused cached segments too, which the
// real pool would keep: an approximation only at the capacity. A pool's
// addresses are its own allocator's, moved up by (pool + 1) · 2^47 so that
// no two pools' addresses meet (the main allocator's space ends at 2^47,
// sim/alloc/address_space.h); GraphPoolOfAddress reads the pool back.
#ifndef GPUSIM_SIM_ALLOC_GRAPH_POOLS_H_
#define GPUSIM_SIM_ALLOC_GRAPH_POOLS_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "sim/alloc/allocator.h"
#include "sim/config/spec.h"

namespace gpusim {

// Which buffers each private pool served, as the replay found (buffer ids of
// the trace the state starts). Empty: no private pools.
struct GraphPoolMembers {
  int32_t pools = 0;                                // pools 0 .. pools-1
  absl::flat_hash_map<BufferId, int32_t> pool_of;  // buffer → its pool
  bool empty() const { return pools == 0; }
};

inline constexpr int kGraphPoolAddressShift = 47;
inline constexpr int32_t kMaxGraphPools = (int32_t{1} << (64 - kGraphPoolAddressShift)) - 2;
// The private pool an address of GraphPoolAllocator lies in, or -1: the main pool.
inline int32_t GraphPoolOfAddress(uint64_t addr) {
  return static_cast<int32_t>(addr >> kGraphPoolAddressShift) - 1;
}

class GraphPoolAllocator : public Allocator {
 public:
  // `main` at `capacity` (already restored to any start state); private
  // pools are made from `spec` when first used. `members` (may be empty)
  // routes Alloc.
  GraphPoolAllocator(std::unique_ptr<Allocator> main, AllocatorSpec spec, Bytes capacity, GraphPoolMembers members);

  std::string_view name() const override { return main_->name(); }
  // Routed by members (a buffer not in it: the main pool).
  bool Alloc(BufferId id, Bytes size, StreamId stream) override;
  // Into private pool `pool` (made on first use; errors only when the
  // allocator cannot be made or pool is out of range).
  absl::StatusOr<bool> AllocInPool(int32_t pool, BufferId id, Bytes size, StreamId stream);
  void Free(BufferId id) override;
  // Current values summed over the pools; peak_allocated / peak_reserved are
  // those of the sum (sampled after every call); the other peaks are the
  // sums of each pool's own peak (an upper bound: pools peak at different
  // times).
  AllocatorStats stats() const override;
  AllocatorUsage usage() const override { return usage_; }
  std::optional<uint64_t> AddressOf(BufferId id) const override;
  std::optional<Bytes> BlockSizeOf(BufferId id) const override;
  bool ModelsSegments() const override { return main_->ModelsSegments(); }
  Bytes RoundedBlockSize(Bytes size) const override { return main_->RoundedBlockSize(size); }
  absl::Status RestoreSegment(const SegmentLayout& segment) override;
  std::vector<SegmentLayout> Segments() const override;
  void SetNextSegmentAddress(uint64_t addr) override { main_->SetNextSegmentAddress(addr); }
  void ReleaseCache() override;
  absl::Status Finish() override;
  bool PlansOffline() const override { return main_->PlansOffline(); }

  Allocator& main() { return *main_; }
  int32_t pools_used() const { return pools_used_; }

 private:
  // The allocator buffer `id` lives in, or null.
  Allocator* Holder(BufferId id) const;
  static uint64_t Offset(int32_t pool) { return static_cast<uint64_t>(pool + 1) << kGraphPoolAddressShift; }
  // `a` is pool `pool` (-1: main), made for this request when `fresh`.
  bool Place(Allocator& a, int32_t pool, BufferId id, Bytes size, StreamId stream, bool fresh);
  AllocatorUsage Sum() const;  // over the main pool and the private ones
  bool Fits() const;           // Sum().reserved within the capacity
  // Sends what `a` (pool `pool`, -1: main) logged to this allocator's log.
  void Forward(int32_t pool);
  void Sample();  // usage_ and the peaks from Sum()

  std::unique_ptr<Allocator> main_;
  AllocatorSpec spec_;
  Bytes capacity_;
  GraphPoolMembers members_;
  std::vector<std::unique_ptr<Allocator>> pools_;
  int32_t pools_used_ = 0;
  absl::flat_hash_map<BufferId, int32_t> live_pool_;  // live buffers in a private pool
  std::vector<AllocatorEvent> scratch_;
  AllocatorUsage usage_;
  Bytes peak_allocated_, peak_reserved_;
};

}  // namespace gpusim

#endif  // GPUSIM_SIM_ALLOC_GRAPH_POOLS_H_
