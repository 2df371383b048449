// See megatron_ranks.h, Note [Megatron rank order].
#include "models/megatron_ranks.h"

#include <algorithm>
#include <map>
#include <set>

namespace gpusim {

int64_t MegatronGlobalRank(const MegatronSpec& g, int64_t tensor, const MegatronCoords& c) {
  const int64_t inner = tensor * g.context;  // tp and cp come first in both orders
  const int64_t base = c.tp + tensor * c.cp;
  return g.tp_pp_dp_mapping ? base + inner * (c.pp + g.pipeline * c.dp) : base + inner * (c.dp + g.data * c.pp);
}

namespace {

// Note [Megatron expert ranks]: parallel_state.initialize_model_parallel
// numbers each pipeline stage's TP x CP x DP ranks again for the experts,
// with a RankGenerator over "tp-ep-dp" where tp is ETP and dp the expert
// data-parallel size (pp outermost, as in the dense default order): rank
// = stage x (ranks per stage) + etp + ETP (ep + EP edp). The EP group varies
// ep, the ETP group etp, the tp_ep group both.
int64_t ExpertGroupNodes(const MegatronSpec& g, int64_t tensor, MegatronGroup kind, int64_t stage) {
  const int64_t per_node = std::max<int64_t>(g.gpus_per_node, 1);
  const int64_t per_stage = tensor * g.context * g.data, etp = g.moe.etp, ep = g.moe.ep;
  std::map<int64_t, std::set<int64_t>> nodes;
  for (int64_t r = 0; r < per_stage; ++r) {
    const int64_t e_tp = r % etp, e_ep = r / etp % ep, e_dp = r / (etp * ep);
    const int64_t key = kind == MegatronGroup::kExpert ? e_tp + etp * ep * e_dp
                        : kind == MegatronGroup::kExpertTensor ? etp * (e_ep + ep * e_dp)
                                                               : etp * ep * e_dp;
    nodes[key].insert((stage * per_stage + r) / per_node);
  }
  size_t most = 1;
  for (const auto& [key, n] : nodes) most = std::max(most, n.size());
  return static_cast<int64_t>(most);
}

}  // namespace

int64_t MegatronGroupNodes(const MegatronSpec& g, int64_t tensor, MegatronGroup kind, int64_t stage) {
  if (kind == MegatronGroup::kExpert || kind == MegatronGroup::kExpertTensor ||
      kind == MegatronGroup::kExpertTensorExpert) {
    return g.moe.experts > 0 ? ExpertGroupNodes(g, tensor, kind, stage) : 1;
  }
  const int64_t per_node = std::max<int64_t>(g.gpus_per_node, 1);
  const bool spans_pp = kind == MegatronGroup::kModel || kind == MegatronGroup::kWorld ||
                        kind == MegatronGroup::kEmbedding;
  // Groups are keyed by the coordinates they do not vary.
  std::map<int64_t, std::set<int64_t>> nodes;
  MegatronCoords c;
  for (c.pp = 0; c.pp < g.pipeline; ++c.pp) {
    if (kind == MegatronGroup::kEmbedding ? c.pp != 0 && c.pp != g.pipeline - 1 : !spans_pp && c.pp != stage) {
      continue;
    }
    for (c.dp = 0; c.dp < g.data; ++c.dp) {
      for (c.cp = 0; c.cp < g.context; ++c.cp) {
        for (c.tp = 0; c.tp < tensor; ++c.tp) {
          MegatronCoords key = c;
          switch (kind) {
            case MegatronGroup::kTensor: key.tp = 0; break;
            case MegatronGroup::kContext: key.cp = 0; break;
            case MegatronGroup::kDataContext: key.dp = 0, key.cp = 0; break;
            case MegatronGroup::kModel: key.tp = 0, key.pp = 0; break;
            case MegatronGroup::kWorld: key = MegatronCoords{}; break;
            case MegatronGroup::kEmbedding: key.pp = 0; break;
            default: break;  // the expert groups: ExpertGroupNodes
          }
          nodes[MegatronGlobalRank(g, tensor, key)].insert(MegatronGlobalRank(g, tensor, c) / per_node);
        }
      }
    }
  }
  size_t most = 1;
  for (const auto& [key, n] : nodes) most = std::max(most, n.size());
  return static_cast<int64_t>(most);
}

}  // namespace gpusim
