// Megatron-LM's global rank order and which nodes its process groups span.
//
// Note [Megatron rank order]
// megatron/core/parallel_state.py initialize_model_parallel numbers the
// world with a RankGenerator over the order "tp-cp-ep-dp-pp" (or
// "tp-cp-ep-pp-dp" under --use-tp-pp-dp-mapping): the first dimension
// varies fastest, rank = tp + T (cp + C (dp + D pp)) in the default order
// (ep is 1 in the dense order; the experts have an order of their own). Each process group is the set
// of ranks that differ only in its dimensions (RankGenerator.get_ranks,
// generate_masked_orthogonal_rank_groups): the tensor group "tp", the
// context group "cp", the data-parallel group with context parallelism
// "dp-cp" (the DDP gradient reduce and the distributed optimizer), the model
// parallel group "tp-pp" (the gradient norm without the distributed
// optimizer), the whole world (with it), and the embedding group, the first
// and last rank of each pipeline group (the tied embedding's gradient).
// Ranks r and r' share a node when r / gpus_per_node == r' / gpus_per_node
// (torchrun's consecutive local ranks). A group whose ranks sit in one node
// is priced on NVLink, one that spans nodes on the network
// (sim/device/collective_model.h).
#ifndef GPUSIM_MODELS_MEGATRON_RANKS_H_
#define GPUSIM_MODELS_MEGATRON_RANKS_H_

#include <cstdint>

#include "sim/config/spec.h"

namespace gpusim {

struct MegatronCoords {
  int64_t tp = 0, cp = 0, dp = 0, pp = 0;
};

// The global rank of `c` in Megatron's order. `tensor`: the TP size
// (RunSpec::parallelism.tensor).
int64_t MegatronGlobalRank(const MegatronSpec& g, int64_t tensor, const MegatronCoords& c);

// The expert groups (mixture of experts, Note [Megatron expert ranks] in
// the .cc): EP, ETP, and ETP x EP (the allgather dispatcher's tp_ep group).
enum class MegatronGroup {
  kTensor, kContext, kDataContext, kModel, kWorld, kEmbedding, kExpert, kExpertTensor, kExpertTensorExpert,
  // The expert data-parallel group (TP x CP x DP / (EP x ETP) ranks): the
  // expert parameters' gradient reduction and all-gather (Note [Megatron
  // expert gradients], models/gpt_megatron.cc).
  kExpertData,
  // TP x CP x DP (get_tensor_and_data_parallel_group with context): the
  // expert bias's token counts (Note [Megatron MoE router]).
  kTensorDataContext };

// The most nodes one `kind` group holding a rank of pipeline stage `stage`
// spans (1 when every such group sits in one node).
int64_t MegatronGroupNodes(const MegatronSpec& g, int64_t tensor, MegatronGroup kind, int64_t stage);

}  // namespace gpusim

#endif  // GPUSIM_MODELS_MEGATRON_RANKS_H_
