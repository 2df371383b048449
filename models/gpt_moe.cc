// The gpt builder's mixture-of-experts MLP (Megatron launch lines with
// --num-experts): the router, the token dispatcher's buffers and
// collectives, the experts and the shared experts, as layer values; the
// expert parameters; the dispatched token counts of the two routing cases.
// See gpt_builder.h.
//
// Note [Megatron MoE layer]: after NVIDIA/Megatron-LM (core_r0.12, 2025)
// megatron/core/transformer/moe/:
//  - moe_layer.py MoELayer.forward: route, dispatch, experts, combine, plus
//    the shared experts (shared_experts.py SharedExpertMLP, a dense MLP of
//    --moe-shared-expert-intermediate-size, TP-split like the dense MLP);
//  - router.py TopKRouter: logits = input x W_router [h, E] (the compute
//    dtype), then Note [Megatron MoE router]; with the aux loss
//    (switch_load_balancing_loss_func, seq_aux_loss alike) a second fp32
//    softmax over all experts is kept for its backward, attached to the
//    probs by MoEAuxLossAutoScaler;
//  - token_dispatcher.py MoEAlltoAllTokenDispatcher: permute (moe_utils.py
//    permute, an index_select into [T x topk, h]), all-to-all over the EP
//    group, all-gather over the ETP group when ETP > 1, sort_chunks_by_idxs
//    into expert order when a rank holds several experts; the combine runs
//    the inverse (reduce-scatter over ETP, all-to-all back) and unpermute
//    scatter-adds. Since core_r0.13 the routing weights travel with the
//    tokens (permute(..., probs=...)) and scale the experts' activation
//    (experts.py TEGroupedMLP: activation_func_with_probs, its backward
//    reading fc1's output and the [n] permuted weights), so unpermute runs
//    without probs and keeps only the permutation's map (NVIDIA/Megatron-LM
//    23e00ed and 57a02672 token_dispatcher.py token_unpermutation /
//    combine_postprocess): the sorted indices, an i64 per permuted row
//    (moe_utils.py permute: index_select; unpermute: scatter_add), or with
//    --moe-permute-fusion TE's row_id_map, int32 [T, 2E + 1]
//    (TransformerEngine v2.11 pytorch/permutation.py _moe_permute_mask_map
//    and _moe_unpermute_mask_map save only it);
//    MoEAllGatherTokenDispatcher: the hidden states and probs all-gathered
//    over the TP x EP group (ETP x EP ranks), the local experts' tokens
//    permuted out of them; the combine scatter-adds into the gathered
//    layout and reduce-scatters it back;
//  - experts.py TEGroupedMLP (--moe-grouped-gemm): one grouped GEMM per
//    projection over the rank's experts; SequentialMLP: one GEMM per expert
//    (the backward here sums each expert's input gradient into the full
//    [N, h] one, a transient the real split/cat does not hold twice).
// Every all-to-all is priced as an all-gather of the buffer it receives:
// each rank sends and receives (EP - 1)/EP of it, as a ring all-gather does
// (sim/device/collective_model.h has no all-to-all; the latency term is
// the ring's). Expert biases are refused at parse time.
//
// Note [Megatron MoE router]: NVIDIA/Megatron-LM 23e00ed moe_utils.py
// topk_softmax_with_capacity: with --moe-router-pre-softmax the softmax over
// all E experts in fp32 (its [T, E] result saved), then top-k; without it
// top-k of the logits and the softmax over the k picked, [T, k] saved.
// --moe-router-score-function sigmoid: sigmoid(logits.float()), its fp32
// [T, E] result saved, then top-k (of the scores plus the expert bias under
// --moe-router-enable-expert-bias, gathered back from the scores) and the
// division by their sum ([T, k]). The expert bias and the forward's
// local_tokens_per_expert are fp32 [E] buffers of the router (router.py
// TopKRouter.__init__ register_buffer); finalize_model_grads.py
// _update_router_expert_bias all-reduces the stacked token counts over the
// TP x CP x DP group once a step (moe_utils.py get_updated_expert_bias).
// Group-limited routing (--moe-router-num-groups G, --moe-router-group-topk
// g; group_limited_topk) scores each group by the sum of its top-(k / g),
// keeps the best g groups and masks the rest with masked_fill: the boolean
// [T, E] mask is saved, the group scores are transient (about ten small
// kernels). The [T, k] top-k indices and --moe-router-topk-scaling-factor's
// product are a few KiB and not modelled.
//
// Note [Megatron fp32 router]: NVIDIA/Megatron-LM 23e00ed moe_utils.py
// RouterGatingLinearFunction with --moe-router-dtype fp32: the forward GEMM
// (te_general_gemm) reads the compute-dtype input and weight and writes fp32
// logits [T, E]; it saves the input (ln2, kept anyway) and the weight. Its
// backward casts the weight to fp32 [E, h], computes the input gradient in
// fp32 [T, h] and casts it back, then casts the input to fp32 [T, h] for the
// weight gradient: three fp32 transients of the backward, its GEMMs in
// fp32 (RouterFp32Backward, gpt_moe.cc).
//
// Note [MoE routing cases]: routing is data-dependent; with T tokens per
// rank (after CP and SP), E experts, E_l = E/EP on a rank, k = topk:
//  - balanced: every expert gets T x k / E tokens from every rank: a rank's
//    experts get T x k (x ETP gathered);
//  - bound: with --moe-expert-capacity-factor C the capacity per expert and
//    source rank, cap = ceil(T x k / E x C) (moe_utils.py get_capacity), so
//    at most EP x E_l x cap (x ETP); without it every token of the EP group
//    on this rank's experts: EP x T x min(k, E_l) (x ETP);
//  - --moe-pad-expert-input-to-capacity: both are EP x E_l x cap, and the
//    rank sends E x cap.
// sim/step/megatron_step.cc simulates both; the bound decides "fits".
#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "models/gpt_builder.h"

namespace gpusim {
namespace gpt_internal {

MoeTokens GptBuilder::MoeTokenCounts() const {
  const MegatronMoeSpec& e = g_.moe;
  const int64_t T = Ssp() * B_, local = e.experts / e.ep;
  MoeTokens c;
  const int64_t cap = e.capacity_factor > 0
                          ? static_cast<int64_t>(std::ceil(static_cast<double>(T * e.topk) /
                                                           static_cast<double>(e.experts) * e.capacity_factor))
                          : 0;
  c.sent = e.pad_to_capacity ? e.experts * cap : T * e.topk;
  const int64_t worst = e.ep * T * std::min(e.topk, local);
  int64_t n = T * e.topk;
  if (e.pad_to_capacity) {
    n = e.ep * local * cap;
  } else if (g_.moe.routing == "bound") {
    n = cap > 0 ? std::min(e.ep * local * cap, worst) : worst;
  }
  c.received = n;
  c.expert = n * e.etp;
  return c;
}

std::pair<int64_t, MegatronGroup> GptBuilder::GroupOf(const LayerValue& v) const {
  if (absl::StartsWith(v.name, "moe_")) {
    if (v.name == "moe_gathered" || v.name == "moe_gathered_probs" || v.name == "moe_routed") {
      return {g_.moe.ep * g_.moe.etp, MegatronGroup::kExpertTensorExpert};
    }
    if (v.name == "moe_dispatched" || v.name == "moe_combined") return {g_.moe.ep, MegatronGroup::kExpert};
    return {g_.moe.etp, MegatronGroup::kExpertTensor};
  }
  if (v.group > 0) return {v.group, MegatronGroup::kContext};
  return {t_, MegatronGroup::kTensor};
}

std::vector<std::pair<std::string, std::vector<int64_t>>> GptBuilder::MoeParamShapes() const {
  const MegatronMoeSpec& e = g_.moe;
  const int64_t local = e.experts / e.ep, f1 = (g_.swiglu ? 2 : 1) * e.ffn;
  std::vector<std::pair<std::string, std::vector<int64_t>>> out = {{"w_router", {H_, e.experts}}};
  if (e.grouped_gemm) {
    out.push_back({"w_exp_fc1", {local, H_, f1 / e.etp}});
    out.push_back({"w_exp_fc2", {local, e.ffn / e.etp, H_}});
  } else {
    for (int64_t x = 0; x < local; ++x) {
      out.push_back({absl::StrCat("w_exp", x, "_fc1"), {H_, f1 / e.etp}});
      out.push_back({absl::StrCat("w_exp", x, "_fc2"), {e.ffn / e.etp, H_}});
    }
  }
  if (e.shared_ffn > 0) {
    out.push_back({"w_sh_fc1", {H_, (g_.swiglu ? 2 : 1) * e.shared_ffn / t_}});
    out.push_back({"w_sh_fc2", {e.shared_ffn / t_, H_}});
  }
  return out;
}

bool IsExpertParam(const std::string& name) { return absl::StrContains(name, ".w_exp"); }

// The experts: one grouped GEMM per projection, or one GEMM per expert.
void GptBuilder::AddExperts(std::vector<LayerValue>* out, const std::string& in, int64_t n_tok,
                            const std::string& probs) const {
  const MegatronMoeSpec& e = g_.moe;
  const int64_t local = e.experts / e.ep, f = e.ffn / e.etp, f1 = (g_.swiglu ? 2 : 1) * f;
  const double h = static_cast<double>(H_);
  const int64_t groups = e.grouped_gemm ? 1 : local;
  std::vector<std::string> outs;
  for (int64_t x = 0; x < groups; ++x) {
    const std::string p = e.grouped_gemm ? "exp" : absl::StrCat("exp", x);
    const int64_t rows = e.grouped_gemm ? n_tok : (n_tok + local - 1) / local;
    const double r = static_cast<double>(rows);
    LayerValue fc1{p + "_fc1", {rows, f1}, cdt_, OpKind::kMatmul, {in, "W:w_" + p + "_fc1"},
                   2 * r * h * static_cast<double>(f1), "moe_expert_fc1", true, false, {in}};
    fc1.m = e.grouped_gemm ? (rows + local - 1) / local : rows;
    fc1.n = f1; fc1.k = H_; fc1.batch = e.grouped_gemm ? local : 1;
    out->push_back(fc1);
    // The routing weights scale the activation (Note [Megatron MoE layer]).
    // SwiGLU: one fused kernel (fused_bias_swiglu.py weighted_bias_swiglu_impl)
    // whose backward reads fc1's output (and the [n] permuted weights).
    // Otherwise (NVIDIA/Megatron-LM 57a02672 mlp.py MLP.forward, experts.py
    // activation_func_with_probs) the activation, then a multiply by the
    // weights, which keeps the activation's output for its backward (the
    // multiply's own output is fc2's saved input; its cast back to the
    // compute dtype when the weights are fp32 is a transient not modelled).
    std::string act = p + "_act";
    if (g_.swiglu) {
      out->push_back({act, {rows, f}, cdt_, OpKind::kElementwise, {p + "_fc1", probs}, 9 * r * static_cast<double>(f),
                      "", false, false, {p + "_fc1"}});
    } else {
      out->push_back({p + "_act_unscaled", {rows, f}, cdt_, OpKind::kElementwise, {p + "_fc1"},
                      8 * r * static_cast<double>(f), "", false, false, {p + "_fc1"}});
      out->push_back({act, {rows, f}, cdt_, OpKind::kElementwise, {p + "_act_unscaled", probs},
                      r * static_cast<double>(f), "", false, false, {p + "_act_unscaled"}});
    }
    LayerValue fc2{p + "_fc2", {rows, H_}, cdt_, OpKind::kMatmul, {act, "W:w_" + p + "_fc2"},
                   2 * r * h * static_cast<double>(f), "moe_expert_fc2", true, false, {act}};
    fc2.m = fc1.m; fc2.n = H_; fc2.k = f; fc2.batch = fc1.batch;
    out->push_back(fc2);
    outs.push_back(p + "_fc2");
  }
  if (!e.grouped_gemm) {
    out->push_back({"exp_out", {n_tok, H_}, cdt_, OpKind::kElementwise, outs, static_cast<double>(n_tok) * h, "",
                    false, false, {}});
  }
}

// The MoE MLP after ln2 (Note [Megatron MoE layer]); its last value is
// "fc2", the MLP output [s/t, b, h] the residual add reads.
void GptBuilder::AddMoeValues(std::vector<LayerValue>* out) const {
  const MegatronMoeSpec& e = g_.moe;
  const int64_t T = Ssp() * B_, E = e.experts, local = E / e.ep;
  const double t = static_cast<double>(T), h = static_cast<double>(H_), ex = static_cast<double>(E);
  const MoeTokens c = MoeTokenCounts();
  auto add = [&](LayerValue v) { out->push_back(std::move(v)); };
  // Note [Megatron fp32 router]: --moe-router-dtype fp32 writes fp32 logits.
  LayerValue router{"router_logits", {T, E}, e.router_fp32 ? DType::kF32 : cdt_, OpKind::kMatmul,
                    {"ln2", "W:w_router"}, 2 * t * h * ex, "moe_router", true, false, {"ln2"}};
  router.m = T; router.n = E; router.k = H_;
  add(router);
  // Note [Megatron MoE router]: the softmax over every expert (pre-softmax)
  // or over the top-k logits, in fp32, its result saved.
  const int64_t scored = e.pre_softmax || e.sigmoid ? E : e.topk;
  add({"router_probs", {T, scored}, DType::kF32, OpKind::kElementwise, {"router_logits"},
       6 * t * static_cast<double>(scored), "", false, false, {"router_probs"}});
  std::string probs = "router_probs";
  if (e.router_groups > 0) {
    // group_limited_topk: the masked_fill's boolean expert mask, saved.
    add({"router_group_mask", {T, E}, DType::kU8, OpKind::kElementwise, {probs}, 10 * t * ex, "", false, false, {}});
    add({"router_group_probs", {T, E}, DType::kF32, OpKind::kElementwise, {probs, "router_group_mask"}, t * ex, "",
         false, false, {"router_group_mask"}});
    probs = "router_group_probs";
  }
  if (e.aux_loss) {
    add({"aux_scores", {T, E}, DType::kF32, OpKind::kElementwise, {"router_logits"}, 5 * t * ex, "", false, false,
         {"aux_scores"}});
    add({"probs_aux", {T, E}, DType::kF32, OpKind::kElementwise, {probs, "aux_scores"}, t * ex, "", false,
         false, {}});
    probs = "probs_aux";
  }
  add({"routing_map", {T, E}, DType::kU8, OpKind::kElementwise, {probs}, t * ex, "", false, false, {}});
  // The permutation's map, saved for the permute's and the unpermute's
  // backward (Note [Megatron MoE layer]): TE's row_id_map under
  // --moe-permute-fusion, else the sorted indices.
  const int64_t permuted = e.dispatcher == "allgather" ? c.expert : c.sent;
  LayerValue map = e.permute_fusion
                       ? LayerValue{"moe_permute_map", {T * (e.dispatcher == "allgather" ? e.ep * e.etp : 1), 2 * E + 1},
                                    DType::kI32, OpKind::kElementwise, {"routing_map"}, t * ex, "", false, false, {}}
                       : LayerValue{"moe_permute_map", {permuted}, DType::kI64, OpKind::kElementwise, {"routing_map"},
                                    t * ex, "", false, false, {}};
  std::string cur;
  if (e.dispatcher == "allgather") {
    const int64_t g = e.ep * e.etp, tg = T * g;
    std::string src = "ln2", p_src = probs;
    if (g > 1) {
      add({"moe_gathered", {tg, H_}, cdt_, OpKind::kAllGather, {"ln2"}, 0, "", false, false, {}});
      add({"moe_gathered_probs", {tg, E}, DType::kF32, OpKind::kAllGather, {probs}, 0, "", false, false, {}});
      src = "moe_gathered", p_src = "moe_gathered_probs";
    }
    add(map);
    add({"exp_in", {c.expert, H_}, cdt_, OpKind::kElementwise, {src, "moe_permute_map"},
         static_cast<double>(c.expert) * h, "", false, false, {"moe_permute_map"}});
    AddExperts(out, "exp_in", c.expert, p_src);
    const std::string eo = e.grouped_gemm ? "exp_fc2" : "exp_out";
    const std::vector<int64_t> shape = g > 1 ? std::vector<int64_t>{tg, H_} : std::vector<int64_t>{Ssp(), B_, H_};
    add({"moe_unpermuted", shape, cdt_, OpKind::kElementwise, {eo, "moe_permute_map"},
         2 * static_cast<double>(c.expert) * h, "", false, false, {"moe_permute_map"}});
    cur = "moe_unpermuted";
    if (g > 1) {
      add({"moe_routed", {Ssp(), B_, H_}, cdt_, OpKind::kReduceScatter, {cur}, 0, "", false, false, {}});
      cur = "moe_routed";
    }
  } else {
    add(map);
    add({"moe_permuted", {c.sent, H_}, cdt_, OpKind::kElementwise, {"ln2", "moe_permute_map"},
         static_cast<double>(c.sent) * h, "", false, false, {"moe_permute_map"}});
    cur = "moe_permuted";
    if (e.ep > 1) {
      add({"moe_dispatched", {c.received, H_}, cdt_, OpKind::kAllGather, {cur}, 0, "", false, false, {}});
      cur = "moe_dispatched";
    }
    if (e.etp > 1) {
      add({"moe_etp_gathered", {c.expert, H_}, cdt_, OpKind::kAllGather, {cur}, 0, "", false, false, {}});
      cur = "moe_etp_gathered";
    }
    if (local > 1) {
      add({"exp_in", {c.expert, H_}, cdt_, OpKind::kElementwise, {cur}, static_cast<double>(c.expert) * h, "", false,
           false, {}});
      cur = "exp_in";
    }
    AddExperts(out, cur, c.expert, probs);
    cur = e.grouped_gemm ? "exp_fc2" : "exp_out";
    if (local > 1) {
      add({"moe_unsorted", {c.expert, H_}, cdt_, OpKind::kElementwise, {cur}, static_cast<double>(c.expert) * h, "",
           false, false, {}});
      cur = "moe_unsorted";
    }
    if (e.etp > 1) {
      add({"moe_etp_scattered", {c.received, H_}, cdt_, OpKind::kReduceScatter, {cur}, 0, "", false, false, {}});
      cur = "moe_etp_scattered";
    }
    if (e.ep > 1) {
      add({"moe_combined", {c.sent, H_}, cdt_, OpKind::kAllGather, {cur}, 0, "", false, false, {}});
      cur = "moe_combined";
    }
    add({"moe_unpermuted", {Ssp(), B_, H_}, cdt_, OpKind::kElementwise, {cur, "moe_permute_map"},
         2 * static_cast<double>(c.sent) * h, "", false, false, {"moe_permute_map"}});
    cur = "moe_unpermuted";
  }
  if (e.shared_ffn == 0) {
    out->back().name = "fc2";
    return;
  }
  AddSharedExperts(out, cur);
}

// Note [MoE dispatch syncs]: the token dispatchers need the routed token
// counts on the host (NVIDIA/Megatron-LM 57a02672 megatron/core/transformer/
// moe/token_dispatcher.py), so every MoE layer's forward (and its
// recompute) stops the host until the device has caught up (Note [Host
// syncs], sim/engine/engine.h):
//  - MoEAllGatherTokenDispatcher.dispatch_postprocess: tokens_per_expert =
//    local_map.sum(dim=0).long().cpu() after the gathered routing map (a
//    blocking device-to-host copy), then after the permute
//    local_probs.masked_select(local_map), whose output size the host must
//    read (a data-dependent shape): two syncs;
//  - MoEAlltoAllTokenDispatcher: the counts copied device-to-host at
//    before_permutation_1 and waited for at cuda_sync_point
//    (_maybe_dtoh_and_synchronize), before_ep_alltoall under EP or TP > 1
//    and otherwise later in the dispatch: one sync, taken here after the
//    first permutation.
// Without the syncs the host would run ahead of a small MoE model's GPU
// through the whole forward.
bool GptBuilder::MoeSyncsAfter(const std::string& value) const {
  const MegatronMoeSpec& e = g_.moe;
  if (e.dispatcher == "allgather") {
    return value == (e.ep * e.etp > 1 ? "moe_gathered_probs" : "routing_map") || value == "exp_in";
  }
  // --moe-pad-expert-input-to-capacity: the splits are static
  // (MoEAlltoAllTokenDispatcher.preprocess under drop_and_pad; NVIDIA/
  // Megatron-LM 23e00ed _maybe_dtoh_and_synchronize does nothing then).
  return !e.pad_to_capacity && value == "moe_permuted";
}

// Shared experts (shared_experts.py SharedExpertMLP): a dense TP-split MLP
// on the (SP-gathered) ln2, added to the routed output.
void GptBuilder::AddSharedExperts(std::vector<LayerValue>* out, const std::string& routed) const {
  const double s = static_cast<double>(S_), b = static_cast<double>(B_), h = static_cast<double>(H_);
  const int64_t fs = g_.moe.shared_ffn / t_, f1s = (g_.swiglu ? 2 : 1) * fs;
  auto add = [&](LayerValue v) { out->push_back(std::move(v)); };
  std::string in = "ln2";
  if (sp_) {
    add({"ln2_full", {S_, B_, H_}, cdt_, OpKind::kAllGather, {"ln2"}, 0, "", false, false, {}});
    in = "ln2_full";
  }
  LayerValue fc1{"sh_fc1", {S_, B_, f1s}, cdt_, OpKind::kMatmul, {in, "W:w_sh_fc1"},
                 2 * s * b * h * static_cast<double>(f1s), "moe_shared_fc1", true, false, {"ln2"}};
  fc1.m = S_ * B_; fc1.n = f1s; fc1.k = H_;
  add(fc1);
  add({"sh_act", {S_, B_, fs}, cdt_, OpKind::kElementwise, {"sh_fc1"}, 8 * s * b * static_cast<double>(fs), "", false,
       false, {"sh_fc1"}});
  LayerValue fc2{"sh_fc2_partial", {S_, B_, H_}, cdt_, OpKind::kMatmul, {"sh_act", "W:w_sh_fc2"},
                 2 * s * b * h * static_cast<double>(fs), "moe_shared_fc2", true, false, {"sh_act"}};
  fc2.m = S_ * B_; fc2.n = H_; fc2.k = fs;
  add(fc2);
  add({"sh_fc2", {Ssp(), B_, H_}, cdt_, sp_ ? OpKind::kReduceScatter : OpKind::kAllReduce, {"sh_fc2_partial"}, 0, "",
       false, false, {}});
  add({"fc2", {Ssp(), B_, H_}, cdt_, OpKind::kElementwise, {routed, "sh_fc2"}, static_cast<double>(Ssp()) * b * h, "",
       false, false, {}});
}

// Note [Megatron fp32 router]: the router GEMM's backward under
// --moe-router-dtype fp32; dx of the router's input added into `g`.
void GptBuilder::RouterFp32Backward(const std::string& pre, int l, const LayerValue& n, TensorId dout, TensorId xin,
                                    std::map<std::string, TensorId>* g) {
  const Tensor in = b_.tensor(xin);  // copies: AddTensor may reallocate
  const TensorId w = Param(l, n.param());
  const Tensor wt = b_.tensor(w);
  const TensorId w32 = b_.AddTensor(pre + "router.weight_fp32", wt.shape, DType::kF32, Role::kTemporary,
                                    "the router weight cast to fp32 for its backward");
  b_.AddOp(pre + "router.weight_fp32", OpKind::kConvert, {w}, {w32}, static_cast<double>(wt.elements()));
  const TensorId dx32 = b_.AddTensor(pre + "router_logits.dx_fp32", in.shape, DType::kF32, Role::kTemporary,
                                     "the router input's gradient in fp32");
  Op& x = b_.AddOp(pre + "router_logits.dx", OpKind::kMatmul, {dout, w32}, {dx32}, n.flops);
  x.m = n.m; x.n = n.k; x.k = n.n;
  x.dtype = DType::kF32;
  const TensorId dx = b_.AddTensor(pre + n.inputs[0] + ".router_logits", in.shape, cdt_, Role::kTemporary,
                                   "gradient of " + n.inputs[0]);
  b_.AddOp(pre + "router_logits.dx_cast", OpKind::kConvert, {dx32}, {dx}, static_cast<double>(in.elements()));
  const TensorId in32 = b_.AddTensor(pre + "router.input_fp32", in.shape, DType::kF32, Role::kTemporary,
                                     "the router input cast to fp32 for the weight gradient");
  b_.AddOp(pre + "router.input_fp32", OpKind::kConvert, {xin}, {in32}, static_cast<double>(in.elements()));
  WeightGrad(absl::StrCat("layer", l, ".", n.param()), {in32, dout}, OpKind::kMatmul, n.flops, n.k, n.n, n.m,
             DType::kF32);
  AddGrad(*g, n.inputs[0], dx);
}

}  // namespace gpt_internal
}  // namespace gpusim
