#include "sim/alloc/offline_planner.h"

#include <algorithm>
#include <tuple>

#include "sim/alloc/address_space.h"
#include "sim/base/status.h"

namespace gpusim {

PlannedAllocator::PlannedAllocator(std::unique_ptr<OfflinePlanner> planner, Bytes capacity, int64_t alignment)
    : planner_(std::move(planner)), capacity_(capacity.value()), alignment_(alignment) {
  GPUSIM_CHECK(planner_ != nullptr && capacity_ > 0 && alignment_ >= 1);
  base_ = DeviceAddressSpace().Reserve(static_cast<uint64_t>(capacity_));
}

bool PlannedAllocator::Alloc(BufferId id, Bytes size, StreamId stream) {
  GPUSIM_CHECK(size.value() >= 0 && !live_.contains(id));
  const int64_t req = ClampRequest(size.value());  // Note [Huge requests]
  const int64_t rounded = (req + alignment_ - 1) / alignment_ * alignment_;
  if (live_bytes_ + rounded > capacity_) {
    stats_.ooms++;
    Record(AllocatorAction::kOom, 0, Bytes(rounded), stream);
    return false;
  }
  live_bytes_ += rounded;
  live_[id] = buffers_.size();
  buffers_.push_back({id, Bytes(rounded), now_, -1});
  requested_.push_back(size.value());
  ++now_;
  dirty_ = true;
  return true;
}

void PlannedAllocator::Free(BufferId id) {
  auto it = live_.find(id);
  GPUSIM_CHECK(it != live_.end());
  HeapBuffer& b = buffers_[it->second];
  b.end = now_++;
  live_bytes_ -= b.size.value();
  live_.erase(it);
  dirty_ = true;
}

void PlannedAllocator::PlanIfDirty() const {
  if (!dirty_) return;
  dirty_ = false;
  std::vector<HeapBuffer> bs = buffers_;
  for (HeapBuffer& b : bs) {
    if (b.end < 0) b.end = now_;
  }
  plan_ = planner_->PlanOffline(bs);
  // Stats of the placed heap, replayed in call order.
  AllocatorStats s;
  s.ooms = stats_.ooms;
  int64_t peak = 0, cur = 0, peak_req = 0, cur_req = 0;
  std::vector<std::tuple<int64_t, int64_t, int64_t>> ev;  // (2·time, +1 for a free), bytes, requested
  for (size_t i = 0; i < bs.size(); ++i) {
    ev.emplace_back(2 * bs[i].start, bs[i].size.value(), requested_[i]);
    if (buffers_[i].end >= 0) ev.emplace_back(2 * bs[i].end + 1, -bs[i].size.value(), -requested_[i]);
  }
  std::sort(ev.begin(), ev.end());
  for (const auto& [t, d, r] : ev) {
    cur += d;
    cur_req += r;
    peak = std::max(peak, cur);
    peak_req = std::max(peak_req, cur_req);
  }
  s.allocated = s.active = Bytes(cur);
  s.peak_allocated = s.peak_active = Bytes(peak);
  s.requested = Bytes(cur_req);
  s.peak_requested = Bytes(peak_req);
  s.peak_reserved = plan_.heap_size;
  int64_t top = 0;
  for (const auto& [id, idx] : live_) top = std::max(top, plan_.offsets[idx].value() + bs[idx].size.value());
  s.reserved = Bytes(top);
  s.segments = s.peak_segments = s.device_mallocs = bs.empty() ? 0 : 1;
  s.largest_free_block = Bytes(capacity_ - top);
  s.inactive_split = s.reserved - s.allocated;
  stats_ = s;
}

absl::Status PlannedAllocator::Finish() {
  PlanIfDirty();
  if (recording()) {
    for (size_t i = 0; i < buffers_.size(); ++i) {
      Record(AllocatorAction::kAlloc, base_ + static_cast<uint64_t>(plan_.offsets[i].value()), Bytes(requested_[i]),
             0, buffers_[i].id);
    }
  }
  return absl::OkStatus();
}

AllocatorStats PlannedAllocator::stats() const {
  PlanIfDirty();
  return stats_;
}

const HeapPlan& PlannedAllocator::plan() const {
  PlanIfDirty();
  return plan_;
}

std::optional<uint64_t> PlannedAllocator::AddressOf(BufferId id) const {
  auto it = live_.find(id);
  if (it == live_.end()) return std::nullopt;
  PlanIfDirty();
  return base_ + static_cast<uint64_t>(plan_.offsets[it->second].value());
}

std::optional<Bytes> PlannedAllocator::BlockSizeOf(BufferId id) const {
  auto it = live_.find(id);
  if (it == live_.end()) return std::nullopt;
  return buffers_[it->second].size;
}

}  // namespace gpusim
