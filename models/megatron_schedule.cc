// Note [Megatron pipeline schedules]
// megatron/core/pipeline_parallel/schedules.py (NVIDIA/Megatron-LM):
//  - 1F1B, forward_backward_pipelining_without_interleaving: rank r of p runs
//    min(p - r - 1, m) warm-up forwards, then m - warm-up pairs of one
//    forward and one backward, then the remaining backwards (cool-down). So
//    the first stage holds p micro-batches' activations at once, the last 1.
//  - Interleaved, forward_backward_pipelining_with_interleaving (v model
//    chunks per rank, --num-layers-per-virtual-pipeline-stage): m x v virtual
//    micro-batches; warm-up (p - r - 1) x 2 + (v - 1) x G with G =
//    microbatch_group_size_per_vp_stage (default p), at most m x v, all of
//    them when that is reached (get_pp_rank_microbatches). The virtual id k
//    maps to (micro-batch, chunk) by get_schedule_table: for each group of G
//    micro-batches, chunk 0's G forwards, then chunk 1's, ...; a backward
//    takes the same table entry with the chunk reversed (v - 1 - chunk).
//  - Output tensors are freed as soon as they are sent
//    (deallocate_output_tensor): a stage keeps only what autograd saved.
#include "models/megatron_schedule.h"

#include <algorithm>
#include <set>
#include <utility>

#include "sim/base/status.h"

namespace gpusim {

int64_t MegatronWarmup(int64_t p, int64_t rank, int64_t v, int64_t m, int64_t group) {
  if (v <= 1) return std::min(p - rank - 1, m);
  return std::min((p - rank - 1) * 2 + (v - 1) * group, m * v);
}

std::vector<PipelineSlot> MegatronSchedule(int64_t p, int64_t rank, int64_t v, int64_t m, int64_t group) {
  GPUSIM_CHECK(p >= 1 && rank >= 0 && rank < p && v >= 1 && m >= 1 && group >= 1);
  // get_schedule_table: (micro-batch, chunk) of each virtual id.
  std::vector<std::pair<int64_t, int64_t>> table;
  if (v == 1) {
    for (int64_t i = 0; i < m; ++i) table.push_back({i, 0});
  } else {
    for (int64_t lo = 0; lo < m; lo += group) {
      for (int64_t c = 0; c < v; ++c) {
        for (int64_t i = lo; i < std::min(lo + group, m); ++i) table.push_back({i, c});
      }
    }
  }
  const int64_t total = m * v;
  const int64_t warm = MegatronWarmup(p, rank, v, m, group);
  auto fwd = [&](int64_t k) { return PipelineSlot{true, table[k].first, table[k].second}; };
  auto bwd = [&](int64_t k) { return PipelineSlot{false, table[k].first, v - 1 - table[k].second}; };
  std::vector<PipelineSlot> s;
  for (int64_t k = 0; k < warm; ++k) s.push_back(fwd(k));
  for (int64_t k = 0; k < total - warm; ++k) {
    s.push_back(fwd(warm + k));
    s.push_back(bwd(k));
  }
  for (int64_t k = total - warm; k < total; ++k) s.push_back(bwd(k));
  return s;
}

int64_t MaxInFlight(const std::vector<PipelineSlot>& s) {
  std::set<std::pair<int64_t, int64_t>> live;
  int64_t most = 0;
  for (const PipelineSlot& x : s) {
    if (x.forward) {
      live.insert({x.microbatch, x.chunk});
      most = std::max<int64_t>(most, static_cast<int64_t>(live.size()));
    } else {
      live.erase({x.microbatch, x.chunk});
    }
  }
  return most;
}

}  // namespace gpusim
