// TF/XLA's best-fit-with-coalescing allocator (openxla/xla
// xla/tsl/framework/bfc_allocator.{h,cc}, BFCAllocator), as JAX's GPU client
// configures it (xla/pjrt/gpu/gpu_helpers.cc CreateBFCAllocator):
//
//   memory_limit = mem_fraction × device memory (JAX default 0.75)
//   preallocate (default): one region of the whole limit at the first
//   request; allow_growth (preallocate=false): regions start at 2 MiB and
//   double (a region at least as large as the request).
//
// Requests round up to 256 B (kMinAllocationSize). Free chunks sit in 21
// bins (bin b: [256·2^b, 256·2^(b+1)), the last unbounded), each ordered by
// (size, address); the search starts at the request's bin and takes the
// first chunk that fits. A chunk is split (the request at its low end) when
// it is at least twice the request or exceeds it by ≥ 128 MiB
// (max_internal_fragmentation_bytes; fragmentation_fraction × limit when
// set). Freed chunks coalesce with free neighbours within their region.
// Not modelled: spatial partitioning, timestamped (freed_by) chunks.
#ifndef GPUSIM_SIM_ALLOC_IMPL_BFC_H_
#define GPUSIM_SIM_ALLOC_IMPL_BFC_H_

#include <array>
#include <vector>

#include "absl/container/btree_set.h"
#include "absl/container/flat_hash_map.h"
#include "sim/alloc/address_space.h"
#include "sim/alloc/allocator.h"
#include "sim/alloc/bfc_options.h"
#include "sim/alloc/options.h"

namespace gpusim {

// The options ParseBfcOptions reads (`gpusim list allocators`).
const std::vector<ParamDoc>& BfcParameters();

class BfcAllocator : public Allocator {
 public:
  static constexpr int kNumBins = 21;                   // bfc_allocator.h
  static constexpr int64_t kMinAllocationSize = 256;    // 1 << kMinAllocationBits

  // REQUIRES: capacity > 0.
  BfcAllocator(Bytes capacity, BfcOptions options = {});
  std::string_view name() const override { return "bfc"; }
  bool Alloc(BufferId id, Bytes size, StreamId stream) override;
  void Free(BufferId id) override;
  AllocatorStats stats() const override;
  AllocatorUsage usage() const override { return {stats_.allocated, stats_.reserved}; }
  std::optional<uint64_t> AddressOf(BufferId id) const override;
  std::optional<Bytes> BlockSizeOf(BufferId id) const override;

  static int BinNumForSize(int64_t bytes);
  static int64_t RoundedBytes(int64_t bytes);
  int64_t memory_limit() const { return memory_limit_; }

 private:
  struct Chunk {
    uint64_t addr = 0;
    int64_t size = 0;
    int64_t requested = 0;
    bool in_use = false;
    int bin = -1;
    int prev = -1, next = -1;
    int region = -1;
  };
  struct FreeKey {
    int64_t size;
    uint64_t addr;
    int handle;
    bool operator<(const FreeKey& o) const { return size != o.size ? size < o.size : addr < o.addr; }
  };
  struct Region {
    uint64_t addr = 0;
    int64_t size = 0;
    int first = -1;  // chunk at addr
    bool live = false;
  };

  int NewChunk();
  void InsertFree(int h);
  void RemoveFree(int h);
  void Split(int h, int64_t num_bytes);
  void Merge(int h1, int h2);
  int TryToCoalesce(int h);
  int FindChunk(int bin, int64_t rounded, int64_t num_bytes);
  bool Extend(int64_t rounded);
  bool DeallocateFreeRegions(int64_t rounded);

  int64_t capacity_;
  BfcOptions opt_;
  int64_t memory_limit_;
  int64_t curr_region_allocation_bytes_;
  int64_t max_internal_fragmentation_bytes_;
  int64_t pool_bytes_ = 0;
  std::vector<Chunk> chunks_;
  std::vector<int> spare_;
  std::array<absl::btree_set<FreeKey>, kNumBins> bins_;
  std::vector<Region> regions_;
  absl::flat_hash_map<BufferId, int> live_;  // -1: a 0-byte request
  DeviceAddressSpace va_;
  AllocatorStats stats_;
};

}  // namespace gpusim

#endif  // GPUSIM_SIM_ALLOC_IMPL_BFC_H_
