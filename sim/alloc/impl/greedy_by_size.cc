#include "sim/alloc/impl/greedy_by_size.h"

#include <algorithm>
#include <limits>
#include <numeric>

namespace gpusim {

HeapPlan GreedyBySizePlanner::PlanOffline(const std::vector<HeapBuffer>& buffers) const {
  HeapPlan plan;
  plan.algorithm = "greedy_by_size";
  plan.offsets.assign(buffers.size(), Bytes(0));
  std::vector<size_t> order(buffers.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if (buffers[a].size != buffers[b].size) return buffers[a].size > buffers[b].size;
    return buffers[a].start < buffers[b].start;
  });
  // Placed buffers ordered by offset (the paper's ordered allocated list).
  std::vector<size_t> placed;
  for (size_t i : order) {
    const HeapBuffer& t = buffers[i];
    int64_t prev_offset = 0;
    int64_t best_offset = -1;
    int64_t smallest_gap = std::numeric_limits<int64_t>::max();
    for (size_t j : placed) {
      const HeapBuffer& x = buffers[j];
      if (x.end < t.start || x.start > t.end) continue;  // lifetimes disjoint
      const int64_t off = plan.offsets[j].value();
      const int64_t gap = off - prev_offset;
      if (off >= prev_offset && gap >= t.size.value() && gap < smallest_gap) {
        smallest_gap = gap;
        best_offset = prev_offset;
      }
      prev_offset = std::max(prev_offset, off + x.size.value());
    }
    if (best_offset < 0) best_offset = prev_offset;
    plan.offsets[i] = Bytes(best_offset);
    plan.heap_size = Max(plan.heap_size, Bytes(best_offset) + t.size);
    auto pos = std::upper_bound(placed.begin(), placed.end(), best_offset,
                                [&](int64_t off, size_t j) { return off < plan.offsets[j].value(); });
    placed.insert(pos, i);
  }
  return plan;
}

}  // namespace gpusim
