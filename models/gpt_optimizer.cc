// The plain gpt family's parameters and optimizer: gradient clipping by the
// global norm and fused AdamW. See gpt_builder.h.
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "models/gpt_builder.h"

namespace gpusim {
namespace gpt_internal {

void GptBuilder::DeclareParams() {
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

// Note [GPT gradient clipping]: Megatron-LM clips by the global norm
// (megatron/core/optimizer/clip_grads.py get_grad_norm_fp32 and
// clip_grad_by_total_norm_fp32; --clip-grad 1.0 by default): one
// multi_tensor_l2norm pass over every gradient, the squared norm
// all-reduced over the model-parallel (here tensor-parallel) group, then
// the gradients scaled in place only when clip_coeff = max_norm / norm < 1.
// Whether that happens depends on the values, which a simulator does not
// have; the steady-state step is modelled (norm computed, no rescale).
TensorId GptBuilder::GradNorm() {
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
void GptBuilder::Optimizer() {
  if (mg_) {
    MegatronOptimizer();
    IterationTail();  // Note [Megatron iteration on the host]
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

}  // namespace gpt_internal
}  // namespace gpusim
