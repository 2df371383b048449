// PyTorch's CUDA caching allocator, modelled to the byte and to the address:
// DeviceCachingAllocator in c10/cuda/CUDACachingAllocator.cpp and its
// options in c10/cuda/CUDAAllocatorConfig.{h,cpp}, PyTorch v2.5.1 (see Note
// [PyTorch version] in the .cc for what differs in other versions).
//
//   request ─► round_size (512 B, or roundup_power2_divisions)
//           ─► pool: small (≤ 1 MiB) | large, blocks ordered (stream, size, addr)
//           ─► get_free_block: lower_bound best fit on the request's stream
//           ─► miss: [gc] → cudaMalloc(segment) → free oversize cached blocks
//                    → release all unsplit cached blocks → cudaMalloc → OOM
//           ─► split the block if the remainder qualifies; the block takes
//              the low end, the remainder stays free above it
//
// Segments take addresses from a DeviceAddressSpace (Note [Simulated device
// addresses]); SetNextSegmentAddress forces the next one. cudaMalloc (and,
// with expandable segments, mapping pages) fails when reserved + size would
// exceed `capacity`.
#ifndef GPUSIM_SIM_ALLOC_IMPL_PYTORCH_CACHING_H_
#define GPUSIM_SIM_ALLOC_IMPL_PYTORCH_CACHING_H_

#include <array>
#include <cstdint>
#include <limits>
#include <memory>
#include <vector>

#include "sim/alloc/allocator.h"
#include "sim/alloc/options.h"

namespace gpusim {

// PYTORCH_CUDA_ALLOC_CONF and torch.cuda.set_per_process_memory_fraction.
struct PyTorchCachingOptions {
  static constexpr int64_t kNoLimit = std::numeric_limits<int64_t>::max();
  static constexpr int kRoundUpPowerOfTwoIntervals = 16;  // CUDAAllocatorConfig.h

  int64_t max_split_size = kNoLimit;            // max_split_size_mb × MiB
  int64_t max_non_split_rounding = 20 << 20;    // max_non_split_rounding_mb × MiB (kLargeBuffer)
  // Divisions per power-of-two band; band i holds sizes in [2^(20+i), 2^(21+i)),
  // band 0 also everything below 1 MiB, band 15 everything above. 0 or 1: off.
  std::array<int64_t, kRoundUpPowerOfTwoIntervals> roundup_power2_divisions{};
  double garbage_collection_threshold = 0;      // (0, 1); needs a memory fraction
  bool expandable_segments = false;
  double per_process_memory_fraction = -1;      // [0, 1]; < 0: not set
};

// Parses the options listed in PyTorchCachingParameters(), validating them
// as CUDAAllocatorConfig does.
absl::StatusOr<PyTorchCachingOptions> ParsePyTorchCachingOptions(const AllocatorOptions& options);
const std::vector<ParamDoc>& PyTorchCachingParameters();

// torch.cuda.memory_stats(): each stat per pool (aggregate, small, large).
struct PyTorchStat {
  int64_t current = 0;
  int64_t peak = 0;
};
struct PyTorchDeviceStats {
  enum Pool { kAggregate = 0, kSmallPool = 1, kLargePool = 2 };
  using PerPool = std::array<PyTorchStat, 3>;
  PerPool allocation, segment, active, inactive_split;
  PerPool allocated_bytes, reserved_bytes, active_bytes, inactive_split_bytes, requested_bytes;
  PyTorchStat oversize_allocations, oversize_segments;
  int64_t num_alloc_retries = 0;
  int64_t num_ooms = 0;
  int64_t num_device_alloc = 0;
  int64_t num_device_free = 0;
};

class PyTorchCachingAllocator : public Allocator {
 public:
  // REQUIRES: capacity > 0.
  explicit PyTorchCachingAllocator(Bytes capacity, PyTorchCachingOptions options = {});
  ~PyTorchCachingAllocator() override;
  PyTorchCachingAllocator(const PyTorchCachingAllocator&) = delete;
  PyTorchCachingAllocator& operator=(const PyTorchCachingAllocator&) = delete;

  std::string_view name() const override { return "pytorch_caching"; }
  // REQUIRES (beyond Allocator's): stream fits in 16 bits.
  bool Alloc(BufferId id, Bytes size, StreamId stream) override;
  void Free(BufferId id) override;
  AllocatorStats stats() const override;
  AllocatorUsage usage() const override;
  std::optional<uint64_t> AddressOf(BufferId id) const override;
  std::optional<Bytes> BlockSizeOf(BufferId id) const override;

  // Segments (Allocator): a recorded start state, forced segment
  // addresses, torch.cuda.empty_cache().
  bool ModelsSegments() const override { return true; }
  // round_size() under this allocator's options.
  Bytes RoundedBlockSize(Bytes size) const override;
  // The next new segment (cudaMalloc, or an expandable segment's address
  // reservation) starts at `addr`, as a recorded `segment_alloc` says.
  // REQUIRES: addr is a multiple of 512 below 2^48.
  void SetNextSegmentAddress(uint64_t addr) override;
  // torch.cuda.empty_cache(): release every unsplit cached segment and unmap
  // the free pages of expandable segments.
  void ReleaseCache() override;
  PyTorchDeviceStats device_stats() const;
  // Rebuilds a segment that existed before a replay window began (from a
  // snapshot): reserves its address range, makes its allocated blocks live
  // under their buffer ids and caches its free blocks (adjacent free blocks
  // merged). Not counted as a device malloc. Errors: blocks that do not tile
  // the segment, sizes that are not multiples of 512, a buffer id already
  // live, an address range already reserved, expandable segments on.
  absl::Status RestoreSegment(const SegmentLayout& segment) override;
  // Every segment now (non-expandable), ascending by address.
  std::vector<SegmentLayout> Segments() const override;
  // Address-space reservations that could not take their forced address.
  int64_t address_conflicts() const;

  // The rules, exposed for tests: round_size() and get_allocation_size().
  static int64_t RoundSize(int64_t size, const PyTorchCachingOptions& options);
  static int64_t AllocationSize(int64_t rounded_size);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace gpusim

#endif  // GPUSIM_SIM_ALLOC_IMPL_PYTORCH_CACHING_H_
