// Mixture of experts in a Megatron-LM launch line: the MoE arguments gpusim
// models, accepts or refuses, and their checks. See
// megatron_args_internal.h; the layer is built by models/gpt_moe.cc.
//
// Note [Megatron MoE arguments]: names, defaults and checks from
// NVIDIA/Megatron-LM (core_r0.12, 2025) megatron/training/arguments.py
// _add_moe_args and validate_args, and megatron/core/transformer/
// transformer_config.py TransformerConfig.__post_init__:
//  - --moe-router-topk 2; --moe-token-dispatcher-type allgather;
//    --moe-router-load-balancing-type aux_loss; --moe-aux-loss-coeff 0.0;
//    --moe-ffn-hidden-size: --ffn-hidden-size; --expert-tensor-parallel-size:
//    TP (validate_args);
//  - num_experts % EP == 0; topk <= num_experts;
//  - EP > 1 with TP > 1 needs --sequence-parallel;
//  - --moe-expert-capacity-factor only with the alltoall dispatcher;
//    --moe-pad-expert-input-to-capacity only with a capacity factor;
//  - the expert data-parallel size is world / (PP x ETP x EP)
//    (parallel_state.initialize_model_parallel's expert RankGenerator).
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "sim/base/status.h"
#include "sim/config/megatron_args_internal.h"

namespace gpusim {
namespace megatron_internal {

const std::vector<MoeArgRule>& MoeArgRules() {
  using K = MoeArgKind;
  static const std::vector<MoeArgRule>* const kRules = new std::vector<MoeArgRule>{
      {"num-experts", K::kModelled, "experts per MoE layer (models/gpt_moe.cc)"},
      {"moe-router-topk", K::kModelled, "experts per token"},
      {"expert-model-parallel-size", K::kModelled, "EP: experts sharded over the EP group, tokens dispatched over it"},
      {"expert-tensor-parallel-size", K::kModelled, "ETP: each expert's GEMMs split over the ETP group"},
      {"moe-grouped-gemm", K::kModelled, "one grouped GEMM for a rank's experts (else one GEMM per expert)"},
      {"moe-ffn-hidden-size", K::kModelled, "expert MLP width"},
      {"moe-shared-expert-intermediate-size", K::kModelled, "shared experts: a dense MLP beside the routed ones"},
      {"moe-token-dispatcher-type", K::kModelled, "allgather | alltoall (their buffers and collectives)"},
      {"moe-expert-capacity-factor", K::kModelled, "capacity per expert (tokens beyond it dropped)"},
      {"moe-pad-expert-input-to-capacity", K::kModelled, "every expert's input padded to its capacity"},
      {"moe-router-load-balancing-type", K::kModelled,
       "aux_loss | seq_aux_loss | none (the aux loss's saved scores) | sinkhorn (Note [Sinkhorn routing])"},
      {"moe-aux-loss-coeff", K::kModelled, "> 0: the load-balancing loss is computed (its saved scores)"},
      {"moe-layer-freq", K::kModelled, "1 only: every layer an MoE layer"},
      {"moe-token-drop-policy", K::kNoEffect, "which tokens are dropped, not how many"},
      {"moe-router-topk-scaling-factor", K::kNoEffect, "routing weights' values"},
      {"moe-router-pre-softmax", K::kNoEffect, "softmax before or after top-k: same shapes"},
      {"moe-per-layer-logging", K::kNoEffect, "logging"},
      {"moe-router-dtype", K::kRefused, "an fp32 router GEMM is not modelled (the router runs in the compute dtype)"},
      // core/transformer/moe/router.py TopKRouter (NVIDIA/Megatron-LM 57a02672):
      // softmax is the default score function; sigmoid is refused by value
      // in ApplyMoeOptions.
      {"moe-router-score-function", K::kModelled, "softmax routing scores (Megatron's default)"},
      {"moe-router-num-groups", K::kRefused, "group-limited routing is not modelled"},
      {"moe-router-group-topk", K::kRefused, "group-limited routing is not modelled"},
      {"moe-router-enable-expert-bias", K::kRefused, "aux-loss-free expert bias is not modelled"},
      {"moe-router-bias-update-rate", K::kRefused, "aux-loss-free expert bias is not modelled"},
      {"moe-router-force-load-balancing", K::kRefused, "forced balanced routing is not modelled"},
      {"moe-z-loss-coeff", K::kRefused, "the router z-loss is not modelled"},
      {"moe-input-jitter-eps", K::kRefused, "router input jitter is not modelled"},
      {"moe-shared-expert-overlap", K::kRefused, "shared experts overlapped with dispatch are not modelled"},
      {"moe-use-legacy-grouped-gemm", K::kRefused, "the legacy GroupedMLP is not modelled (TE's grouped GEMM is)"},
      {"moe-layer-recompute", K::kRefused, "MoE-layer recompute is not modelled"},
      {"moe-extended-tp", K::kRefused, "extended tensor parallelism for experts is not modelled"},
      {"moe-use-upcycling", K::kRefused, "upcycling is not modelled"},
      {"moe-permute-fusion", K::kRefused, "the fused permute kernels are not modelled"},
      {"moe-enable-deepep", K::kRefused, "the DeepEP (flex) dispatcher is not modelled"},
      {"moe-deepep-num-sms", K::kRefused, "the DeepEP (flex) dispatcher is not modelled"},
      {"moe-apply-probs-on-input", K::kRefused, "routing weights applied on the input are not modelled"},
      {"overlap-moe-expert-parallel-comm", K::kRefused, "EP communication overlap is not modelled"},
      {"moe-router-padding-for-fp8", K::kRefused, "fp8 training is not modelled"},
  };
  return *kRules;
}

namespace {

// The MoE layer's options: widths, dispatcher, capacity, aux loss.
absl::Status ApplyMoeOptions(const Args& g, const RunSpec& run, MegatronMoeSpec* moe) {
  moe->ffn = run.model.mlp_dim;
  RETURN_IF_ERROR(g.Int("moe-ffn-hidden-size", &moe->ffn));
  RETURN_IF_ERROR(g.Int("moe-shared-expert-intermediate-size", &moe->shared_ffn));
  RETURN_IF_ERROR(g.Flag("moe-grouped-gemm", &moe->grouped_gemm));
  RETURN_IF_ERROR(g.Choice("moe-token-dispatcher-type", &moe->dispatcher, {"allgather", "alltoall"}));
  RETURN_IF_ERROR(g.Float("moe-expert-capacity-factor", &moe->capacity_factor, 1e-6, 1e6));
  RETURN_IF_ERROR(g.Flag("moe-pad-expert-input-to-capacity", &moe->pad_to_capacity));
  if (moe->capacity_factor > 0 && moe->dispatcher != "alltoall") {
    return g.Error("moe-expert-capacity-factor", "works with --moe-token-dispatcher-type alltoall only "
                                                 "(transformer_config.py)");
  }
  if (moe->pad_to_capacity && moe->capacity_factor == 0) {
    return g.Error("moe-pad-expert-input-to-capacity", "needs --moe-expert-capacity-factor");
  }
  std::string score = "softmax";
  RETURN_IF_ERROR(g.Choice("moe-router-score-function", &score, {"softmax", "sigmoid"}));
  if (score == "sigmoid") {
    return g.Error("moe-router-score-function", "not modelled: sigmoid routing scores are not modelled (softmax is)");
  }
  std::string balance = "aux_loss";
  RETURN_IF_ERROR(
      g.Choice("moe-router-load-balancing-type", &balance, {"aux_loss", "seq_aux_loss", "none", "sinkhorn"}));
  double coeff = 0;
  RETURN_IF_ERROR(g.Float("moe-aux-loss-coeff", &coeff, 0, 1e6));
  if (balance == "sinkhorn" && coeff > 0) {
    return g.Error("moe-aux-loss-coeff", "must be 0 with sinkhorn routing (router.py sinkhorn_load_balancing asserts it)");
  }
  moe->aux_loss = (balance == "aux_loss" || balance == "seq_aux_loss") && coeff > 0;
  if (const MegatronArg* f = g.Get("moe-layer-freq"); f != nullptr && f->value != "1") {
    return g.Error("moe-layer-freq", absl::StrCat("only 1 (every layer an MoE layer) is modelled; mixed dense and "
                                                  "MoE layers are not, got '", f->value, "'"));
  }
  if (run.megatron.bias_linear) {
    return g.Error("num-experts", "biases in the expert linears are not modelled: give --disable-bias-linear");
  }
  // Under --use-tp-pp-dp-mapping the expert ranks follow the same order
  // (Note [Megatron expert ranks], models/megatron_ranks.cc), and
  // parallel_state.initialize_model_parallel asserts that the attention and
  // MoE layers then share their data-parallel size when PP > 1.
  if (run.megatron.tp_pp_dp_mapping && run.megatron.pipeline > 1 && moe->edp != run.megatron.data) {
    return g.Error("use-tp-pp-dp-mapping",
                   absl::StrCat("with PP > 1 needs the expert data-parallel size (", moe->edp,
                                ") equal to the data-parallel size (", run.megatron.data,
                                "): Megatron's initialize_model_parallel asserts it when the order does not end "
                                "with pp"));
  }
  return absl::OkStatus();
}

// Note [Sinkhorn routing]: NVIDIA/Megatron-LM (57a02672) megatron/core/
// transformer/moe/router.py TopKRouter.sinkhorn_load_balancing, in training:
// under no_grad, moe_utils.py sinkhorn(logits in fp32) (a while loop until
// the mean change of its column scaling is under 1e-4; each test of the loop
// condition is a host sync) and top-k of the result; then the activation
// (sigmoid for top-1, else softmax in fp32 cast back) and scores = activation
// x the one-hot routing map. There is no aux loss (asserted). Memory: the
// no_grad [T, E] fp32 tensors are transient; the saved activation is the
// router_probs value of models/gpt_moe.cc ([T, E] fp32; top-1's sigmoid keeps
// it in the compute dtype, T x E x 2 B less, not modelled). Time: the loop's
// data-dependent iterations and syncs are not in the step time, and the
// argument says so in megatron.args.
void MarkSinkhornTime(const Args& g, RunSpec* run) {
  const MegatronArg* b = g.Get("moe-router-load-balancing-type");
  if (b == nullptr || b->value != "sinkhorn") return;
  for (auto& [name, what] : run->megatron.args) {
    if (name == "moe-router-load-balancing-type") {
      what = "not modelled (costs time): sinkhorn routing's iterations, each a host sync (Note [Sinkhorn routing])";
    }
  }
}

}  // namespace

absl::Status ApplyMoeArgs(const Args& g, RunSpec* run) {
  MegatronMoeSpec& moe = run->megatron.moe;
  for (const MoeArgRule& r : MoeArgRules()) {
    if (r.kind == MoeArgKind::kModelled && g.Has(r.name) && !g.Has("num-experts") &&
        std::string(r.name) != "num-experts") {
      // Megatron builds the expert groups of a dense model too
      // (core/parallel_state.py initialize_model_parallel takes
      // expert_tensor_parallel_size either way); no expert uses them.
      if (std::string(r.name) == "expert-tensor-parallel-size" || std::string(r.name) == "expert-model-parallel-size") {
        for (auto& [name, how] : run->megatron.args) {
          if (name == r.name) how = "no effect on memory or time: a dense model has no experts to split";
        }
        run->megatron.no_effect.push_back(r.name);
        continue;
      }
      return g.Error(r.name, "needs --num-experts (a mixture-of-experts model)");
    }
  }
  if (!g.Has("num-experts")) return absl::OkStatus();
  const int64_t tp = run->parallelism.tensor;
  RETURN_IF_ERROR(g.Int("num-experts", &moe.experts));
  RETURN_IF_ERROR(g.Int("moe-router-topk", &moe.topk));
  RETURN_IF_ERROR(g.Int("expert-model-parallel-size", &moe.ep));
  moe.etp = tp;
  RETURN_IF_ERROR(g.Int("expert-tensor-parallel-size", &moe.etp));
  if (moe.topk > moe.experts) return g.Error("moe-router-topk", "must be at most --num-experts");
  if (moe.experts % moe.ep != 0) return g.Error("expert-model-parallel-size", "must divide --num-experts");
  if (moe.ep > 1 && tp > 1 && !run->parallelism.sequence_parallel) {
    return g.Error("expert-model-parallel-size", "with TP > 1 needs --sequence-parallel (Megatron's validate_args)");
  }
  if (tp > 1 && !run->parallelism.sequence_parallel) {
    return g.Error("num-experts", "MoE with TP > 1 and no --sequence-parallel is not modelled");
  }
  const MegatronSpec& mg = run->megatron;
  const int64_t stage_ranks = mg.world_size / mg.pipeline;  // TP x CP x DP
  if (moe.ep * moe.etp > stage_ranks || stage_ranks % (moe.ep * moe.etp) != 0) {
    return g.Error("expert-model-parallel-size",
                   absl::StrCat("EP x ETP (", moe.ep, " x ", moe.etp, ") must divide TP x CP x DP (", stage_ranks, ")"));
  }
  moe.edp = stage_ranks / (moe.ep * moe.etp);
  RETURN_IF_ERROR(ApplyMoeOptions(g, *run, &moe));
  MarkSinkhornTime(g, run);
  if (moe.ffn % moe.etp != 0) {
    return g.Error("expert-tensor-parallel-size", "must divide --moe-ffn-hidden-size");
  }
  if (moe.shared_ffn % tp != 0) {
    return g.Error("moe-shared-expert-intermediate-size", "must be a multiple of TP");
  }
  return absl::OkStatus();
}

}  // namespace megatron_internal
}  // namespace gpusim
