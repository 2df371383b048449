// The gpt family's entry points (models/gpt.h) and the step's structure:
// the pipeline slots, the head and loss. See gpt_builder.h.
#include "models/gpt.h"

#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "models/gpt_builder.h"
#include "models/megatron_schedule.h"
#include "sim/base/status.h"

namespace gpusim {
namespace gpt_internal {

GptBuilder::GptBuilder(const RunSpec& s, const RematPlan& plan)
    : s_(s), m_(s.model), plan_(plan), b_(absl::StrCat(s.model.name, "-train-step")), g_(s.megatron),
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
    for (MegatronGroup k : {MegatronGroup::kTensor, MegatronGroup::kContext, MegatronGroup::kDataContext,
                            MegatronGroup::kModel, MegatronGroup::kWorld, MegatronGroup::kEmbedding,
                            MegatronGroup::kExpert, MegatronGroup::kExpertTensor,
                            MegatronGroup::kExpertTensorExpert, MegatronGroup::kExpertData,
                            MegatronGroup::kTensorDataContext}) {
      group_nodes_[k] = MegatronGroupNodes(g_, t_, k, g_.stage);
    }
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

// The tensor-parallel split must divide the layer's widths.
absl::Status GptBuilder::CheckSplit() const {
  if (H_ % t_ != 0 || A_ % t_ != 0 || K_ % t_ != 0 || F_ % t_ != 0 || V_ % t_ != 0 || (sp_ && S_ % t_ != 0)) {
    return absl::InvalidArgumentError("parallelism.tensor: must divide d_model, n_heads, n_kv_heads, mlp_dim, "
                                      "vocab (and seq_len with sequence_parallel)");
  }
  return absl::OkStatus();
}

// One decoder layer (sim/ir/layer_graph.h), the graph the step pipeline
// applies the remat policy to (sim/remat/apply.h).
absl::StatusOr<LayerGraph> GptBuilder::Graph() const {
  RETURN_IF_ERROR(CheckSplit());
  return MakeLayerGraph();
}

absl::StatusOr<Program> GptBuilder::Build() {
  RETURN_IF_ERROR(CheckSplit());
  graph_ = MakeLayerGraph();
  if (plan_.kinds.size() != graph_.kinds.size()) {
    return absl::InternalError("gpt: the remat plan was not made on this layer graph (its kinds of layer differ)");
  }
  lp_ = &plan_;
  DeclareParams();
  if (mg_) RETURN_IF_ERROR(DeclareGemmWorkspaces());
  if (mg_ && g_.overlap_param_gather && dp_ * cp_ > 1) EmitParamGathers();
  for (size_t i = 0; i < schedule_.size(); ++i) {
    // Megatron: each pass of the schedule is a "pipeline_slot" region, the
    // unit the ranks wait on each other by (sim/step/megatron_step_pipeline.h).
    if (mg_) b_.BeginRegion(absl::StrCat("pipeline_slot", i), "pipeline_slot");
    const OpId first = b_.next_op();
    if (schedule_[i].forward) {
      ForwardSlot(schedule_[i]);
    } else {
      BackwardSlot(schedule_[i]);
    }
    if (mg_) b_.EndRegion();
    // Note [Megatron iteration on the host]: the p2p calls before this pass.
    if (mg_) PipelineHostCalls(i, first);
  }
  b_.set_layer(-1);
  const OpId after_passes = b_.next_op();
  if (mg_) PipelineHostCalls(schedule_.size(), after_passes);
  if (mg_) ReduceGradients(/*at_end=*/true);
  b_.set_phase(Phase::kOptimizer);
  Optimizer();
  if (pending_host_calls_ > 0 && after_passes < b_.next_op()) b_.op(after_passes).host_calls += pending_host_calls_;
  return b_.Finish();
}

// One forward pass of (micro-batch, chunk): the embedding on the first
// chunk of the first stage, else the activation received from the
// previous stage; the head and loss on the last chunk of the last stage,
// else a send (the output is freed once sent: deallocate_output_tensor).
void GptBuilder::ForwardSlot(const PipelineSlot& slot) {
  mbp_ = MbPrefix(slot.microbatch);
  const std::vector<int>& layers = chunks_[static_cast<size_t>(slot.chunk)];
  chunk_first_ = layers.front();
  b_.set_phase(Phase::kForward);
  b_.set_layer(-1);
  TensorId x;
  const bool embed = slot.chunk == 0 && first_stage_;
  const bool head = slot.chunk == static_cast<int64_t>(chunks_.size()) - 1 && last_stage_;
  if (mg_ && (embed || head)) GetBatch();  // Note [Megatron iteration on the host]
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

void GptBuilder::BackwardSlot(const PipelineSlot& slot) {
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
    const int64_t g = plan_.group_size;
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

// The final norm, the vocabulary-parallel logits and the cross entropy.
// Plain family: fp32 logits and the loss gradient in the forward phase.
// Note [Megatron logits]: Megatron's output layer (a ColumnParallelLinear,
// its input all-gathered under SP) writes compute-dtype logits [s, b, V/t];
// LanguageModule.compute_language_model_loss calls
// vocab_parallel_cross_entropy(logits.float(), labels)
// (megatron/core/tensor_parallel/cross_entropy.py): the fp32 copy becomes
// the softmax saved for the backward (exp in place), the compute-dtype
// logits die; the backward turns the saved softmax into the gradient in
// place and casts it back for the output layer's GEMMs. With
// --cross-entropy-loss-fusion: Note [Megatron fused cross entropy]
// (gpt_cross_entropy.cc).
void GptBuilder::HeadForward(int64_t mb, TensorId x) {
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
  if (g_.cross_entropy_fusion) {
    // Note [Megatron iteration on the host]
    LossFunc(g_.cross_entropy_te ? TeCrossEntropyForward(l16, &h) : FusedCrossEntropyForward(l16, &h));
    return;
  }
  h.logits = b_.AddTensor(mbp_ + "logits.float", {S_, B_, V_ / t_}, DType::kF32, Role::kResidual,
                          "fp32 logits, the softmax the vocab-parallel cross entropy saves");
  b_.AddOp(mbp_ + "logits.float", OpKind::kConvert, {l16}, {h.logits}, static_cast<double>(S_ * B_ * V_ / t_));
  TensorId loss = b_.AddTensor(mbp_ + "loss", {S_, B_}, DType::kF32, Role::kScalar, "per-token loss");
  Op& ce = b_.AddOp(mbp_ + "cross_entropy", OpKind::kElementwise, {h.logits, tokens_}, {loss},
                    5.0 * S_ * B_ * V_ / t_);
  (void)ce;
  LossFunc(loss);  // Note [Megatron iteration on the host]
}

TensorId GptBuilder::HeadBackward(int64_t mb) {
  HeadState h = head_.at(mb);
  head_.erase(mb);
  const TensorId w_out = OutputWeight();
  if (mg_) {
    if (g_.cross_entropy_fusion) {
      h.dlogits = g_.cross_entropy_te ? TeCrossEntropyBackward(h) : FusedCrossEntropyBackward(h);
    } else {
      h.dlogits = b_.AddTensor(mbp_ + "d_logits", {S_, B_, V_ / t_}, cdt_, Role::kTemporary, "cross-entropy gradient");
      b_.AddOp(mbp_ + "cross_entropy.backward", OpKind::kElementwise, {h.logits, tokens_}, {h.dlogits},
               3.0 * S_ * B_ * V_ / t_);
    }
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
    SetGroup(b_.AddOp(mbp_ + "d_final.reduce_scatter", OpKind::kReduceScatter, {dfull}, {d}, 0), t_,
             MegatronGroup::kTensor);
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

// Under SP a column-parallel GEMM's input is all-gathered along the
// sequence first (a transient full-sequence copy); else `x` itself.
TensorId GptBuilder::Gathered(TensorId x, const std::string& name) {
  if (!sp_) return x;
  TensorId full = b_.AddTensor(name, {S_, B_, H_}, cdt_, Role::kTemporary,
                               Origin{"SP", "the sequence all-gathered"});
  SetGroup(b_.AddOp(name, OpKind::kAllGather, {x}, {full}, 0), t_, MegatronGroup::kTensor);
  return full;
}

void GptBuilder::SetGroup(Op& op, int64_t size, MegatronGroup kind) const {
  op.group = size;
  if (mg_) op.group_nodes = group_nodes_.at(kind);
}

}  // namespace gpt_internal

using gpt_internal::GptBuilder;

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

absl::StatusOr<LayerGraph> GptLayerGraph(const RunSpec& spec) {
  const RematPlan unused;
  return GptBuilder(spec, unused).Graph();
}

absl::StatusOr<Program> BuildGptTrainStep(const RunSpec& spec, const RematPlan& plan) {
  GptBuilder b(spec, plan);
  return b.Build();
}

}  // namespace gpusim
