#include "sim/alloc/graph_pools.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "sim/base/status.h"

namespace gpusim {

GraphPoolAllocator::GraphPoolAllocator(std::unique_ptr<Allocator> main, AllocatorSpec spec, Bytes capacity,
                                       GraphPoolMembers members)
    : main_(std::move(main)), spec_(std::move(spec)), capacity_(capacity), members_(std::move(members)) {
  main_->RecordEventsTo(&scratch_);
  pools_.resize(static_cast<size_t>(std::max<int32_t>(members_.pools, 0)));
  Sample();
  const AllocatorStats s = main_->stats();
  peak_allocated_ = std::max(s.peak_allocated, usage_.allocated);
  peak_reserved_ = std::max(s.peak_reserved, usage_.reserved);
}

AllocatorUsage GraphPoolAllocator::Sum() const {
  AllocatorUsage u = main_->usage();
  for (const auto& p : pools_) {
    if (p == nullptr) continue;
    const AllocatorUsage pu = p->usage();
    u.allocated += pu.allocated;
    u.reserved += pu.reserved;
  }
  return u;
}

void GraphPoolAllocator::Sample() {
  usage_ = Sum();
  peak_allocated_ = std::max(peak_allocated_, usage_.allocated);
  peak_reserved_ = std::max(peak_reserved_, usage_.reserved);
}

bool GraphPoolAllocator::Fits() const { return Sum().reserved <= capacity_; }

void GraphPoolAllocator::Forward(int32_t pool) {
  if (recording()) {
    const uint64_t off = pool < 0 ? 0 : Offset(pool);
    for (const AllocatorEvent& e : scratch_) {
      // An OOM's addr is the device's free bytes, not an address.
      const uint64_t addr = e.action == AllocatorAction::kOom ? e.addr : e.addr + off;
      Record(e.action, addr, e.size, e.stream, e.buffer, e.pages);
    }
  }
  scratch_.clear();
}

bool GraphPoolAllocator::Place(Allocator& a, int32_t pool, BufferId id, Bytes size, StreamId stream, bool fresh) {
  bool ok = a.Alloc(id, size, stream);
  if (ok && !pools_.empty() && !Fits()) {
    // The pools together pass the device: the cudaMalloc that gave `a` its
    // segment fails. CUDACachingAllocator.cpp alloc_block failing:
    // release_cached_blocks frees the main pool's cached segments (not a
    // pool in use), then malloc retries once.
    a.Free(id);
    ok = false;
    if (fresh) {
      scratch_.clear();  // the pool got nothing: it never existed
      pools_[static_cast<size_t>(pool)].reset();
      --pools_used_;
    } else {
      if (a.ModelsSegments()) a.ReleaseCache();  // the segment just taken, with the others cached
      Forward(pool);
    }
    if (main_->ModelsSegments()) {
      main_->ReleaseCache();
      Forward(-1);
    }
    if (!fresh) {
      ok = a.Alloc(id, size, stream);
      if (ok && !Fits()) {
        a.Free(id);
        ok = false;
        if (a.ModelsSegments()) a.ReleaseCache();
      }
    }
  }
  Forward(pool);
  if (ok && pool >= 0) live_pool_[id] = pool;
  Sample();
  return ok;
}

bool GraphPoolAllocator::Alloc(BufferId id, Bytes size, StreamId stream) {
  if (!members_.empty()) {
    if (auto it = members_.pool_of.find(id); it != members_.pool_of.end()) {
      absl::StatusOr<bool> ok = AllocInPool(it->second, id, size, stream);
      return ok.ok() && *ok;
    }
  }
  return Place(*main_, -1, id, size, stream, false);
}

absl::StatusOr<bool> GraphPoolAllocator::AllocInPool(int32_t pool, BufferId id, Bytes size, StreamId stream) {
  if (pool < 0 || pool >= kMaxGraphPools) {
    return absl::InvalidArgumentError(
        absl::StrCat("CUDA graph private pool ", pool, ": out of range (0 to ", kMaxGraphPools - 1, ")"));
  }
  if (static_cast<size_t>(pool) >= pools_.size()) pools_.resize(static_cast<size_t>(pool) + 1);
  std::unique_ptr<Allocator>& p = pools_[static_cast<size_t>(pool)];
  const bool fresh = p == nullptr;
  if (fresh) {
    ASSIGN_OR_RETURN(p, MakeAllocator(spec_, capacity_));
    p->RecordEventsTo(&scratch_);
    ++pools_used_;
  }
  return Place(*p, pool, id, size, stream, fresh);
}

Allocator* GraphPoolAllocator::Holder(BufferId id) const {
  if (!live_pool_.empty()) {
    if (auto it = live_pool_.find(id); it != live_pool_.end()) return pools_[static_cast<size_t>(it->second)].get();
  }
  return main_.get();
}

void GraphPoolAllocator::Free(BufferId id) {
  int32_t pool = -1;
  if (!live_pool_.empty()) {
    if (auto it = live_pool_.find(id); it != live_pool_.end()) {
      pool = it->second;
      live_pool_.erase(it);
    }
  }
  // A private pool keeps the freed block for its own later requests.
  (pool < 0 ? *main_ : *pools_[static_cast<size_t>(pool)]).Free(id);
  Forward(pool);
  Sample();
}

AllocatorStats GraphPoolAllocator::stats() const {
  AllocatorStats s = main_->stats();
  for (const auto& p : pools_) {
    if (p == nullptr) continue;
    const AllocatorStats ps = p->stats();
    s.allocated += ps.allocated;
    s.reserved += ps.reserved;
    s.device_mallocs += ps.device_mallocs;
    s.device_frees += ps.device_frees;
    s.largest_free_block = std::max(s.largest_free_block, ps.largest_free_block);
    s.requested += ps.requested;
    s.peak_requested += ps.peak_requested;
    s.active += ps.active;
    s.peak_active += ps.peak_active;
    s.inactive_split += ps.inactive_split;
    s.peak_inactive_split += ps.peak_inactive_split;
    s.segments += ps.segments;
    s.peak_segments += ps.peak_segments;
    s.alloc_retries += ps.alloc_retries;
    s.ooms += ps.ooms;
  }
  s.peak_allocated = std::max(peak_allocated_, s.allocated);
  s.peak_reserved = std::max(peak_reserved_, s.reserved);
  return s;
}

std::optional<uint64_t> GraphPoolAllocator::AddressOf(BufferId id) const {
  const Allocator* a = Holder(id);
  std::optional<uint64_t> at = a->AddressOf(id);
  if (at.has_value() && a != main_.get()) *at += Offset(live_pool_.at(id));
  return at;
}

std::optional<Bytes> GraphPoolAllocator::BlockSizeOf(BufferId id) const { return Holder(id)->BlockSizeOf(id); }

absl::Status GraphPoolAllocator::RestoreSegment(const SegmentLayout& segment) {
  absl::Status st = main_->RestoreSegment(segment);
  Forward(-1);
  Sample();
  return st;
}

std::vector<SegmentLayout> GraphPoolAllocator::Segments() const {
  std::vector<SegmentLayout> out = main_->Segments();
  for (size_t k = 0; k < pools_.size(); ++k) {
    if (pools_[k] == nullptr) continue;
    const uint64_t off = Offset(static_cast<int32_t>(k));
    for (SegmentLayout seg : pools_[k]->Segments()) {
      seg.address += off;
      for (SegmentLayout::Block& b : seg.blocks) b.address += off;
      out.push_back(std::move(seg));
    }
  }
  return out;
}

void GraphPoolAllocator::ReleaseCache() {
  main_->ReleaseCache();  // a pool in use keeps its segments
  Forward(-1);
  Sample();
}

absl::Status GraphPoolAllocator::Finish() {
  RETURN_IF_ERROR(main_->Finish());
  for (const auto& p : pools_) {
    if (p != nullptr) RETURN_IF_ERROR(p->Finish());
  }
  Forward(-1);
  Sample();
  return absl::OkStatus();
}

}  // namespace gpusim
