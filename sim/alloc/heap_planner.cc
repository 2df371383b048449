#include "sim/alloc/heap_planner.h"

#include <algorithm>
#include <climits>
#include <cstdint>
#include <map>
#include <numeric>
#include <optional>

namespace gpusim {
namespace {

// The order XLA's GlobalDecreasingSizeBestFitHeap places buffers in
// (heap_simulator.cc: SpatialSizeComparison / TemporalSizeComparison), ties
// broken by start so that the result is deterministic, then by input
// position (as a stable sort leaves them). Into `idx`.
//
// Note [Placement order by key]
// The comparison reads two buffers and computes both lifetimes per call;
// here each buffer's key (the two criteria negated for decreasing order,
// its start, its input position) is made once and the keys are sorted
// whole. Keys are unique (the position), so an unstable sort gives the
// stable sort's order exactly.
struct OrderKey {
  int64_t first, second, start;
  size_t index;
  bool operator<(const OrderKey& o) const {
    if (first != o.first) return first < o.first;
    if (second != o.second) return second < o.second;
    if (start != o.start) return start < o.start;
    return index < o.index;
  }
};
void PlacementOrder(const std::vector<HeapBuffer>& buffers, HeapOrder order, std::vector<OrderKey>& keys,
                    std::vector<size_t>& idx) {
  keys.resize(buffers.size());
  for (size_t i = 0; i < buffers.size(); ++i) {
    const HeapBuffer& b = buffers[i];
    const int64_t size = b.size.value(), life = b.end - b.start;
    keys[i] = order == HeapOrder::kSpatial ? OrderKey{-size, -life, b.start, i} : OrderKey{-life, -size, b.start, i};
  }
  std::sort(keys.begin(), keys.end());
  idx.resize(buffers.size());
  for (size_t i = 0; i < keys.size(); ++i) idx[i] = keys[i].index;
}

// Note [Overlap index]
// XLA keeps the placed chunks in a BufferIntervalTree (heap_simulator.cc): a
// binary search tree keyed by start time, each node augmented with the
// largest end time in its subtree, and ChunksOverlappingInTime(start, end)
// walks it pruning subtrees that end too early or start too late. Here
// every interval is known before packing, which allows an index whose cost
// is the number of chunks it returns: a placed buffer overlaps [s, e] iff
//   (a) it is live at s (start <= s <= end), or
//   (b) it starts in (s, e].
// (a) is a stabbing query on a segment tree over the distinct start times
// (queries only ever stab at a buffer's start): each placed interval is
// filed at the O(log n) nodes that cover it exactly, and the nodes on the
// path from the leaf of s to the root hold each interval live at s exactly
// once. (b) is a range of the buffers sorted by start: the positions in
// whole blocks of 64 come from a second segment tree over the blocks (the
// O(log n) nodes that cover the range exactly), those in the partial
// blocks at either end from a bitset of the placed ones, scanned word by
// word. (A flat list of blocks made a long-lived buffer read n/64 covers:
// with an unrolled 1,024-layer Llama that was half of what the index
// returned.) The two sets are disjoint; their union is exactly what XLA's
// ChunksOverlappingInTime returns.
//
// A buffer of size > 0 only needs the *cover* of the busy chunks: their
// union, plus the zero-sized chunks strictly inside its gaps (Note
// [Best-fit sweep]). So each segment tree node keeps its chunks merged
// into disjoint, non-touching intervals (a zero-sized chunk is an interval
// [x, x) until something covers or touches it), and so does each node of
// the block tree for (b). A scanned model's saved
// residuals, stacked next to one another, then cost one interval a node
// instead of one a layer.
//
// Note [Packing storage]
// Everything the index and the packing keep (the per-node covers, the
// per-buffer tables, the scratch lists) lives in storage the caller keeps,
// one per thread in PackBestFit, so that packing many steps (`advise`
// prepares hundreds) allocates none of it anew: a fresh vector per call,
// freed at its end, also made glibc consolidate its free lists on every
// large allocation that followed (malloc_consolidate was a tenth of the
// packing). PackBestOf builds the index once for both orders (Reset
// forgets the placements; what depends only on the buffers stays).
class OverlapIndex {
 public:
  using Cover = std::vector<std::pair<int64_t, int64_t>>;
  struct Info {
    size_t position = 0;                 // in start order
    size_t first_time = 0, last_time = 0;  // distinct start times it is live at
    size_t later_begin = 0, later_end = 0;  // positions of the buffers starting in (start, end]
  };
  struct Storage {
    std::vector<Cover> covers;
    std::vector<size_t> by_start, placed_buffers;
    std::vector<int64_t> starts, times;
    std::vector<uint64_t> placed;
    std::vector<std::pair<int64_t, int64_t>> chunk_at;
    std::vector<Info> info;
  };

  // REQUIRES: `storage` outlives the index and is used by nothing else meanwhile.
  OverlapIndex(const std::vector<HeapBuffer>& buffers, Storage& storage)
      : buffers_(buffers),
        cover_(storage.covers),
        placed_buffers_(storage.placed_buffers),
        placed_(storage.placed),
        chunk_at_(storage.chunk_at),
        info_(storage.info) {
    const size_t n = buffers.size();
    std::vector<size_t>& by_start = storage.by_start;
    by_start.resize(n);
    std::iota(by_start.begin(), by_start.end(), 0);
    std::stable_sort(by_start.begin(), by_start.end(),
                     [&](size_t a, size_t b) { return buffers[a].start < buffers[b].start; });
    std::vector<int64_t>& starts = storage.starts;  // sorted
    starts.resize(n);
    for (size_t p = 0; p < n; ++p) starts[p] = buffers[by_start[p]].start;
    std::vector<int64_t>& times = storage.times;  // distinct
    times.assign(starts.begin(), starts.end());
    times.erase(std::unique(times.begin(), times.end()), times.end());
    leaves_ = 1;
    while (leaves_ < times.size()) leaves_ *= 2;
    block_leaves_ = 1;
    while (block_leaves_ < (n + 63) / 64) block_leaves_ *= 2;
    block_covers_ = 2 * leaves_;
    used_ = block_covers_ + 2 * block_leaves_;
    if (cover_.size() < used_) cover_.resize(used_);
    Reset();
    chunk_at_.resize(n);
    info_.resize(n);
    for (size_t p = 0; p < n; ++p) {
      const HeapBuffer& b = buffers[by_start[p]];
      Info& in = info_[by_start[p]];
      in.position = p;
      in.first_time = static_cast<size_t>(std::lower_bound(times.begin(), times.end(), b.start) - times.begin());
      in.last_time = static_cast<size_t>(std::upper_bound(times.begin(), times.end(), b.end) - times.begin()) - 1;
      in.later_begin = static_cast<size_t>(std::upper_bound(starts.begin(), starts.end(), b.start) - starts.begin());
      in.later_end = static_cast<size_t>(std::upper_bound(starts.begin(), starts.end(), b.end) - starts.begin());
    }
  }

  // Forgets every placement.
  void Reset() {
    for (size_t x = 0; x < used_; ++x) cover_[x].clear();
    placed_.assign((buffers_.size() + 63) / 64, 0);
    placed_buffers_.clear();
  }

  // Records buffer `i`'s chunk [offset, offset + size).
  // REQUIRES: buffer `i` not placed yet.
  void Place(size_t i, int64_t offset, int64_t size) {
    const Info& in = info_[i];
    const std::pair<int64_t, int64_t> chunk{offset, offset + size};
    for (size_t l = in.first_time + leaves_, r = in.last_time + leaves_ + 1; l < r; l /= 2, r /= 2) {
      if (l & 1) MergeInto(cover_[l++], chunk);
      if (r & 1) MergeInto(cover_[--r], chunk);
    }
    placed_[in.position / 64] |= uint64_t{1} << (in.position % 64);
    chunk_at_[in.position] = chunk;
    for (size_t x = block_leaves_ + in.position / 64; x >= 1; x /= 2) MergeInto(cover_[block_covers_ + x], chunk);
    placed_buffers_.push_back(i);
  }

  // Appends to `out` the chunk of every placed buffer that overlaps buffer
  // `i` in time (in no particular order). O(placed buffers): for the rare
  // zero-sized buffer only.
  void ChunksOverlapping(size_t i, std::vector<std::pair<int64_t, int64_t>>& out) const {
    const int64_t s = buffers_[i].start;
    for (size_t j : placed_buffers_) {  // (a)
      if (buffers_[j].start <= s && buffers_[j].end >= s) out.push_back(chunk_at_[info_[j].position]);
    }
    AppendStartingLater(info_[i], out);
  }

  // The same cover as ChunksOverlapping(i)'s chunks (the same union and
  // the same zero-sized chunks outside it) as lists: `covers` gets the
  // covers of the segment tree nodes it reads (each sorted, disjoint,
  // non-touching), `loose` the chunks of the partial blocks (in no order).
  void CoverListsOverlapping(size_t i, std::vector<const Cover*>& covers,
                             std::vector<std::pair<int64_t, int64_t>>& loose) const {
    const Info& in = info_[i];
    for (size_t x = in.first_time + leaves_; x >= 1; x /= 2) {  // (a)
      if (!cover_[x].empty()) covers.push_back(&cover_[x]);
    }
    // (b) the whole blocks of 64 positions by the O(log n) nodes of the
    // block tree that cover them exactly, the partial blocks at either end
    // chunk by chunk.
    const size_t first_whole = (in.later_begin + 63) / 64, last_whole = in.later_end / 64;
    if (first_whole >= last_whole) {
      AppendChunks(in.later_begin, in.later_end, loose);
      return;
    }
    AppendChunks(in.later_begin, first_whole * 64, loose);
    for (size_t l = first_whole + block_leaves_, r = last_whole + block_leaves_; l < r; l /= 2, r /= 2) {
      if (l & 1) AddCover(cover_[block_covers_ + l++], covers);
      if (r & 1) AddCover(cover_[block_covers_ + --r], covers);
    }
    AppendChunks(last_whole * 64, in.later_end, loose);
  }

 private:

  // Adds `chunk` to a cover (sorted, disjoint, non-touching intervals):
  // [f, g) are the intervals that overlap or touch it.
  static void MergeInto(Cover& c, std::pair<int64_t, int64_t> chunk) {
    const auto f = std::partition_point(c.begin(), c.end(), [&](const auto& v) { return v.second < chunk.first; });
    const auto g = std::partition_point(f, c.end(), [&](const auto& v) { return v.first <= chunk.second; });
    if (f == g) {
      c.insert(f, chunk);
      return;
    }
    f->first = std::min(f->first, chunk.first);
    f->second = std::max((g - 1)->second, chunk.second);
    c.erase(f + 1, g);
  }

  static void AddCover(const Cover& c, std::vector<const Cover*>& covers) {
    if (!c.empty()) covers.push_back(&c);
  }

  // The chunks of the placed buffers at positions [begin, end), which lie
  // in one block or two adjacent ones.
  void AppendChunks(size_t begin, size_t end, std::vector<std::pair<int64_t, int64_t>>& out) const {
    for (size_t p = begin; p < end;) {
      const size_t stop = std::min((p / 64 + 1) * 64, end);
      for (uint64_t word = placed_[p / 64] >> (p % 64); word != 0; word &= word - 1) {
        const size_t q = p + static_cast<size_t>(__builtin_ctzll(word));
        if (q >= stop) break;
        out.push_back(chunk_at_[q]);
      }
      p = stop;
    }
  }

  void AppendStartingLater(const Info& in, std::vector<std::pair<int64_t, int64_t>>& out) const {
    for (size_t p = in.later_begin; p < in.later_end;) {  // (b)
      uint64_t word = placed_[p / 64] >> (p % 64);
      if (word == 0) {
        p = (p / 64 + 1) * 64;
        continue;
      }
      p += static_cast<size_t>(__builtin_ctzll(word));
      if (p >= in.later_end) break;
      out.push_back(chunk_at_[p]);
      ++p;
    }
  }

  const std::vector<HeapBuffer>& buffers_;
  size_t leaves_ = 1;
  std::vector<Cover>& cover_;            // segment tree nodes (root 1), then blocks: placed chunks merged
  size_t block_leaves_ = 1;              // leaves of the block tree: blocks of 64 positions
  size_t block_covers_ = 0;              // index in cover_ of the block tree (its root at + 1)
  size_t used_ = 0;                      // nodes of cover_ in use
  std::vector<size_t>& placed_buffers_;  // in placement order
  std::vector<uint64_t>& placed_;                        // bitset over positions
  std::vector<std::pair<int64_t, int64_t>>& chunk_at_;  // by position
  std::vector<Info>& info_;                              // by buffer index
};

// Note [Best-fit sweep]
// For the buffer being placed, the chunks of the placed buffers that overlap
// it in time are sorted by offset and swept from address 0: a gap is the
// space between the highest end seen so far and the next chunk's offset.
// The smallest gap that holds the buffer wins (the lowest one on a tie),
// else the buffer goes on top of everything it overlaps. These are XLA's
// FindChunkCandidate's free chunks (its map starts as [0, inf) and
// subtracts each used chunk) with the same choice: smallest, then lowest.
// A zero-sized chunk strictly inside a gap splits it in two (the sweep's
// cursor stops there).
int64_t SweepBestFit(std::vector<std::pair<int64_t, int64_t>>& busy, int64_t size) {
  std::sort(busy.begin(), busy.end());
  int64_t cursor = 0, best = -1, best_gap = INT64_MAX;
  for (const auto& [lo, hi] : busy) {
    const int64_t gap = lo - cursor;
    if (gap >= size && gap < best_gap) {
      best_gap = gap;
      best = cursor;
    }
    cursor = std::max(cursor, hi);
  }
  return best >= 0 ? best : cursor;
}

// Note [Free-chunk subtraction]
// The same choice without sorting, as XLA's FindChunkCandidate computes it
// (openxla/xla 0e06ac82 xla/service/heap_simulator/heap_simulator.cc,
// GlobalDecreasingSizeBestFitHeap): start from one free chunk [0, inf),
// subtract every busy chunk in any order, and drop free chunks that became
// shorter than the buffer (they can only shrink, so the order of the
// subtractions changes nothing). Left over are exactly the sweep's gaps
// that fit, plus the top [max end, inf). Only for size > 0: a zero-sized
// buffer also fits the sweep's zero-length gaps.
//
// The tie-break rules, the same in the sweep, the subtraction and XLA:
//   1. the free chunk of the smallest length that holds the buffer (the top
//      [max end, inf) is never one of them);
//   2. of equal lengths, the lowest offset;
//   3. none: the top, at the highest end of the busy chunks (0 if none);
//   4. a zero-sized busy chunk strictly inside a free chunk splits it in
//      two; one at a free chunk's edge changes nothing.
//
// Note [Free windows]
// The busy chunks come as lists (Note [Overlap index]): the covers of the
// segment tree nodes the query reads, each sorted, disjoint and
// non-touching, and a few loose chunks of partial blocks. A cover is
// subtracted window by window: a binary search finds its first interval
// that ends inside the window, and only the intervals that reach into a
// window are read; those that fall where an earlier list left no window
// that fits are skipped whole. So the loose chunks go first, then the
// covers from the shortest to the longest: by the time the long covers of
// an unrolled model (each layer's saved activations, live over most of the
// step) are read, the windows are few and narrow. What the covers hold
// between the windows costs nothing, which is what made the query linear
// in the depth: it read every interval of every cover. The windows are not
// capped: a cover costs one step per window at most, where the sweep that
// used to take over past 256 windows sorted every chunk.
constexpr int64_t kInf = INT64_MAX;
using Interval = std::pair<int64_t, int64_t>;

// Subtracts `busy` (chunks in any order, overlapping or not) from `free`
// (sorted by offset, disjoint, each end - offset >= size, the last one the
// top). REQUIRES: `busy` is short (the loose chunks: an insert moves the
// free chunks above it).
void SubtractChunks(const std::vector<Interval>& busy, int64_t size, std::vector<Interval>& free) {
  for (const auto& [lo, hi] : busy) {
    // The first free chunk that ends after lo; a zero-sized busy chunk only
    // matters strictly inside a free chunk.
    size_t f = 0;
    if (free.size() <= 8) {
      while (f < free.size() && free[f].second <= lo) ++f;
    } else {
      // A local copy: clang 14 cannot capture a structured binding (P1091).
      const int64_t start = lo;
      f = static_cast<size_t>(std::partition_point(free.begin(), free.end(), [start](const auto& c) {
                                return c.second <= start;
                              }) - free.begin());
    }
    if (f == free.size() || free[f].first >= std::max(hi, lo + 1)) continue;
    // free[f] .. free[g-1] overlap [lo, hi) (or contain lo, when lo == hi).
    size_t g = f + 1;
    while (g < free.size() && free[g].first < hi) ++g;
    const int64_t left_start = free[f].first, right_end = free[g - 1].second;
    Interval keep[2];
    int nkeep = 0;
    if (lo > left_start && lo - left_start >= size) keep[nkeep++] = {left_start, lo};
    if (right_end > hi && (right_end == kInf || right_end - hi >= size)) keep[nkeep++] = {hi, right_end};
    // Replace free[f, g) by keep[0, nkeep).
    const size_t removed = g - f;
    if (static_cast<size_t>(nkeep) <= removed) {
      for (int k = 0; k < nkeep; ++k) free[f + static_cast<size_t>(k)] = keep[k];
      free.erase(free.begin() + static_cast<std::ptrdiff_t>(f) + nkeep, free.begin() + static_cast<std::ptrdiff_t>(g));
    } else {  // one chunk split in two
      free[f] = keep[0];
      free.insert(free.begin() + static_cast<std::ptrdiff_t>(f) + 1, keep[1]);
    }
  }
}

// `free` less the cover `c` (sorted, disjoint, non-touching) into `next`,
// window by window (Note [Free windows]).
void SubtractCover(const std::vector<Interval>& c, int64_t size, const std::vector<Interval>& free,
                   std::vector<Interval>& next) {
  next.clear();
  auto it = c.begin();
  for (const auto& [a, b] : free) {
    const int64_t window_start = a;  // clang 14: no capture of a structured binding
    it = std::partition_point(it, c.end(), [window_start](const Interval& v) { return v.second <= window_start; });
    int64_t cursor = a;
    // Ends increase along a cover; an interval reaching past b may reach
    // into the next window too, so it is not stepped over.
    for (; it != c.end() && it->first < b; ++it) {
      if (it->first - cursor >= size) next.push_back({cursor, it->first});
      cursor = it->second;
      if (cursor >= b) break;
    }
    if (cursor < b && (b == kInf || b - cursor >= size)) next.push_back({cursor, b});
  }
}

// The offset by rules 1-3 of Note [Free-chunk subtraction] for a buffer of
// `size` > 0 among the busy `covers` and `loose` chunks. Reorders `covers`.
int64_t BestFitInLists(std::vector<const std::vector<Interval>*>& covers, const std::vector<Interval>& loose,
                       int64_t size, std::vector<Interval>& free, std::vector<Interval>& next) {
  free.assign(1, {0, kInf});
  SubtractChunks(loose, size, free);
  // Shortest first; equal lengths in any order (the result does not depend
  // on the order, only the work).
  std::sort(covers.begin(), covers.end(), [](const auto* x, const auto* y) { return x->size() < y->size(); });
  for (const std::vector<Interval>* c : covers) {
    SubtractCover(*c, size, free, next);
    free.swap(next);
  }
  int64_t best = -1, best_len = kInf;
  for (const auto& [a, b] : free) {
    if (b != kInf && b - a < best_len) {  // in offset order: the first of equals wins
      best_len = b - a;
      best = a;
    }
  }
  return best >= 0 ? best : free.back().first;  // the last chunk is the top
}

// Note [Packing storage]: one per thread.
struct PackStorage {
  OverlapIndex::Storage index;
  std::vector<OrderKey> keys;
  std::vector<size_t> order;
  std::vector<Interval> busy;  // [offset, offset+size) overlapping in time
  std::vector<const OverlapIndex::Cover*> covers;
  std::vector<Interval> loose, free, next;
};
PackStorage& ThreadPackStorage() {
  thread_local PackStorage storage;
  return storage;
}

// PackBestFit that gives up (returns nullopt) as soon as the heap reaches
// `give_up_at`: the heap only grows, so the result could not be smaller.
// REQUIRES: `index` is over `buffers`, with nothing placed.
std::optional<HeapPlan> PackBestFitBelow(const std::vector<HeapBuffer>& buffers, HeapOrder order, Bytes give_up_at,
                                         OverlapIndex& index, PackStorage& storage) {
  HeapPlan plan;
  plan.algorithm = order == HeapOrder::kSpatial ? "spatial" : "temporal";
  plan.offsets.assign(buffers.size(), Bytes(0));
  std::vector<Interval>& busy = storage.busy;
  PlacementOrder(buffers, order, storage.keys, storage.order);
  for (size_t i : storage.order) {
    const HeapBuffer& b = buffers[i];
    const int64_t size = b.size.value();
    int64_t off = 0;
    if (size > 0) {
      storage.covers.clear();
      storage.loose.clear();
      index.CoverListsOverlapping(i, storage.covers, storage.loose);
      off = BestFitInLists(storage.covers, storage.loose, size, storage.free, storage.next);
    } else {
      busy.clear();
      index.ChunksOverlapping(i, busy);  // zero-length gaps count too
      off = SweepBestFit(busy, size);
    }
    plan.offsets[i] = Bytes(off);
    plan.heap_size = Max(plan.heap_size, Bytes(off) + b.size);
    if (plan.heap_size >= give_up_at) return std::nullopt;
    index.Place(i, off, size);
  }
  if (plan.heap_size >= give_up_at) return std::nullopt;  // no buffers
  return plan;
}

}  // namespace

HeapPlan PackBestFit(const std::vector<HeapBuffer>& buffers, HeapOrder order) {
  PackStorage& storage = ThreadPackStorage();
  OverlapIndex index(buffers, storage.index);
  return *PackBestFitBelow(buffers, order, Bytes(INT64_MAX), index, storage);
}

// Temporal wins only when strictly smaller (ties: spatial), so its packing
// stops once it reaches the spatial heap: same result, less work.
HeapPlan PackBestOf(const std::vector<HeapBuffer>& buffers) {
  PackStorage& storage = ThreadPackStorage();
  OverlapIndex index(buffers, storage.index);
  HeapPlan spatial = *PackBestFitBelow(buffers, HeapOrder::kSpatial, Bytes(INT64_MAX), index, storage);
  index.Reset();
  std::optional<HeapPlan> temporal =
      PackBestFitBelow(buffers, HeapOrder::kTemporal, spatial.heap_size, index, storage);
  return temporal.has_value() ? *std::move(temporal) : spatial;
}

Bytes NoFragmentationPeak(const std::vector<HeapBuffer>& buffers) {
  std::map<int64_t, int64_t> delta;  // event → change, frees after the event
  for (const HeapBuffer& b : buffers) {
    delta[2 * b.start] += b.size.value();
    delta[2 * b.end + 1] -= b.size.value();
  }
  int64_t cur = 0, peak = 0;
  for (const auto& [t, d] : delta) {
    cur += d;
    peak = std::max(peak, cur);
  }
  return Bytes(peak);
}

namespace internal {

// The first implementation, kept verbatim as the oracle of the property
// test: every placed buffer is tested for overlap in time (O(n) a buffer).
HeapPlan PackBestFitQuadratic(const std::vector<HeapBuffer>& buffers, HeapOrder order) {
  HeapPlan plan;
  plan.algorithm = order == HeapOrder::kSpatial ? "spatial" : "temporal";
  plan.offsets.assign(buffers.size(), Bytes(0));
  std::vector<size_t> idx(buffers.size());
  std::iota(idx.begin(), idx.end(), 0);
  auto life = [&](size_t i) { return buffers[i].end - buffers[i].start; };
  std::stable_sort(idx.begin(), idx.end(), [&](size_t a, size_t b) {
    const HeapBuffer& x = buffers[a];
    const HeapBuffer& y = buffers[b];
    if (order == HeapOrder::kSpatial) {
      if (x.size != y.size) return x.size > y.size;
      if (life(a) != life(b)) return life(a) > life(b);
    } else {
      if (life(a) != life(b)) return life(a) > life(b);
      if (x.size != y.size) return x.size > y.size;
    }
    return x.start < y.start;
  });
  std::vector<size_t> placed;
  std::vector<std::pair<int64_t, int64_t>> busy;
  for (size_t i : idx) {
    const HeapBuffer& b = buffers[i];
    busy.clear();
    for (size_t j : placed) {
      const HeapBuffer& o = buffers[j];
      if (o.end < b.start || o.start > b.end) continue;
      busy.push_back({plan.offsets[j].value(), plan.offsets[j].value() + o.size.value()});
    }
    std::sort(busy.begin(), busy.end());
    int64_t cursor = 0, best = -1, best_gap = INT64_MAX;
    for (const auto& [lo, hi] : busy) {
      const int64_t gap = lo - cursor;
      if (gap >= b.size.value() && gap < best_gap) {
        best_gap = gap;
        best = cursor;
      }
      cursor = std::max(cursor, hi);
    }
    const int64_t off = best >= 0 ? best : cursor;
    plan.offsets[i] = Bytes(off);
    plan.heap_size = Max(plan.heap_size, Bytes(off) + b.size);
    placed.push_back(i);
  }
  return plan;
}

}  // namespace internal
}  // namespace gpusim
