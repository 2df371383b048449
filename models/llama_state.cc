// The llama train state: parameters and their FSDP / tensor-parallel
// sharding, weight gathers and gradient reduction, the embedding, head and
// loss, and the optimizer step. See llama_builder.h.
#include <map>
#include <numeric>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "models/llama_builder.h"
#include "sim/ir/loop_slice.h"

namespace gpusim {
namespace llama_internal {

// This rank's part of the tensor-parallel split (the shape FSDP gathers to).
std::vector<int64_t> LlamaBuilder::Local(const Param& p) const {
  std::vector<int64_t> s = p.full;
  if (p.tp_axis >= 0) s[static_cast<size_t>(p.tp_axis)] /= t_;
  return s;
}

std::vector<int64_t> LlamaBuilder::Shard(const Param& p) const {
  std::vector<int64_t> s = Local(p);
  s[static_cast<size_t>(p.shard_axis)] = CeilDiv(s[static_cast<size_t>(p.shard_axis)], N_);
  return s;
}

void LlamaBuilder::AddParam(std::string name, std::vector<int64_t> full, int shard_axis, bool per_layer, int tp_axis) {
  Param p;
  p.name = std::move(name);
  p.full = std::move(full);
  p.shard_axis = shard_axis;
  p.per_layer = per_layer;
  p.tp_axis = t_ > 1 ? tp_axis : -1;
  std::vector<int64_t> shape = Shard(p);
  if (per_layer) shape = Stacked(shape);
  std::string sharding = N_ > 1 ? absl::StrFormat(", FSDP shard 1/%d", N_) : "";
  if (p.tp_axis >= 0) absl::StrAppend(&sharding, absl::StrFormat(", tensor-parallel 1/%d", t_));
  const std::string what = per_layer ? absl::StrFormat("stacked [L=%d] layer parameter", L_) : "parameter";
  p.value = b_.AddArgument("params." + p.name, shape, wdt_, Role::kParameter, true,
                           absl::StrCat(what, " ", p.name, sharding));
  if (s_.optimizer.kind == "adamw") {
    p.mu = b_.AddArgument("opt.mu." + p.name, shape, s_.optimizer.moment_dtype,
                          Role::kOptimizerState, true, "AdamW first moment of " + p.name);
    p.nu = b_.AddArgument("opt.nu." + p.name, shape, s_.optimizer.moment_dtype,
                          Role::kOptimizerState, true, "AdamW second moment of " + p.name);
  }
  param_index_[p.name] = params_.size();
  params_.push_back(std::move(p));
}

// The donated train state (MaxText train.py: donate_argnums=0) and the
// batch. jax.jit's keep_unused=False prunes inputs the step never reads, so
// `targets_position` is not an argument.
void LlamaBuilder::DeclareState() {
  step_ = b_.AddArgument("state.step", {}, DType::kI32, Role::kScalar, true, "train-state step counter");
  // The last argument: the axis tensor parallelism splits (Note [Llama
  // tensor parallelism]); norm scales only under jax (MaxText `norm`).
  const int norm_tp = maxtext_tp_ ? 0 : -1;
  AddParam("token_embedder", {V_, D_}, 1, false, 0);
  const int64_t q = H_ * Dh_, kv = K_ * Dh_;
  AddParam("attn_norm", {D_}, 0, true, norm_tp);
  AddParam("wq", {D_, q}, 0, true, 1);
  AddParam("wk", {D_, kv}, 0, true, 1);
  AddParam("wv", {D_, kv}, 0, true, 1);
  AddParam("wo", {q, D_}, 1, true, 0);
  AddParam("mlp_norm", {D_}, 0, true, norm_tp);
  if (E_ > 1) {
    // Note [MaxText MoE dense matmul] (llama_moe.cc): the gate [D,E] and
    // the experts' [E,D,M] / [E,M,D], embed over FSDP, mlp over tensor.
    AddParam("gate", {D_, E_}, 0, true, -1);
    AddParam("wi_0", {E_, D_, M_}, 1, true, 2);
    AddParam("wi_1", {E_, D_, M_}, 1, true, 2);
    AddParam("wo_mlp", {E_, M_, D_}, 2, true, 1);
  } else {
    AddParam("wi_0", {D_, M_}, 0, true, 1);
    AddParam("wi_1", {D_, M_}, 0, true, 1);
    AddParam("wo_mlp", {M_, D_}, 1, true, 0);
  }
  AddParam("final_norm", {D_}, 0, false, norm_tp);
  if (!m_.tied_embeddings) AddParam("logits_dense", {D_, V_}, 0, false, 1);
  if (s_.optimizer.kind == "adamw") {
    // optax.chain(scale_by_adam, add_decayed_weights, scale_by_schedule):
    // ScaleByAdamState.count and ScaleByScheduleState.count, both int32.
    adam_count_ = b_.AddArgument("opt.count", {}, DType::kI32, Role::kScalar, true, "scale_by_adam count");
    sched_count_ = b_.AddArgument("opt.schedule_count", {}, DType::kI32, Role::kScalar, true,
                                  "scale_by_schedule count");
  }
  for (const char* n : {"inputs", "inputs_position", "inputs_segmentation", "targets",
                        "targets_segmentation"}) {
    batch_[n] = b_.AddArgument(absl::StrCat("batch.", n), {B_, S_}, DType::kI32, Role::kInputBatch,
                               false, "input batch (int32 [B,S])");
  }
}

// All-gathers one layer's (or a global) weight for compute: the shard is
// cast to the gather dtype, gathered over the FSDP group, cast to compute.
TensorId LlamaBuilder::Gather(const std::string& name, int layer, const std::string& why) {
  Param& p = P(name);
  const std::vector<int64_t> shard = Shard(p);
  const std::string base = absl::StrCat(layer >= 0 ? absl::StrCat("layer", layer, ".") : "", name);
  TensorId src = p.per_layer && p.scan_source != kNoTensor ? p.scan_source : p.value;
  if (b_.phase() == Phase::kBackward && p.residual_stack != kNoTensor) src = p.residual_stack;
  const Bytes slice = Bytes(b_.tensor(src).bytes().value() / (p.per_layer ? L_ : 1));
  TensorId cur = src;
  // Note [Materialised loop slices] (sim/lower/xla/loop_slices.h): a
  // rolled loop's per-layer slice of a stacked weight that no cast reads
  // is read by an all-gather (FSDP) or a GEMM (no FSDP, weights already in
  // the compute dtype), and lowering decides whether it is a buffer; a
  // cast reads it in place and its output is the buffer.
  if (rolled_ && p.per_layer && layer >= 0 && p.full.size() > 1 && gdt_ == b_.tensor(src).dtype &&
      (N_ > 1 || b_.tensor(src).dtype == cdt_)) {
    const SliceReader reader = N_ > 1 ? SliceReader::kAllGather : SliceReader::kGemm;
    cur = b_.AddLoopSlice(base + ".slice", src, shard, b_.tensor(src).dtype, Role::kTemporary,
                          {SliceSource::kStackedWeights, name, {{reader, {}}}});
    src = cur;
  }
  if (gdt_ != b_.tensor(src).dtype) {
    cur = b_.AddTensor(base + ".cast", shard, gdt_, Role::kTemporary, "weight shard cast for gather");
    Op& op = b_.AddOp(base + ".cast", OpKind::kConvert, {src}, {cur}, 0);
    op.bytes_read = slice;
  }
  if (N_ > 1) {
    TensorId full = b_.AddTensor(base + ".gathered", Local(p), gdt_, Role::kTemporary,
                                 absl::StrCat("all-gathered weight ", name, " (", why, ")"));
    Op& op = b_.AddOp(base + ".all_gather", OpKind::kAllGather, {cur}, {full}, 0);
    op.group = N_;
    if (cur == src) op.bytes_read = slice;
    cur = full;
  }
  if (GatheredOverTp(p)) {
    TensorId full = TpCollective(base + ".tp_all_gather", OpKind::kAllGather, cur, p.full, b_.tensor(cur).dtype,
                                 absl::StrCat("norm scale ", name, " all-gathered over tensor_sequence"));
    if (cur == src) b_.op(b_.next_op() - 1).bytes_read = slice;
    cur = full;
  }
  if (b_.tensor(cur).dtype != cdt_) {
    TensorId c = b_.AddTensor(base + ".compute", GatheredOverTp(p) ? p.full : Local(p), cdt_, Role::kTemporary,
                              "weight cast to compute dtype");
    Op& op = b_.AddOp(base + ".to_compute", OpKind::kConvert, {cur}, {c}, 0);
    if (cur == src) op.bytes_read = slice;
    cur = c;
  }
  return cur;
}

// Reduce-scatters a full bf16 weight gradient to this device's shard, cast
// to the weight dtype: a per-layer gradient, or (rolled scan) an in-place
// dynamic-update-slice into the backward loop's stacked output.
void LlamaBuilder::ReduceGrad(const std::string& name, int layer, TensorId full_grad) {
  Param& p = P(name);
  const std::string base = absl::StrCat(layer >= 0 ? absl::StrCat("layer", layer, ".") : "", name);
  TensorId cur = full_grad;
  if (GatheredOverTp(p)) {
    cur = TpCollective(base + ".tp_reduce_scatter", OpKind::kReduceScatter, cur, Local(p), b_.tensor(cur).dtype,
                       "norm-scale gradient reduce-scattered over tensor_sequence");
  } else if (sp_ && !maxtext_tp_ && p.full.size() == 1) {
    // Megatron SP: each rank's norm saw S/t tokens; the replicated scale's
    // gradient is all-reduced over the group (Note [Llama tensor parallelism]).
    cur = TpCollective(base + ".tp_all_reduce", OpKind::kAllReduce, cur, p.full, b_.tensor(cur).dtype,
                       "norm-scale gradient all-reduced over the tensor-parallel group (sequence parallel)");
  }
  if (N_ > 1) {
    TensorId sh = b_.AddTensor(base + ".grad_shard", Shard(p), b_.tensor(full_grad).dtype,
                               Role::kTemporary, "reduce-scattered gradient shard");
    Op& op = b_.AddOp(base + ".reduce_scatter", OpKind::kReduceScatter, {cur}, {sh}, 0);
    op.group = N_;
    cur = sh;
  }
  if (p.per_layer && p.grad_stack != kNoTensor) {
    Op& op = b_.AddOp(base + ".grad_to_stack", OpKind::kDynamicUpdateSlice, {p.grad_stack, cur}, {}, 0);
    op.bytes_read = b_.tensor(cur).bytes();
    op.bytes_written = Bytes(b_.tensor(cur).elements() * DTypeSize(wdt_));
    return;
  }
  if (sem_.grad_cast_fuses_into_readers && b_.tensor(cur).dtype != wdt_) {
    // XLA: the convert to the weight dtype is fusible and every user of
    // it (the global-norm reduces and the AdamW update) fuses it
    // (priority_fusion.cc CanFuseWithAllNonBitcastUsers), so the gradient
    // buffer is the compute-dtype one; no weight-dtype copy is held.
    b_.tensor(cur).role = Role::kGradient;
    b_.tensor(cur).origin = absl::StrCat("gradient of ", name, " (", std::string(DTypeName(b_.tensor(cur).dtype)),
                                         "; its cast to ", std::string(DTypeName(wdt_)), " fuses into its readers)");
    p.grads.push_back(cur);
    return;
  }
  TensorId g = b_.AddTensor(base + ".grad", Shard(p), wdt_, Role::kGradient,
                            absl::StrCat("gradient of ", name, " (", std::string(DTypeName(wdt_)), ")"));
  b_.AddOp(base + ".grad_cast", OpKind::kConvert, {cur}, {g}, 0);
  p.grads.push_back(g);
}

// Under tensor parallelism the table is split by vocabulary
// (VocabParallelEmbedding; MaxText `vocab` -> tensor): each rank looks up
// its rows, zeros elsewhere, and the partial sums are reduced to the
// residual stream.
TensorId LlamaBuilder::Embedding() {
  TensorId table = Gather("token_embedder", -1, "forward");
  TensorId x = b_.AddTensor(t_ > 1 ? "embed.partial" : "embed.out", {B_, S_, D_}, cdt_, Role::kActivation,
                            t_ > 1 ? "embedding lookup of this rank's vocabulary rows" : "embedding lookup output");
  b_.AddOp(t_ > 1 ? "embed.partial" : "embed.lookup", OpKind::kGather, {table, batch_.at("inputs")}, {x}, 0);
  if (t_ == 1) return x;
  x = ReducePartial("embed.out", x);
  b_.tensor(x).role = Role::kActivation;
  return x;
}

// The vocab-split cross-entropy's statistic `name` ([B,S] f32): a local
// reduction over this rank's vocabulary slice, all-reduced over the group.
TensorId LlamaBuilder::VocabStatistic(const std::string& name, TensorId logits) {
  TensorId local = b_.AddTensor(name + ".local", {B_, S_}, DType::kF32, Role::kTemporary,
                                "cross-entropy partial over this rank's vocabulary slice");
  b_.AddOp(name + ".local", OpKind::kReduce, {logits}, {local}, static_cast<double>(T_) * Vt_);
  return TpCollective(name, OpKind::kAllReduce, local, {B_, S_}, DType::kF32,
                      "cross-entropy statistic all-reduced over the tensor-parallel group");
}

LlamaBuilder::HeadResult LlamaBuilder::HeadAndLoss(TensorId x) {
  HeadResult r{};
  b_.BeginRegion("head.forward", "phase");
  TensorId scale = Gather("final_norm", -1, "forward");
  std::vector<TensorId> norm_ins = {x, scale};
  if (embed_sharded_) norm_ins.push_back(NormStatistic("final_norm.stat", {x}));
  r.h_final = Elementwise("final_norm", std::move(norm_ins), Rs(), 4.0 * static_cast<double>(RsElements()), cdt_);
  b_.tensor(r.h_final).role = Role::kActivation;
  r.h_full = GatherResidual("final_norm.all_gather", r.h_final);
  r.w_out = Gather(m_.tied_embeddings ? "token_embedder" : "logits_dense", -1, "forward");
  // logits_dot_in_fp32 False: a bf16 dot, then cast_logits_to_fp32.
  TensorId logits = MatmulOp("logits", r.h_full, r.w_out, {B_, S_, Vt_}, T_, Vt_, D_);
  auto f32 = [&](const std::string& n, std::vector<TensorId> ins, double flops) {
    TensorId t = Elementwise(n, std::move(ins), {B_, S_, Vt_}, flops, m_.logits_dtype);
    b_.tensor(t).role = Role::kActivation;
    return t;
  };
  const double tv = static_cast<double>(T_) * Vt_;
  r.logits_f32 = f32("logits_f32", {logits}, tv);
  r.onehot = f32("onehot_targets", {batch_.at("targets")}, tv);
  // cross_entropy_with_logits (MaxText max_utils.py) is a custom VJP whose
  // residuals are fp32 [B,S,V] arrays: logits, targets, exp_shifted, log_softmax.
  std::vector<TensorId> exp_ins = {r.logits_f32}, lsm_ins = {r.logits_f32};
  if (t_ > 1) {
    exp_ins.push_back(VocabStatistic("ce.max", r.logits_f32));
    // Megatron's _VocabParallelCrossEntropy all-reduces the target logit too.
    if (!maxtext_tp_) lsm_ins.push_back(VocabStatistic("ce.target_logit", r.logits_f32));
  }
  r.exp_shifted = f32("ce.exp_shifted", std::move(exp_ins), 3 * tv);
  lsm_ins.push_back(r.exp_shifted);
  if (t_ > 1) lsm_ins.push_back(VocabStatistic("ce.sum_exp", r.exp_shifted));
  r.log_softmax = f32("ce.log_softmax", std::move(lsm_ins), 3 * tv);
  r.loss = b_.AddTensor("loss", {}, DType::kF32, Role::kScalar, "loss (metric output)");
  b_.AddOp("ce.loss", OpKind::kReduce, {r.log_softmax, r.onehot, batch_.at("targets_segmentation")}, {r.loss},
           2 * tv);
  b_.tensor(r.loss).live_out = true;
  if (sem_.maxtext_metric_outputs) {
    // MaxText train.py train_step's other scalar metrics (4bf3beaa):
    // learning/total_weights = sum(targets_segmentation != 0) (int32) and
    // learning/moe_lb_loss (0.0 for a dense model), outputs like loss.
    TensorId tw = b_.AddTensor("total_weights", {}, DType::kI32, Role::kScalar, "total_weights (metric output)");
    b_.AddOp("total_weights.reduce", OpKind::kReduce, {batch_.at("targets_segmentation")}, {tw},
             static_cast<double>(T_));
    b_.tensor(tw).live_out = true;
    TensorId lb = b_.AddTensor("moe_lb_loss", {}, DType::kF32, Role::kScalar,
                               "moe_lb_loss (metric output; 0 for a dense model)");
    b_.AddOp("moe_lb_loss.zero", OpKind::kElementwise, {}, {lb}, 0);
    b_.tensor(lb).live_out = true;
  }
  for (TensorId t : {r.logits_f32, r.onehot, r.exp_shifted, r.log_softmax}) b_.tensor(t).role = Role::kResidual;
  b_.EndRegion();
  return r;
}

TensorId LlamaBuilder::HeadBackward(const HeadResult& r) {
  b_.BeginRegion("head.backward", "phase");
  const double tv = static_cast<double>(T_) * Vt_;
  TensorId d_logits = Elementwise("ce.d_logits", {r.exp_shifted, r.onehot, r.log_softmax}, {B_, S_, Vt_}, 3 * tv,
                                  m_.logits_dtype);
  TensorId d_logits_c = Elementwise("ce.d_logits_cast", {d_logits}, {B_, S_, Vt_}, 0, cdt_);
  TensorId w_out = Gather(m_.tied_embeddings ? "token_embedder" : "logits_dense", -1, "backward");
  TensorId dh = MatmulOp("d_logits.dx", d_logits_c, w_out, {B_, S_, D_}, T_, D_, Vt_);
  // Megatron's output layer saves its sharded input and gathers it again
  // for dW; XLA reuses the forward's gathered value.
  const TensorId h_full = maxtext_tp_ ? r.h_full : GatherResidual("d_logits.regather", r.h_final);
  TensorId dw = MatmulOp("d_logits.dw", h_full, d_logits_c, {D_, Vt_}, D_, Vt_, T_);
  ReduceGrad(m_.tied_embeddings ? "token_embedder" : "logits_dense", -1, dw);
  dh = ReducePartial("d_logits.dx.reduce", dh);
  TensorId scale = Gather("final_norm", -1, "backward");
  const double rn = static_cast<double>(RsElements());
  std::vector<TensorId> ins = {dh, scale};
  if (embed_sharded_) ins.push_back(NormStatistic("d_final_norm.stat", {dh, scale}));
  TensorId dx = Elementwise("d_final_norm.dx", std::move(ins), Rs(), 8.0 * rn, cdt_);
  TensorId ds = Grad("d_final_norm.dscale", {Rs()[2]}, DType::kF32);
  b_.AddOp("d_final_norm.dscale", OpKind::kReduce, {dh}, {ds}, 3.0 * rn);
  ReduceGrad("final_norm", -1, ds);
  b_.EndRegion();
  return dx;
}

void LlamaBuilder::EmbeddingBackward(TensorId dx) {
  dx = GatherResidual("d_embed.all_gather", dx);
  TensorId dt = Grad("d_embed.table", {Vt_, D_}, cdt_);
  b_.AddOp("d_embed.scatter", OpKind::kScatter, {dx, batch_.at("inputs")}, {dt}, 1.0 * T_ * D_);
  ReduceGrad("token_embedder", -1, dt);
}

// Note [Optimizer step]: MaxText train_step (train.py at 4bf3beaa,
// L464-485): grads = optax.clip_by_global_norm(1.0).update(raw_grads)
// (g_norm = global_norm(raw_grads); each leaf where(g_norm < max, t,
// t / g_norm * max)) when gradient_clipping_threshold > 0, else raw_grads;
// new_state = state.apply_gradients(grads) (optax.chain(scale_by_adam,
// add_decayed_weights, scale_by_schedule)); then three metrics:
// grad_norm = l2norm_pytree(grads), raw_grad_norm = l2norm_pytree(raw_grads),
// param_norm = l2norm_pytree(new_state.params) (max_utils.py L74).
// Lowered as:
//  - raw_grad_norm and the clip's global norm are the same per-leaf
//    reduce(multiply(x, x)) (optax numerics.abs_sq and jnp.square both
//    lower to x*x on reals), one computation after HloCSE: one reduction
//    pass over the raw gradients, before any update (each clipped leaf
//    needs the norm);
//  - assumed from XLA GPU fusion, not checked against an HLO dump: the
//    clip is fused into each leaf's update, which writes the new param,
//    mu and nu into the donated buffers (no clipped tree is
//    materialised), and the grad_norm / param_norm reductions of values
//    that fusion computes are extra outputs of it (multi-output fusion):
//    per-leaf partial sums, added up and all-reduced at the end.
// So each raw gradient dies at its leaf's update.
void LlamaBuilder::Optimizer(TensorId loss) {
  (void)loss;
  b_.BeginRegion("optimizer", "phase");
  const bool clip = s_.optimizer.clip_grad_norm;
  std::vector<TensorId> all_grads;
  for (const Param& p : params_) all_grads.insert(all_grads.end(), p.grads.begin(), p.grads.end());
  // A scalar metric from per-device partial sums: summed, then all-reduced
  // over the FSDP (x tensor-parallel) group.
  auto norm = [&](const std::string& name, const std::vector<TensorId>& partials, const std::string& what) {
    TensorId sq = b_.AddTensor(name + ".local", {}, DType::kF32, Role::kTemporary, "local sum of squares");
    b_.AddOp(name + ".sum", OpKind::kReduce, partials, {sq}, static_cast<double>(partials.size()));
    TensorId n = b_.AddTensor(name, {}, DType::kF32, Role::kScalar, what);
    if (N_ * t_ > 1) {
      // Over every FSDP x TP device (Note [Llama tensor parallelism]).
      b_.AddOp(name + ".all_reduce", OpKind::kAllReduce, {sq}, {n}, 0).group = N_ * t_;
    } else {
      b_.AddOp(name + ".sqrt", OpKind::kElementwise, {sq}, {n}, 1);
    }
    b_.tensor(n).live_out = true;
    return n;
  };
  // The raw gradients' norm: the clip's g_norm and the raw_grad_norm metric.
  TensorId raw_norm = kNoTensor;
  if (clip) {
    TensorId sq = b_.AddTensor("raw_grad_norm.partial", {}, DType::kF32, Role::kTemporary,
                               "local sum of squares of the raw gradients");
    const double elems = static_cast<double>(
        std::accumulate(all_grads.begin(), all_grads.end(), int64_t{0},
                        [&](int64_t n, TensorId g) { return n + b_.tensor(g).elements(); }));
    b_.AddOp("raw_grad_norm.reduce", OpKind::kReduce, all_grads, {sq}, 2.0 * elems);
    raw_norm = norm("raw_grad_norm", {sq}, "global norm of the raw gradients (clip threshold input; metric)");
  }
  std::vector<TensorId> grad_partials, param_partials;
  for (Param& p : params_) {
    std::vector<TensorId> ins = {p.value, p.mu, p.nu};
    if (s_.optimizer.kind != "adamw") ins = {p.value};
    if (raw_norm != kNoTensor) ins.push_back(raw_norm);
    ins.insert(ins.end(), p.grads.begin(), p.grads.end());
    std::vector<TensorId> outs;
    for (TensorId src : {p.value, p.mu, p.nu}) {
      if (src == kNoTensor) continue;
      const Tensor& t = b_.tensor(src);
      TensorId o = b_.AddTensor(t.name + ".new", t.shape, t.dtype, t.role, "updated " + t.origin);
      b_.tensor(o).live_out = true;
      b_.tensor(o).aliases = src;
      outs.push_back(o);
    }
    for (auto* partials : {&grad_partials, &param_partials}) {
      const std::string what = partials == &grad_partials ? "grad_norm" : "param_norm";
      TensorId t = b_.AddTensor(absl::StrCat(what, ".partial.", p.name), {}, DType::kF32, Role::kTemporary,
                                absl::StrCat(what, " partial sum of ", p.name, " (multi-output of its update)"));
      partials->push_back(t);
      outs.push_back(t);
    }
    const double elems = static_cast<double>(b_.tensor(p.value).elements());
    Op& op = b_.AddOp("adamw." + p.name, OpKind::kElementwise, ins, outs, 20.0 * elems);
    op.dtype = DType::kF32;
  }
  const TensorId grad_norm = norm("grad_norm", grad_partials,
                                  clip ? "global norm of the clipped gradients (metric)"
                                       : "global gradient norm (metric)");
  if (!clip) {
    // grads = raw_grads: raw_grad_norm is the same computation (HloCSE).
    TensorId raw = b_.AddTensor("raw_grad_norm", {}, DType::kF32, Role::kScalar,
                                "global norm of the raw gradients (metric; = grad_norm without clipping)");
    b_.AddOp("raw_grad_norm.copy", OpKind::kElementwise, {grad_norm}, {raw}, 0);
    b_.tensor(raw).live_out = true;
  }
  norm("param_norm", param_partials, "global norm of the updated parameters (metric)");
  for (TensorId src : {step_, adam_count_, sched_count_}) {
    if (src == kNoTensor) continue;
    const Tensor& t = b_.tensor(src);
    TensorId o = b_.AddTensor(t.name + ".new", {}, t.dtype, t.role, "incremented " + t.name);
    b_.tensor(o).live_out = true;
    b_.tensor(o).aliases = src;
    b_.AddOp(t.name + ".increment", OpKind::kElementwise, {src}, {o}, 1);
  }
  b_.EndRegion();
}

}  // namespace llama_internal
}  // namespace gpusim
