// Offline planners: strategies that need every buffer's whole lifetime
// before placing any (XLA buffer assignment's heap packing, TFLite's
// greedy-by-size). They take the HeapBuffers of sim/alloc/heap_planner.h and
// return a HeapPlan; PlannedAllocator (below) lets the registry and the
// engine use them like runtime allocators.
#ifndef GPUSIM_SIM_ALLOC_OFFLINE_PLANNER_H_
#define GPUSIM_SIM_ALLOC_OFFLINE_PLANNER_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "sim/alloc/allocator.h"
#include "sim/alloc/heap_planner.h"

namespace gpusim {

class OfflinePlanner {
 public:
  virtual ~OfflinePlanner() = default;
  virtual std::string_view name() const = 0;
  // Offsets for every buffer such that no two overlap in both time and
  // address. REQUIRES: start <= end and size >= 0 for every buffer.
  virtual HeapPlan PlanOffline(const std::vector<HeapBuffer>& buffers) const = 0;
};

// An Allocator over an OfflinePlanner: it records the calls (each call is
// one time step; a buffer is live from its Alloc to its Free, inclusive, or
// to the end) and plans at Finish(), or at the first stats() / AddressOf()
// after new calls (the engine never calls Finish). Alloc fails only when the
// live requests alone exceed the capacity (no placement could fit); whether
// the plan fits is stats().peak_reserved (the heap size) vs the capacity.
// Sizes round up to `alignment` before planning. Addresses: one arena at a
// DeviceAddressSpace address, plus the planned offset.
class PlannedAllocator : public Allocator {
 public:
  // REQUIRES: planner non-null; capacity > 0; alignment >= 1.
  PlannedAllocator(std::unique_ptr<OfflinePlanner> planner, Bytes capacity, int64_t alignment = 1);
  std::string_view name() const override { return planner_->name(); }
  bool Alloc(BufferId id, Bytes size, StreamId stream) override;
  void Free(BufferId id) override;
  AllocatorStats stats() const override;
  // Live bytes for both: the heap size is known only once planned, and
  // planning at every event would make a replay quadratic.
  AllocatorUsage usage() const override { return {Bytes(live_bytes_), Bytes(live_bytes_)}; }
  std::optional<uint64_t> AddressOf(BufferId id) const override;
  std::optional<Bytes> BlockSizeOf(BufferId id) const override;
  absl::Status Finish() override;
  bool PlansOffline() const override { return true; }

  // The last plan (after Finish or a lazy plan).
  const HeapPlan& plan() const;

 private:
  void PlanIfDirty() const;

  std::unique_ptr<OfflinePlanner> planner_;
  int64_t capacity_;
  int64_t alignment_;
  uint64_t base_;
  int64_t now_ = 0;
  int64_t live_bytes_ = 0;
  std::vector<HeapBuffer> buffers_;              // in Alloc order; end = -1 while live
  std::vector<int64_t> requested_;
  absl::flat_hash_map<BufferId, size_t> live_;   // → index in buffers_
  mutable bool dirty_ = false;
  mutable HeapPlan plan_;
  mutable AllocatorStats stats_;
};

}  // namespace gpusim

#endif  // GPUSIM_SIM_ALLOC_OFFLINE_PLANNER_H_
