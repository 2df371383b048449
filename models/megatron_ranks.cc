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
// numbers the world again for the experts, with a RankGenerator over the same
// order with ep in it and cp 1: tp is ETP, dp the expert data-parallel size.
// In the default order "tp-cp-ep-dp-pp" a stage's ranks are consecutive:
// rank = etp + ETP (ep + EP (edp + EDP pp)); under --use-tp-pp-dp-mapping,
// "tp-cp-ep-pp-dp", rank = etp + ETP (ep + EP (pp + PP edp)) (megatron/
// training/initialize.py passes the order; 57a02672). The EP group varies
// ep, the ETP group etp, the tp_ep group both.
int64_t ExpertRank(const MegatronSpec& g, int64_t e_tp, int64_t e_ep, int64_t e_dp, int64_t stage) {
  const int64_t etp = g.moe.etp, ep = g.moe.ep, edp = g.moe.edp;
  return g.tp_pp_dp_mapping ? e_tp + etp * (e_ep + ep * (stage + g.pipeline * e_dp))
                            : e_tp + etp * (e_ep + ep * (e_dp + edp * stage));
}

int64_t ExpertGroupNodes(const MegatronSpec& g, MegatronGroup kind, int64_t stage) {
  const int64_t per_node = std::max<int64_t>(g.gpus_per_node, 1);
  const int64_t etp = g.moe.etp, ep = g.moe.ep, edp = g.moe.edp;
  std::map<int64_t, std::set<int64_t>> nodes;
  for (int64_t e_dp = 0; e_dp < edp; ++e_dp) {
    for (int64_t e_ep = 0; e_ep < ep; ++e_ep) {
      for (int64_t e_tp = 0; e_tp < etp; ++e_tp) {
        // A group is keyed by the coordinates it does not vary.
        const int64_t key = kind == MegatronGroup::kExpert         ? e_tp + etp * ep * e_dp
                            : kind == MegatronGroup::kExpertTensor ? etp * (e_ep + ep * e_dp)
                            : kind == MegatronGroup::kExpertData   ? e_tp + etp * e_ep
                                                                   : etp * ep * e_dp;
        nodes[key].insert(ExpertRank(g, e_tp, e_ep, e_dp, stage) / per_node);
      }
    }
  }
  size_t most = 1;
  for (const auto& [key, n] : nodes) most = std::max(most, n.size());
  return static_cast<int64_t>(most);
}

}  // namespace

int64_t MegatronGroupNodes(const MegatronSpec& g, int64_t tensor, MegatronGroup kind, int64_t stage) {
  if (kind == MegatronGroup::kExpert || kind == MegatronGroup::kExpertTensor ||
      kind == MegatronGroup::kExpertTensorExpert || kind == MegatronGroup::kExpertData) {
    return g.moe.experts > 0 ? ExpertGroupNodes(g, kind, stage) : 1;
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
            case MegatronGroup::kTensorDataContext: key.tp = 0, key.dp = 0, key.cp = 0; break;
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
