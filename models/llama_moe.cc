// The llama layer's mixture-of-experts MLP (model.experts > 1): MaxText's
// MoeBlock as its dense_matmul runs it without capacity, the values the
// remat policy sees and their backward. See llama_builder.h.
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "models/llama_builder.h"

namespace gpusim {
namespace llama_internal {

// Note [MaxText MoE dense matmul]
// MaxText at 4bf3beaa (MaxText/layers/mistral.py:139-151, the mistral
// decoder block Mixtral uses) replaces the MLP of a layer with
// num_experts > 1 by linears.MoeBlock (layers/linears.py). Its params
// (generate_kernels :322, DenseGeneral `gate` :884-895) are
//   gate [D,E] (kernel_axes ("embed", None): D over fsdp),
//   wi_0, wi_1 [E,D,M] (wi_kernel_axes ("exp","embed_no_exp","mlp") :319),
//   wo [E,M,D] (wo_kernel_axes ("exp","mlp","embed_no_exp") :320),
// in weight_dtype, cast to dtype for use; E over the `expert` mesh axis,
// which gpusim does not model (ici_expert_parallelism is refused), so
// FSDP shards their embed axis and the layer gathers them whole, as the
// llama family's other weights (Gather, llama_state.cc).
// MoeBlock.__call__ (:898) runs dense_matmul (:708) when sparse_matmul is
// False, and its no-capacity branch (:831-862) when capacity_factor <= 0
// (configs/models/gpu/mixtral_8x1b.yml, mixtral_8x2b.yml): every token goes
// through all E experts, with static shapes.
//   gate_logits    [B,S,E]   x·gate, a dot with no batch dims        :884
//   top_k          [B,S,k]   jax.lax.top_k values and int32 indices  :713
//   router_probs   [B,S,k]   softmax over the k selected, f32 inside :718
//   router_weights [B,S,E]   zeros scattered at the indices          :510-520
//   mlpwi_0/1      [B,S,E,M] einsum BSM,EMH->BSEH (no batch dims),
//                            checkpoint_name mlpwi_0 / mlpwi_1       :834-846
//   act            [B,S,E,M] silu(mlpwi_0)·mlpwi_1                   :847-848
//   mlpwo          [B,S,E,D] einsum BSEH,EHM->BSEM (E a batch dim),
//                            checkpoint_name mlpwo                   :850-855
//   moe_out        [B,S,D]   einsum BSEM,BSE->BSM (B,S batch dims)   :856-861
// so a remat policy sees only the names mlpwi_0, mlpwi_1 and mlpwo, and
// `minimal` (checkpoint_dots_with_no_batch_dims) saves gate_logits, mlpwi_0
// and mlpwi_1 but not mlpwo nor moe_out. The FFN costs 3·2·T·E·D·M, E/k
// times the dropless count MaxText's TFLOP formula uses
// (maxtext_utils.py:186-194). dense_matmul also computes
// load_balance_loss (:723-726), but this branch returns (output, None)
// (:862): the loss reaches no output and XLA removes it (dead code), so it
// is not built. Shapes do not depend on routing: Note [MaxText MoE routing
// figures] (sim/report/render.cc).

void LlamaBuilder::AppendMoeMlp(std::vector<LayerValue>& n, const std::string& h2) const {
  const double T = static_cast<double>(T_), E = static_cast<double>(E_), K = static_cast<double>(Ek_);
  const double D = static_cast<double>(D_), M = static_cast<double>(M_);
  LayerValue gate{"gate_logits", {B_, S_, E_}, cdt_, OpKind::kMatmul, {h2, "W:gate"}, 2 * T * D * E, "", true, false,
                  {"h2"}};
  gate.m = T_; gate.n = E_; gate.k = D_;
  n.push_back(std::move(gate));
  n.push_back({"router_topk_idx", {B_, S_, Ek_}, DType::kI32, OpKind::kReduce, {"gate_logits"}, T * E, ""});
  n.push_back({"router_topk", {B_, S_, Ek_}, cdt_, OpKind::kReduce, {"gate_logits"}, T * E, "", false, false,
               {"router_topk_idx"}});
  n.push_back({"router_probs", {B_, S_, Ek_}, cdt_, OpKind::kElementwise, {"router_topk"}, 5 * T * K, "", false,
               false, {"router_probs"}});
  n.push_back({"router_weights", {B_, S_, E_}, cdt_, OpKind::kScatter, {"router_probs", "router_topk_idx"}, T * K, "",
               false, false, {"router_topk_idx"}});
  for (const auto& [w, param] : {std::pair<const char*, const char*>{"mlpwi_0", "W:wi_0"}, {"mlpwi_1", "W:wi_1"}}) {
    LayerValue wi{w, {B_, S_, E_, M_}, cdt_, OpKind::kMatmul, {h2, param}, 2 * T * D * E * M, w, true, false, {"h2"}};
    wi.m = T_; wi.n = E_ * M_; wi.k = D_;
    n.push_back(std::move(wi));
  }
  n.push_back({"act", {B_, S_, E_, M_}, cdt_, OpKind::kElementwise, {"mlpwi_0", "mlpwi_1"}, 5 * T * E * M, "", false,
               false, {"mlpwi_0", "mlpwi_1"}});
  LayerValue wo{"mlpwo", {B_, S_, E_, D_}, cdt_, OpKind::kMatmul, {"act", "W:wo_mlp"}, 2 * T * E * M * D, "mlpwo",
                true, true, {"act"}};
  wo.m = T_; wo.n = D_; wo.k = M_; wo.batch = E_;
  n.push_back(std::move(wo));
  LayerValue sum{"moe_out", {B_, S_, D_}, cdt_, OpKind::kMatmul, {"mlpwo", "router_weights"}, 2 * T * E * D, "",
                 true, true, {"mlpwo", "router_weights"}};
  sum.m = D_; sum.n = 1; sum.k = E_; sum.batch = T_;
  n.push_back(std::move(sum));
}

TensorId LlamaBuilder::BatchedMatmul(const std::string& name, std::vector<TensorId> ins, std::vector<int64_t> shape,
                                     int64_t m, int64_t n, int64_t k, int64_t batch) {
  TensorId out = Grad(name, std::move(shape), cdt_);
  Op& op = b_.AddOp(name, OpKind::kMatmul, std::move(ins), {out}, 2.0 * static_cast<double>(batch) * m * n * k);
  op.dtype = cdt_;
  op.m = m; op.n = n; op.k = k; op.batch = batch;
  return out;
}

// The backward of AppendMoeMlp's values (the VJPs of the einsums, the
// scatter, the softmax and top_k): returns the gradient of the MLP input
// h2. REQUIRES: t_ == 1 (CheckLlamaParallelism).
TensorId LlamaBuilder::MoeMlpBackward(int l, std::map<std::string, TensorId>& v, TensorId dy) {
  const std::string pre = absl::StrCat("layer", l, ".");
  const double T = static_cast<double>(T_), K = static_cast<double>(Ek_);
  // moe_out = einsum(mlpwo, router_weights): both operands' gradients.
  TensorId d_mlpwo = BatchedMatmul(pre + "d_moe_out.d_mlpwo", {dy, v.at("router_weights")}, {B_, S_, E_, D_}, D_, E_,
                                   1, T_);
  TensorId d_rw = BatchedMatmul(pre + "d_moe_out.d_router_weights", {dy, v.at("mlpwo")}, {B_, S_, E_}, E_, 1, D_, T_);
  // mlpwo = einsum(act, wo) batched over E: dX and dW per expert.
  TensorId d_act = BatchedMatmul(pre + "d_wo_mlp.dx", {d_mlpwo, v.at("W:wo_mlp")}, {B_, S_, E_, M_}, T_, M_, D_, E_);
  TensorId d_wo = BatchedMatmul(pre + "d_wo_mlp.dw", {v.at("act"), d_mlpwo}, {E_, M_, D_}, M_, D_, T_, E_);
  ReduceGrad("wo_mlp", l, d_wo);
  TensorId d_wi = Elementwise(pre + "d_swiglu", {d_act, v.at("mlpwi_0"), v.at("mlpwi_1")}, {B_, S_, E_, 2, M_},
                              8.0 * T * static_cast<double>(E_ * M_), cdt_);
  const TensorId h2 = v.at("h2");
  TensorId d_h2a = DenseBackward(l, "wi_0", h2, d_wi, v.at("W:wi_0"), D_, E_ * M_, {B_, S_, D_});
  TensorId d_h2b = DenseBackward(l, "wi_1", h2, d_wi, v.at("W:wi_1"), D_, E_ * M_, {B_, S_, D_});
  // Router: the scatter's VJP gathers at the indices, the softmax's reads
  // its output, top_k's scatters back to [B,S,E]; then the gate's dX, dW.
  TensorId d_probs = Grad(pre + "d_router_weights.gather", {B_, S_, Ek_}, cdt_);
  b_.AddOp(pre + "d_router_weights.gather", OpKind::kGather, {d_rw, v.at("router_topk_idx")}, {d_probs}, 0);
  TensorId d_topk = Elementwise(pre + "d_router_softmax", {d_probs, v.at("router_probs")}, {B_, S_, Ek_}, 4 * T * K,
                                cdt_);
  TensorId d_logits = Grad(pre + "d_top_k.scatter", {B_, S_, E_}, cdt_);
  b_.AddOp(pre + "d_top_k.scatter", OpKind::kScatter, {d_topk, v.at("router_topk_idx")}, {d_logits}, T * K);
  TensorId d_h2g = DenseBackward(l, "gate", h2, d_logits, v.at("W:gate"), D_, E_, {B_, S_, D_});
  return Elementwise(pre + "d_h2", {d_h2a, d_h2b, d_h2g}, {B_, S_, D_}, 2.0 * T * static_cast<double>(D_), cdt_);
}

}  // namespace llama_internal
}  // namespace gpusim
