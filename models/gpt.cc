#include "models/gpt.h"

#include <algorithm>
#include <limits>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/match.h"
#include "models/megatron_schedule.h"
#include "models/megatron_schedule_buckets.h"
#include "sim/base/status.h"
#include "sim/ir/builder.h"
#include "sim/remat/remat_policy.h"

namespace gpusim {
namespace {

// A linear layer's weight and the bias whose gradient its wgrad writes.
constexpr std::pair<const char*, const char*> kBiasOf[] = {
    {"w_qkv", "b_qkv"}, {"w_proj", "b_proj"}, {"w_fc1", "b_fc1"}, {"w_fc2", "b_fc2"}};

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
  int64_t group = 0;                // collective group (0: the TP group)
  double comm_scale = 1;            // collective: bytes moved / output bytes (the CP ring)
  double bwd_scale = 1;             // backward FLOPs / forward FLOPs (per input)
};

class GptBuilder {
 public:
  GptBuilder(const RunSpec& s, const RematPolicy& policy)
      : s_(s), m_(s.model), policy_(policy), b_(absl::StrCat(s.model.name, "-train-step")), g_(s.megatron),
        mg_(s.megatron.present) {
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
    Sfull_ = S_;
    if (mg_) {
      // Note [Megatron ranks]: pipeline rank r holds model chunks c = 0..v-1,
      // chunk c being virtual stage c x p + r with the layers after those of
      // the virtual stages before it (MegatronSpec::stage_layers, Note
      // [Megatron uneven stages] in sim/config/megatron_args.cc);
      // CP splits the sequence into cp chunks per rank (the load-balanced
      // 2 x cp halves, get_batch_on_this_cp_rank).
      cp_ = g_.context;
      dp_ = g_.data;
      S_ = Sfull_ / cp_;
      first_stage_ = g_.stage == 0;
      last_stage_ = g_.stage == g_.pipeline - 1;
      for (int64_t c = 0; c < g_.virtual_stages; ++c) {
        const int64_t k = c * g_.pipeline + g_.stage;
        int64_t start = 0;
        for (int64_t j = 0; j < k; ++j) start += StageLayers(j);
        std::vector<int> layers;
        for (int64_t j = 0; j < StageLayers(k); ++j) layers.push_back(static_cast<int>(start + j));
        chunks_.push_back(layers);
      }
      schedule_ = MegatronSchedule(g_.pipeline, g_.stage, g_.virtual_stages, g_.microbatches, g_.microbatch_group);
    } else {
      std::vector<int> layers;
      for (int l = 0; l < L_; ++l) layers.push_back(l);
      chunks_.push_back(layers);
      schedule_ = {{true, 0, 0}, {false, 0, 0}};
    }
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
    if (mg_ && g_.overlap_param_gather && dp_ * cp_ > 1) EmitParamGathers();
    for (size_t i = 0; i < schedule_.size(); ++i) {
      // Megatron: each pass of the schedule is a "pipeline_slot" region, the
      // unit the ranks wait on each other by (sim/step/megatron_step_pipeline.h).
      if (mg_) b_.BeginRegion(absl::StrCat("pipeline_slot", i), "pipeline_slot");
      if (schedule_[i].forward) {
        ForwardSlot(schedule_[i]);
      } else {
        BackwardSlot(schedule_[i]);
      }
      if (mg_) b_.EndRegion();
    }
    b_.set_layer(-1);
    if (mg_) ReduceGradients(/*at_end=*/true);
    b_.set_phase(Phase::kOptimizer);
    Optimizer();
    return b_.Finish();
  }

 private:
  // Megatron launch lines (RunSpec::megatron): a gradient bucket, and the
  // head's values of one micro-batch between its forward and backward.
  struct Bucket {
    std::vector<TensorId> grads;
    std::set<std::string> units;  // "head", "layerN", "embed": all done -> ready
    int64_t elements = 0;
    bool emitted = false;
  };
  struct HeadState {
    TensorId xf = kNoTensor, logits = kNoTensor, dlogits = kNoTensor;
  };

  // Transformer layers of virtual stage k (even when the launch line's
  // parser left no per-stage list, as a hand-built spec may).
  int64_t StageLayers(int64_t k) const {
    if (!g_.stage_layers.empty()) return g_.stage_layers[static_cast<size_t>(k)];
    return L_ / (g_.pipeline * g_.virtual_stages);
  }

  // Names of micro-batch k's values: "mbK." (none with a single micro-batch).
  std::string MbPrefix(int64_t mb) const {
    return mg_ && g_.microbatches > 1 ? absl::StrCat("mb", mb, ".") : std::string();
  }

  // One forward pass of (micro-batch, chunk): the embedding on the first
  // chunk of the first stage, else the activation received from the
  // previous stage; the head and loss on the last chunk of the last stage,
  // else a send (the output is freed once sent: deallocate_output_tensor).
  void ForwardSlot(const PipelineSlot& slot) {
    mbp_ = MbPrefix(slot.microbatch);
    const std::vector<int>& layers = chunks_[static_cast<size_t>(slot.chunk)];
    chunk_first_ = layers.front();
    b_.set_phase(Phase::kForward);
    b_.set_layer(-1);
    TensorId x;
    const bool embed = slot.chunk == 0 && first_stage_;
    const bool head = slot.chunk == static_cast<int64_t>(chunks_.size()) - 1 && last_stage_;
    if (embed) {
      x = b_.AddTensor(mbp_ + "embed.out", {Ssp(), B_, H_}, cdt_, Role::kActivation, "embedding output");
      std::vector<TensorId> ins = {params_.at("embedding"), tokens_};
      // Learned absolute positions: added to the word embeddings
      // (megatron/core/models/common/embeddings/language_model_embedding.py).
      if (params_.count("position")) ins.push_back(params_.at("position"));
      b_.AddOp(mbp_ + "embed.lookup", OpKind::kGather, ins, {x}, 0);
    } else {
      x = b_.AddTensor(absl::StrCat(mbp_, "recv.chunk", slot.chunk, ".x"), {Ssp(), B_, H_}, cdt_, Role::kActivation,
                       "activation received from the previous pipeline stage");
      b_.AddOp(absl::StrCat(mbp_, "recv.chunk", slot.chunk, ".x"), OpKind::kCopy, {}, {x}, 0);
    }
    if (mg_ && slot.microbatch == 0 && param_gather_.count(slot.chunk)) {
      b_.op(b_.next_op() - 1).control_deps.push_back(param_gather_.at(slot.chunk));
    }
    std::vector<std::map<std::string, TensorId>>& fwd = fwd_[{slot.microbatch, slot.chunk}];
    for (int l : layers) {
      b_.set_layer(l);
      b_.BeginRegion(absl::StrCat("layer", l, ".forward"), "layer");
      fwd.push_back(Forward(l, {{"x", x}}, false, {}));
      MarkSaved(l, fwd.back());
      Offload(l, fwd.back());
      b_.EndRegion();
      x = fwd.back().at("x_out");
    }
    b_.set_layer(-1);
    if (head) {
      HeadForward(slot.microbatch, x);
    } else {
      b_.AddOp(absl::StrCat(mbp_, "send.chunk", slot.chunk, ".x"), OpKind::kCopy, {x}, {}, 0);
    }
  }

  void BackwardSlot(const PipelineSlot& slot) {
    mbp_ = MbPrefix(slot.microbatch);
    const std::vector<int>& layers = chunks_[static_cast<size_t>(slot.chunk)];
    chunk_first_ = layers.front();
    const bool embed = slot.chunk == 0 && first_stage_;
    const bool head = slot.chunk == static_cast<int64_t>(chunks_.size()) - 1 && last_stage_;
    const bool last_pass = mg_ && slot.microbatch == g_.microbatches - 1;
    std::vector<std::map<std::string, TensorId>>& fwd = fwd_.at({slot.microbatch, slot.chunk});
    b_.set_layer(-1);
    TensorId dx;
    if (head) {
      // The plain family runs the head's backward inside the forward phase
      // (golden figures); Megatron's backward_step starts with it.
      if (mg_) b_.set_phase(Phase::kBackward);
      dx = HeadBackward(slot.microbatch);
      b_.set_phase(Phase::kBackward);
      if (last_pass) UnitDone("head");
    } else {
      b_.set_phase(Phase::kBackward);
      dx = b_.AddTensor(absl::StrCat(mbp_, "recv.chunk", slot.chunk, ".dy"), {Ssp(), B_, H_}, cdt_,
                        Role::kTemporary, "gradient received from the next pipeline stage");
      b_.AddOp(absl::StrCat(mbp_, "recv.chunk", slot.chunk, ".dy"), OpKind::kCopy, {}, {dx}, 0);
    }
    std::map<int, std::map<std::string, TensorId>> group_values;
    for (int j = static_cast<int>(layers.size()) - 1; j >= 0; --j) {
      const int l = layers[static_cast<size_t>(j)];
      b_.set_layer(l);
      b_.BeginRegion(absl::StrCat("layer", l, ".backward"), "layer");
      const int64_t g = GroupSize();
      if (Checkpointed(l) && g > 1 && !group_values.count(l)) {
        // Groups of layers (uniform, sequential, sqrt): recompute the whole
        // group from its saved input, then run its layers' backward passes
        // in reverse.
        const int start = static_cast<int>(l - Local(l) % g);
        TensorId x = fwd[static_cast<size_t>(start - chunk_first_)].at("x");
        for (int i = start; i <= l; ++i) {
          b_.set_layer(i);
          group_values[i] = Forward(i, {{"x", x}}, true, {});
          x = group_values[i].at("x_out");
        }
        b_.set_layer(l);
      }
      auto gv = group_values.find(l);
      dx = Backward(l, fwd[static_cast<size_t>(j)], gv == group_values.end() ? nullptr : &gv->second, dx);
      b_.EndRegion();
      if (last_pass) UnitDone(absl::StrCat("layer", l));
    }
    b_.set_layer(-1);
    if (embed) {
      if (mg_) {
        std::vector<TensorId> ins = {dx, tokens_, main_grad_.at("embedding")};
        if (params_.count("position")) ins.push_back(main_grad_.at("position"));
        b_.AddOp(mbp_ + "embed.backward", OpKind::kScatter, ins, {}, 0);
        if (last_pass) UnitDone("embed");
      } else {
        TensorId demb = b_.AddTensor("grad.embedding", b_.tensor(params_.at("embedding")).shape, cdt_,
                                     Role::kGradient, "gradient of embedding");
        b_.AddOp("embed.backward", OpKind::kScatter, {dx, tokens_}, {demb}, 0);
        grads_["embedding"] = demb;
      }
    } else {
      b_.AddOp(absl::StrCat(mbp_, "send.chunk", slot.chunk, ".dx"), OpKind::kCopy, {dx}, {}, 0);
    }
    fwd_.erase({slot.microbatch, slot.chunk});
  }

  // Layer index within its model chunk (recompute groups count from there:
  // transformer_block.py _checkpointed_forward loops over the chunk's layers).
  int64_t Local(int l) const { return l - chunk_first_; }

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
    // Megatron launch lines: SwiGLU (fc1 twice as wide, gate x up), flash
    // attention, hidden dropout off when --hidden-dropout 0.
    const bool swiglu = mg_ && g_.swiglu;
    const bool flash = mg_ && g_.attention == "flash";
    const bool masks = !mg_ || g_.hidden_dropout > 0;
    const int64_t F1t = (swiglu ? 2 : 1) * Ft;
    const double f1 = (swiglu ? 2 : 1) * f;
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
      std::vector<std::string> ins = {"qkv"};
      if (cp_ > 1) {
        Node ring{"kv_ring", {2, 2, S_, B_, K_ * Dh_ / t_}, cdt_, OpKind::kAllGather, {"qkv"}, "", 0, "", false,
                  false, {}};
        ring.group = cp_;
        ring.comm_scale = static_cast<double>(cp_) / 2.0;
        add(ring);
        ins.push_back("kv_ring");
      }
      add({"attn_lse", {B_, At, S_}, DType::kF32, OpKind::kElementwise, {"qkv"}, "", b * a / t * s, "attn_lse", false,
           false, {}});
      Node fa{"context", {S_, B_, Wc / t_}, cdt_, OpKind::kAttention, ins, "", 2 * b * a / t * s * keys * dh,
              "context", false, true, {"qkv", "context", "attn_lse"}};
      fa.bwd_scale = 2.5;
      add(fa);
    } else {
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
    }
    Node proj{"proj_partial", {S_, B_, H_}, cdt_, OpKind::kMatmul, {"context"}, "w_proj", 2 * s * b * wc * h / t,
              "out_proj", true, false, {"context"}};
    proj.m = S_ * B_; proj.n = H_; proj.k = Wc / t_;
    add(proj);
    // Row-parallel output: all-reduce (g), or reduce-scatter with SP.
    add({"proj", {Ssp(), B_, H_}, cdt_, sp_ ? OpKind::kReduceScatter : OpKind::kAllReduce, {"proj_partial"}, "", 0,
         "", false, false, {}});
    if (masks) {
      add({"drop1_mask", {Ssp(), B_, H_}, DType::kU8, OpKind::kElementwise, {"proj"}, "", s * b * h / (sp_ ? t : 1),
           "", false, false, {}});
      add({"x_mid", {Ssp(), B_, H_}, cdt_, OpKind::kElementwise, {"x", "proj", "drop1_mask"}, "",
           3 * s * b * h / (sp_ ? t : 1), "", false, false, {"drop1_mask"}});
    } else {
      add({"x_mid", {Ssp(), B_, H_}, cdt_, OpKind::kElementwise, {"x", "proj"}, "", s * b * h / (sp_ ? t : 1), "",
           false, false, {}});
    }
    add({"ln2", {Ssp(), B_, H_}, cdt_, OpKind::kElementwise, {"x_mid"}, "ln2", 8 * s * b * h / (sp_ ? t : 1), "",
         false, false, {"x_mid"}});
    std::string fc1_in = "ln2";
    if (sp_) {
      add({"ln2_full", {S_, B_, H_}, cdt_, OpKind::kAllGather, {"ln2"}, "", 0, "", false, false, {}});
      fc1_in = "ln2_full";
    }
    Node fc1{"fc1", {S_, B_, F1t}, cdt_, OpKind::kMatmul, {fc1_in}, "w_fc1", 2 * s * b * h * f1 / t, "mlpwi", true,
             false, {"ln2"}};
    fc1.m = S_ * B_; fc1.n = F1t; fc1.k = H_;
    add(fc1);
    // GeLU, or SwiGLU: silu(gate) x up (megatron/core/fusions/fused_bias_swiglu.py
    // saves its input, the fc1 output).
    const std::string act = swiglu ? "swiglu" : "gelu";
    add({act, {S_, B_, Ft}, cdt_, OpKind::kElementwise, {"fc1"}, "", 8 * s * b * f / t, "", false, false, {"fc1"}});
    Node fc2{"fc2_partial", {S_, B_, H_}, cdt_, OpKind::kMatmul, {act}, "w_fc2", 2 * s * b * h * f / t, "mlpwo",
             true, false, {act}};
    fc2.m = S_ * B_; fc2.n = H_; fc2.k = Ft;
    add(fc2);
    add({"fc2", {Ssp(), B_, H_}, cdt_, sp_ ? OpKind::kReduceScatter : OpKind::kAllReduce, {"fc2_partial"}, "", 0, "",
         false, false, {}});
    if (masks) {
      add({"drop2_mask", {Ssp(), B_, H_}, DType::kU8, OpKind::kElementwise, {"fc2"}, "", s * b * h / (sp_ ? t : 1), "",
           false, false, {}});
      add({"x_out", {Ssp(), B_, H_}, cdt_, OpKind::kElementwise, {"x_mid", "fc2", "drop2_mask"}, "",
           3 * s * b * h / (sp_ ? t : 1), "", false, false, {"drop2_mask"}});
    } else {
      add({"x_out", {Ssp(), B_, H_}, cdt_, OpKind::kElementwise, {"x_mid", "fc2"}, "", s * b * h / (sp_ ? t : 1), "",
           false, false, {}});
    }
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
    if (s_.remat.method == "block") return Local(l) < s_.remat.num_layers;
    if (s_.remat.method == "sequential") return Local(l) < GroupSize() * (s_.remat.num_layers - 1);
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
    if (mg_) {
      DeclareMegatronParams();
      return;
    }
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

  // Note [Megatron bytes per parameter]: per rank, each parameter of its
  // layers in the compute dtype (2 B under bf16), its main_grad (4 B, Note
  // [Megatron main_grad]) and the optimizer's fp32 master copy plus Adam's
  // exp_avg and exp_avg_sq (12 B; megatron/core/optimizer/optimizer.py
  // Float16OptimizerWithFloat16Params) = 18 B; with
  // --use-distributed-optimizer the 12 B are sharded over the data-parallel
  // (x context-parallel) group (megatron/core/optimizer/distrib_optimizer.py
  // DistributedOptimizer._build_model_and_main_param_groups): 6 + 12/d
  // (docs/source/api-guide/dist_optimizer.md). fp32 params have no master
  // copy (16 B, 8 + 8/d); fp16 main_grads are copied to fp32 for the step
  // (_copy_model_grads_to_main_grads: 20 B, 4 + 16/d).
  void DeclareMegatronParams() {
    const bool master = m_.weight_dtype != DType::kF32;
    auto param = [&](const std::string& name, std::vector<int64_t> shape, int layer) {
      const std::string full = layer >= 0 ? absl::StrCat("layer", layer, ".", name) : name;
      params_[full] = b_.AddArgument("params." + full, shape, m_.weight_dtype, Role::kParameter, true,
                                     "parameter " + full);
      main_grad_[full] = b_.AddArgument("main_grad." + full, shape, g_.grad_dtype, Role::kGradient, false,
                                        "main_grad of " + full + " (DDP grad buffer)");
      param_order_.push_back(full);
      if (g_.distributed_optimizer) return;
      std::vector<TensorId> st;
      if (master) {
        st.push_back(b_.AddArgument("opt.master." + full, shape, DType::kF32, Role::kOptimizerState, true,
                                    "fp32 master copy of " + full));
      }
      st.push_back(b_.AddArgument("opt.exp_avg." + full, shape, DType::kF32, Role::kOptimizerState, true,
                                  "Adam exp_avg of " + full));
      st.push_back(b_.AddArgument("opt.exp_avg_sq." + full, shape, DType::kF32, Role::kOptimizerState, true,
                                  "Adam exp_avg_sq of " + full));
      states_[full] = st;
    };
    const int64_t norm_rows = g_.rms_norm ? 1 : 2;  // RMSNorm: weight only; LayerNorm: weight and bias
    const int64_t F1 = g_.swiglu ? 2 * F_ : F_;    // SwiGLU: fc1 holds the gate and the up projection
    if (first_stage_) {
      param("embedding", {V_ / t_, H_}, -1);
      // Learned absolute positions: replicated over TP (not vocabulary-parallel).
      if (g_.position == "learned_absolute") param("position", {g_.max_position, H_}, -1);
    }
    for (const std::vector<int>& chunk : chunks_) {
      for (int l : chunk) {
        param("ln1", {norm_rows, H_}, l);
        param("w_qkv", {H_, (A_ + 2 * K_) * Dh_ / t_}, l);
        if (g_.qkv_bias) param("b_qkv", {(A_ + 2 * K_) * Dh_ / t_}, l);
        param("w_proj", {A_ * Dh_ / t_, H_}, l);
        if (g_.bias_linear) param("b_proj", {H_}, l);
        param("ln2", {norm_rows, H_}, l);
        param("w_fc1", {H_, F1 / t_}, l);
        if (g_.bias_linear) param("b_fc1", {F1 / t_}, l);
        param("w_fc2", {F_ / t_, H_}, l);
        if (g_.bias_linear) param("b_fc2", {H_}, l);
      }
    }
    if (last_stage_) {
      param("ln_f", {norm_rows, H_}, -1);
      // Untied, or tied with PP > 1: the last stage holds an output weight of
      // its own, its gradient all-reduced with the first stage's embedding
      // (LanguageModule.setup_embeddings_and_output_layer, finalize_model_grads
      // _allreduce_word_embedding_grads).
      if (!m_.tied_embeddings || g_.pipeline > 1) param("output", {V_ / t_, H_}, -1);
    }
    if (g_.distributed_optimizer) {
      int64_t elems = 0;
      for (const auto& [name, p] : params_) elems += b_.tensor(p).elements();
      const int64_t d = dp_ * cp_;
      const int64_t shard = (elems + d - 1) / d;
      for (const char* st : {"master", "exp_avg", "exp_avg_sq"}) {
        if (std::string(st) == "master" && !master) continue;
        shard_states_.push_back(b_.AddArgument(absl::StrCat("opt.", st, ".shard"), {shard}, DType::kF32,
                                               Role::kOptimizerState, true,
                                               absl::StrCat("distributed optimizer: this rank's 1/", d, " of ", st)));
      }
    }
    tokens_ = b_.AddArgument("batch.tokens", {B_, Sfull_ / cp_}, DType::kI64, Role::kInputBatch, false, "token ids");
    BuildBuckets();
  }

  TensorId Param(int l, const std::string& w) { return params_.at(absl::StrCat("layer", l, ".", w)); }

  // Emits the nodes in `only` (all when empty), starting from `known`.
  std::map<std::string, TensorId> Forward(int l, std::map<std::string, TensorId> known, bool recompute,
                                          const std::set<std::string>& only) {
    b_.set_recompute(recompute);
    const std::string pre = absl::StrCat(mbp_, "layer", l, recompute ? ".remat." : ".");
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
      op.group = IsCollective(n.kind) ? (n.group > 0 ? n.group : t_) : 1;
      op.m = n.m; op.n = n.n; op.k = n.k; op.batch = n.batch;
      if (n.comm_scale != 1) {
        op.bytes_written = Bytes(static_cast<int64_t>(static_cast<double>(op.bytes_written.value()) * n.comm_scale));
      }
      known[n.out] = out;
    }
    b_.set_recompute(false);
    return known;
  }

  void MarkSaved(int l, const std::map<std::string, TensorId>& v) {
    if (Checkpointed(l)) {
      // Full recompute keeps only the checkpoint's input (uniform groups: the
      // first layer of each group of remat.num_layers).
      if (Local(l) % GroupSize() == 0) b_.tensor(v.at("x")).role = Role::kResidual;
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
      TensorId h = b_.AddTensor(absl::StrCat(mbp_, "host.layer", l, ".", name), src.shape, src.dtype, Role::kResidual,
                                absl::StrCat("layer ", l, " ", name, " offloaded to pinned host"));
      b_.tensor(h).host = true;
      Op& op = b_.AddOp(absl::StrCat(mbp_, "layer", l, ".offload_", name), OpKind::kDeviceToHost, {src.id}, {h}, 0);
      op.on_compute_stream = s_.framework == "pytorch";
      host_[{mbp_ + absl::StrCat(l), name}] = h;
    }
  }

  void Reload(int l, std::map<std::string, TensorId>* v) {
    OpId start = b_.next_op() - 1;
    for (const std::string& name : offload_) {
      const Tensor h = b_.tensor(host_.at({mbp_ + absl::StrCat(l), name}));
      TensorId t = b_.AddTensor(absl::StrCat(mbp_, "layer", l, ".reload.", name), h.shape, h.dtype, Role::kResidual,
                                absl::StrCat("layer ", l, " ", name, " copied back from pinned host"));
      Op& op = b_.AddOp(absl::StrCat(mbp_, "layer", l, ".reload_", name), OpKind::kHostToDevice, {h.id}, {t}, 0);
      op.on_compute_stream = s_.framework == "pytorch";
      if (start >= 0) op.control_deps.push_back(start);
      (*v)[name] = t;
    }
  }

  // The final norm, the vocabulary-parallel logits and the cross entropy.
  // Plain family: fp32 logits and the loss gradient in the forward phase.
  // Note [Megatron logits]: Megatron's output layer (a ColumnParallelLinear,
  // its input all-gathered under SP) writes compute-dtype logits [s, b, V/t];
  // LanguageModule.compute_language_model_loss calls
  // vocab_parallel_cross_entropy(logits.float(), labels)
  // (megatron/core/tensor_parallel/cross_entropy.py): the fp32 copy becomes
  // the softmax saved for the backward (exp in place), the compute-dtype
  // logits die; the backward turns the saved softmax into the gradient in
  // place and casts it back for the output layer's GEMMs.
  void HeadForward(int64_t mb, TensorId x) {
    HeadState& h = head_[mb];
    h.xf = b_.AddTensor(mbp_ + "final_ln", {Ssp(), B_, H_}, cdt_, Role::kResidual, "final LayerNorm output");
    b_.AddOp(mbp_ + "final_ln", OpKind::kElementwise, {x, params_.at("ln_f")}, {h.xf}, 8.0 * S_ * B_ * H_);
    const TensorId w_out = OutputWeight();
    if (!mg_) {
      h.logits = b_.AddTensor("logits", {S_, B_, V_ / t_}, DType::kF32, Role::kResidual, "logits (fp32)");
      Op& op = b_.AddOp("logits", OpKind::kMatmul, {h.xf, w_out}, {h.logits}, 2.0 * S_ * B_ * H_ * V_ / t_);
      op.m = S_ * B_; op.n = V_ / t_; op.k = H_;
      h.dlogits = b_.AddTensor("d_logits", {S_, B_, V_ / t_}, cdt_, Role::kTemporary, "cross-entropy gradient");
      b_.AddOp("cross_entropy", OpKind::kElementwise, {h.logits, tokens_}, {h.dlogits}, 5.0 * S_ * B_ * V_ / t_);
      return;
    }
    const TensorId in = Gathered(h.xf, mbp_ + "final_ln.gathered");
    TensorId l16 = b_.AddTensor(mbp_ + "logits", {S_, B_, V_ / t_}, cdt_, Role::kTemporary, "logits (compute dtype)");
    Op& op = b_.AddOp(mbp_ + "logits", OpKind::kMatmul, {in, w_out}, {l16}, 2.0 * S_ * B_ * H_ * V_ / t_);
    op.m = S_ * B_; op.n = V_ / t_; op.k = H_;
    h.logits = b_.AddTensor(mbp_ + "logits.float", {S_, B_, V_ / t_}, DType::kF32, Role::kResidual,
                            "fp32 logits, the softmax the vocab-parallel cross entropy saves");
    b_.AddOp(mbp_ + "logits.float", OpKind::kConvert, {l16}, {h.logits}, static_cast<double>(S_ * B_ * V_ / t_));
    TensorId loss = b_.AddTensor(mbp_ + "loss", {S_, B_}, DType::kF32, Role::kScalar, "per-token loss");
    Op& ce = b_.AddOp(mbp_ + "cross_entropy", OpKind::kElementwise, {h.logits, tokens_}, {loss},
                      5.0 * S_ * B_ * V_ / t_);
    (void)ce;
  }

  TensorId HeadBackward(int64_t mb) {
    HeadState h = head_.at(mb);
    head_.erase(mb);
    const TensorId w_out = OutputWeight();
    if (mg_) {
      h.dlogits = b_.AddTensor(mbp_ + "d_logits", {S_, B_, V_ / t_}, cdt_, Role::kTemporary, "cross-entropy gradient");
      b_.AddOp(mbp_ + "cross_entropy.backward", OpKind::kElementwise, {h.logits, tokens_}, {h.dlogits},
               3.0 * S_ * B_ * V_ / t_);
      TensorId dfull = b_.AddTensor(mbp_ + "d_final.full", {S_, B_, H_}, cdt_, Role::kTemporary,
                                    "gradient into the final norm");
      Op& dx = b_.AddOp(mbp_ + "logits.backward", OpKind::kMatmul, {h.dlogits, w_out}, {dfull},
                        2.0 * S_ * B_ * H_ * V_ / t_);
      dx.m = S_ * B_; dx.n = H_; dx.k = V_ / t_;
      const TensorId xin = Gathered(h.xf, mbp_ + "final_ln.regathered");
      WeightGrad(params_.count("output") ? "output" : "embedding", {h.dlogits, xin}, OpKind::kMatmul,
                 2.0 * S_ * B_ * H_ * V_ / t_, H_, V_ / t_, S_ * B_);
      WeightGrad("ln_f", {dfull, h.xf}, OpKind::kReduce, 2.0 * S_ * B_ * H_, 0, 0, 0);
      if (!sp_) return dfull;
      TensorId d = b_.AddTensor(mbp_ + "d_final", {Ssp(), B_, H_}, cdt_, Role::kTemporary, "gradient into the last layer");
      b_.AddOp(mbp_ + "d_final.reduce_scatter", OpKind::kReduceScatter, {dfull}, {d}, 0).group = t_;
      return d;
    }
    TensorId dx = b_.AddTensor("d_final", {Ssp(), B_, H_}, cdt_, Role::kTemporary, "gradient into the last layer");
    if (m_.tied_embeddings) {
      b_.AddOp("logits.backward", OpKind::kMatmul, {h.dlogits, w_out, h.xf}, {dx}, 4.0 * S_ * B_ * H_ * V_ / t_);
    } else {
      b_.AddOp("logits.backward", OpKind::kMatmul, {h.dlogits, w_out}, {dx}, 2.0 * S_ * B_ * H_ * V_ / t_);
      TensorId dw = b_.AddTensor("grad.output", {V_ / t_, H_}, cdt_, Role::kGradient, "gradient of output");
      b_.AddOp("logits.d_output", OpKind::kMatmul, {h.dlogits, h.xf}, {dw}, 2.0 * S_ * B_ * H_ * V_ / t_);
      grads_["output"] = dw;
    }
    return dx;
  }

  TensorId OutputWeight() const {
    return params_.at(params_.count("output") ? "output" : "embedding");
  }

  // Under SP a column-parallel GEMM's input is all-gathered along the
  // sequence first (a transient full-sequence copy); else `x` itself.
  TensorId Gathered(TensorId x, const std::string& name) {
    if (!sp_) return x;
    TensorId full = b_.AddTensor(name, {S_, B_, H_}, cdt_, Role::kTemporary, "SP: the sequence all-gathered");
    b_.AddOp(name, OpKind::kAllGather, {x}, {full}, 0).group = t_;
    return full;
  }

  // Note [Megatron main_grad]: Megatron's DDP keeps one contiguous buffer
  // of main_grad per model chunk (megatron/core/distributed/
  // param_and_grad_buffer.py _ParamAndGradBuffer, fp32 under bf16: grad_dtype
  // = main_grads_dtype), allocated once and zeroed each step; with
  // gradient_accumulation_fusion (the default) the wgrad GEMM accumulates
  // straight into it (fused_weight_gradient_mlp_cuda / TE
  // fuse_wgrad_accumulation), so micro-batches add no gradient memory.
  // Without it the compute-dtype weight gradient is allocated and added in
  // (the param hook of distributed_data_parallel.py _make_backward_post_hook).
  void WeightGrad(const std::string& param, std::vector<TensorId> reads, OpKind kind, double flops, int64_t m,
                  int64_t n, int64_t k) {
    const TensorId mg = main_grad_.at(param);
    std::vector<TensorId> biases;
    for (const auto& [w, bias] : kBiasOf) {
      const std::string suffix = std::string(".") + w;
      if (absl::EndsWith(param, suffix)) {
        const std::string bp = param.substr(0, param.size() - std::string(w).size()) + bias;
        if (main_grad_.count(bp)) biases.push_back(main_grad_.at(bp));
      }
    }
    const std::string name = absl::StrCat(mbp_, "wgrad.", param);
    const bool fused = g_.gradient_accumulation_fusion || kind != OpKind::kMatmul;
    if (fused) {
      reads.push_back(mg);
      reads.insert(reads.end(), biases.begin(), biases.end());
      Op& op = b_.AddOp(name, kind, reads, {}, flops);
      op.m = m; op.n = n; op.k = k;
      return;
    }
    TensorId dw = b_.AddTensor(name, b_.tensor(params_.at(param)).shape, cdt_, Role::kGradient,
                               "weight gradient before it is added into main_grad");
    Op& op = b_.AddOp(name, kind, reads, {dw}, flops);
    op.m = m; op.n = n; op.k = k;
    std::vector<TensorId> acc = {dw, mg};
    acc.insert(acc.end(), biases.begin(), biases.end());
    b_.AddOp(name + ".accumulate", OpKind::kElementwise, acc, {}, static_cast<double>(b_.tensor(dw).elements()));
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
    const std::string pre = absl::StrCat(mbp_, "layer", l, ".d_");
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
        op.group = n.group > 0 ? n.group : t_;
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
        if (mg_) {
          WeightGrad(absl::StrCat("layer", l, ".", n.weight), {xin, dout}, OpKind::kMatmul, n.flops, n.k, n.n, n.m);
        } else {
          TensorId dw = b_.AddTensor(pre + n.weight, b_.tensor(Param(l, n.weight)).shape, cdt_, Role::kGradient,
                                     absl::StrCat("gradient of layer ", l, " ", n.weight));
          Op& w = b_.AddOp(pre + n.weight, OpKind::kMatmul, {xin, dout}, {dw}, n.flops);
          w.m = n.k; w.n = n.n; w.k = n.m;
          grads_[absl::StrCat("layer", l, ".", n.weight)] = dw;
        }
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
      if (n.kind == OpKind::kAttention) {
        // Flash attention's backward: one kernel writing dQKV (and, under
        // CP, the dK/dV passed back round the ring).
        std::vector<TensorId> outs;
        for (const std::string& in : n.ins) {
          outs.push_back(b_.AddTensor(pre + in + "." + n.out, NodeOf(in).shape, cdt_, Role::kTemporary,
                                      "gradient of " + in));
        }
        Op& op = b_.AddOp(pre + n.out + ".backward", n.kind, reads, outs, n.flops * n.bwd_scale);
        op.dtype = cdt_;
        for (size_t i = 0; i < n.ins.size(); ++i) AddGrad(g, n.ins[i], outs[i]);
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
      if (!n.weight.empty() && mg_) {  // norm weights: into main_grad
        WeightGrad(absl::StrCat("layer", l, ".", n.weight), reads, OpKind::kReduce, 2.0 * S_ * B_ * H_, 0, 0, 0);
      } else if (!n.weight.empty()) {  // LayerNorm scale and bias
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

  // Note [Megatron gradient buckets]: DDP lays each chunk's main_grad
  // buffer out in buckets (Note [Megatron gradient buffer layout],
  // models/megatron_schedule_buckets.cc: reverse module order, the
  // distributed optimizer's padding, --ddp-bucket-size, one bucket without
  // --overlap-grad-reduce, on pipeline ranks after the first and for chunks
  // after the first). With --overlap-grad-reduce a bucket's reduce-scatter
  // (distributed optimizer) or all-reduce is launched on the communication
  // stream as soon as the last micro-batch's backward has written all of its
  // gradients (param_and_grad_buffer.py
  // _ParamAndGradBucketGroup.register_grad_ready), overlapping the rest of
  // the backward; otherwise all run after the last backward
  // (finish_grad_sync). The padding is held as buffers of its own beside the
  // gradients (and the params under the distributed optimizer). Tied
  // embeddings with PP > 1: the first and last stage then all-reduce the
  // embedding gradient between them (finalize_model_grads.py
  // _allreduce_word_embedding_grads).
  void BuildBuckets() {
    const int64_t d = dp_ * cp_;
    const bool shared_tied = m_.tied_embeddings && g_.pipeline > 1;
    for (size_t c = 0; c < chunks_.size(); ++c) {
      std::vector<std::pair<std::string, std::string>> order;  // (param, unit) in buffer order
      auto unit = [&](const std::string& name, std::vector<std::string> names) {
        for (auto it = names.rbegin(); it != names.rend(); ++it) order.push_back({*it, name});
      };
      if (c + 1 == chunks_.size() && last_stage_) {
        std::vector<std::string> head = {"ln_f"};
        if (params_.count("output")) head.push_back("output");
        unit("head", head);
      }
      for (auto it = chunks_[c].rbegin(); it != chunks_[c].rend(); ++it) {
        std::vector<std::string> names;
        const std::string pre = absl::StrCat("layer", *it, ".");
        for (const std::string& p : param_order_) {
          if (absl::StartsWith(p, pre)) names.push_back(p);
        }
        unit(absl::StrCat("layer", *it), names);
      }
      if (c == 0 && first_stage_) {
        std::vector<std::string> emb = {"embedding"};
        if (params_.count("position")) emb.push_back("position");
        unit("embed", emb);
      }
      std::vector<int64_t> numel;
      std::vector<bool> shared;
      for (const auto& [name, u] : order) {
        numel.push_back(b_.tensor(main_grad_.at(name)).elements());
        shared.push_back(shared_tied && (name == "embedding" || name == "output"));
      }
      const bool bucketed = g_.overlap_grad_reduce && g_.stage == 0 && c == 0;
      const int64_t size = !bucketed ? 0 : g_.bucket_size > 0 ? g_.bucket_size : std::max<int64_t>(40000000, 1000000 * d);
      const MegatronBufferLayout layout = LayOutGradBuffer(numel, shared, size, g_.distributed_optimizer, d);
      for (const MegatronBucketLayout& bl : layout.buckets) {
        Bucket bk;
        int64_t own = 0;
        for (int64_t i = bl.first_param; i <= bl.last_param; ++i) {
          const auto& [name, u] = order[static_cast<size_t>(i)];
          bk.grads.push_back(main_grad_.at(name));
          bk.units.insert(u);
          own += numel[static_cast<size_t>(i)];
        }
        bk.elements = bl.end - bl.start;
        if (bk.elements > own) {
          bk.grads.push_back(b_.AddArgument(absl::StrCat("main_grad.padding.chunk", c, ".bucket", buckets_.size()),
                                            {bk.elements - own}, g_.grad_dtype, Role::kGradient, false,
                                            "DDP grad buffer padding (distributed optimizer)"));
        }
        buckets_.push_back(bk);
      }
      if (g_.distributed_optimizer && layout.padding() > 0) {
        // Not a parameter (the model's parameter count leaves it out): room in
        // the param buffer.
        b_.AddArgument(absl::StrCat("params.padding.chunk", c), {layout.padding()}, m_.weight_dtype, Role::kWorkspace,
                       false, "DDP param buffer padding (distributed optimizer)");
      }
    }
  }

  void EmitReduce(Bucket& bk) {
    bk.emitted = true;
    const int64_t d = dp_ * cp_;
    if (d <= 1) return;
    const OpId after = b_.next_op() - 1;
    Op& op = b_.AddOp(absl::StrCat("grad_sync.bucket", reduce_ops_.size()),
                      g_.distributed_optimizer ? OpKind::kReduceScatter : OpKind::kAllReduce, bk.grads, {}, 0);
    op.group = d;
    op.dtype = g_.grad_dtype;
    if (after >= 0) op.control_deps.push_back(after);
    reduce_ops_.push_back(op.id);
  }

  void UnitDone(const std::string& unit) {
    done_.insert(unit);
    if (!g_.overlap_grad_reduce) return;
    for (Bucket& bk : buckets_) {
      if (bk.emitted) continue;
      if (std::all_of(bk.units.begin(), bk.units.end(), [&](const std::string& u) { return done_.count(u) > 0; })) {
        EmitReduce(bk);
      }
    }
  }

  void ReduceGradients(bool /*at_end*/) {
    b_.set_phase(Phase::kBackward);
    for (Bucket& bk : buckets_) {
      if (!bk.emitted) EmitReduce(bk);
    }
    if (m_.tied_embeddings && g_.pipeline > 1 && (first_stage_ || last_stage_)) {
      const TensorId g = main_grad_.at(first_stage_ ? "embedding" : "output");
      const OpId after = b_.next_op() - 1;
      Op& op = b_.AddOp("embedding_grad.all_reduce", OpKind::kAllReduce, {g}, {}, 0);
      op.group = 2;
      op.dtype = g_.grad_dtype;
      op.control_deps.push_back(after);
      reduce_ops_.push_back(op.id);
    }
  }

  // Note [Megatron optimizer step]: the global norm over main_grads
  // (clip_grads.py get_grad_norm_fp32; under the distributed optimizer over
  // this rank's shard, all-reduced over the whole model and data-parallel
  // group), then Adam in place on the fp32 master weights and moments
  // (TE/apex FusedAdam, multi_tensor_apply), the result cast into the
  // compute-dtype params (_copy_main_params_to_model_params); the
  // distributed optimizer steps its shard and all-gathers the params into
  // the param buffer (distrib_optimizer.py _copy_main_params_to_param_buffer,
  // start_param_sync), or, with --overlap-param-gather, gathers each chunk's
  // params at the start of the next step's forward, overlapped with it.
  void MegatronOptimizer() {
    const int64_t d = dp_ * cp_;
    int64_t elems = 0;
    std::vector<TensorId> grads;
    for (const std::string& p : param_order_) {
      elems += b_.tensor(params_.at(p)).elements();
      grads.push_back(main_grad_.at(p));
    }
    const int64_t local = g_.distributed_optimizer ? (elems + d - 1) / d : elems;
    TensorId norm = kNoTensor;
    if (s_.optimizer.clip_grad_norm) {
      TensorId sq = b_.AddTensor("grad_norm.local", {}, DType::kF32, Role::kTemporary,
                                 "local sum of squares of the gradients");
      Op& l2 = b_.AddOp("grad_norm.l2norm", OpKind::kReduce, g_.distributed_optimizer ? std::vector<TensorId>{} : grads,
                        {sq}, 2.0 * static_cast<double>(local));
      l2.control_deps = reduce_ops_;
      if (g_.distributed_optimizer) l2.bytes_read = Bytes(local * DTypeSize(g_.grad_dtype));
      norm = b_.AddTensor("grad_norm", {}, DType::kF32, Role::kScalar, "global gradient norm (clip)");
      const int64_t group = t_ * g_.pipeline * (g_.distributed_optimizer ? d : 1);
      if (group > 1) {
        b_.AddOp("grad_norm.all_reduce", OpKind::kAllReduce, {sq}, {norm}, 0).group = group;
      } else {
        b_.AddOp("grad_norm.sqrt", OpKind::kElementwise, {sq}, {norm}, 1);
      }
    }
    auto updated = [&](TensorId src) {
      const Tensor t = b_.tensor(src);
      TensorId o = b_.AddTensor(t.name + ".new", t.shape, t.dtype, t.role, "updated " + t.origin);
      b_.tensor(o).live_out = true;
      b_.tensor(o).aliases = src;
      return o;
    };
    if (!g_.distributed_optimizer) {
      // fp16 main_grad: every gradient is copied to fp32 before the step
      // (_copy_model_grads_to_main_grads), so all copies live at once.
      std::map<std::string, TensorId> f32;
      for (const std::string& p : param_order_) {
        if (g_.grad_dtype == DType::kF32) break;
        const Tensor mgt = b_.tensor(main_grad_.at(p));
        f32[p] = b_.AddTensor("main_grad.float." + p, mgt.shape, DType::kF32, Role::kGradient,
                              "fp32 copy of an fp16 main_grad for the step");
        Op& cv = b_.AddOp("main_grad.float." + p, OpKind::kConvert, {main_grad_.at(p)}, {f32[p]},
                          static_cast<double>(mgt.elements()));
        cv.control_deps = reduce_ops_;
      }
      for (const std::string& p : param_order_) {
        std::vector<TensorId> ins = {params_.at(p), main_grad_.at(p)};
        if (f32.count(p)) ins.push_back(f32.at(p));
        std::vector<TensorId> outs = {updated(params_.at(p))};
        for (TensorId st : states_.at(p)) {
          ins.push_back(st);
          outs.push_back(updated(st));
        }
        if (norm != kNoTensor) ins.push_back(norm);
        Op& op = b_.AddOp("adam." + p, OpKind::kElementwise, ins, outs,
                          16.0 * static_cast<double>(b_.tensor(params_.at(p)).elements()));
        op.dtype = DType::kF32;
        if (norm == kNoTensor) op.control_deps = reduce_ops_;
      }
      return;
    }
    std::vector<TensorId> ins = shard_states_, outs;
    if (g_.grad_dtype != DType::kF32) {
      TensorId f = b_.AddTensor("main_grad.float.shard", {local}, DType::kF32, Role::kGradient,
                                "fp32 copy of this rank's fp16 main_grad shard");
      b_.AddOp("main_grad.float.shard", OpKind::kConvert, {}, {f}, static_cast<double>(local));
      ins.push_back(f);
    }
    if (norm != kNoTensor) ins.push_back(norm);
    for (TensorId st : shard_states_) outs.push_back(updated(st));
    Op& op = b_.AddOp("adam.shard", OpKind::kElementwise, ins, outs, 16.0 * static_cast<double>(local));
    op.dtype = DType::kF32;
    op.control_deps = reduce_ops_;
    std::vector<TensorId> new_params;
    for (const std::string& p : param_order_) new_params.push_back(updated(params_.at(p)));
    const bool gather_now = d > 1 && !g_.overlap_param_gather;
    Op& ag = b_.AddOp(gather_now ? "param_all_gather" : "param_copy_shard", gather_now ? OpKind::kAllGather
                                                                                       : OpKind::kElementwise,
                      {outs.front()}, new_params, gather_now ? 0 : static_cast<double>(local));
    ag.group = gather_now ? d : 1;
  }

  // --overlap-param-gather: each chunk's param all-gather of the previous
  // step's update, issued as the step starts; the chunk's first forward
  // waits for it (Note [Megatron optimizer step]).
  void EmitParamGathers() {
    const int64_t d = dp_ * cp_;
    b_.set_phase(Phase::kForward);
    for (size_t c = 0; c < chunks_.size(); ++c) {
      int64_t bytes = 0;
      for (const std::string& p : param_order_) {
        bool in_chunk = false;
        for (int l : chunks_[c]) in_chunk |= absl::StartsWith(p, absl::StrCat("layer", l, "."));
        if (!in_chunk && c == 0 && first_stage_) in_chunk = p == "embedding" || p == "position";
        if (!in_chunk && c + 1 == chunks_.size() && last_stage_) in_chunk = p == "ln_f" || p == "output";
        if (in_chunk) bytes += b_.tensor(params_.at(p)).bytes().value();
      }
      Op& op = b_.AddOp(absl::StrCat("param_all_gather.chunk", c), OpKind::kAllGather, {}, {}, 0);
      op.group = d;
      op.bytes_written = Bytes(bytes);
      param_gather_[static_cast<int64_t>(c)] = op.id;
    }
  }

  // torch.optim.AdamW (fused): in place into params and moments.
  void Optimizer() {
    if (mg_) {
      MegatronOptimizer();
      return;
    }
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
  std::map<std::pair<std::string, std::string>, TensorId> host_;  // offloaded values in pinned host memory
  std::map<std::string, TensorId> params_, grads_;
  std::map<std::string, std::pair<TensorId, TensorId>> moments_;
  TensorId tokens_ = kNoTensor;
  // Megatron launch lines (RunSpec::megatron): this pipeline rank's chunks
  // and schedule, main_grad buffers, optimizer state, gradient buckets.
  const MegatronSpec& g_;
  bool mg_;
  int64_t cp_ = 1, dp_ = 1, Sfull_ = 0;
  bool first_stage_ = true, last_stage_ = true;
  std::vector<std::vector<int>> chunks_;
  std::vector<PipelineSlot> schedule_;
  std::string mbp_;    // name prefix of the current micro-batch
  int chunk_first_ = 0;  // first layer of the current chunk
  std::map<std::pair<int64_t, int64_t>, std::vector<std::map<std::string, TensorId>>> fwd_;
  std::map<int64_t, HeadState> head_;
  std::map<std::string, TensorId> main_grad_;
  std::map<std::string, std::vector<TensorId>> states_;
  std::vector<TensorId> shard_states_;
  std::vector<std::string> param_order_;
  std::vector<Bucket> buckets_;
  std::set<std::string> done_;
  std::vector<OpId> reduce_ops_;
  std::map<int64_t, OpId> param_gather_;
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
