#include "sim/alloc/impl/buddy.h"

#include <bit>

#include "absl/strings/str_cat.h"
#include "sim/alloc/address_space.h"
#include "sim/base/status.h"

namespace gpusim {

const std::vector<ParamDoc>& BuddyParameters() {
  static const auto* p = new std::vector<ParamDoc>{
      {"allocator.min_block", "int", "bytes", "256", "power of 2", "the smallest block"}};
  return *p;
}

absl::StatusOr<int64_t> ParseBuddyMinBlock(const AllocatorOptions& options) {
  if (absl::Status s = CheckOptionKeys("buddy", options, {"min_block"}); !s.ok()) return s;
  int64_t m = 256;
  if (absl::Status s = ReadIntOption(options, "min_block", &m); !s.ok()) return s;
  if (m <= 0 || !std::has_single_bit(static_cast<uint64_t>(m))) {
    return absl::InvalidArgumentError(absl::StrCat("allocator.min_block: must be a power of two, got ", m));
  }
  return m;
}

BuddyAllocator::BuddyAllocator(Bytes capacity, int64_t min_block)
    : min_order_(std::countr_zero(static_cast<uint64_t>(min_block))), free_(64) {
  GPUSIM_CHECK(capacity.value() >= min_block && std::has_single_bit(static_cast<uint64_t>(min_block)));
  const int64_t usable = capacity.value() / min_block * min_block;
  base_ = DeviceAddressSpace().Reserve(static_cast<uint64_t>(usable));
  int64_t offset = 0;
  for (int order = 62; order >= min_order_; --order) {
    const int64_t size = int64_t{1} << order;
    if (usable - offset >= size) {
      roots_.push_back({offset, size});
      free_[order].insert(offset);
      offset += size;
    }
  }
}

int64_t BuddyAllocator::RootSizeAt(int64_t offset) const {
  for (const auto& [off, size] : roots_) {
    if (offset >= off && offset < off + size) return size;
  }
  GPUSIM_CHECK(false);
  return 0;
}

bool BuddyAllocator::Alloc(BufferId id, Bytes size, StreamId stream) {
  GPUSIM_CHECK(size.value() >= 0 && !live_.contains(id));
  // Note [Huge requests]: bit_ceil of at most 2^62 stays in range.
  const uint64_t want = std::bit_ceil(static_cast<uint64_t>(std::max<int64_t>(ClampRequest(size.value()), 1)));
  const int order = std::max(min_order_, std::countr_zero(want));
  int o = order;
  while (o < 63 && free_[o].empty()) ++o;
  if (o >= 63) {
    stats_.ooms++;
    Record(AllocatorAction::kOom, 0, Bytes(int64_t{1} << std::min(order, 62)), stream);
    return false;
  }
  const int64_t offset = *free_[o].begin();
  free_[o].erase(free_[o].begin());
  while (o > order) {  // keep the low half, free the high half
    --o;
    free_[o].insert(offset + (int64_t{1} << o));
  }
  const int64_t block = int64_t{1} << order;
  live_[id] = {offset, order, size.value()};
  ends_.insert(offset + block);
  if (stats_.segments == 0) stats_.segments = stats_.peak_segments = stats_.device_mallocs = 1;
  stats_.allocated += Bytes(block);
  stats_.peak_allocated = Max(stats_.peak_allocated, stats_.allocated);
  stats_.requested += size;
  stats_.peak_requested = Max(stats_.peak_requested, stats_.requested);
  stats_.active = stats_.allocated;
  stats_.peak_active = stats_.peak_allocated;
  stats_.reserved = Bytes(*ends_.rbegin());
  stats_.peak_reserved = Max(stats_.peak_reserved, stats_.reserved);
  Record(AllocatorAction::kAlloc, base_ + static_cast<uint64_t>(offset), size, stream, id);
  return true;
}

void BuddyAllocator::Free(BufferId id) {
  auto it = live_.find(id);
  GPUSIM_CHECK(it != live_.end());
  int64_t offset = it->second.offset;
  int order = it->second.order;
  stats_.requested -= Bytes(it->second.requested);
  live_.erase(it);
  ends_.erase(ends_.find(offset + (int64_t{1} << order)));
  stats_.allocated -= Bytes(int64_t{1} << order);
  stats_.active = stats_.allocated;
  stats_.reserved = Bytes(ends_.empty() ? 0 : *ends_.rbegin());
  Record(AllocatorAction::kFree, base_ + static_cast<uint64_t>(offset), Bytes(int64_t{1} << order), 0, id);
  const int64_t root = RootSizeAt(offset);
  while ((int64_t{1} << order) < root) {
    const int64_t buddy = offset ^ (int64_t{1} << order);
    auto b = free_[order].find(buddy);
    if (b == free_[order].end()) break;
    free_[order].erase(b);
    offset = std::min(offset, buddy);
    ++order;
  }
  free_[order].insert(offset);
}

AllocatorStats BuddyAllocator::stats() const {
  AllocatorStats s = stats_;
  int64_t largest = 0, inactive = 0;
  for (int o = 0; o < 63; ++o) {
    if (free_[o].empty()) continue;
    largest = std::max(largest, int64_t{1} << o);
    for (int64_t off : free_[o]) {
      if (off < s.reserved.value()) inactive += int64_t{1} << o;
    }
  }
  s.largest_free_block = Bytes(largest);
  s.inactive_split = Bytes(inactive);
  return s;
}

std::optional<uint64_t> BuddyAllocator::AddressOf(BufferId id) const {
  auto it = live_.find(id);
  if (it == live_.end()) return std::nullopt;
  return base_ + static_cast<uint64_t>(it->second.offset);
}

std::optional<Bytes> BuddyAllocator::BlockSizeOf(BufferId id) const {
  auto it = live_.find(id);
  if (it == live_.end()) return std::nullopt;
  return Bytes(int64_t{1} << it->second.order);
}

}  // namespace gpusim
