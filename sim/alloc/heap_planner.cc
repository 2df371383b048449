#include "sim/alloc/heap_planner.h"

#include <algorithm>
#include <climits>
#include <map>
#include <numeric>

namespace gpusim {
namespace {

// The order XLA's GlobalDecreasingSizeBestFitHeap places buffers in
// (heap_simulator.cc: SpatialSizeComparison / TemporalSizeComparison), ties
// broken by start so that the result is deterministic.
std::vector<size_t> PlacementOrder(const std::vector<HeapBuffer>& buffers, HeapOrder order) {
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
  return idx;
}

// Note [Static interval tree]
// XLA keeps the placed chunks in a BufferIntervalTree (heap_simulator.cc): a
// binary search tree keyed by start time, each node augmented with the
// largest end time in its subtree, so ChunksOverlappingInTime(start, end)
// prunes every subtree that ends before `start` and every right subtree
// that starts after `end`. XLA inserts nodes as they are placed, so the tree
// is unbalanced (and degenerates into a list when equal-sized buffers come
// in start order, as a scanned model's layers do). Here every interval is
// known before packing, so the tree is laid out once, balanced, over the
// buffers sorted by start (an implicit tree: the node of range [lo, hi) is
// its middle element); placing a buffer only switches its node on and
// raises `subtree_end` along the path from the root. Queries return exactly
// the placed buffers whose [start, end] meets the query's, as XLA's do.
class StaticIntervalTree {
 public:
  explicit StaticIntervalTree(const std::vector<HeapBuffer>& buffers) {
    std::vector<size_t> by_start(buffers.size());
    std::iota(by_start.begin(), by_start.end(), 0);
    std::stable_sort(by_start.begin(), by_start.end(),
                     [&](size_t a, size_t b) { return buffers[a].start < buffers[b].start; });
    nodes_.resize(buffers.size());
    position_.resize(buffers.size());
    for (size_t p = 0; p < by_start.size(); ++p) {
      nodes_[p].start = buffers[by_start[p]].start;
      nodes_[p].end = buffers[by_start[p]].end;
      position_[by_start[p]] = p;
    }
  }

  // Records buffer `i`'s chunk [offset, offset + size).
  // REQUIRES: buffer `i` not placed yet.
  void Place(size_t i, int64_t offset, int64_t size) {
    const size_t target = position_[i];
    Node& n = nodes_[target];
    const int64_t end = n.end;
    size_t lo = 0, hi = nodes_.size();
    while (lo < hi) {
      const size_t mid = lo + (hi - lo) / 2;
      nodes_[mid].subtree_end = std::max(nodes_[mid].subtree_end, end);
      if (target == mid) break;
      if (target < mid) {
        hi = mid;
      } else {
        lo = mid + 1;
      }
    }
    n.placed_end = end;
    n.chunk = {offset, offset + size};
  }

  // Appends the chunk of every placed buffer live at some event in
  // [start, end] to `out`.
  void ChunksOverlappingInTime(int64_t start, int64_t end, std::vector<std::pair<int64_t, int64_t>>& out) const {
    Query(0, nodes_.size(), start, end, out);
  }

 private:
  struct Node {
    int64_t start = 0;
    int64_t end = 0;
    int64_t placed_end = INT64_MIN;   // end once placed: never >= a query start before
    int64_t subtree_end = INT64_MIN;  // max placed_end in this node's subtree
    std::pair<int64_t, int64_t> chunk{0, 0};
  };

  void Query(size_t lo, size_t hi, int64_t start, int64_t end, std::vector<std::pair<int64_t, int64_t>>& out) const {
    while (lo < hi) {
      const size_t mid = lo + (hi - lo) / 2;
      const Node& n = nodes_[mid];
      if (n.subtree_end < start) return;  // nothing placed below lives that late
      if (lo < mid) Query(lo, mid, start, end, out);
      if (n.start > end) return;  // neither it nor anything to its right starts in time
      if (n.placed_end >= start) out.push_back(n.chunk);
      lo = mid + 1;  // the right subtree, iteratively
    }
  }

  std::vector<Node> nodes_;       // by tree position (buffers sorted by start)
  std::vector<size_t> position_;  // buffer index → tree position
};

}  // namespace

// Note [Best-fit sweep]
// For the buffer being placed, the chunks of the placed buffers that overlap
// it in time are sorted by offset and swept from address 0: a gap is the
// space between the highest end seen so far and the next chunk's offset.
// The smallest gap that holds the buffer wins (the lowest one on a tie),
// else the buffer goes on top of everything it overlaps. These are XLA's
// FindChunkCandidate's free chunks (its map starts as [0, inf) and
// subtracts each used chunk) with the same choice: smallest, then lowest.
HeapPlan PackBestFit(const std::vector<HeapBuffer>& buffers, HeapOrder order) {
  HeapPlan plan;
  plan.algorithm = order == HeapOrder::kSpatial ? "spatial" : "temporal";
  plan.offsets.assign(buffers.size(), Bytes(0));
  StaticIntervalTree tree(buffers);
  std::vector<std::pair<int64_t, int64_t>> busy;  // [offset, offset+size) overlapping in time
  for (size_t i : PlacementOrder(buffers, order)) {
    const HeapBuffer& b = buffers[i];
    busy.clear();
    tree.ChunksOverlappingInTime(b.start, b.end, busy);
    std::sort(busy.begin(), busy.end());
    const int64_t size = b.size.value();
    int64_t cursor = 0, best = -1, best_gap = INT64_MAX;
    for (const auto& [lo, hi] : busy) {
      const int64_t gap = lo - cursor;
      if (gap >= size && gap < best_gap) {
        best_gap = gap;
        best = cursor;
      }
      cursor = std::max(cursor, hi);
    }
    const int64_t off = best >= 0 ? best : cursor;
    plan.offsets[i] = Bytes(off);
    plan.heap_size = Max(plan.heap_size, Bytes(off) + b.size);
    tree.Place(i, off, size);
  }
  return plan;
}

HeapPlan PackBestOf(const std::vector<HeapBuffer>& buffers) {
  HeapPlan spatial = PackBestFit(buffers, HeapOrder::kSpatial);
  HeapPlan temporal = PackBestFit(buffers, HeapOrder::kTemporal);
  return temporal.heap_size < spatial.heap_size ? temporal : spatial;
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
