// The gpt decoder layer: its table of forward values (a LayerGraph), their
// emission for the forward pass and as recompute under the remat plan, host
// offload of the values the plan offloads, and the backward ops. See
// gpt_builder.h.
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "models/gpt_builder.h"
#include "sim/base/status.h"
#include "sim/lower/semantics.h"

namespace gpusim {
namespace gpt_internal {

namespace {

// Note [Megatron QK layernorm]: --qk-layernorm (NVIDIA/Megatron-LM
// 57a02672 megatron/core/transformer/attention.py SelfAttention.
// get_query_key_value_tensors; gpt_layer_specs.py: q_layernorm and
// k_layernorm are TENorm, TE's LayerNorm or RMSNorm over a head's Dh). The
// query, split off the fused QKV output and reshaped to [s, b, np, hn]
// (a copy unless np/ng or ng is 1), and the key (a strided view) enter
// TE's norm, which runs on `input_.contiguous()` and saves that tensor and
// its fp32 statistics (TE v2.11 pytorch/ops/basic/rmsnorm.py and
// layer_norm.py op_forward: rstdevs; means too for LayerNorm). So each
// layer keeps a query- and a key-sized copy beside what attention keeps;
// the normed q, k (RoPE'd) and v are attention's inputs, of the QKV
// output's size, as without the norms.
//
// The values: per query and key, the norm's contiguous input, its fp32
// statistics and its output; then attention's q, k, v. Returns the name
// attention reads.
std::string AddQkNorms(std::vector<LayerValue>* out, int64_t S, int64_t B, int64_t q_heads, int64_t k_heads,
                       int64_t Dh, int64_t qkv_width, DType cdt, bool rms) {
  const int64_t stats = rms ? 1 : 2;
  for (const auto& [p, heads] : {std::pair<std::string, int64_t>{"q", q_heads}, {"k", k_heads}}) {
    const double e = static_cast<double>(S * B * heads * Dh);
    out->push_back({p + "_ln_in", {S, B, heads * Dh}, cdt, OpKind::kElementwise, {"qkv"}, e, "", false, false, {}});
    LayerValue st{p + "_ln_stats", {S, B, heads * stats}, DType::kF32, OpKind::kElementwise, {p + "_ln_in"}, e, "",
                  false, false, {}};
    st.kernel_of = p + "_ln";  // Note [A second output of a kernel]
    out->push_back(st);
    out->push_back({p + "_ln", {S, B, heads * Dh}, cdt, OpKind::kElementwise, {p + "_ln_in", "W:" + p + "_ln"}, 8 * e,
                    "", false, false, {p + "_ln_in", p + "_ln_stats"}});
  }
  out->push_back({"qkv_normed", {S, B, qkv_width}, cdt, OpKind::kElementwise, {"q_ln", "k_ln", "qkv"},
                  static_cast<double>(S * B * qkv_width), "", false, false, {}});
  return "qkv_normed";
}

}  // namespace

// Note [Megatron MoE layer pattern] (sim/config/megatron_moe_args.cc): with
// dense layers beside the MoE ones, the graph is the MoE layer's and its one
// kind the dense layer's (LayerGraph::kinds), each planned on its own.
LayerGraph GptBuilder::MakeLayerGraph() const {
  LayerGraph graph = MakeLayerGraphOf(Moe());
  if (Moe() && !g_.moe.layer_pattern.empty()) graph.kinds.push_back(MakeLayerGraphOf(false));
  return graph;
}

void GptBuilder::UseLayer(int l) {
  const bool dense = !graph_.kinds.empty() && !MoeLayer(l);
  lg_ = dense ? &graph_.kinds.front() : &graph_;
  lp_ = dense ? &plan_.kinds.front() : &plan_;
}

LayerGraph GptBuilder::MakeLayerGraphOf(bool moe_mlp) const {
  const double s = static_cast<double>(S_), b = static_cast<double>(B_), h = static_cast<double>(H_);
  const double t = static_cast<double>(t_);
  // Megatron launch lines: SwiGLU (fc1 twice as wide, gate x up), hidden
  // dropout off when --hidden-dropout 0.
  const bool masks = !mg_ || g_.hidden_dropout > 0;
  LayerGraph graph;
  graph.n_layers = L_;
  graph.checkpoint_unit = CheckpointUnit::kLayerGroups;
  std::vector<LayerValue>& n = graph.values;
  auto add = [&](LayerValue x) { n.push_back(std::move(x)); };
  // Layer input x [s/t (SP) or s, b, h]; LayerNorm keeps its input.
  add({"ln1", {Ssp(), B_, H_}, cdt_, OpKind::kElementwise, {"x", "W:ln1"}, 8 * s * b * h / (sp_ ? t : 1), "", false,
       false, {"x"}});
  if (mg_ && g_.mla.present) {
    AddMlaValues(&n);  // Note [Megatron multi-latent attention], gpt_mla.cc
  } else {
    AddAttentionValues(&n);
  }
  // Row-parallel output: all-reduce (g), or reduce-scatter with SP.
  add({"proj", {Ssp(), B_, H_}, cdt_, sp_ ? OpKind::kReduceScatter : OpKind::kAllReduce, {"proj_partial"}, 0,
       "", false, false, {}});
  if (masks) {
    add({"drop1_mask", {Ssp(), B_, H_}, DType::kU8, OpKind::kElementwise, {"proj"}, s * b * h / (sp_ ? t : 1),
         "", false, false, {}});
    add({"x_mid", {Ssp(), B_, H_}, cdt_, OpKind::kElementwise, {"x", "proj", "drop1_mask"},
         3 * s * b * h / (sp_ ? t : 1), "", false, false, {"drop1_mask"}});
  } else {
    add({"x_mid", {Ssp(), B_, H_}, cdt_, OpKind::kElementwise, {"x", "proj"}, s * b * h / (sp_ ? t : 1), "",
         false, false, {}});
  }
  add({"ln2", {Ssp(), B_, H_}, cdt_, OpKind::kElementwise, {"x_mid", "W:ln2"}, 8 * s * b * h / (sp_ ? t : 1), "",
       false, false, {"x_mid"}});
  if (moe_mlp) {
    AddMoeValues(&n);
  } else {
    AddDenseMlp(&n);
  }
  if (masks) {
    add({"drop2_mask", {Ssp(), B_, H_}, DType::kU8, OpKind::kElementwise, {"fc2"}, s * b * h / (sp_ ? t : 1), "",
         false, false, {}});
    add({"x_out", {Ssp(), B_, H_}, cdt_, OpKind::kElementwise, {"x_mid", "fc2", "drop2_mask"},
         3 * s * b * h / (sp_ ? t : 1), "", false, false, {"drop2_mask"}});
  } else {
    add({"x_out", {Ssp(), B_, H_}, cdt_, OpKind::kElementwise, {"x_mid", "fc2"}, s * b * h / (sp_ ? t : 1), "",
         false, false, {}});
  }
  if (Fp8()) Fp8Graph(&graph);
  return graph;
}

// Attention after ln1: the fused QKV GEMM, (QK norms,) the attention core
// and the output projection, its last value "proj_partial".
// Grouped-query attention (Ainslie et al. 2023, arXiv 2305.13245;
// Megatron-LM --group-query-attention --num-query-groups K,
// megatron/core/transformer/attention.py SelfAttention.linear_qkv of
// width (A + 2K)·Dh, each TP rank holding A/t query heads and K/t
// groups): the fused QKV GEMM is (A + 2K)·Dh wide; scores and context
// run over the A/t query heads of a rank. K = A is multi-head attention.
// Flash attention: the launch line's --attention-backend, or a gpt config's
// model.attention (the same TE flash kernels, Note [Megatron flash
// attention]).
void GptBuilder::AddAttentionValues(std::vector<LayerValue>* out) const {
  const double s = static_cast<double>(S_), b = static_cast<double>(B_), h = static_cast<double>(H_);
  const double a = static_cast<double>(A_), t = static_cast<double>(t_);
  const int64_t At = A_ / t_;
  const int64_t Wqkv = (A_ + 2 * K_) * Dh_, Wc = A_ * Dh_;
  const double wqkv = static_cast<double>(Wqkv), wc = static_cast<double>(Wc), dh = static_cast<double>(Dh_);
  const bool flash = mg_ ? g_.attention == "flash" : m_.attention == "flash";
  std::vector<LayerValue>& n = *out;
  auto add = [&](LayerValue x) { n.push_back(std::move(x)); };
  std::string qkv_in = "ln1";
  if (sp_) {  // SP: all-gather along the sequence before the column-parallel GEMM (transient)
    add({"ln1_full", {S_, B_, H_}, cdt_, OpKind::kAllGather, {"ln1"}, 0, "", false, false, {}});
    qkv_in = "ln1_full";
  }
  // Column-parallel QKV GEMM; its weight gradient reads the (sharded, with
  // SP re-gathered) input.
  LayerValue qkv{"qkv", {S_, B_, Wqkv / t_}, cdt_, OpKind::kMatmul, {qkv_in, "W:w_qkv"}, 2 * s * b * h * wqkv / t, "qkv",
           true, false, {"ln1"}};
  qkv.m = S_ * B_; qkv.n = Wqkv / t_; qkv.k = H_;
  add(qkv);
  // --qk-layernorm: Note [Megatron QK layernorm].
  const std::string qkv_att =
      mg_ && g_.qk_layernorm ? AddQkNorms(&n, S_, B_, At, K_ / t_, Dh_, Wqkv / t_, cdt_, g_.rms_norm) : "qkv";
  if (flash) {
    // Note [Megatron flash attention]: TE's flash / cuDNN fused attention
    // keeps q, k, v, its output and the fp32 softmax statistics (one per
    // query row and head) for the backward, never the s x s scores; the
    // attention dropout runs inside the kernel from its RNG state. Causal:
    // half the QK^T and AV work. The backward recomputes the scores: 2.5x
    // the forward FLOPs (FlashAttention-2, Dao 2023, Sec. 3.1).
    // Context parallelism (TE AttnFuncWithCPAndKVP2P, cp_comm_type p2p):
    // the local queries meet every rank's K and V passed round the CP
    // ring, double-buffered (two K/V chunks in flight), cp - 1 chunks
    // received per pass; the backward sends dK/dV round the same ring.
    const double keys = static_cast<double>(Sfull_);
    std::vector<std::string> ins = {qkv_att};
    // Note [Megatron CP all-to-all]: --cp-comm-type a2a (TE v2.11
    // transformer_engine/pytorch/attention/dot_product_attention/
    // context_parallel.py AttnFuncWithCPAndQKVOA2A, DeepSpeed-Ulysses,
    // arXiv 2309.14509). flash_attn_a2a_communicate all-to-alls q, k, v
    // over the CP group from [s/cp, b, heads, d] to [s, b, heads/cp, d]
    // (the same elements per rank); the kernel runs the whole sequence over
    // a cp-th of the heads (the same FLOPs as the ring) and saves the
    // all-to-all'd q, k, v and its own output `out_part`; that output is
    // all-to-all'd back to [s/cp, b, heads, d], a second buffer, which
    // linear_proj saves as its input. So each layer keeps one more
    // context-sized tensor than under p2p, where the ring's `out` is the
    // very tensor returned. The backward all-to-alls dout to the head
    // layout and dq, dk, dv back (transient). The pre-all-to-all q, k, v
    // are read by nothing after the exchange and are freed.
    const bool a2a = cp_ > 1 && mg_ && g_.cp_comm == "a2a";
    if (a2a) {
      LayerValue x{"qkv_a2a", {Sfull_, B_, Wqkv / t_ / cp_}, cdt_, OpKind::kAllGather, {qkv_att}, 0, "attn_qkv_a2a",
                   false, false, {}};
      x.group = cp_;  // an all-to-all: every rank sends (cp - 1)/cp of the buffer, as an all-gather receives
      add(x);
      ins = {"qkv_a2a"};
    } else if (cp_ > 1) {
      LayerValue ring{"kv_ring", {2, 2, S_, B_, K_ * Dh_ / t_}, cdt_, OpKind::kAllGather, {qkv_att}, 0, "attn_kv_ring",
                      false, false, {}};
      ring.group = cp_;
      ring.comm_scale = static_cast<double>(cp_) / 2.0;
      add(ring);
      ins.push_back("kv_ring");
    }
    const std::string q = ins.front(), out = a2a ? "context_heads" : "context";
    LayerValue lse{"attn_lse", a2a ? std::vector<int64_t>{B_, At / cp_, Sfull_} : std::vector<int64_t>{B_, At, S_},
                   DType::kF32, OpKind::kElementwise, {q}, b * a / t * s, "attn_lse", false, false, {}};
    lse.kernel_of = out;  // Note [A second output of a kernel]
    add(lse);
    LayerValue fa{out, a2a ? std::vector<int64_t>{Sfull_, B_, Wc / t_ / cp_} : std::vector<int64_t>{S_, B_, Wc / t_},
                  cdt_, OpKind::kAttention, ins, 2 * b * a / t * s * keys * dh, a2a ? "attn_out_heads" : "context",
                  false, true, {q, out, "attn_lse"}};
    fa.bwd_scale = 2.5;
    add(fa);
    if (a2a) {
      LayerValue back{"context", {S_, B_, Wc / t_}, cdt_, OpKind::kAllGather, {out}, 0, "context", false, false, {}};
      back.group = cp_;
      add(back);
    }
  } else {
    // QK^T (batch dims b, a/t), softmax, dropout, AV: the attention core.
    LayerValue sc{"scores", {B_, At, S_, S_}, cdt_, OpKind::kMatmul, {qkv_att}, 2 * b * a / t * s * s * dh,
            "attn_scores", true, true, {qkv_att}};
    sc.m = S_; sc.n = S_; sc.k = Dh_; sc.batch = B_ * At;
    add(sc);
    add({"probs", {B_, At, S_, S_}, cdt_, OpKind::kElementwise, {"scores"}, 5 * b * a / t * s * s, "attn_probs",
         false, false, {"probs"}});
    add({"attn_mask", {B_, At, S_, S_}, DType::kU8, OpKind::kElementwise, {"probs"}, b * a / t * s * s,
         "attn_dropout_mask", false, false, {}});
    add({"dropped", {B_, At, S_, S_}, cdt_, OpKind::kElementwise, {"probs", "attn_mask"}, b * a / t * s * s,
         "attn_dropped", false, false, {"attn_mask"}});
    LayerValue av{"context", {S_, B_, Wc / t_}, cdt_, OpKind::kMatmul, {"dropped", qkv_att}, 2 * b * a / t * s * s * dh,
            "context", true, true, {"dropped", qkv_att}};
    av.m = S_; av.n = Dh_; av.k = S_; av.batch = B_ * At;
    add(av);
  }
  LayerValue proj{"proj_partial", {S_, B_, H_}, cdt_, OpKind::kMatmul, {"context", "W:w_proj"}, 2 * s * b * wc * h / t,
            "out_proj", true, false, {"context"}};
  proj.m = S_ * B_; proj.n = H_; proj.k = Wc / t_;
  add(proj);
}

// The dense MLP after ln2: fc1, GeLU or SwiGLU, fc2 and its TP reduction.
void GptBuilder::AddDenseMlp(std::vector<LayerValue>* out) const {
  const double s = static_cast<double>(S_), b = static_cast<double>(B_), h = static_cast<double>(H_);
  const double f = static_cast<double>(F_), t = static_cast<double>(t_);
  const bool swiglu = mg_ && g_.swiglu;
  const int64_t Ft = F_ / t_, F1t = (swiglu ? 2 : 1) * Ft;
  const double f1 = (swiglu ? 2 : 1) * f;
  auto add = [&](LayerValue x) { out->push_back(std::move(x)); };
  std::string fc1_in = "ln2";
  if (sp_) {
    add({"ln2_full", {S_, B_, H_}, cdt_, OpKind::kAllGather, {"ln2"}, 0, "", false, false, {}});
    fc1_in = "ln2_full";
  }
  LayerValue fc1{"fc1", {S_, B_, F1t}, cdt_, OpKind::kMatmul, {fc1_in, "W:w_fc1"}, 2 * s * b * h * f1 / t, "mlpwi", true,
           false, {"ln2"}};
  fc1.m = S_ * B_; fc1.n = F1t; fc1.k = H_;
  add(fc1);
  // GeLU, or SwiGLU: silu(gate) x up (megatron/core/fusions/fused_bias_swiglu.py
  // saves its input, the fc1 output).
  const std::string act = swiglu ? "swiglu" : "gelu";
  add({act, {S_, B_, Ft}, cdt_, OpKind::kElementwise, {"fc1"}, 8 * s * b * f / t, "", false, false, {"fc1"}});
  LayerValue fc2{"fc2_partial", {S_, B_, H_}, cdt_, OpKind::kMatmul, {act, "W:w_fc2"}, 2 * s * b * h * f / t, "mlpwo",
           true, false, {act}};
  fc2.m = S_ * B_; fc2.n = H_; fc2.k = Ft;
  add(fc2);
  add({"fc2", {Ssp(), B_, H_}, cdt_, sp_ ? OpKind::kReduceScatter : OpKind::kAllReduce, {"fc2_partial"}, 0, "",
       false, false, {}});
}

const LayerValue& GptBuilder::NodeOf(const std::string& name) const {
  const LayerValue* v = lg_->Find(name);
  GPUSIM_CHECK(v != nullptr);
  return *v;
}

// Emits the nodes in `only` (all when empty), starting from `known`.
std::map<std::string, TensorId> GptBuilder::Forward(int l, std::map<std::string, TensorId> known,
                                                    bool recompute, const std::set<std::string>& only) {
  UseLayer(l);
  b_.set_recompute(recompute);
  const std::string pre = absl::StrCat(mbp_, "layer", l, recompute ? ".remat." : ".");
  if (Fp8() && !recompute) CastFp8Weights(l);
  for (const LayerValue& n : lg_->values) {
    if (!only.empty() && !only.count(n.name)) continue;
    if (known.count(n.name)) continue;
    // Note [A second output of a kernel]: recomputed, it is its kernel rerun,
    // which writes the kernel's own output again (read by nothing).
    const LayerValue& k = recompute && !n.kernel_of.empty() ? NodeOf(n.kernel_of) : n;
    std::vector<TensorId> ins;
    for (const std::string& i : k.inputs) {
      ins.push_back(IsParamInput(i) ? (Fp8Gemm(k) ? GemmWeight(l, ParamOfInput(i), false) : Param(l, ParamOfInput(i)))
                                    : known.at(i));
    }
    TensorId out = b_.AddTensor(pre + n.name, n.shape, n.dtype, Role::kActivation,
                                absl::StrCat(recompute ? "recomputed " : "", "layer ", l, " ", n.name));
    std::vector<TensorId> outs = {out};
    if (&k != &n) {
      outs.push_back(b_.AddTensor(pre + k.name, k.shape, k.dtype, Role::kTemporary,
                                  absl::StrCat("layer ", l, " ", k.name, " written again by the recomputed kernel")));
    }
    Op& op = b_.AddOp(pre + (&k != &n ? k.name : n.name), k.kind, ins, outs, k.flops);
    op.dtype = cdt_;
    // The one layer value with its own group is the CP ring (kv_ring).
    if (IsCollective(k.kind)) {
      const auto [size, kind] = GroupOf(k);
      SetGroup(op, size, kind);
    }
    op.m = k.m; op.n = k.n; op.k = k.k; op.batch = k.batch;
    if (Fp8()) Fp8Op(op, k);
    if (k.comm_scale != 1) {
      op.bytes_written = Bytes(static_cast<int64_t>(static_cast<double>(op.bytes_written.value()) * k.comm_scale));
    }
    // Megatron under Transformer Engine with --attention-backend unfused:
    // DotProductAttention.forward calls its UnfusedDotProductAttention
    // module, which calls FusedScaleMaskSoftmax and the attention Dropout
    // (transformer_engine/pytorch/attention/dot_product_attention/
    // dot_product_attention.py, backends.py): three Python module calls
    // beside the layer's 8 (Note [Eager host costs]).
    if (mg_ && n.name == "scores" && g_.attention == "unfused" && g_.transformer_impl == "transformer_engine") {
      op.host_calls += 3;
    }
    if (MoeLayer(l) && MoeSyncsAfter(n.name)) op.host_sync = true;  // Note [MoE dispatch syncs]
    known[n.name] = out;
  }
  b_.set_recompute(false);
  return known;
}

void GptBuilder::MarkSaved(int l, const std::map<std::string, TensorId>& v) {
  UseLayer(l);
  if (Checkpointed(l)) {
    // Full recompute keeps only the checkpoint's input (uniform groups: the
    // first layer of each group of remat.num_layers).
    if (plan_.GroupStart(Local(l))) b_.tensor(v.at(lp_->input)).role = Role::kResidual;
    return;
  }
  for (const std::string& name : lp_->saved) b_.tensor(v.at(name)).role = Role::kResidual;
}

// Host offload of the values the policy marks Offloadable. Under jax the
// copies run on the host-copy stream as in models/llama.cc (Note [Host
// offload]). Under pytorch they are torch.autograd.graph.save_on_cpu's
// pack and unpack hooks: `packed.copy_(tensor)` into pinned memory and
// `tensor.to(device, non_blocking=True)`, both issued on the current
// (compute) stream, so they do not overlap compute.
void GptBuilder::Offload(int l, const std::map<std::string, TensorId>& v) {
  UseLayer(l);
  for (const std::string& name : lp_->offload) {
    const Tensor src = b_.tensor(v.at(name));  // a copy: AddTensor may reallocate
    TensorId h = b_.AddTensor(absl::StrCat(mbp_, "host.layer", l, ".", name), src.shape, src.dtype, Role::kResidual,
                              absl::StrCat("layer ", l, " ", name, " offloaded to pinned host"));
    b_.tensor(h).host = true;
    Op& op = b_.AddOp(absl::StrCat(mbp_, "layer", l, ".offload_", name), OpKind::kDeviceToHost, {src.id}, {h}, 0);
    op.on_compute_stream = LoweringSemanticsOf(s_).host_copies_on_compute_stream;
    host_[{mbp_ + absl::StrCat(l), name}] = h;
  }
}

void GptBuilder::Reload(int l, std::map<std::string, TensorId>* v) {
  UseLayer(l);
  OpId start = b_.next_op() - 1;
  for (const std::string& name : lp_->offload) {
    const Tensor h = b_.tensor(host_.at({mbp_ + absl::StrCat(l), name}));
    TensorId t = b_.AddTensor(absl::StrCat(mbp_, "layer", l, ".reload.", name), h.shape, h.dtype, Role::kResidual,
                              absl::StrCat("layer ", l, " ", name, " copied back from pinned host"));
    Op& op = b_.AddOp(absl::StrCat(mbp_, "layer", l, ".reload_", name), OpKind::kHostToDevice, {h.id}, {t}, 0);
    op.on_compute_stream = LoweringSemanticsOf(s_).host_copies_on_compute_stream;
    if (start >= 0) op.control_deps.push_back(start);
    (*v)[name] = t;
  }
}

// d(name) accumulated: a second contribution is added in.
void GptBuilder::AddGrad(std::map<std::string, TensorId>& g, const std::string& name, TensorId contribution) {
  auto it = g.find(name);
  if (it == g.end()) {
    g[name] = contribution;
    return;
  }
  const Tensor t = b_.tensor(contribution);  // a copy: AddTensor may reallocate
  TensorId sum = b_.AddTensor(b_.tensor(it->second).name + "+", t.shape, t.dtype, Role::kTemporary,
                              "summed gradient");
  b_.AddOp(t.name + ".accumulate", OpKind::kElementwise, {it->second, contribution}, {sum},
           static_cast<double>(t.elements()));
  it->second = sum;
}

TensorId GptBuilder::Backward(int l, const std::map<std::string, TensorId>& fwd,
                              const std::map<std::string, TensorId>* recomputed, TensorId dy) {
  UseLayer(l);
  std::map<std::string, TensorId> v;
  if (recomputed != nullptr) {
    v = *recomputed;
  } else if (Checkpointed(l)) {
    // Recompute the layer (or, uniform groups, the group) from its input.
    v = Forward(l, {{"x", fwd.at("x")}}, true, {});
  } else {
    for (const std::string& s : lp_->saved) v[s] = fwd.at(s);
    Reload(l, &v);
    if (!lp_->recompute.empty()) v = Forward(l, v, true, lp_->recompute);
  }
  std::map<std::string, TensorId> g{{"x_out", dy}};
  const std::string pre = absl::StrCat(mbp_, "layer", l, ".d_");
  for (auto it = lg_->values.rbegin(); it != lg_->values.rend(); ++it) {
    const LayerValue& n = *it;
    const std::string weight = n.param();
    auto gi = g.find(n.name);
    if (gi == g.end()) continue;
    const TensorId dout = gi->second;
    std::vector<TensorId> reads = {dout};
    for (const std::string& need : n.needs) reads.push_back(v.at(need));
    if (IsCollective(n.kind)) {
      // The conjugate: all-gather ↔ reduce-scatter; all-reduce's (g) backward
      // is the identity, its partner f (before the column-parallel GEMM)
      // all-reduces the input gradient (below).
      const std::string in = n.inputs[0];
      if (n.kind == OpKind::kAllReduce) {
        AddGrad(g, in, dout);
        continue;
      }
      const LayerValue& src = NodeOf(in);
      TensorId d = b_.AddTensor(pre + in, src.shape, cdt_, Role::kTemporary, "gradient of " + in);
      Op& op = b_.AddOp(pre + n.name + ".conjugate",
                        n.kind == OpKind::kAllGather ? OpKind::kReduceScatter : OpKind::kAllGather, {dout}, {d}, 0);
      const auto [size, kind] = GroupOf(n);
      SetGroup(op, size, kind);
      AddGrad(g, in, d);
      continue;
    }
    if (n.kind == OpKind::kConvert && Fp8()) {  // an fp8 cast: its gradient passes through (gpt_fp8.cc)
      AddGrad(g, n.inputs[0], dout);
      continue;
    }
    if (!weight.empty() && n.kind == OpKind::kMatmul) {
      // dW = Xᵀ dY (needs X, with SP re-gathered), dX = dY Wᵀ; under fp8 both
      // GEMMs read dY cast to fp8 (Note [Megatron fp8]).
      TensorId xin = v.at(n.needs[0]);
      if (n.name == "router_logits" && g_.moe.router_fp32) {
        RouterFp32Backward(pre, l, n, dout, xin, &g);
        continue;
      }
      const bool f8 = Fp8Gemm(n);
      const auto [dy_row, dy_t] = f8 ? CastGradFp8(pre, n, dout) : std::make_pair(dout, dout);
      // Column-parallel GEMMs read the sequence-gathered input (MLA's up
      // projections their normed latents).
      const bool column = n.name == "qkv" || n.name == "fc1" || n.name == "sh_fc1" || n.name == "q_up" ||
                          n.name == "kv_up" || n.name == "q_proj";
      if (sp_ && column) {
        std::vector<int64_t> shape = b_.tensor(xin).shape;
        shape[0] = S_;
        TensorId full = b_.AddTensor(pre + n.name + ".input_regathered", shape, b_.tensor(xin).dtype,
                                     Role::kTemporary,
                                     Origin{"SP", "the saved sharded input all-gathered again for dW"});
        Op& ag = b_.AddOp(pre + n.name + ".regather", OpKind::kAllGather, {xin}, {full}, 0);
        SetGroup(ag, t_, MegatronGroup::kTensor);
        xin = full;
      }
      if (mg_) {
        WeightGrad(absl::StrCat("layer", l, ".", weight), {xin, dy_t}, OpKind::kMatmul, n.flops, n.k, n.n, n.m,
                   f8 ? DType::kF8 : DType::kBF16);
      } else {
        TensorId dw = b_.AddTensor(pre + weight, b_.tensor(Param(l, weight)).shape, cdt_, Role::kGradient,
                                   absl::StrCat("gradient of layer ", l, " ", weight));
        Op& w = b_.AddOp(pre + weight, OpKind::kMatmul, {xin, dout}, {dw}, n.flops);
        w.m = n.k; w.n = n.n; w.k = n.m;
        grads_[absl::StrCat("layer", l, ".", weight)] = dw;
      }
      const std::string in = n.inputs[0];
      std::vector<int64_t> in_shape = in == "x" ? std::vector<int64_t>{Ssp(), B_, H_} : NodeOf(in).shape;
      TensorId dx = b_.AddTensor(pre + in, in_shape, cdt_, Role::kTemporary, "gradient of " + in);
      Op& x = b_.AddOp(pre + n.name + ".dx", OpKind::kMatmul, {dy_row, f8 ? GemmWeight(l, weight, true) : Param(l, weight)},
                       {dx}, n.flops);
      x.m = n.m; x.n = n.k; x.k = n.n;
      if (f8) x.dtype = DType::kF8;
      if (!sp_ && column && n.name != "sh_fc1" && t_ > 1) {
        // f's backward: all-reduce the input gradient across the TP group.
        TensorId r = b_.AddTensor(pre + in + ".reduced", in_shape, cdt_, Role::kTemporary, "all-reduced gradient");
        Op& ar = b_.AddOp(pre + n.name + ".f_backward", OpKind::kAllReduce, {dx}, {r}, 0);
        SetGroup(ar, t_, MegatronGroup::kTensor);
        dx = r;
      }
      AddGrad(g, in, dx);
      continue;
    }
    if (n.kind == OpKind::kAttention) {
      // Flash attention's backward: one kernel writing dQKV (and, under
      // CP, the dK/dV passed back round the ring).
      std::vector<TensorId> outs;
      for (const std::string& in : n.inputs) {
        outs.push_back(b_.AddTensor(pre + in + "." + n.name, NodeOf(in).shape, cdt_, Role::kTemporary,
                                    "gradient of " + in));
      }
      Op& op = b_.AddOp(pre + n.name + ".backward", n.kind, reads, outs, n.flops * n.bwd_scale);
      op.dtype = cdt_;
      for (size_t i = 0; i < n.inputs.size(); ++i) AddGrad(g, n.inputs[i], outs[i]);
      continue;
    }
    // Other ops: one backward op per input that carries a gradient.
    for (const std::string& in : n.inputs) {
      if (in == "attn_mask" || in == "drop1_mask" || in == "drop2_mask" || in == "routing_map" ||
          in == "moe_permute_map" || in == "router_group_mask") {
        continue;  // masks (and the MoE routing map and permutation) have no gradient
      }
      if (IsParamInput(in)) continue;  // the weight's gradient, below
      std::vector<int64_t> in_shape = in == "x" ? std::vector<int64_t>{Ssp(), B_, H_} : NodeOf(in).shape;
      TensorId d = b_.AddTensor(pre + in + "." + n.name, in_shape, cdt_, Role::kTemporary, "gradient of " + in);
      Op& op = b_.AddOp(pre + n.name + ".d" + in, n.kind, reads, {d}, n.kind == OpKind::kMatmul ? n.flops : n.flops);
      op.m = n.m; op.n = n.n; op.k = n.k; op.batch = n.batch;
      AddGrad(g, in, d);
    }
    if (!weight.empty() && mg_) {  // norm weights: into main_grad
      WeightGrad(absl::StrCat("layer", l, ".", weight), reads, OpKind::kReduce, 2.0 * S_ * B_ * H_, 0, 0, 0);
    } else if (!weight.empty()) {  // LayerNorm scale and bias
      TensorId dw = b_.AddTensor(pre + weight, {2, H_}, DType::kF32, Role::kGradient,
                                 absl::StrCat("gradient of layer ", l, " ", weight));
      b_.AddOp(pre + weight, OpKind::kReduce, reads, {dw}, 2.0 * S_ * B_ * H_);
      grads_[absl::StrCat("layer", l, ".", weight)] = dw;
    }
  }
  return g.at("x");
}

}  // namespace gpt_internal
}  // namespace gpusim
