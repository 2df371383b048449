#include "sim/alloc/colocated_heap.h"

#include <algorithm>
#include <limits>
#include <numeric>
#include <utility>

namespace gpusim {
namespace {

int64_t AlignUp(int64_t x, int64_t alignment) { return (x + alignment - 1) / alignment * alignment; }

struct Group {
  size_t root = 0;
  std::vector<size_t> members;  // the root first
  Bytes size;                   // the largest member's
  int64_t min_start = 0, max_end = 0;
};

std::vector<Group> Groups(const std::vector<ColocatedInterval>& in) {
  std::vector<size_t> root(in.size());
  std::vector<int64_t> group_of(in.size(), -1);
  std::vector<Group> groups;
  for (size_t i = 0; i < in.size(); ++i) {
    const int64_t c = in[i].colocated_with;
    root[i] = c >= 0 && static_cast<size_t>(c) < i ? root[static_cast<size_t>(c)] : i;
    if (root[i] == i) {
      group_of[i] = static_cast<int64_t>(groups.size());
      Group g;
      g.root = i;
      g.min_start = in[i].start;
      g.max_end = in[i].end;
      groups.push_back(std::move(g));
    }
    Group& g = groups[static_cast<size_t>(group_of[root[i]])];
    g.members.push_back(i);
    g.size = Max(g.size, in[i].size);
    g.min_start = std::min(g.min_start, in[i].start);
    g.max_end = std::max(g.max_end, in[i].end);
  }
  return groups;
}

// The offset FindUnslicedChunkCandidates gives `g` among the chunks placed.
int64_t BestFit(const Group& g, const std::vector<ColocatedInterval>& in,
                const std::vector<std::pair<size_t, int64_t>>& placed, int64_t alignment) {
  std::vector<std::pair<int64_t, int64_t>> used;  // [offset, end)
  for (const auto& [j, off] : placed) {
    for (size_t m : g.members) {
      if (in[j].start <= in[m].end && in[j].end >= in[m].start) {
        used.push_back({off, off + in[j].size.value()});
        break;
      }
    }
  }
  std::sort(used.begin(), used.end());
  const int64_t size = g.size.value();
  std::vector<std::pair<int64_t, int64_t>> free;  // [start, end)
  int64_t free_start = 0;
  for (size_t k = 0; k < used.size();) {
    int64_t lo = used[k].first, hi = used[k].second;
    for (++k; k < used.size() && used[k].first < hi; ++k) hi = std::max(hi, used[k].second);
    if (lo - free_start >= in[g.root].size.value()) free.push_back({free_start, lo});
    free_start = std::max(free_start, AlignUp(hi, alignment));
  }
  free.push_back({free_start, std::numeric_limits<int64_t>::max()});
  int64_t best = -1, best_size = 0, best_start = 0;
  for (const auto& [s, e] : free) {
    const int64_t at = AlignUp(s, alignment);
    if (at > e || e - at < size) continue;
    if (best < 0 || std::make_pair(e - s, s) < std::make_pair(best_size, best_start)) {
      best = at;
      best_size = e - s;
      best_start = s;
    }
  }
  return best;
}

}  // namespace

ColocatedPlan PackColocated(const std::vector<ColocatedInterval>& in, ColocatedOrder order, int64_t alignment) {
  std::vector<Group> groups = Groups(in);
  std::vector<size_t> idx(groups.size());
  std::iota(idx.begin(), idx.end(), 0);
  std::stable_sort(idx.begin(), idx.end(), [&](size_t a, size_t b) {
    const Group& x = groups[a];
    const Group& y = groups[b];
    const ColocatedInterval& rx = in[x.root];
    const ColocatedInterval& ry = in[y.root];
    if (order == ColocatedOrder::kSpatial) {
      if (rx.size != ry.size) return rx.size > ry.size;
      if (rx.end - rx.start != ry.end - ry.start) return rx.end - rx.start > ry.end - ry.start;
    } else {
      if (x.max_end - x.min_start != y.max_end - y.min_start) return x.max_end - x.min_start > y.max_end - y.min_start;
      if (rx.size != ry.size) return rx.size > ry.size;
    }
    return x.root < y.root;
  });
  ColocatedPlan plan;
  plan.algorithm = order == ColocatedOrder::kSpatial ? "spatial" : "temporal";
  plan.offsets.assign(in.size(), Bytes(0));
  std::vector<std::pair<size_t, int64_t>> placed;
  for (size_t gi : idx) {
    const Group& g = groups[gi];
    const int64_t off = BestFit(g, in, placed, alignment);
    for (size_t m : g.members) {
      plan.offsets[m] = Bytes(off);
      placed.push_back({m, off});
    }
    plan.heap_size = Max(plan.heap_size, Bytes(off) + g.size);
  }
  return plan;
}

ColocatedPlan PackColocatedBestOf(const std::vector<ColocatedInterval>& in, int64_t alignment) {
  ColocatedPlan spatial = PackColocated(in, ColocatedOrder::kSpatial, alignment);
  ColocatedPlan temporal = PackColocated(in, ColocatedOrder::kTemporal, alignment);
  return temporal.heap_size < spatial.heap_size ? temporal : spatial;
}

}  // namespace gpusim
