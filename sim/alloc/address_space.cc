#include "sim/alloc/address_space.h"

#include <algorithm>
#include <iterator>

#include "sim/base/status.h"

namespace gpusim {

bool DeviceAddressSpace::Carve(uint64_t addr, uint64_t size) {
  auto it = free_.upper_bound(addr);
  if (it == free_.begin()) return false;
  --it;
  const uint64_t start = it->first, end = it->second;
  if (addr < start || addr + size > end) return false;
  free_.erase(it);
  if (start < addr) free_[start] = addr;
  if (addr + size < end) free_[addr + size] = end;
  return true;
}

uint64_t DeviceAddressSpace::Reserve(uint64_t size) {
  GPUSIM_CHECK(size > 0);
  const uint64_t len = Round(size);
  if (forced_.has_value()) {
    const uint64_t addr = *forced_;
    forced_.reset();
    if (Carve(addr, len)) return addr;
    ++conflicts_;
  }
  for (const auto& [start, end] : free_) {
    if (end <= kBase) continue;  // below kBase only forced reservations go
    // Free ranges start on a granule unless a forced address split one.
    const uint64_t addr = Round(std::max(start, kBase) - kBase) + kBase;
    if (addr + len <= end) {
      GPUSIM_CHECK(Carve(addr, len));
      return addr;
    }
  }
  GPUSIM_CHECK(false && "device address space exhausted");
  return 0;
}

void DeviceAddressSpace::Release(uint64_t addr, uint64_t size) {
  uint64_t start = addr, end = addr + Round(size);
  auto next = free_.lower_bound(start);
  if (next != free_.end() && next->first == end) {
    end = next->second;
    next = free_.erase(next);
  }
  if (next != free_.begin()) {
    auto prev = std::prev(next);
    GPUSIM_CHECK(prev->second <= start);
    if (prev->second == start) {
      start = prev->first;
      free_.erase(prev);
    }
  }
  free_[start] = end;
}

}  // namespace gpusim
