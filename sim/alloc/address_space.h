// The simulated device virtual address space that segments take their
// addresses from (cudaMalloc, cuMemAddressReserve, BFC regions, arenas).
//
// Note [Simulated device addresses]
// Real cudaMalloc addresses depend on the driver; we need ones that are
// deterministic and plausible. The space is [kBase, kBase + kSpan); a
// reservation takes the lowest free address at or above kBase that fits (first fit), its
// length rounded up to kGranule (2 MiB, the granularity of large cudaMalloc
// allocations and of CUDA VMM), and a release makes the range reusable
// (adjacent free ranges merge). kBase looks like the addresses PyTorch
// snapshots show (0x7f.. on Linux). A replayer that knows the real address
// of the next segment (a snapshot's `segment_alloc` entry) forces it with
// ForceNext; if that range is not free, the reservation falls back to first
// fit and conflicts() counts it.
#ifndef GPUSIM_SIM_ALLOC_ADDRESS_SPACE_H_
#define GPUSIM_SIM_ALLOC_ADDRESS_SPACE_H_

#include <cstdint>
#include <map>
#include <optional>

namespace gpusim {

class DeviceAddressSpace {
 public:
  static constexpr uint64_t kBase = 0x7f0000000000ULL;
  static constexpr uint64_t kSpan = 1ULL << 44;        // 16 TiB
  static constexpr uint64_t kGranule = 2ULL << 20;     // 2 MiB

  // Forced reservations may lie anywhere in [kGranule, kBase + kSpan) (real
  // addresses, e.g. a snapshot's 0xb03000000); first fit starts at kBase.
  DeviceAddressSpace() { free_[kGranule] = kBase + kSpan; }

  // REQUIRES: size > 0. Returns the start of a free range of `size` bytes.
  uint64_t Reserve(uint64_t size);
  // REQUIRES: [addr, addr + size) was returned by Reserve(size).
  void Release(uint64_t addr, uint64_t size);
  // The next Reserve tries to start at `addr`.
  void ForceNext(uint64_t addr) { forced_ = addr; }
  int64_t conflicts() const { return conflicts_; }

 private:
  static uint64_t Round(uint64_t size) { return (size + kGranule - 1) / kGranule * kGranule; }
  bool Carve(uint64_t addr, uint64_t size);

  std::map<uint64_t, uint64_t> free_;  // start → end (exclusive)
  std::optional<uint64_t> forced_;
  int64_t conflicts_ = 0;
};

}  // namespace gpusim

#endif  // GPUSIM_SIM_ALLOC_ADDRESS_SPACE_H_
