// Each member names the BFCAllocator member it models
// (openxla/xla xla/tsl/framework/bfc_allocator.cc).
#include "sim/alloc/impl/bfc.h"

#include <algorithm>
#include <bit>

#include "absl/strings/str_cat.h"
#include "sim/base/status.h"

namespace gpusim {

const std::vector<ParamDoc>& BfcParameters() {
  static const auto* p = new std::vector<ParamDoc>{
      {"allocator.preallocate", "bool", "", "true", "", "XLA_PYTHON_CLIENT_PREALLOCATE: reserve the arena up front"},
      {"allocator.mem_fraction", "double", "fraction", "0.75", "(0, 1]",
       "XLA_PYTHON_CLIENT_MEM_FRACTION: the arena's share of device memory"},
      {"allocator.garbage_collection", "bool", "", "false", "",
       "BFC garbage_collection: free unused regions and retry before failing"},
      {"allocator.fragmentation_fraction", "double", "fraction", "0", "[0, 1]",
       "BFC fragmentation_fraction: split limit (0 = the 128 MiB default cap)"},
  };
  return *p;
}

absl::StatusOr<BfcOptions> ParseBfcOptions(const AllocatorOptions& options) {
  if (absl::Status s = CheckOptionKeys(
          "bfc", options, {"preallocate", "mem_fraction", "garbage_collection", "fragmentation_fraction"});
      !s.ok()) {
    return s;
  }
  BfcOptions o;
  if (absl::Status s = ReadBoolOption(options, "preallocate", &o.preallocate); !s.ok()) return s;
  if (absl::Status s = ReadDoubleOption(options, "mem_fraction", &o.mem_fraction); !s.ok()) return s;
  if (!(o.mem_fraction > 0 && o.mem_fraction <= 1)) {
    return absl::InvalidArgumentError("allocator.mem_fraction: must be in (0, 1]");
  }
  if (absl::Status s = ReadBoolOption(options, "garbage_collection", &o.garbage_collection); !s.ok()) return s;
  if (absl::Status s = ReadDoubleOption(options, "fragmentation_fraction", &o.fragmentation_fraction); !s.ok()) {
    return s;
  }
  if (!(o.fragmentation_fraction >= 0 && o.fragmentation_fraction < 1)) {
    return absl::InvalidArgumentError("allocator.fragmentation_fraction: must be in [0, 1)");
  }
  return o;
}

int BfcAllocator::BinNumForSize(int64_t bytes) {
  const uint64_t v = static_cast<uint64_t>(std::max<int64_t>(bytes, 256)) >> 8;  // kMinAllocationBits
  return std::min(kNumBins - 1, 63 - std::countl_zero(v));
}

int64_t BfcAllocator::RoundedBytes(int64_t bytes) {
  return kMinAllocationSize * ((bytes + kMinAllocationSize - 1) / kMinAllocationSize);
}

BfcAllocator::BfcAllocator(Bytes capacity, BfcOptions options) : capacity_(capacity.value()), opt_(options) {
  GPUSIM_CHECK(capacity_ > 0 && capacity_ < kMaxRequestBytes);
  // CreateBFCAllocator: total_memory * memory_fraction (size_t).
  memory_limit_ = static_cast<int64_t>(static_cast<double>(capacity_) * opt_.mem_fraction);
  // Constructor: 2 MiB first region with allow_growth, else the whole limit.
  curr_region_allocation_bytes_ =
      RoundedBytes(opt_.preallocate ? memory_limit_ : std::min<int64_t>(memory_limit_, 2 << 20));
  max_internal_fragmentation_bytes_ =
      opt_.fragmentation_fraction > 0
          ? static_cast<int64_t>(opt_.fragmentation_fraction * static_cast<double>(memory_limit_))
          : int64_t{128} << 20;
}

int BfcAllocator::NewChunk() {
  if (!spare_.empty()) {
    const int h = spare_.back();
    spare_.pop_back();
    chunks_[h] = Chunk();
    return h;
  }
  chunks_.emplace_back();
  return static_cast<int>(chunks_.size()) - 1;
}

void BfcAllocator::InsertFree(int h) {  // InsertFreeChunk
  Chunk& c = chunks_[h];
  GPUSIM_CHECK(!c.in_use && c.bin == -1);
  c.bin = BinNumForSize(c.size);
  bins_[c.bin].insert({c.size, c.addr, h});
}

void BfcAllocator::RemoveFree(int h) {  // RemoveFreeChunkFromBin
  Chunk& c = chunks_[h];
  GPUSIM_CHECK(bins_[c.bin].erase({c.size, c.addr, h}) == 1);
  c.bin = -1;
}

void BfcAllocator::Split(int h, int64_t num_bytes) {  // SplitChunk
  const int n = NewChunk();
  Chunk& c = chunks_[h];
  Chunk& nc = chunks_[n];
  nc.addr = c.addr + static_cast<uint64_t>(num_bytes);
  nc.size = c.size - num_bytes;
  nc.region = c.region;
  c.size = num_bytes;
  nc.prev = h;
  nc.next = c.next;
  if (c.next != -1) chunks_[c.next].prev = n;
  c.next = n;
  InsertFree(n);
}

void BfcAllocator::Merge(int h1, int h2) {  // MergeChunks: h2 into h1
  Chunk& c1 = chunks_[h1];
  Chunk& c2 = chunks_[h2];
  GPUSIM_CHECK(!c1.in_use && !c2.in_use && c2.prev == h1);
  c1.next = c2.next;
  if (c2.next != -1) chunks_[c2.next].prev = h1;
  c1.size += c2.size;
  spare_.push_back(h2);
}

int BfcAllocator::TryToCoalesce(int h) {
  int coalesced = h;
  const int next = chunks_[h].next;
  if (next != -1 && !chunks_[next].in_use) {
    RemoveFree(next);
    Merge(h, next);
  }
  const int prev = chunks_[h].prev;
  if (prev != -1 && !chunks_[prev].in_use) {
    coalesced = prev;
    RemoveFree(prev);
    Merge(prev, h);
  }
  return coalesced;
}

// FindChunkPtr + AllocateChunkFromLowEnd (alignment 256: no padding).
int BfcAllocator::FindChunk(int bin, int64_t rounded, int64_t num_bytes) {
  for (int b = bin; b < kNumBins; ++b) {
    auto it = bins_[b].lower_bound({rounded, 0, 0});
    if (it == bins_[b].end()) continue;
    const int h = it->handle;
    RemoveFree(h);
    const int64_t size = chunks_[h].size;
    // ShouldSplitChunk.
    if (size >= rounded * 2 || size - rounded >= max_internal_fragmentation_bytes_) Split(h, rounded);
    Chunk& c = chunks_[h];
    c.in_use = true;
    c.requested = num_bytes;
    stats_.allocated += Bytes(c.size);
    stats_.peak_allocated = Max(stats_.peak_allocated, stats_.allocated);
    return h;
  }
  return -1;
}

bool BfcAllocator::Extend(int64_t rounded) {
  int64_t available = memory_limit_ - pool_bytes_;
  available = available / kMinAllocationSize * kMinAllocationSize;
  if (rounded > available) return false;
  bool increased_allocation = false;
  while (rounded > curr_region_allocation_bytes_) {
    curr_region_allocation_bytes_ *= 2;
    increased_allocation = true;
  }
  int64_t bytes = std::min(curr_region_allocation_bytes_, available);
  // The sub-allocator (cuMemAlloc) fails past physical memory; back off by
  // kBackpedalFactor = 0.9 until it fits or drops below the request.
  auto fits = [&](int64_t b) { return pool_bytes_ + b <= capacity_; };
  while (!fits(bytes)) {
    int64_t backpedal = RoundedBytes(static_cast<int64_t>(static_cast<float>(bytes) * 0.9f));
    if (backpedal >= bytes) backpedal = bytes - kMinAllocationSize;
    bytes = backpedal;
    if (bytes < rounded) return false;
  }
  // TF doubles without bound (size_t); capped here below 2^63, which changes
  // nothing since a region is min(curr_region_allocation_bytes_, available).
  if (!increased_allocation) curr_region_allocation_bytes_ = std::min(curr_region_allocation_bytes_ * 2, kMaxRequestBytes);
  const uint64_t addr = va_.Reserve(static_cast<uint64_t>(bytes));
  pool_bytes_ += bytes;
  stats_.reserved = Bytes(pool_bytes_);
  stats_.peak_reserved = Max(stats_.peak_reserved, stats_.reserved);
  stats_.device_mallocs++;
  stats_.segments++;
  stats_.peak_segments = std::max(stats_.peak_segments, stats_.segments);
  const int h = NewChunk();
  chunks_[h].addr = addr;
  chunks_[h].size = bytes;
  chunks_[h].region = static_cast<int>(regions_.size());
  regions_.push_back({addr, bytes, h, true});
  InsertFree(h);
  Record(AllocatorAction::kSegmentAlloc, addr, Bytes(bytes), 0);
  return true;
}

bool BfcAllocator::DeallocateFreeRegions(int64_t rounded) {
  if (!opt_.garbage_collection) return false;
  std::vector<int> free_regions;
  int64_t total_free = 0;
  for (size_t r = 0; r < regions_.size(); ++r) {
    if (!regions_[r].live) continue;
    bool any_use = false;
    for (int h = regions_[r].first; h != -1; h = chunks_[h].next) any_use = any_use || chunks_[h].in_use;
    if (!any_use) {
      free_regions.push_back(static_cast<int>(r));
      total_free += regions_[r].size;
    }
  }
  if (total_free == 0) return false;
  if (rounded > memory_limit_ - pool_bytes_ + total_free) return false;
  for (int r : free_regions) {  // DeallocateRegions
    Region& region = regions_[r];
    for (int h = region.first; h != -1;) {
      const int next = chunks_[h].next;
      RemoveFree(h);
      spare_.push_back(h);
      h = next;
    }
    va_.Release(region.addr, static_cast<uint64_t>(region.size));
    pool_bytes_ -= region.size;
    region.live = false;
    stats_.device_frees++;
    stats_.segments--;
    Record(AllocatorAction::kSegmentFree, region.addr, Bytes(region.size), 0);
  }
  stats_.reserved = Bytes(pool_bytes_);
  return true;
}

// AllocateRawInternal.
bool BfcAllocator::Alloc(BufferId id, Bytes size, StreamId stream) {
  GPUSIM_CHECK(size.value() >= 0 && !live_.contains(id));
  if (size.value() == 0) {
    live_[id] = -1;
    return true;
  }
  const int64_t rounded = RoundedBytes(ClampRequest(size.value()));  // Note [Huge requests]
  const int bin = BinNumForSize(rounded);
  int h = FindChunk(bin, rounded, size.value());
  if (h == -1 && Extend(rounded)) h = FindChunk(bin, rounded, size.value());
  if (h == -1 && DeallocateFreeRegions(rounded) && Extend(rounded)) h = FindChunk(bin, rounded, size.value());
  if (h == -1) {
    stats_.ooms++;
    Record(AllocatorAction::kOom, static_cast<uint64_t>(memory_limit_ - pool_bytes_), Bytes(rounded), stream);
    return false;
  }
  live_[id] = h;
  stats_.requested += size;
  stats_.peak_requested = Max(stats_.peak_requested, stats_.requested);
  stats_.active = stats_.allocated;
  stats_.peak_active = stats_.peak_allocated;
  Record(AllocatorAction::kAlloc, chunks_[h].addr, size, stream, id);
  return true;
}

// DeallocateRawInternal.
void BfcAllocator::Free(BufferId id) {
  auto it = live_.find(id);
  GPUSIM_CHECK(it != live_.end());
  const int h = it->second;
  live_.erase(it);
  if (h == -1) return;
  Chunk& c = chunks_[h];
  Record(AllocatorAction::kFree, c.addr, Bytes(c.requested), 0, id);
  c.in_use = false;  // MarkFree
  stats_.allocated -= Bytes(c.size);
  stats_.requested -= Bytes(c.requested);
  stats_.active = stats_.allocated;
  InsertFree(TryToCoalesce(h));
}

AllocatorStats BfcAllocator::stats() const {
  AllocatorStats s = stats_;
  int64_t largest = 0, inactive_split = 0;
  for (const auto& bin : bins_) {
    for (const FreeKey& k : bin) {
      largest = std::max(largest, k.size);
      const Chunk& c = chunks_[k.handle];
      if (c.prev != -1 || c.next != -1) inactive_split += c.size;
    }
  }
  s.largest_free_block = Bytes(largest);
  s.inactive_split = Bytes(inactive_split);
  return s;
}

std::optional<uint64_t> BfcAllocator::AddressOf(BufferId id) const {
  auto it = live_.find(id);
  if (it == live_.end()) return std::nullopt;
  return it->second == -1 ? 0 : chunks_[it->second].addr;
}

std::optional<Bytes> BfcAllocator::BlockSizeOf(BufferId id) const {
  auto it = live_.find(id);
  if (it == live_.end()) return std::nullopt;
  return Bytes(it->second == -1 ? 0 : chunks_[it->second].size);
}

}  // namespace gpusim
