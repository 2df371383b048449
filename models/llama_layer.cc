// The llama decoder layer: its table of forward values, their emission for
// the forward pass and as recompute, the backward ops, and tensor / sequence
// parallelism (Note [Llama tensor parallelism]). See llama_builder.h.
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "models/llama_builder.h"

namespace gpusim {
namespace llama_internal {

// Note [Llama tensor parallelism]
// parallelism.tensor = t splits each layer over a group of t devices that
// process the same batch (batch.per_device is a model replica's batch).
// Weights: the heads, KV heads, MLP and vocabulary axes are split over t,
// the embed axis stays the FSDP axis.
//  - pytorch follows Megatron-LM (Korthikanti et al. 2022, arXiv
//    2205.05198, Sec. 4 and Table 2; megatron/core/tensor_parallel/
//    layers.py at d98e8a64): wq/wk/wv and wi_0/wi_1 are ColumnParallelLinear
//    (output dim split), wo and wo_mlp RowParallelLinear (input dim split),
//    the embedding VocabParallelEmbedding and the output layer a
//    vocab-split ColumnParallelLinear; RMSNorm scales are replicated. The
//    residual stream (x, the norm outputs, x1) is replicated [B,S,D]
//    without SP: the row-parallel output is all-reduced (g), and the
//    column-parallel input gradient all-reduced in backward (f,
//    LinearWithGradAccumulationAndAsyncCommunication.backward). With
//    sequence parallelism it is [B,S/t,D]: all-gather before each
//    column-parallel GEMM, reduce-scatter after each row-parallel one, the
//    conjugates in backward; the saved input is the sharded one and is
//    all-gathered again for dW (the same backward); the norm-scale
//    gradients are all-reduced over the group
//    (finalize_model_grads.py _allreduce_non_tensor_model_parallel_grads).
//    Megatron turns SP off when t = 1 (training/arguments.py); here that
//    combination is refused by name.
//  - jax follows MaxText's logical-axis rules (MaxText/configs/base.yml
//    logical_axis_rules at 4bf3beaa): vocab, heads, kv_heads, mlp and norm
//    map to the mesh axes `tensor` and `tensor_sequence`, embed to fsdp; the
//    decoder layer (layers/llama2.py) constrains its input, norm outputs,
//    attention and MLP outputs to (activation_batch,
//    activation_norm_length, activation_embed). With ici_tensor_parallelism
//    = t (sequence_parallel false) activation_embed -> tensor shards the
//    residual stream on embed, [B,S,D/t]: the RMSNorm's sum of squares is
//    all-reduced ([B,S] f32), the norm output all-gathered on embed before
//    each projection and the projections' outputs reduce-scattered back.
//    With ici_tensor_sequence_parallelism = t (sequence_parallel true)
//    activation_norm_length -> tensor_sequence shards it on length,
//    [B,S/t,D], as Megatron's SP does; the norm scales (sharded over
//    tensor_sequence) are all-gathered for use, their gradients
//    reduce-scattered. Attention activations are [B,S,H/t,Dh]
//    (activation_heads, activation_kv_heads), MLP ones [B,S,M/t]
//    (activation_mlp), logits [B,S,V/t] (activation_vocab).
// Both: the vocab-split cross-entropy all-reduces its max and sum of
// exponentials over the group (Megatron cross_entropy.py
// _VocabParallelCrossEntropy also all-reduces the target logit), and the
// global gradient norm is all-reduced over all FSDP x TP devices.

// A collective over the tensor-parallel group.
TensorId LlamaBuilder::TpCollective(const std::string& name, OpKind kind, TensorId in, std::vector<int64_t> shape,
                                    DType dt, const std::string& origin) {
  TensorId out = b_.AddTensor(name, std::move(shape), dt, Role::kTemporary, origin);
  b_.AddOp(name, kind, {in}, {out}, 0).group = t_;
  return out;
}

// The residual-stream value `in` gathered to [B,S,D] for a column-parallel
// GEMM (or the logits); `in` itself when the stream is not sharded.
TensorId LlamaBuilder::GatherResidual(const std::string& name, TensorId in) {
  if (!ResidualSharded()) return in;
  return TpCollective(name, OpKind::kAllGather, in, {B_, S_, D_}, b_.tensor(in).dtype,
                      "residual stream all-gathered over the tensor-parallel group");
}

// A [B,S,D] partial sum (a row-parallel output, or the input gradient of
// column-parallel GEMMs) reduced over the group to the residual stream.
TensorId LlamaBuilder::ReducePartial(const std::string& name, TensorId partial) {
  if (t_ == 1) return partial;
  return TpCollective(name, ResidualSharded() ? OpKind::kReduceScatter : OpKind::kAllReduce, partial, Rs(),
                      b_.tensor(partial).dtype, "partial sums reduced over the tensor-parallel group");
}

// jax, embed-sharded stream: RMSNorm's per-token sum of squares (forward)
// or of dy·g·x (backward) is a partial sum over the local embed slice,
// all-reduced over the group.
TensorId LlamaBuilder::NormStatistic(const std::string& name, std::vector<TensorId> ins) {
  TensorId local = b_.AddTensor(name + ".local", {B_, Rs()[1]}, DType::kF32, Role::kTemporary,
                                "RMSNorm partial sum over the local embed slice");
  b_.AddOp(name + ".local", OpKind::kReduce, std::move(ins), {local}, 2.0 * static_cast<double>(RsElements()));
  return TpCollective(name, OpKind::kAllReduce, local, {B_, Rs()[1]}, DType::kF32,
                      "RMSNorm statistic all-reduced over the tensor-parallel group");
}

std::vector<std::string> LlamaBuilder::LayerWeights() const {
  if (E_ > 1) return {"attn_norm", "wq", "wk", "wv", "wo", "mlp_norm", "gate", "wi_0", "wi_1", "wo_mlp"};
  return {"attn_norm", "wq", "wk", "wv", "wo", "mlp_norm", "wi_0", "wi_1", "wo_mlp"};
}

std::map<std::string, TensorId> LlamaBuilder::GatherLayer(int l, const char* why) {
  std::map<std::string, TensorId> w;
  for (const std::string& n : LayerWeights()) w["W:" + n] = Gather(n, l, why);
  return w;
}

LayerGraph LlamaBuilder::MakeLayerGraph() const {
  // Per-rank widths under tensor parallelism (Note [Llama tensor
  // parallelism]); at t = 1 the whole layer.
  const int64_t q = Ht_ * Dh_, kv = Kt_ * Dh_;
  const double T = static_cast<double>(T_), M = static_cast<double>(Mt_);
  const double R = static_cast<double>(RsElements());  // one residual-stream value
  const std::vector<int64_t> rs = Rs();
  LayerGraph g;
  g.n_layers = L_;
  std::vector<LayerValue>& n = g.values;
  // A weight matmul; its backward (dW) reads its input `needs` (the norm
  // output, before any gather: the backward gathers it again).
  auto dot = [&](std::string out, std::vector<int64_t> shape, std::string in, std::string w, int64_t kdim,
                 int64_t ndim, std::string tag, std::string needs) {
    LayerValue f{std::move(out), std::move(shape), cdt_, OpKind::kMatmul, {std::move(in), std::move(w)},
                 2.0 * T * static_cast<double>(kdim) * static_cast<double>(ndim), std::move(tag), true, false,
                 {std::move(needs)}};
    f.m = T_; f.n = ndim; f.k = kdim;
    n.push_back(std::move(f));
  };
  auto collective = [&](std::string out, OpKind kind, std::vector<int64_t> shape, std::string in) {
    n.push_back({std::move(out), std::move(shape), cdt_, kind, {std::move(in)}, 0, ""});
  };
  // RMSNorm computes in fp32 and casts its output (MaxText normalizations.py).
  auto norm = [&](const std::string& out, const std::string& in, const std::string& w) {
    std::vector<std::string> ins = {in, w};
    if (embed_sharded_) {
      // The per-token sum of squares over the sharded embed axis.
      n.push_back({out + "_ss", {B_, rs[1]}, DType::kF32, OpKind::kReduce, {in}, 2 * R, ""});
      n.push_back({out + "_rms", {B_, rs[1]}, DType::kF32, OpKind::kAllReduce, {out + "_ss"}, 0, ""});
      ins.push_back(out + "_rms");
    }
    n.push_back({out, rs, cdt_, OpKind::kElementwise, ins, 4 * R, ""});
    n.back().needs = {in};
  };
  // A column-parallel GEMM's input: the norm output, gathered when the
  // stream is sharded (transient; the backward gathers it again).
  auto column_input = [&](const std::string& in) {
    if (!ResidualSharded()) return in;
    collective(in + "_full", OpKind::kAllGather, {B_, S_, D_}, in);
    return in + "_full";
  };
  // A row-parallel GEMM: the partial sums, then all-reduce (g) or
  // reduce-scatter; the policy sees the reduced value as the dot's output
  // (checkpoint_name and the dot are on the logical value).
  auto row_dot = [&](const std::string& out, const std::string& in, const std::string& w, int64_t kdim,
                     const std::string& tag) {
    if (t_ == 1) return dot(out, rs, in, w, kdim, D_, tag, in);
    dot(out + "_partial", {B_, S_, D_}, in, w, kdim, D_, "", in);
    n.back().is_dot = false;
    collective(out, ResidualSharded() ? OpKind::kReduceScatter : OpKind::kAllReduce, rs, out + "_partial");
    n.back().tag = tag;
    n.back().is_dot = true;
  };
  norm("h1", "x", "W:attn_norm");
  const std::string h1 = column_input("h1");
  dot("q_lin", {B_, S_, Ht_, Dh_}, h1, "W:wq", D_, q, "", "h1");
  dot("k_lin", {B_, S_, Kt_, Dh_}, h1, "W:wk", D_, kv, "", "h1");
  dot("value_proj", {B_, S_, Kt_, Dh_}, h1, "W:wv", D_, kv, "value_proj", "h1");
  // RoPE (embeddings.py); MaxText tags query_proj/key_proj after it.
  n.push_back({"query_proj", {B_, S_, Ht_, Dh_}, cdt_, OpKind::kElementwise, {"q_lin"}, 6 * T * q, "query_proj"});
  n.push_back({"key_proj", {B_, S_, Kt_, Dh_}, cdt_, OpKind::kElementwise, {"k_lin"}, 6 * T * kv, "key_proj"});
  // Causal attention: QKᵀ and AV. cuDNN's causal flash kernel skips the
  // masked tiles, half the score matrix; the explicit form (MaxText
  // dot_product: attentions.py apply_attention_dot, einsum then mask)
  // computes all of it, as the imported HLO's dots do.
  const double attn_flops = 2.0 * 2.0 * static_cast<double>(B_ * Ht_ * Dh_) * static_cast<double>(S_) *
                            static_cast<double>(S_) * CausalFraction();
  if (m_.attention == "flash") {
    // The flash backward reads q, k, v, its output and the softmax
    // statistics (LayerBackwardOps).
    n.push_back({"attn_out", {B_, S_, Ht_, Dh_}, cdt_, OpKind::kAttention, {"query_proj", "key_proj", "value_proj"},
                 attn_flops, "context"});
    n.back().needs = {"query_proj", "key_proj", "value_proj", "attn_out", "attn_lse"};
    n.push_back({"attn_lse", {B_, Ht_, S_}, DType::kF32, OpKind::kAttention, {"query_proj", "key_proj"}, 0,
                 "context"});
  } else {
    LayerValue sc{"scores", {B_, Ht_, S_, S_}, cdt_, OpKind::kMatmul, {"query_proj", "key_proj"}, attn_flops / 2, "",
                  true, true, {"query_proj", "key_proj"}};
    sc.m = S_; sc.n = S_; sc.k = Dh_; sc.batch = B_ * Ht_;
    n.push_back(sc);
    n.push_back({"probs", {B_, Ht_, S_, S_}, cdt_, OpKind::kElementwise, {"scores"},
                 5.0 * static_cast<double>(B_ * Ht_ * S_ * S_), "", false, false, {"probs"}});
    LayerValue av{"attn_out", {B_, S_, Ht_, Dh_}, cdt_, OpKind::kMatmul, {"probs", "value_proj"}, attn_flops / 2,
                  "context", true, true, {"probs", "value_proj"}};
    av.m = S_; av.n = Dh_; av.k = S_; av.batch = B_ * Ht_;
    n.push_back(av);
  }
  row_dot("out_proj", "attn_out", "W:wo", q, "out_proj");
  n.push_back({"x1", rs, cdt_, OpKind::kElementwise, {"x", "out_proj"}, R, ""});
  norm("h2", "x1", "W:mlp_norm");
  const std::string h2 = column_input("h2");
  if (E_ > 1) {
    // Note [MaxText MoE dense matmul] (llama_moe.cc); t_ == 1.
    AppendMoeMlp(n, h2);
    n.push_back({"y", rs, cdt_, OpKind::kElementwise, {"x1", "moe_out"}, R, "decoder_layer_input"});
    return g;
  }
  dot("mlpwi_0", {B_, S_, Mt_}, h2, "W:wi_0", D_, Mt_, "mlpwi_0", "h2");
  dot("mlpwi_1", {B_, S_, Mt_}, h2, "W:wi_1", D_, Mt_, "mlpwi_1", "h2");
  n.push_back({"act", {B_, S_, Mt_}, cdt_, OpKind::kElementwise, {"mlpwi_0", "mlpwi_1"}, 5 * T * M, "", false, false,
               {"mlpwi_0", "mlpwi_1"}});
  row_dot("mlpwo", "act", "W:wo_mlp", Mt_, "mlpwo");
  n.push_back({"y", rs, cdt_, OpKind::kElementwise, {"x1", "mlpwo"}, R, "decoder_layer_input"});
  return g;
}

// Emits the forward nodes in `only` (all when empty). Weights are gathered
// on first use. Returns name → tensor for every emitted value.
// `known` holds the gathered weights ("W:name") and, when recomputing,
// the saved values the recomputation starts from.
std::map<std::string, TensorId> LlamaBuilder::EmitLayerForward(int l, TensorId x,
                                                               const std::map<std::string, TensorId>& known,
                                                               bool recompute, const std::set<std::string>& only) {
  std::map<std::string, TensorId> v = known;
  v["x"] = x;
  b_.set_recompute(recompute);
  const std::string pre = absl::StrCat("layer", l, recompute ? ".remat." : ".");
  for (const LayerValue& f : graph_.values) {
    if (!only.empty() && !only.count(f.name)) continue;
    std::vector<TensorId> ins;
    for (const std::string& in : f.inputs) ins.push_back(v.at(in));
    const Role role = Role::kActivation;
    TensorId out = b_.AddTensor(pre + f.name, f.shape, f.dtype, role,
                                absl::StrCat(recompute ? "recomputed " : "", "layer ", l, " ", f.name));
    Op& op = b_.AddOp(pre + f.name, f.kind, ins, {out}, f.flops);
    op.dtype = cdt_;
    op.m = f.m; op.n = f.n; op.k = f.k; op.batch = f.batch;
    if (IsCollective(f.kind)) op.group = t_;
    if (!recompute) WaitForPending(op);
    v[f.name] = out;
  }
  b_.set_recompute(false);
  return v;
}

// Backward of one layer: `fwd` holds the saved values (by name); the rest
// are recomputed from them (remat), then the gradient ops run.
TensorId LlamaBuilder::EmitLayerBackward(int l, TensorId x, const std::map<std::string, TensorId>& fwd,
                                         const std::map<std::string, TensorId>& weights, TensorId dy) {
  for (const std::string& r : plan_.saved) {
    if (r != "x" && !rolled_) b_.tensor(fwd.at(r)).role = Role::kResidual;
  }
  const std::set<std::string>& need = plan_.recompute;
  std::map<std::string, TensorId> v;
  for (const std::string& r : plan_.saved) v[r] = fwd.at(r);
  if (rolled_) MaterialiseResidualSlices(l, v);
  for (const std::string& r : plan_.offload) v[r] = fwd.at(r);
  for (const auto& [k, t] : weights) v[k] = t;  // the backward's own gather
  if (!need.empty()) {
    auto re = EmitLayerForward(l, x, v, /*recompute=*/true, need);
    for (const std::string& k : need) v[k] = re.at(k);
  }
  return LayerBackwardOps(l, x, v, dy);
}

TensorId LlamaBuilder::Grad(const std::string& name, std::vector<int64_t> shape, DType dt) {
  return b_.AddTensor(name, std::move(shape), dt, Role::kTemporary, "backward temporary");
}

TensorId LlamaBuilder::MatmulOp(const std::string& name, TensorId a, TensorId w, std::vector<int64_t> shape, int64_t m,
                                int64_t n, int64_t k) {
  TensorId out = Grad(name, std::move(shape), cdt_);
  Op& op = b_.AddOp(name, OpKind::kMatmul, {a, w}, {out}, 2.0 * static_cast<double>(m) * n * k);
  op.dtype = cdt_;
  op.m = m; op.n = n; op.k = k;
  return out;
}

// dX = dY·Wᵀ and dW = Xᵀ·dY for Y = X·W, X [T,kdim], W [kdim,ndim].
TensorId LlamaBuilder::DenseBackward(int l, const std::string& w, TensorId x_in, TensorId dy, TensorId wt, int64_t kdim,
                                     int64_t ndim, std::vector<int64_t> x_shape) {
  const std::string pre = absl::StrCat("layer", l, ".d_", w);
  TensorId dx = MatmulOp(pre + ".dx", dy, wt, std::move(x_shape), T_, kdim, ndim);
  TensorId dw = MatmulOp(pre + ".dw", x_in, dy, b_.tensor(wt).shape, kdim, ndim, T_);
  ReduceGrad(w, l, dw);
  return dx;
}

TensorId LlamaBuilder::Elementwise(const std::string& name, std::vector<TensorId> ins, std::vector<int64_t> shape,
                                   double flops, DType dt) {
  TensorId out = Grad(name, std::move(shape), dt);
  b_.AddOp(name, OpKind::kElementwise, std::move(ins), {out}, flops);
  return out;
}

TensorId LlamaBuilder::NormBackward(int l, const std::string& w, TensorId x_in, TensorId d_out, TensorId scale) {
  const std::string pre = absl::StrCat("layer", l, ".d_", w);
  std::vector<TensorId> ins = {x_in, d_out, scale};
  if (embed_sharded_) ins.push_back(NormStatistic(pre + ".stat", {x_in, d_out, scale}));
  const double r = static_cast<double>(RsElements());
  TensorId dx = Elementwise(pre + ".dx", std::move(ins), Rs(), 8.0 * r, cdt_);
  TensorId ds = Grad(pre + ".dscale", {Rs()[2]}, DType::kF32);
  b_.AddOp(pre + ".dscale", OpKind::kReduce, {x_in, d_out}, {ds}, 3.0 * r);
  ReduceGrad(w, l, ds);
  return dx;
}

TensorId LlamaBuilder::LayerBackwardOps(int l, TensorId x, std::map<std::string, TensorId>& v, TensorId dy) {
  const int64_t q = Ht_ * Dh_, kv = Kt_ * Dh_;
  const std::string pre = absl::StrCat("layer", l, ".");
  const std::vector<int64_t> rs = Rs();
  const double r = static_cast<double>(RsElements());
  // MLP: y = x1 + wo_mlp(silu(wi_0) * wi_1). Under tensor parallelism the
  // row-parallel backward reads dy gathered (the conjugate of its
  // reduce-scatter; identity after an all-reduce), the column-parallel
  // dW the norm output gathered again, and their input gradients are
  // partial sums reduced over the group (Note [Llama tensor parallelism]).
  TensorId d_h2;
  if (E_ > 1) {
    d_h2 = MoeMlpBackward(l, v, dy);  // Note [MaxText MoE dense matmul]
  } else {
    TensorId dy_full = GatherResidual(pre + "d_mlpwo.all_gather", dy);
    TensorId d_act = DenseBackward(l, "wo_mlp", v.at("act"), dy_full, v.at("W:wo_mlp"), Mt_, D_, {B_, S_, Mt_});
    TensorId d_wi = Elementwise(pre + "d_swiglu", {d_act, v.at("mlpwi_0"), v.at("mlpwi_1")}, {B_, S_, 2, Mt_},
                                8.0 * T_ * Mt_, cdt_);
    TensorId h2 = GatherResidual(pre + "d_mlpwi.regather", v.at("h2"));
    TensorId d_h2a = DenseBackward(l, "wi_0", h2, d_wi, v.at("W:wi_0"), D_, Mt_, {B_, S_, D_});
    TensorId d_h2b = DenseBackward(l, "wi_1", h2, d_wi, v.at("W:wi_1"), D_, Mt_, {B_, S_, D_});
    d_h2 = Elementwise(pre + "d_h2", {d_h2a, d_h2b}, {B_, S_, D_}, 1.0 * T_ * D_, cdt_);
    d_h2 = ReducePartial(pre + "d_h2.reduce", d_h2);
  }
  TensorId d_x1n = NormBackward(l, "mlp_norm", v.at("x1"), d_h2, v.at("W:mlp_norm"));
  TensorId d_x1 = Elementwise(pre + "d_x1", {dy, d_x1n}, rs, r, cdt_);
  // Attention: x1 = x + wo(attn(q, k, v))
  TensorId d_x1_full = GatherResidual(pre + "d_out_proj.all_gather", d_x1);
  TensorId d_attn = DenseBackward(l, "wo", v.at("attn_out"), d_x1_full, v.at("W:wo"), q, D_, {B_, S_, Ht_, Dh_});
  const double attn_flops = 2.0 * 2.0 * static_cast<double>(B_ * Ht_ * Dh_) * S_ * S_ * CausalFraction();
  TensorId dq = Grad(pre + "d_query", {B_, S_, Ht_, Dh_}, cdt_);
  TensorId dk = Grad(pre + "d_key", {B_, S_, Kt_, Dh_}, cdt_);
  TensorId dvv = Grad(pre + "d_value", {B_, S_, Kt_, Dh_}, cdt_);
  if (m_.attention == "flash") {
    // Flash backward recomputes the scores: 5 S×S matmuls vs 2 forward.
    b_.AddOp(pre + "flash_bwd", OpKind::kAttention,
             {v.at("query_proj"), v.at("key_proj"), v.at("value_proj"), v.at("attn_out"), v.at("attn_lse"), d_attn},
             {dq, dk, dvv}, attn_flops * 2.5).dtype = cdt_;
  } else {
    TensorId dp = Grad(pre + "d_probs", {B_, Ht_, S_, S_}, cdt_);
    Op& a = b_.AddOp(pre + "d_probs", OpKind::kMatmul, {d_attn, v.at("value_proj")}, {dp}, attn_flops / 2);
    a.m = S_; a.n = S_; a.k = Dh_; a.batch = B_ * Ht_;
    Op& b = b_.AddOp(pre + "d_value", OpKind::kMatmul, {v.at("probs"), d_attn}, {dvv}, attn_flops / 2);
    b.m = S_; b.n = Dh_; b.k = S_; b.batch = B_ * Ht_;
    TensorId ds = Elementwise(pre + "d_scores", {dp, v.at("probs")}, {B_, Ht_, S_, S_},
                              4.0 * B_ * Ht_ * S_ * S_, cdt_);
    Op& c = b_.AddOp(pre + "d_qk", OpKind::kMatmul, {ds, v.at("query_proj"), v.at("key_proj")}, {dq, dk},
                     attn_flops);
    c.m = S_; c.n = Dh_; c.k = S_; c.batch = B_ * Ht_;
  }
  TensorId dq_lin = Elementwise(pre + "d_rope_q", {dq}, {B_, S_, Ht_, Dh_}, 6.0 * T_ * q, cdt_);
  TensorId dk_lin = Elementwise(pre + "d_rope_k", {dk}, {B_, S_, Kt_, Dh_}, 6.0 * T_ * kv, cdt_);
  TensorId h1 = GatherResidual(pre + "d_qkv.regather", v.at("h1"));
  TensorId d_h1q = DenseBackward(l, "wq", h1, dq_lin, v.at("W:wq"), D_, q, {B_, S_, D_});
  TensorId d_h1k = DenseBackward(l, "wk", h1, dk_lin, v.at("W:wk"), D_, kv, {B_, S_, D_});
  TensorId d_h1v = DenseBackward(l, "wv", h1, dvv, v.at("W:wv"), D_, kv, {B_, S_, D_});
  TensorId d_h1 = Elementwise(pre + "d_h1", {d_h1q, d_h1k, d_h1v}, {B_, S_, D_}, 2.0 * T_ * D_, cdt_);
  d_h1 = ReducePartial(pre + "d_h1.reduce", d_h1);
  TensorId d_xn = NormBackward(l, "attn_norm", x, d_h1, v.at("W:attn_norm"));
  return Elementwise(pre + "d_x", {d_x1, d_xn}, rs, r, cdt_);
}

}  // namespace llama_internal
}  // namespace gpusim
