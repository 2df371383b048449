// RematPlan: what a remat policy decided for one decoder layer's values
// (sim/remat/apply.h ApplyRematPolicy on a LayerGraph, sim/ir/layer_graph.h),
// as plain data. The step pipeline (sim/step/model_program.h) makes it and
// hands it to the family's build function; builders read the plan and never
// a policy.
#ifndef GPUSIM_SIM_IR_REMAT_PLAN_H_
#define GPUSIM_SIM_IR_REMAT_PLAN_H_

#include <cstdint>
#include <limits>
#include <set>
#include <string>
#include <vector>

namespace gpusim {

struct RematPlan {
  std::string policy;     // remat.policy, for messages
  bool no_remat = false;  // the scope is not checkpointed (MaxText none): every residual AD keeps is saved

  // Per value, for every layer that is not checkpointed whole (below):
  // saved on the device (always holding the layer input), recomputed in the
  // backward pass, or offloaded to pinned host. Only values the backward
  // rules or a recomputation read are in any set.
  std::string input = "x";
  std::set<std::string> saved, recompute, offload;

  // Layer groups (LayerGraph::checkpoint_unit kLayerGroups under policy
  // `full`): layers whose local index within their model chunk is below
  // `checkpointed_layers` are recomputed whole, in groups of `group_size`
  // layers, each group saving its first layer's input.
  bool layer_groups = false;
  int64_t group_size = 1;
  int64_t checkpointed_layers = 0;

  // `local`: the layer's index within its model chunk.
  // The plans of LayerGraph::kinds, in the same order (each has none).
  std::vector<RematPlan> kinds;

  bool Checkpointed(int64_t local) const { return layer_groups && local < checkpointed_layers; }
  // The first layer of its group: its input is the group's checkpoint.
  bool GroupStart(int64_t local) const { return local % group_size == 0; }
};

inline constexpr int64_t kAllLayers = std::numeric_limits<int64_t>::max();

}  // namespace gpusim

#endif  // GPUSIM_SIM_IR_REMAT_PLAN_H_
