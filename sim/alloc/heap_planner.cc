#include "sim/alloc/heap_planner.h"

#include <algorithm>
#include <map>
#include <numeric>

namespace gpusim {

HeapPlan PackBestFit(const std::vector<HeapBuffer>& buffers, HeapOrder order) {
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
  std::vector<std::pair<int64_t, int64_t>> busy;  // [offset, offset+size) overlapping in time
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

}  // namespace gpusim
