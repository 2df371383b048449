// Applying a remat policy to one decoder layer: the one place that decides,
// for every transformer family, which forward values are saved for the
// backward pass, recomputed there, or offloaded to pinned host, and which
// layers Megatron's full recompute checkpoints whole. The step pipeline
// (sim/step/model_program.h) calls it on the family's LayerGraph and hands
// the RematPlan to the family's build function.
#ifndef GPUSIM_SIM_REMAT_APPLY_H_
#define GPUSIM_SIM_REMAT_APPLY_H_

#include "absl/status/statusor.h"
#include "sim/config/spec.h"
#include "sim/ir/layer_graph.h"
#include "sim/ir/remat_plan.h"

namespace gpusim {

// Note [Saved set]: as JAX's remat partial evaluation does
// (jax/_src/ad_checkpoint.py remat_partial_eval), walk back from the values
// the backward rules read (LayerValue::needs): a value the policy saves is a
// residual, one it offloads a residual in pinned host memory, any other is
// recomputed and its own inputs become needed in turn. So a saveable value
// is saved only if the backward pass or a recomputation reads it. The layer
// input is always saved. Megatron's selective recompute is the same walk
// with a policy that recomputes the attention core (Korthikanti et al.
// 2022, Sec. 5).
//
// Under kLayerGroups (LayerGraph::checkpoint_unit) policy `full` is
// Megatron-LM's --recompute-granularity full instead
// (megatron/core/transformer/transformer_block.py
// TransformerBlock._checkpointed_forward, over the layers of one model
// chunk): values are decided as without remat, and the plan says which
// layers are checkpointed whole and in groups of how many:
//  - uniform k (--recompute-method uniform --recompute-num-layers k): every
//    layer, groups of k, each checkpointing its first layer's input;
//  - block k: the first k layers, one by one; the rest save everything;
//  - sequential k: torch.utils.checkpoint.checkpoint_sequential(functions,
//    segments=k): segments of n // k layers, all but the last checkpointed;
//  - sqrt: Chen et al. 2016 (arXiv 1604.06174, Sec. 4.1): segments of
//    ceil(sqrt(n)) layers.
// Errors: the policy's own (sim/remat/remat_policy.h MakeRematPolicy), and
// under kLayerGroups "remat.num_layers: N must be >= 1 [and <=
// model.n_layers (L) for method sequential]".
absl::StatusOr<RematPlan> ApplyRematPolicy(const LayerGraph& graph, const RematSpec& spec);

}  // namespace gpusim

#endif  // GPUSIM_SIM_REMAT_APPLY_H_
