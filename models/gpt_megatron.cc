// The gpt builder under a Megatron-LM launch line: parameters, main_grad
// buffers and optimizer state per rank, gradient buckets and their
// reduction, the (distributed) optimizer step and parameter all-gathers.
// See gpt_builder.h.
#include <algorithm>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "models/gpt_builder.h"
#include "models/megatron_schedule_buckets.h"

namespace gpusim {
namespace gpt_internal {
namespace {

// A linear layer's weight and the bias whose gradient its wgrad writes.
constexpr std::pair<const char*, const char*> kBiasOf[] = {
    {"w_qkv", "b_qkv"}, {"w_proj", "b_proj"}, {"w_fc1", "b_fc1"}, {"w_fc2", "b_fc2"}};

}  // namespace

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
void GptBuilder::DeclareMegatronParams() {
  const bool master = m_.weight_dtype != DType::kF32;
  auto param = [&](const std::string& name, std::vector<int64_t> shape, int layer) {
    const std::string full = layer >= 0 ? absl::StrCat("layer", layer, ".", name) : name;
    params_[full] = b_.AddArgument("params." + full, shape, ParamDType(name), Role::kParameter, true,
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
      if (g_.mla.present) {  // Note [Megatron multi-latent attention], gpt_mla.cc
        for (const auto& [name, shape] : MlaParamShapes()) param(name, shape, l);
      }
      if (!g_.mla.present) param("w_qkv", {H_, (A_ + 2 * K_) * Dh_ / t_}, l);
      if (g_.qkv_bias) param("b_qkv", {(A_ + 2 * K_) * Dh_ / t_}, l);
      if (!g_.mla.present) param("w_proj", {A_ * Dh_ / t_, H_}, l);
      if (g_.bias_linear) param("b_proj", {H_}, l);
      if (g_.qk_layernorm && !g_.mla.present) {  // Note [Megatron QK layernorm], gpt_layer.cc: a head's Dh
        param("q_ln", {norm_rows, Dh_}, l);
        param("k_ln", {norm_rows, Dh_}, l);
      }
      param("ln2", {norm_rows, H_}, l);
      if (MoeLayer(l)) {  // Note [Megatron MoE layer], gpt_moe.cc
        for (const auto& [name, shape] : MoeParamShapes()) param(name, shape, l);
        if (g_.moe.expert_bias) {  // Note [Megatron MoE router]: the router's fp32 buffers
          for (const char* buf : {"expert_bias", "local_tokens_per_expert"}) {
            b_.AddArgument(absl::StrCat("router.", buf, ".layer", l), {g_.moe.experts}, DType::kF32, Role::kWorkspace,
                           false, absl::StrCat("layer ", l, " router buffer ", buf));
            expert_bias_layers_ += buf == std::string("expert_bias") ? 1 : 0;
          }
        }
        continue;
      }
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
    const int64_t shard = OptimizerShardElements();
    for (const char* st : {"master", "exp_avg", "exp_avg_sq"}) {
      if (std::string(st) == "master" && !master) continue;
      shard_states_.push_back(b_.AddArgument(absl::StrCat("opt.", st, ".shard"), {shard}, DType::kF32,
                                             Role::kOptimizerState, true,
                                             Origin{"distributed optimizer",
                                                    absl::StrCat("this rank's 1/", dp_ * cp_, " of ", st,
                                                                 Moe() ? absl::StrCat(" (experts' 1/", g_.moe.edp, ")")
                                                                       : "")}));
    }
  }
  if (Fp8()) DeclareFp8State();
  tokens_ = b_.AddArgument("batch.tokens", {B_, Sfull_ / cp_}, DType::kI64, Role::kInputBatch, false, "token ids");
  BuildBuckets();
}

// Note [Megatron expert optimizer shards]: the distributed optimizer
// shards the dense parameters over the data-parallel x context-parallel
// group and the expert parameters over the expert data-parallel group,
// TP x CP x DP / (EP x ETP) ranks (megatron/core/optimizer/__init__.py
// get_megatron_optimizer: a second optimizer over the expert parameters
// with parallel_state.get_expert_data_parallel_group).
int64_t GptBuilder::OptimizerShardElements() {
  int64_t dense = 0, expert = 0;
  for (const auto& [name, p] : params_) (IsExpertParam(name) ? expert : dense) += b_.tensor(p).elements();
  const int64_t d = dp_ * cp_, e = std::max<int64_t>(g_.moe.edp, 1);
  return (dense + d - 1) / d + (expert + e - 1) / e;
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
void GptBuilder::WeightGrad(const std::string& param, std::vector<TensorId> reads, OpKind kind, double flops,
                            int64_t m, int64_t n, int64_t k, DType dtype) {
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
    op.dtype = dtype;
    if (kind == OpKind::kMatmul) op.host_calls += 1;  // Note [Megatron iteration on the host]: a Python backward
    return;
  }
  TensorId dw = b_.AddTensor(name, b_.tensor(params_.at(param)).shape, cdt_, Role::kGradient,
                             "weight gradient before it is added into main_grad");
  Op& op = b_.AddOp(name, kind, reads, {dw}, flops);
  op.m = m; op.n = n; op.k = k;
  op.dtype = dtype;
  if (kind == OpKind::kMatmul) op.host_calls += 1;  // as above
  std::vector<TensorId> acc = {dw, mg};
  acc.insert(acc.end(), biases.begin(), biases.end());
  b_.AddOp(name + ".accumulate", OpKind::kElementwise, acc, {}, static_cast<double>(b_.tensor(dw).elements()));
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
void GptBuilder::BuildBuckets() {
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

// Note [Megatron expert gradients]: Megatron's DDP keeps the expert
// parameters in buffers of their own (NVIDIA/Megatron-LM 23e00ed
// megatron/core/distributed/distributed_data_parallel.py: expert_parallel_
// buffers, allreduce over the expert data-parallel group
// intra_expert_dp_group), so their gradients are reduced, and under the
// distributed optimizer their updates all-gathered, over the expert
// data-parallel group (TP x CP x DP / (EP x ETP) ranks), not DP x CP; with
// one rank in it (EP x ETP spanning the stage) there is no collective at
// all. A bucket's expert gradients are reduced beside its dense ones here
// (the memory is the same; the buffer boundaries of the separate expert
// buffer are not modelled).
void GptBuilder::EmitReduce(Bucket& bk) {
  bk.emitted = true;
  CheckBucketGrads(bk);  // Note [Megatron iteration on the host]
  std::vector<TensorId> dense, expert;
  for (TensorId t : bk.grads) (IsExpertParam(b_.tensor(t).name) ? expert : dense).push_back(t);
  const OpKind kind = g_.distributed_optimizer ? OpKind::kReduceScatter : OpKind::kAllReduce;
  auto reduce = [&](const std::vector<TensorId>& grads, int64_t size, MegatronGroup group) {
    if (size <= 1 || grads.empty()) return;
    const OpId after = b_.next_op() - 1;
    Op& op = b_.AddOp(absl::StrCat("grad_sync.bucket", reduce_ops_.size()), kind, grads, {}, 0);
    SetGroup(op, size, group);
    op.dtype = g_.grad_dtype;
    if (after >= 0) op.control_deps.push_back(after);
    reduce_ops_.push_back(op.id);
  };
  reduce(dense, dp_ * cp_, MegatronGroup::kDataContext);
  reduce(expert, std::max<int64_t>(g_.moe.edp, 1), MegatronGroup::kExpertData);
}

void GptBuilder::UnitDone(const std::string& unit) {
  done_.insert(unit);
  if (!g_.overlap_grad_reduce) return;
  for (Bucket& bk : buckets_) {
    if (bk.emitted) continue;
    if (std::all_of(bk.units.begin(), bk.units.end(), [&](const std::string& u) { return done_.count(u) > 0; })) {
      EmitReduce(bk);
    }
  }
}

void GptBuilder::ReduceGradients(bool /*at_end*/) {
  b_.set_phase(Phase::kBackward);
  for (Bucket& bk : buckets_) {
    if (!bk.emitted) EmitReduce(bk);
  }
  if (expert_bias_layers_ > 0) {
    // Note [Megatron MoE router]: _update_router_expert_bias, the stacked
    // token counts all-reduced over TP x CP x DP, then the bias updated.
    const int64_t group = t_ * dp_ * cp_;
    const TensorId counts = SmallKernels("expert_bias.stack", 1, {}, DType::kF32);
    if (group > 1) {
      Op& ar = b_.AddOp("expert_bias.tokens_per_expert.all_reduce", OpKind::kAllReduce, {counts}, {}, 0);
      SetGroup(ar, group, MegatronGroup::kTensorDataContext);
      ar.bytes_written = Bytes(expert_bias_layers_ * g_.moe.experts * DTypeSize(DType::kF32));
    }
    SmallKernels("expert_bias.update", 5, {counts}, DType::kF32);
  }
  if (m_.tied_embeddings && g_.pipeline > 1 && (first_stage_ || last_stage_)) {
    const TensorId g = main_grad_.at(first_stage_ ? "embedding" : "output");
    const OpId after = b_.next_op() - 1;
    Op& op = b_.AddOp("embedding_grad.all_reduce", OpKind::kAllReduce, {g}, {}, 0);
    SetGroup(op, 2, MegatronGroup::kEmbedding);
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
void GptBuilder::MegatronOptimizer() {
  const int64_t d = dp_ * cp_;
  int64_t elems = 0;
  std::vector<TensorId> grads;
  for (const std::string& p : param_order_) {
    elems += b_.tensor(params_.at(p)).elements();
    grads.push_back(main_grad_.at(p));
  }
  const int64_t local = g_.distributed_optimizer ? OptimizerShardElements() : elems;
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
      SetGroup(b_.AddOp("grad_norm.all_reduce", OpKind::kAllReduce, {sq}, {norm}, 0), group,
               g_.distributed_optimizer ? MegatronGroup::kWorld : MegatronGroup::kModel);
    } else {
      b_.AddOp("grad_norm.sqrt", OpKind::kElementwise, {sq}, {norm}, 1);
    }
    ClipGrads(norm, g_.distributed_optimizer ? std::vector<TensorId>{} : grads, local);
  }
  CountZeros();  // Note [Megatron iteration on the host]
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
  // Note [Megatron expert gradients]: the expert parameters' update is
  // gathered over the expert data-parallel group.
  std::vector<TensorId> dense_new, expert_new;
  for (size_t i = 0; i < param_order_.size(); ++i) {
    (IsExpertParam(param_order_[i]) ? expert_new : dense_new).push_back(new_params[i]);
  }
  auto gather = [&](const std::string& what, const std::vector<TensorId>& ps, int64_t size, MegatronGroup group) {
    if (ps.empty()) return;
    const bool gather_now = size > 1 && !g_.overlap_param_gather;
    int64_t elements = 0;
    for (TensorId t : ps) elements += b_.tensor(t).elements();
    Op& ag = b_.AddOp(gather_now ? "param_all_gather" + what : "param_copy_shard" + what,
                      gather_now ? OpKind::kAllGather : OpKind::kElementwise, {outs.front()}, ps,
                      gather_now ? 0 : static_cast<double>(elements / size));
    if (gather_now) SetGroup(ag, size, group);
  };
  gather("", dense_new, d, MegatronGroup::kDataContext);
  gather(".experts", expert_new, std::max<int64_t>(g_.moe.edp, 1), MegatronGroup::kExpertData);
}

// --overlap-param-gather: each chunk's param all-gather of the previous
// step's update, issued as the step starts; the chunk's first forward
// waits for it (Note [Megatron optimizer step]).
void GptBuilder::EmitParamGathers() {
  const int64_t d = dp_ * cp_;
  b_.set_phase(Phase::kForward);
  for (size_t c = 0; c < chunks_.size(); ++c) {
    int64_t bytes = 0, expert_bytes = 0;
    for (const std::string& p : param_order_) {
      bool in_chunk = false;
      for (int l : chunks_[c]) in_chunk |= absl::StartsWith(p, absl::StrCat("layer", l, "."));
      if (!in_chunk && c == 0 && first_stage_) in_chunk = p == "embedding" || p == "position";
      if (!in_chunk && c + 1 == chunks_.size() && last_stage_) in_chunk = p == "ln_f" || p == "output";
      if (in_chunk) (IsExpertParam(p) ? expert_bytes : bytes) += b_.tensor(params_.at(p)).bytes().value();
    }
    Op& op = b_.AddOp(absl::StrCat("param_all_gather.chunk", c), OpKind::kAllGather, {}, {}, 0);
    SetGroup(op, d, MegatronGroup::kDataContext);
    op.bytes_written = Bytes(bytes);
    param_gather_[static_cast<int64_t>(c)] = op.id;
    // Note [Megatron expert gradients]: the experts' over their own group.
    if (expert_bytes > 0 && g_.moe.edp > 1) {
      Op& e = b_.AddOp(absl::StrCat("param_all_gather.chunk", c, ".experts"), OpKind::kAllGather, {}, {}, 0);
      SetGroup(e, g_.moe.edp, MegatronGroup::kExpertData);
      e.bytes_written = Bytes(expert_bytes);
      param_gather_[static_cast<int64_t>(c)] = e.id;
    }
  }
}

}  // namespace gpt_internal
}  // namespace gpusim
