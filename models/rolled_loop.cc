// See rolled_loop.h.
#include "models/rolled_loop.h"

#include <algorithm>
#include <atomic>

namespace gpusim {
namespace {

std::atomic<int64_t> built_once_above{1024};

}  // namespace

int64_t RolledBuiltOnceAbove() { return built_once_above.load(); }

void SetRolledBuiltOnceAboveForTesting(int64_t trips) {
  built_once_above.store(std::max<int64_t>(trips, 2 * kRolledEdgeIterations + 1));
}

std::vector<LoopIteration> LoopIterations(int64_t trips, bool rolled, bool descending) {
  std::vector<LoopIteration> out;
  const int64_t h = kRolledEdgeIterations;
  if (!rolled || trips <= RolledBuiltOnceAbove()) {
    for (int64_t t = 0; t < trips; ++t) out.push_back({t, 1});
  } else {
    for (int64_t t = 0; t < h; ++t) out.push_back({t, 1});
    out.push_back({h, trips - 2 * h});
    for (int64_t t = trips - h; t < trips; ++t) out.push_back({t, 1});
  }
  if (descending) std::reverse(out.begin(), out.end());
  return out;
}

}  // namespace gpusim
