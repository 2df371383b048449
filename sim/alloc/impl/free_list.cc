#include "sim/alloc/impl/free_list.h"

#include <bit>
#include <iterator>

#include "absl/strings/str_cat.h"
#include "sim/alloc/address_space.h"
#include "sim/base/status.h"

namespace gpusim {

const std::vector<ParamDoc>& ArenaParameters() {
  static const auto* p = new std::vector<ParamDoc>{
      {"allocator.alignment", "int", "bytes", "256", "power of 2", "every block's size and offset rounded to it"}};
  return *p;
}

absl::StatusOr<int64_t> ParseArenaAlignment(std::string_view impl, const AllocatorOptions& options) {
  if (absl::Status s = CheckOptionKeys(impl, options, {"alignment"}); !s.ok()) return s;
  int64_t a = 256;
  if (absl::Status s = ReadIntOption(options, "alignment", &a); !s.ok()) return s;
  if (a <= 0 || !std::has_single_bit(static_cast<uint64_t>(a))) {
    return absl::InvalidArgumentError(absl::StrCat("allocator.alignment: must be a power of two, got ", a));
  }
  return a;
}

FreeListAllocator::FreeListAllocator(Bytes capacity, FitPolicy policy, int64_t alignment)
    : policy_(policy), alignment_(alignment), capacity_(capacity.value()) {
  GPUSIM_CHECK(capacity_ > 0 && std::has_single_bit(static_cast<uint64_t>(alignment)));
  base_ = DeviceAddressSpace().Reserve(static_cast<uint64_t>(capacity_));
  AddFree(0, capacity_);
}

void FreeListAllocator::AddFree(int64_t offset, int64_t size) {
  free_[offset] = size;
  if (policy_ == FitPolicy::kBestFit) by_size_.insert({size, offset});
}

void FreeListAllocator::RemoveFree(std::map<int64_t, int64_t>::iterator it) {
  if (policy_ == FitPolicy::kBestFit) by_size_.erase({it->second, it->first});
  free_.erase(it);
}

bool FreeListAllocator::Alloc(BufferId id, Bytes size, StreamId stream) {
  GPUSIM_CHECK(size.value() >= 0 && !live_.contains(id));
  const int64_t req = ClampRequest(size.value());  // Note [Huge requests]
  const int64_t want = std::max<int64_t>(alignment_, (req + alignment_ - 1) / alignment_ * alignment_);
  std::map<int64_t, int64_t>::iterator it = free_.end();
  if (policy_ == FitPolicy::kFirstFit) {
    for (it = free_.begin(); it != free_.end() && it->second < want; ++it) {
    }
  } else {
    auto s = by_size_.lower_bound({want, 0});
    if (s != by_size_.end()) it = free_.find(s->second);
  }
  if (it == free_.end()) {
    stats_.ooms++;
    Record(AllocatorAction::kOom, 0, Bytes(want), stream);
    return false;
  }
  const int64_t offset = it->first, hole = it->second;
  RemoveFree(it);
  if (hole > want) AddFree(offset + want, hole - want);
  live_[id] = {offset, want, size.value()};
  ends_.insert(offset + want);
  if (stats_.segments == 0) {
    stats_.segments = stats_.peak_segments = 1;
    stats_.device_mallocs = 1;
  }
  stats_.allocated += Bytes(want);
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

void FreeListAllocator::Free(BufferId id) {
  auto lit = live_.find(id);
  GPUSIM_CHECK(lit != live_.end());
  int64_t offset = lit->second.offset, size = lit->second.size;
  stats_.requested -= Bytes(lit->second.requested);
  live_.erase(lit);
  ends_.erase(ends_.find(offset + size));
  stats_.allocated -= Bytes(size);
  stats_.active = stats_.allocated;
  stats_.reserved = Bytes(ends_.empty() ? 0 : *ends_.rbegin());
  Record(AllocatorAction::kFree, base_ + static_cast<uint64_t>(offset), Bytes(size), 0, id);
  auto next = free_.lower_bound(offset);
  if (next != free_.end() && next->first == offset + size) {
    size += next->second;
    auto victim = next++;
    RemoveFree(victim);
  }
  if (next != free_.begin()) {
    auto prev = std::prev(next);
    if (prev->first + prev->second == offset) {
      offset = prev->first;
      size += prev->second;
      RemoveFree(prev);
    }
  }
  AddFree(offset, size);
}

AllocatorStats FreeListAllocator::stats() const {
  AllocatorStats s = stats_;
  int64_t largest = 0;
  for (const auto& [off, size] : free_) largest = std::max(largest, size);
  s.largest_free_block = Bytes(largest);
  int64_t inactive = 0;
  const int64_t top = s.reserved.value();
  for (const auto& [off, size] : free_) {
    if (off < top) inactive += std::min(size, top - off);
  }
  s.inactive_split = Bytes(inactive);
  return s;
}

std::optional<uint64_t> FreeListAllocator::AddressOf(BufferId id) const {
  auto it = live_.find(id);
  if (it == live_.end()) return std::nullopt;
  return base_ + static_cast<uint64_t>(it->second.offset);
}

std::optional<Bytes> FreeListAllocator::BlockSizeOf(BufferId id) const {
  auto it = live_.find(id);
  if (it == live_.end()) return std::nullopt;
  return Bytes(it->second.size);
}

}  // namespace gpusim
