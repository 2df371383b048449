#include "models/gpt.h"

#include <algorithm>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "sim/base/status.h"
#include "sim/ir/builder.h"
#include "sim/remat/remat_policy.h"

namespace gpusim {
namespace {

// One forward value of a decoder layer. `needs` are the values its backward
// rule reads (what autograd saves for it).
struct Node {
  std::string out;
  std::vector<int64_t> shape;
  DType dtype;
  OpKind kind;
  std::vector<std::string> ins;     // layer values, "x" (the layer input)
  std::string weight;               // param name for weight matmuls / norms
  double flops = 0;
  std::string tag;                  // name the remat policy sees
  bool is_dot = false, batch_dims = false;
  std::vector<std::string> needs;
  int64_t m = 0, n = 0, k = 0, batch = 1;
};

class GptBuilder {
 public:
  GptBuilder(const RunSpec& s, const RematPolicy& policy)
      : s_(s), m_(s.model), policy_(policy), b_(absl::StrCat(s.model.name, "-train-step")) {
    S_ = s.batch.seq_len;
    B_ = s.batch.per_device;
    H_ = m_.d_model;
    A_ = m_.n_heads;
    F_ = m_.mlp_dim;
    V_ = m_.vocab;
    L_ = m_.n_layers;
    t_ = s.parallelism.tensor;
    K_ = m_.n_kv_heads > 0 ? m_.n_kv_heads : A_;
    Dh_ = m_.head_dim > 0 ? m_.head_dim : H_ / A_;
    sp_ = s.parallelism.sequence_parallel && t_ > 1;
    cdt_ = m_.compute_dtype;
  }

  absl::StatusOr<Program> Build() {
    if (H_ % t_ != 0 || A_ % t_ != 0 || K_ % t_ != 0 || F_ % t_ != 0 || V_ % t_ != 0 || (sp_ && S_ % t_ != 0)) {
      return absl::InvalidArgumentError("parallelism.tensor: must divide d_model, n_heads, n_kv_heads, mlp_dim, "
                                        "vocab (and seq_len with sequence_parallel)");
    }
    if (s_.remat.num_layers < 1 || (s_.remat.method == "sequential" && s_.remat.num_layers > L_)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "remat.num_layers: ", s_.remat.num_layers, " must be >= 1",
          s_.remat.method == "sequential" ? absl::StrCat(" and <= model.n_layers (", L_, ") for method sequential")
                                          : std::string()));
    }
    nodes_ = LayerNodes();
    RETURN_IF_ERROR(DecideSaved());
    DeclareParams();
    b_.set_phase(Phase::kForward);
    TensorId x = b_.AddTensor("embed.out", {Ssp(), B_, H_}, cdt_, Role::kActivation, "embedding output");
    b_.AddOp("embed.lookup", OpKind::kGather, {params_.at("embedding"), tokens_}, {x}, 0);
    std::vector<std::map<std::string, TensorId>> fwd(static_cast<size_t>(L_));
    for (int l = 0; l < L_; ++l) {
      b_.set_layer(l);
      b_.BeginRegion(absl::StrCat("layer", l, ".forward"), "layer");
      fwd[static_cast<size_t>(l)] = Forward(l, {{"x", x}}, false, {});
      MarkSaved(l, fwd[static_cast<size_t>(l)]);
      Offload(l, fwd[static_cast<size_t>(l)]);
      b_.EndRegion();
      x = fwd[static_cast<size_t>(l)].at("x_out");
    }
    b_.set_layer(-1);
    TensorId dx = HeadAndLoss(x);
    b_.set_phase(Phase::kBackward);
    std::map<int, std::map<std::string, TensorId>> group_values;
    for (int l = static_cast<int>(L_) - 1; l >= 0; --l) {
      b_.set_layer(l);
      b_.BeginRegion(absl::StrCat("layer", l, ".backward"), "layer");
      const int64_t g = GroupSize();
      if (Checkpointed(l) && g > 1 && !group_values.count(l)) {
        // Groups of layers (uniform, sequential, sqrt): recompute the whole
        // group from its saved input, then run its layers' backward passes
        // in reverse.
        const int start = static_cast<int>(l - l % g);
        TensorId x = fwd[static_cast<size_t>(start)].at("x");
        for (int j = start; j <= l; ++j) {
          b_.set_layer(j);
          group_values[j] = Forward(j, {{"x", x}}, true, {});
          x = group_values[j].at("x_out");
        }
        b_.set_layer(l);
      }
      auto gv = group_values.find(l);
      dx = Backward(l, fwd[static_cast<size_t>(l)], gv == group_values.end() ? nullptr : &gv->second, dx);
      b_.EndRegion();
    }
    b_.set_layer(-1);
    TensorId demb = b_.AddTensor("grad.embedding", b_.tensor(params_.at("embedding")).shape, cdt_, Role::kGradient,
                                 "gradient of embedding");
    b_.AddOp("embed.backward", OpKind::kScatter, {dx, tokens_}, {demb}, 0);
    grads_["embedding"] = demb;
    b_.set_phase(Phase::kOptimizer);
    Optimizer();
    return b_.Finish();
  }

 private:
  int64_t Ssp() const { return sp_ ? S_ / t_ : S_; }

  std::vector<Node> LayerNodes() const {
    const double s = static_cast<double>(S_), b = static_cast<double>(B_), h = static_cast<double>(H_);
    const double a = static_cast<double>(A_), f = static_cast<double>(F_), t = static_cast<double>(t_);
    // Grouped-query attention (Ainslie et al. 2023, arXiv 2305.13245;
    // Megatron-LM --group-query-attention --num-query-groups K,
    // megatron/core/transformer/attention.py SelfAttention.linear_qkv of
    // width (A + 2K)·Dh, each TP rank holding A/t query heads and K/t
    // groups): the fused QKV GEMM is (A + 2K)·Dh wide; scores and context
    // run over the A/t query heads of a rank. K = A is multi-head attention.
    const int64_t At = A_ / t_, Ft = F_ / t_;
    const int64_t Wqkv = (A_ + 2 * K_) * Dh_, Wc = A_ * Dh_;
    const double wqkv = static_cast<double>(Wqkv), wc = static_cast<double>(Wc), dh = static_cast<double>(Dh_);
    std::vector<Node> n;
    auto add = [&](Node x) { n.push_back(std::move(x)); };
    // Layer input x [s/t (SP) or s, b, h]; LayerNorm keeps its input.
    add({"ln1", {Ssp(), B_, H_}, cdt_, OpKind::kElementwise, {"x"}, "ln1", 8 * s * b * h / (sp_ ? t : 1), "", false,
         false, {"x"}});
    std::string qkv_in = "ln1";
    if (sp_) {  // SP: all-gather along the sequence before the column-parallel GEMM (transient)
      add({"ln1_full", {S_, B_, H_}, cdt_, OpKind::kAllGather, {"ln1"}, "", 0, "", false, false, {}});
      qkv_in = "ln1_full";
    }
    // Column-parallel QKV GEMM; its weight gradient reads the (sharded, with
    // SP re-gathered) input.
    Node qkv{"qkv", {S_, B_, Wqkv / t_}, cdt_, OpKind::kMatmul, {qkv_in}, "w_qkv", 2 * s * b * h * wqkv / t, "qkv",
             true, false, {"ln1"}};
    qkv.m = S_ * B_; qkv.n = Wqkv / t_; qkv.k = H_;
    add(qkv);
    // QK^T (batch dims b, a/t), softmax, dropout, AV: the attention core.
    Node sc{"scores", {B_, At, S_, S_}, cdt_, OpKind::kMatmul, {"qkv"}, "", 2 * b * a / t * s * s * dh,
            "attn_scores", true, true, {"qkv"}};
    sc.m = S_; sc.n = S_; sc.k = Dh_; sc.batch = B_ * At;
    add(sc);
    add({"probs", {B_, At, S_, S_}, cdt_, OpKind::kElementwise, {"scores"}, "", 5 * b * a / t * s * s, "attn_probs",
         false, false, {"probs"}});
    add({"attn_mask", {B_, At, S_, S_}, DType::kU8, OpKind::kElementwise, {"probs"}, "", b * a / t * s * s,
         "attn_dropout_mask", false, false, {}});
    add({"dropped", {B_, At, S_, S_}, cdt_, OpKind::kElementwise, {"probs", "attn_mask"}, "", b * a / t * s * s,
         "attn_dropped", false, false, {"attn_mask"}});
    Node av{"context", {S_, B_, Wc / t_}, cdt_, OpKind::kMatmul, {"dropped", "qkv"}, "", 2 * b * a / t * s * s * dh,
            "context", true, true, {"dropped", "qkv"}};
    av.m = S_; av.n = Dh_; av.k = S_; av.batch = B_ * At;
    add(av);
    Node proj{"proj_partial", {S_, B_, H_}, cdt_, OpKind::kMatmul, {"context"}, "w_proj", 2 * s * b * wc * h / t,
              "out_proj", true, false, {"context"}};
    proj.m = S_ * B_; proj.n = H_; proj.k = Wc / t_;
    add(proj);
    // Row-parallel output: all-reduce (g), or reduce-scatter with SP.
    add({"proj", {Ssp(), B_, H_}, cdt_, sp_ ? OpKind::kReduceScatter : OpKind::kAllReduce, {"proj_partial"}, "", 0,
         "", false, false, {}});
    add({"drop1_mask", {Ssp(), B_, H_}, DType::kU8, OpKind::kElementwise, {"proj"}, "", s * b * h / (sp_ ? t : 1),
         "", false, false, {}});
    add({"x_mid", {Ssp(), B_, H_}, cdt_, OpKind::kElementwise, {"x", "proj", "drop1_mask"}, "",
         3 * s * b * h / (sp_ ? t : 1), "", false, false, {"drop1_mask"}});
    add({"ln2", {Ssp(), B_, H_}, cdt_, OpKind::kElementwise, {"x_mid"}, "ln2", 8 * s * b * h / (sp_ ? t : 1), "",
         false, false, {"x_mid"}});
    std::string fc1_in = "ln2";
    if (sp_) {
      add({"ln2_full", {S_, B_, H_}, cdt_, OpKind::kAllGather, {"ln2"}, "", 0, "", false, false, {}});
      fc1_in = "ln2_full";
    }
    Node fc1{"fc1", {S_, B_, Ft}, cdt_, OpKind::kMatmul, {fc1_in}, "w_fc1", 2 * s * b * h * f / t, "mlpwi", true,
             false, {"ln2"}};
    fc1.m = S_ * B_; fc1.n = Ft; fc1.k = H_;
    add(fc1);
    add({"gelu", {S_, B_, Ft}, cdt_, OpKind::kElementwise, {"fc1"}, "", 8 * s * b * f / t, "", false, false,
         {"fc1"}});
    Node fc2{"fc2_partial", {S_, B_, H_}, cdt_, OpKind::kMatmul, {"gelu"}, "w_fc2", 2 * s * b * h * f / t, "mlpwo",
             true, false, {"gelu"}};
    fc2.m = S_ * B_; fc2.n = H_; fc2.k = Ft;
    add(fc2);
    add({"fc2", {Ssp(), B_, H_}, cdt_, sp_ ? OpKind::kReduceScatter : OpKind::kAllReduce, {"fc2_partial"}, "", 0, "",
         false, false, {}});
    add({"drop2_mask", {Ssp(), B_, H_}, DType::kU8, OpKind::kElementwise, {"fc2"}, "", s * b * h / (sp_ ? t : 1), "",
         false, false, {}});
    add({"x_out", {Ssp(), B_, H_}, cdt_, OpKind::kElementwise, {"x_mid", "fc2", "drop2_mask"}, "",
         3 * s * b * h / (sp_ ? t : 1), "", false, false, {"drop2_mask"}});
    return n;
  }

  const Node& NodeOf(const std::string& name) const {
    for (const Node& n : nodes_) {
      if (n.out == name) return n;
    }
    GPUSIM_CHECK(false);
    return nodes_[0];
  }

  // Which layers are checkpointed under full recompute, and in groups of
  // how many layers (each group saves only its first layer's input and is
  // recomputed whole before its layers' backward passes):
  //  - uniform k: Megatron-LM --recompute-method uniform
  //    --recompute-num-layers k (megatron/core/transformer/
  //    transformer_block.py _checkpointed_forward): every layer, groups of k
  //    — activation checkpointing every k layers.
  //  - block k: --recompute-method block: the first k layers, one by one;
  //    the rest save everything.
  //  - sequential k: torch.utils.checkpoint.checkpoint_sequential(functions,
  //    segments=k): segments of n // k layers, all but the last checkpointed
  //    (the last runs without checkpoint).
  //  - sqrt: Chen et al. 2016 (arXiv 1604.06174, "Training Deep Nets with
  //    Sublinear Memory Cost", Sec. 4.1): segments of ceil(sqrt(n)) layers,
  //    O(sqrt(n)) memory for one extra forward pass.
  bool FullRecompute() const { return !policy_.no_remat() && policy_.name() == "full"; }
  int64_t GroupSize() const {
    const std::string& m = s_.remat.method;
    if (m == "block") return 1;
    if (m == "sequential") return std::max<int64_t>(1, L_ / std::max<int64_t>(1, s_.remat.num_layers));
    if (m == "sqrt") {
      int64_t g = 1;
      while (g * g < L_) ++g;
      return g;
    }
    return std::max<int64_t>(1, s_.remat.num_layers);
  }
  bool Checkpointed(int l) const {
    if (!FullRecompute()) return false;
    if (s_.remat.method == "block") return l < s_.remat.num_layers;
    if (s_.remat.method == "sequential") return l < GroupSize() * (s_.remat.num_layers - 1);
    return true;
  }

  // The saved set for value-level policies (none, selective, JAX names):
  // walk back from what backward rules read, as in models/llama.cc.
  absl::Status DecideSaved() {
    std::vector<std::string> work;
    for (const Node& n : nodes_) work.insert(work.end(), n.needs.begin(), n.needs.end());
    while (!work.empty()) {
      const std::string v = work.back();
      work.pop_back();
      if (v == "x" || saved_.count(v) || recompute_.count(v)) continue;
      const Node& n = NodeOf(v);
      const SaveDecision d = policy_.no_remat() || FullRecompute() ? SaveDecision::kSave
                                                                  : policy_.Decide({n.tag, n.is_dot, n.batch_dims});
      if (d == SaveDecision::kOffload) {
        offload_.insert(v);
      } else if (d == SaveDecision::kSave) {
        saved_.insert(v);
      } else {
        recompute_.insert(v);
        for (const std::string& in : n.ins) work.push_back(in);
      }
    }
    saved_.insert("x");
    return absl::OkStatus();
  }

  void DeclareParams() {
    auto param = [&](const std::string& name, std::vector<int64_t> shape, int layer) {
      const std::string full = layer >= 0 ? absl::StrCat("layer", layer, ".", name) : name;
      TensorId p = b_.AddArgument("params." + full, shape, m_.weight_dtype, Role::kParameter, true,
                                  "parameter " + full);
      params_[full] = p;
      TensorId mu = b_.AddArgument("opt.mu." + full, shape, s_.optimizer.moment_dtype, Role::kOptimizerState, true,
                                   "Adam first moment of " + full);
      TensorId nu = b_.AddArgument("opt.nu." + full, shape, s_.optimizer.moment_dtype, Role::kOptimizerState, true,
                                   "Adam second moment of " + full);
      moments_[full] = {mu, nu};
    };
    param("embedding", {V_ / t_, H_}, -1);
    for (int l = 0; l < L_; ++l) {
      param("ln1", {2, H_}, l);
      param("w_qkv", {H_, (A_ + 2 * K_) * Dh_ / t_}, l);
      param("w_proj", {A_ * Dh_ / t_, H_}, l);
      param("ln2", {2, H_}, l);
      param("w_fc1", {H_, F_ / t_}, l);
      param("w_fc2", {F_ / t_, H_}, l);
    }
    param("ln_f", {2, H_}, -1);
    // Untied: Megatron's output_layer, a vocabulary-parallel
    // ColumnParallelLinear of its own (megatron/core/models/gpt/gpt_model.py,
    // share_embeddings_and_output_weights=False).
    if (!m_.tied_embeddings) param("output", {V_ / t_, H_}, -1);
    tokens_ = b_.AddArgument("batch.tokens", {B_, S_}, DType::kI64, Role::kInputBatch, false, "token ids");
  }

  TensorId Param(int l, const std::string& w) { return params_.at(absl::StrCat("layer", l, ".", w)); }

  // Emits the nodes in `only` (all when empty), starting from `known`.
  std::map<std::string, TensorId> Forward(int l, std::map<std::string, TensorId> known, bool recompute,
                                          const std::set<std::string>& only) {
    b_.set_recompute(recompute);
    const std::string pre = absl::StrCat("layer", l, recompute ? ".remat." : ".");
    for (const Node& n : nodes_) {
      if (!only.empty() && !only.count(n.out)) continue;
      if (known.count(n.out)) continue;
      std::vector<TensorId> ins;
      for (const std::string& i : n.ins) ins.push_back(known.at(i));
      if (!n.weight.empty()) ins.push_back(Param(l, n.weight));
      TensorId out = b_.AddTensor(pre + n.out, n.shape, n.dtype, Role::kActivation,
                                  absl::StrCat(recompute ? "recomputed " : "", "layer ", l, " ", n.out));
      Op& op = b_.AddOp(pre + n.out, n.kind, ins, {out}, n.flops);
      op.dtype = cdt_;
      op.group = IsCollective(n.kind) ? t_ : 1;
      op.m = n.m; op.n = n.n; op.k = n.k; op.batch = n.batch;
      known[n.out] = out;
    }
    b_.set_recompute(false);
    return known;
  }

  void MarkSaved(int l, const std::map<std::string, TensorId>& v) {
    if (Checkpointed(l)) {
      // Full recompute keeps only the checkpoint's input (uniform groups: the
      // first layer of each group of remat.num_layers).
      if (l % GroupSize() == 0) b_.tensor(v.at("x")).role = Role::kResidual;
      return;
    }
    for (const std::string& name : saved_) b_.tensor(v.at(name)).role = Role::kResidual;
  }

  // Host offload of the values the policy marks Offloadable. Under jax the
  // copies run on the host-copy stream as in models/llama.cc (Note [Host
  // offload]). Under pytorch they are torch.autograd.graph.save_on_cpu's
  // pack and unpack hooks: `packed.copy_(tensor)` into pinned memory and
  // `tensor.to(device, non_blocking=True)`, both issued on the current
  // (compute) stream, so they do not overlap compute.
  void Offload(int l, const std::map<std::string, TensorId>& v) {
    for (const std::string& name : offload_) {
      const Tensor src = b_.tensor(v.at(name));  // a copy: AddTensor may reallocate
      TensorId h = b_.AddTensor(absl::StrCat("host.layer", l, ".", name), src.shape, src.dtype, Role::kResidual,
                                absl::StrCat("layer ", l, " ", name, " offloaded to pinned host"));
      b_.tensor(h).host = true;
      Op& op = b_.AddOp(absl::StrCat("layer", l, ".offload_", name), OpKind::kDeviceToHost, {src.id}, {h}, 0);
      op.on_compute_stream = s_.framework == "pytorch";
      host_[{l, name}] = h;
    }
  }

  void Reload(int l, std::map<std::string, TensorId>* v) {
    OpId start = b_.next_op() - 1;
    for (const std::string& name : offload_) {
      const Tensor h = b_.tensor(host_.at({l, name}));
      TensorId t = b_.AddTensor(absl::StrCat("layer", l, ".reload.", name), h.shape, h.dtype, Role::kResidual,
                                absl::StrCat("layer ", l, " ", name, " copied back from pinned host"));
      Op& op = b_.AddOp(absl::StrCat("layer", l, ".reload_", name), OpKind::kHostToDevice, {h.id}, {t}, 0);
      op.on_compute_stream = s_.framework == "pytorch";
      if (start >= 0) op.control_deps.push_back(start);
      (*v)[name] = t;
    }
  }

  TensorId HeadAndLoss(TensorId x) {
    // Final LN, vocabulary-parallel logits and cross-entropy (fp32).
    TensorId xf = b_.AddTensor("final_ln", {Ssp(), B_, H_}, cdt_, Role::kResidual, "final LayerNorm output");
    b_.AddOp("final_ln", OpKind::kElementwise, {x, params_.at("ln_f")}, {xf}, 8.0 * S_ * B_ * H_);
    const TensorId w_out = params_.at(m_.tied_embeddings ? "embedding" : "output");
    TensorId logits = b_.AddTensor("logits", {S_, B_, V_ / t_}, DType::kF32, Role::kResidual, "logits (fp32)");
    Op& op = b_.AddOp("logits", OpKind::kMatmul, {xf, w_out}, {logits}, 2.0 * S_ * B_ * H_ * V_ / t_);
    op.m = S_ * B_; op.n = V_ / t_; op.k = H_;
    TensorId dlogits = b_.AddTensor("d_logits", {S_, B_, V_ / t_}, cdt_, Role::kTemporary, "cross-entropy gradient");
    b_.AddOp("cross_entropy", OpKind::kElementwise, {logits, tokens_}, {dlogits}, 5.0 * S_ * B_ * V_ / t_);
    TensorId dx = b_.AddTensor("d_final", {Ssp(), B_, H_}, cdt_, Role::kTemporary, "gradient into the last layer");
    if (m_.tied_embeddings) {
      b_.AddOp("logits.backward", OpKind::kMatmul, {dlogits, w_out, xf}, {dx}, 4.0 * S_ * B_ * H_ * V_ / t_);
    } else {
      b_.AddOp("logits.backward", OpKind::kMatmul, {dlogits, w_out}, {dx}, 2.0 * S_ * B_ * H_ * V_ / t_);
      TensorId dw = b_.AddTensor("grad.output", {V_ / t_, H_}, cdt_, Role::kGradient, "gradient of output");
      b_.AddOp("logits.d_output", OpKind::kMatmul, {dlogits, xf}, {dw}, 2.0 * S_ * B_ * H_ * V_ / t_);
      grads_["output"] = dw;
    }
    return dx;
  }

  // d(name) accumulated: a second contribution is added in.
  void AddGrad(std::map<std::string, TensorId>& g, const std::string& name, TensorId contribution) {
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

  TensorId Backward(int l, const std::map<std::string, TensorId>& fwd,
                    const std::map<std::string, TensorId>* recomputed, TensorId dy) {
    std::map<std::string, TensorId> v;
    if (recomputed != nullptr) {
      v = *recomputed;
    } else if (Checkpointed(l)) {
      // Recompute the layer (or, uniform groups, the group) from its input.
      v = Forward(l, {{"x", fwd.at("x")}}, true, {});
    } else {
      for (const std::string& s : saved_) v[s] = fwd.at(s);
      Reload(l, &v);
      if (!recompute_.empty()) v = Forward(l, v, true, recompute_);
    }
    std::map<std::string, TensorId> g{{"x_out", dy}};
    const std::string pre = absl::StrCat("layer", l, ".d_");
    for (auto it = nodes_.rbegin(); it != nodes_.rend(); ++it) {
      const Node& n = *it;
      auto gi = g.find(n.out);
      if (gi == g.end()) continue;
      const TensorId dout = gi->second;
      std::vector<TensorId> reads = {dout};
      for (const std::string& need : n.needs) reads.push_back(v.at(need));
      if (IsCollective(n.kind)) {
        // The conjugate: all-gather ↔ reduce-scatter; all-reduce's (g) backward
        // is the identity, its partner f (before the column-parallel GEMM)
        // all-reduces the input gradient (below).
        const std::string in = n.ins[0];
        if (n.kind == OpKind::kAllReduce) {
          AddGrad(g, in, dout);
          continue;
        }
        const Node& src = NodeOf(in);
        TensorId d = b_.AddTensor(pre + in, src.shape, cdt_, Role::kTemporary, "gradient of " + in);
        Op& op = b_.AddOp(pre + n.out + ".conjugate",
                          n.kind == OpKind::kAllGather ? OpKind::kReduceScatter : OpKind::kAllGather, {dout}, {d}, 0);
        op.group = t_;
        AddGrad(g, in, d);
        continue;
      }
      if (!n.weight.empty() && n.kind == OpKind::kMatmul) {
        // dW = Xᵀ dY (needs X, with SP re-gathered), dX = dY Wᵀ.
        TensorId xin = v.at(n.needs[0]);
        if (sp_ && (n.out == "qkv" || n.out == "fc1")) {
          TensorId full = b_.AddTensor(pre + n.out + ".input_regathered", {S_, B_, H_}, cdt_, Role::kTemporary,
                                       "SP: the saved sharded input all-gathered again for dW");
          Op& ag = b_.AddOp(pre + n.out + ".regather", OpKind::kAllGather, {xin}, {full}, 0);
          ag.group = t_;
          xin = full;
        }
        TensorId dw = b_.AddTensor(pre + n.weight, b_.tensor(Param(l, n.weight)).shape, cdt_, Role::kGradient,
                                   absl::StrCat("gradient of layer ", l, " ", n.weight));
        Op& w = b_.AddOp(pre + n.weight, OpKind::kMatmul, {xin, dout}, {dw}, n.flops);
        w.m = n.k; w.n = n.n; w.k = n.m;
        grads_[absl::StrCat("layer", l, ".", n.weight)] = dw;
        const Node& src = NodeOf(n.ins[0]) ;
        (void)src;
        const std::string in = n.ins[0];
        std::vector<int64_t> in_shape = in == "x" ? std::vector<int64_t>{Ssp(), B_, H_} : NodeOf(in).shape;
        TensorId dx = b_.AddTensor(pre + in, in_shape, cdt_, Role::kTemporary, "gradient of " + in);
        Op& x = b_.AddOp(pre + n.out + ".dx", OpKind::kMatmul, {dout, Param(l, n.weight)}, {dx}, n.flops);
        x.m = n.m; x.n = n.k; x.k = n.n;
        if (!sp_ && (n.out == "qkv" || n.out == "fc1") && t_ > 1) {
          // f's backward: all-reduce the input gradient across the TP group.
          TensorId r = b_.AddTensor(pre + in + ".reduced", in_shape, cdt_, Role::kTemporary, "all-reduced gradient");
          Op& ar = b_.AddOp(pre + n.out + ".f_backward", OpKind::kAllReduce, {dx}, {r}, 0);
          ar.group = t_;
          dx = r;
        }
        AddGrad(g, in, dx);
        continue;
      }
      // Other ops: one backward op per input that carries a gradient.
      for (const std::string& in : n.ins) {
        if (in == "attn_mask" || in == "drop1_mask" || in == "drop2_mask") continue;  // masks have no gradient
        std::vector<int64_t> in_shape = in == "x" ? std::vector<int64_t>{Ssp(), B_, H_} : NodeOf(in).shape;
        TensorId d = b_.AddTensor(pre + in + "." + n.out, in_shape, cdt_, Role::kTemporary, "gradient of " + in);
        Op& op = b_.AddOp(pre + n.out + ".d" + in, n.kind, reads, {d}, n.kind == OpKind::kMatmul ? n.flops : n.flops);
        op.m = n.m; op.n = n.n; op.k = n.k; op.batch = n.batch;
        AddGrad(g, in, d);
      }
      if (!n.weight.empty()) {  // LayerNorm scale and bias
        TensorId dw = b_.AddTensor(pre + n.weight, {2, H_}, DType::kF32, Role::kGradient,
                                   absl::StrCat("gradient of layer ", l, " ", n.weight));
        b_.AddOp(pre + n.weight, OpKind::kReduce, reads, {dw}, 2.0 * S_ * B_ * H_);
        grads_[absl::StrCat("layer", l, ".", n.weight)] = dw;
      }
    }
    return g.at("x");
  }

  // Note [GPT gradient clipping]: Megatron-LM clips by the global norm
  // (megatron/core/optimizer/clip_grads.py get_grad_norm_fp32 and
  // clip_grad_by_total_norm_fp32; --clip-grad 1.0 by default): one
  // multi_tensor_l2norm pass over every gradient, the squared norm
  // all-reduced over the model-parallel (here tensor-parallel) group, then
  // the gradients scaled in place only when clip_coeff = max_norm / norm < 1.
  // Whether that happens depends on the values, which a simulator does not
  // have; the steady-state step is modelled (norm computed, no rescale).
  TensorId GradNorm() {
    std::vector<TensorId> all;
    double elems = 0;
    for (const auto& [name, g] : grads_) {
      all.push_back(g);
      elems += static_cast<double>(b_.tensor(g).elements());
    }
    TensorId sq = b_.AddTensor("grad_norm.local", {}, DType::kF32, Role::kTemporary,
                               "local sum of squares of the gradients");
    b_.AddOp("grad_norm.l2norm", OpKind::kReduce, all, {sq}, 2.0 * elems);
    TensorId norm = b_.AddTensor("grad_norm", {}, DType::kF32, Role::kScalar, "global gradient norm (clip)");
    if (t_ > 1) {
      b_.AddOp("grad_norm.all_reduce", OpKind::kAllReduce, {sq}, {norm}, 0).group = t_;
    } else {
      b_.AddOp("grad_norm.sqrt", OpKind::kElementwise, {sq}, {norm}, 1);
    }
    return norm;
  }

  // torch.optim.AdamW (fused): in place into params and moments.
  void Optimizer() {
    const TensorId norm = s_.optimizer.clip_grad_norm ? GradNorm() : kNoTensor;
    for (const auto& [name, p] : params_) {
      auto gi = grads_.find(name);
      std::vector<TensorId> ins = {p, moments_.at(name).first, moments_.at(name).second};
      if (gi != grads_.end()) ins.push_back(gi->second);
      if (norm != kNoTensor) ins.push_back(norm);
      std::vector<TensorId> outs;
      for (TensorId src : {p, moments_.at(name).first, moments_.at(name).second}) {
        const Tensor& t = b_.tensor(src);
        TensorId o = b_.AddTensor(t.name + ".new", t.shape, t.dtype, t.role, "updated " + t.origin);
        b_.tensor(o).live_out = true;
        b_.tensor(o).aliases = src;
        outs.push_back(o);
      }
      Op& op = b_.AddOp("adamw." + name, OpKind::kElementwise, ins, outs,
                        16.0 * static_cast<double>(b_.tensor(p).elements()));
      op.dtype = DType::kF32;
    }
  }

  const RunSpec& s_;
  const ModelSpec& m_;
  const RematPolicy& policy_;
  ProgramBuilder b_;
  int64_t S_, B_, H_, A_, F_, V_, L_, t_, K_ = 0, Dh_ = 0;
  bool sp_;
  DType cdt_;
  std::vector<Node> nodes_;
  std::set<std::string> saved_, recompute_, offload_;
  std::map<std::pair<int, std::string>, TensorId> host_;  // offloaded values in pinned host memory
  std::map<std::string, TensorId> params_, grads_;
  std::map<std::string, std::pair<TensorId, TensorId>> moments_;
  TensorId tokens_ = kNoTensor;
};

}  // namespace

int64_t GptParamCount(const ModelSpec& m) {
  const int64_t h = m.d_model, f = m.mlp_dim, a = m.n_heads;
  const int64_t k = m.n_kv_heads > 0 ? m.n_kv_heads : a, dh = m.head_dim > 0 ? m.head_dim : h / a;
  return m.n_layers * (h * (a + 2 * k) * dh + a * dh * h + 2 * h * f + 4 * h) +
         m.vocab * h * (m.tied_embeddings ? 1 : 2) + 2 * h;
}

Bytes GptLayerActivationBytes(const Program& p, int layer) {
  Bytes total(0);
  for (const Op& op : p.ops) {
    if (op.layer != layer || op.phase != Phase::kForward || op.recompute) continue;
    for (TensorId t : op.outputs) {
      // The layer's output is the next layer's input, counted there.
      if (p.tensor(t).role == Role::kResidual && p.tensor(t).name != absl::StrCat("layer", layer, ".x_out")) {
        total += p.tensor(t).bytes();
      }
    }
  }
  // The layer input x is produced by the previous layer (or the embedding).
  const std::string input = layer == 0 ? "embed.out" : absl::StrCat("layer", layer - 1, ".x_out");
  for (const Tensor& t : p.tensors) {
    if (t.name == input && t.role == Role::kResidual) total += t.bytes();
  }
  return total;
}

absl::StatusOr<Program> BuildGptTrainStep(const RunSpec& spec) {
  ASSIGN_OR_RETURN(std::unique_ptr<RematPolicy> policy, MakeRematPolicy(spec.remat));
  GptBuilder b(spec, *policy);
  return b.Build();
}

}  // namespace gpusim
