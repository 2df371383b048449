// Megatron's fused vocab-parallel cross entropy (--cross-entropy-loss-fusion,
// --cross-entropy-fusion-impl native) on the last pipeline stage: the buffers
// and kernels of its torch.compile'd functions.
//
// Note [Megatron fused cross entropy]
// NVIDIA/Megatron-LM 57a02672 megatron/core/models/common/language_module/
// language_module.py compute_language_model_loss calls
// fused_vocab_parallel_cross_entropy(logits, labels, tp) with the output
// layer's compute-dtype logits [s, b, V/t], which the caller holds until the
// loss returns. megatron/core/fusions/fused_cross_entropy.py runs the unfused
// path's helpers (megatron/core/tensor_parallel/cross_entropy.py
// VocabParallelCrossEntropy) inside four functions decorated with jit_fuser,
// which is torch.compile on torch >= 2.2 (megatron/core/jit.py
// enable_jit_fuser). Called from an autograd.Function, each compiles to an
// inference graph (grad mode is off in forward and backward) whose mutations
// of its inputs stay in the graph (copy_ into the input). What Inductor plans
// for them, read from the wrappers it generates for cuda (torch 2.15.0, the
// recorder's CPU planning, python/gpusim_torch/inductor_cpu.py, on the four
// functions at these shapes; each full-size buffer is [s, b, V/t]):
//  - calculate_logits_max: one reduction kernel writes the fp32 copy of the
//    logits (.float()) and the row max: the same buffers as the unfused path.
//  - calculate_predicted_logits: logits -= max and exp in place become one
//    looped reduction kernel that stores exp(logits - max) into a new fp32
//    buffer while summing it, then copies that buffer back into the logits
//    (the input mutation); the buffer is freed when the graph returns. A
//    small pointwise kernel gathers the predicted logit and the target mask
//    first, into the [2, s, b] cat of predicted logits and sums.
//  - calculate_cross_entropy_loss: the loss and the in-place division by the
//    sum (two pointwise kernels, no new full-size buffer).
//  - calculate_gradients (the backward): grad_2d[arange, target] -= update
//    on the saved softmax (an input) is functionalized: one kernel copies
//    the softmax into a new fp32 buffer, a small one applies the
//    index_put, and one multiplies by grad_output, writes the bf16
//    gradient (.to(torch.bfloat16)) and copies the product back into the
//    softmax; the copy is freed when the graph returns.
// So beside the unfused path's buffers the fused one holds an fp32
// full-size buffer for one kernel in the forward (with the compute-dtype
// logits, the fp32 logits and that buffer live) and one across the
// backward's kernels (the saved softmax, the copy and the bf16 gradient);
// the gradient leaves the function in the compute dtype, as autograd's cast
// of the unfused path's fp32 gradient does. The all-reduces of the max and of
// the [2, s, b] statistics are [s, b]-sized, as in the unfused path.
// Not modelled: the first call of each compiled kernel with more than one
// launch configuration times them (torch/_inductor/runtime/
// triton_heuristics.py CachingAutotuner.benchmark_all_configs), cloning the
// arguments the kernel mutates (maybe_clone_args) and allocating the
// benchmarker's cache-flush buffer; that happens in the first iteration only,
// before Adam's states exist, and its size depends on the torch version.
#include <string>

#include "absl/strings/str_cat.h"
#include "models/gpt_builder.h"

namespace gpusim {
namespace gpt_internal {

// The forward from the compute-dtype logits `l16`: fills h->logits (the fp32
// logits that become the saved softmax) and returns the per-token loss.
TensorId GptBuilder::FusedCrossEntropyForward(TensorId l16, HeadState* h) {
  const int64_t tokens = S_ * B_, n = S_ * B_ * V_ / t_;
  // calculate_logits_max: one reduction kernel, the cast and the row max.
  h->logits = b_.AddTensor(mbp_ + "logits.float", {S_, B_, V_ / t_}, DType::kF32, Role::kResidual,
                           "fp32 logits (fused cross entropy's calculate_logits_max), the softmax it saves");
  const TensorId max = b_.AddTensor(mbp_ + "cross_entropy.logits_max", {S_, B_}, DType::kF32, Role::kTemporary,
                                    "row max of the logits");
  b_.AddOp(mbp_ + "logits.float", OpKind::kReduce, {l16}, {h->logits, max}, static_cast<double>(n));
  // calculate_predicted_logits: the gather kernel, then the looped reduction
  // through Inductor's exp buffer (read by no later op: freed with the graph).
  const TensorId stats = b_.AddTensor(mbp_ + "cross_entropy.stats", {2, S_, B_}, DType::kF32, Role::kTemporary,
                                      "predicted logits and sums of exponentials (one all-reduce)");
  Op& gather = b_.AddOp(mbp_ + "cross_entropy.predicted_logits", OpKind::kElementwise, {tokens_, max}, {stats},
                        static_cast<double>(3 * tokens));
  gather.bytes_read += Bytes(4 * tokens);  // one logit per token
  const TensorId exp = b_.AddTensor(mbp_ + "cross_entropy.exp", {S_, B_, V_ / t_}, DType::kF32, Role::kTemporary,
                                    "Inductor's buffer of exp(logits - max) in the compiled "
                                    "calculate_predicted_logits, copied back into the fp32 logits");
  // Reads the compute-dtype logits only to keep them live: the caller holds
  // them until the loss returns.
  Op& red = b_.AddOp(mbp_ + "cross_entropy.exp_sum", OpKind::kReduce, {h->logits, max, stats, l16}, {exp},
                     3.0 * static_cast<double>(n));
  // Two passes: logits in, exp out; exp in, logits out.
  red.bytes_read = Bytes(8 * n + 8 * tokens);
  red.bytes_written = Bytes(8 * n + 4 * tokens);
  // calculate_cross_entropy_loss: the loss, then the division in place.
  const TensorId loss = b_.AddTensor(mbp_ + "loss", {S_, B_}, DType::kF32, Role::kScalar, "per-token loss");
  b_.AddOp(mbp_ + "cross_entropy.loss", OpKind::kElementwise, {stats}, {loss}, static_cast<double>(2 * tokens));
  Op& div = b_.AddOp(mbp_ + "cross_entropy.softmax", OpKind::kElementwise, {h->logits, stats}, {},
                     static_cast<double>(n));
  div.bytes_written = Bytes(4 * n);
  return loss;
}

// The backward (calculate_gradients): the compute-dtype gradient of the
// logits from the saved softmax.
TensorId GptBuilder::FusedCrossEntropyBackward(const HeadState& h) {
  const int64_t tokens = S_ * B_, n = S_ * B_ * V_ / t_;
  const TensorId copy = b_.AddTensor(mbp_ + "cross_entropy.softmax_copy", {S_ * B_, V_ / t_}, DType::kF32,
                                     Role::kTemporary,
                                     "Inductor's copy of the saved softmax for the functionalized "
                                     "index_put in the compiled calculate_gradients");
  b_.AddOp(mbp_ + "cross_entropy.backward.copy", OpKind::kCopy, {h.logits}, {copy}, 0);
  Op& put = b_.AddOp(mbp_ + "cross_entropy.backward.index_put", OpKind::kElementwise, {copy, tokens_}, {},
                     static_cast<double>(tokens));
  put.bytes_read = Bytes(4 * tokens + 8 * tokens);
  put.bytes_written = Bytes(4 * tokens);
  const TensorId d = b_.AddTensor(mbp_ + "d_logits", {S_, B_, V_ / t_}, cdt_, Role::kTemporary,
                                  "cross-entropy gradient");
  // Reads the copy, writes the gradient and the product back into the softmax.
  Op& mul = b_.AddOp(mbp_ + "cross_entropy.backward", OpKind::kElementwise, {copy, h.logits}, {d},
                     static_cast<double>(n));
  mul.bytes_read = Bytes(4 * n);
  mul.bytes_written += Bytes(4 * n);
  return d;
}

// Note [Transformer Engine cross entropy]
// --cross-entropy-fusion-impl te with --cross-entropy-loss-fusion: NVIDIA/
// Megatron-LM 23e00ed (2025-10) language_module.py
// compute_language_model_loss calls te_parallel_cross_entropy(logits,
// labels, tp) (core/extensions/transformer_engine.py), Transformer Engine's
// parallel_cross_entropy (v2.11 pytorch/cross_entropy.py
// CrossEntropyFunction, pytorch/triton/cross_entropy.py) on the output
// layer's compute-dtype logits [s, b, V/t]:
//  - forward: loss_1d (fp32 [s·b]) and m_d_X_y (fp32 [3·s·b]) zeroed; the
//    online_softmax_kernel reads the logits once into each row's max, sum
//    and target logit; with TP > 1 an all-gather of m_d_X_y over the TP group
//    into an fp32 [3·s·b·t] buffer; cross_entropy_kernel reads the logits
//    again and writes the loss and, in place over the logits, the gradient
//    (softmax minus the one-hot target, computed in fp32, stored in the
//    logits' dtype). The logits are saved for the backward: the only
//    full-size buffer is the one the output layer wrote.
//  - backward: cross_entropy_backward scales the saved buffer in place by
//    grad_output (element_mul_kernel: Megatron's loss mask makes it a
//    [s, b] tensor, so torch.equal with 1.0 does not skip it) and returns
//    it as the logits' gradient.
// Megatron-LM refuses te with the fusion since 168cb15 (2026-06, #5115,
// "disabled due to stability issues"); launch lines from before it (the
// SimuMax B200 runs, validation/simumax_b200.json) run it.
TensorId GptBuilder::TeCrossEntropyForward(TensorId l16, HeadState* h) {
  const int64_t tokens = S_ * B_, n = S_ * B_ * V_ / t_;
  const int64_t bytes = DTypeSize(cdt_);
  const TensorId loss = b_.AddTensor(mbp_ + "loss", {S_, B_}, DType::kF32, Role::kScalar, "per-token loss");
  TensorId stats = b_.AddTensor(mbp_ + "cross_entropy.m_d_X_y", {3 * tokens}, DType::kF32, Role::kTemporary,
                                "each row's max, sum of exponentials and target logit (TE's m_d_X_y)");
  Op& online = b_.AddOp(mbp_ + "cross_entropy.online_softmax", OpKind::kReduce, {l16, tokens_}, {stats},
                        3.0 * static_cast<double>(n));
  (void)online;
  if (t_ > 1) {
    const TensorId all = b_.AddTensor(mbp_ + "cross_entropy.m_d_X_y.gathered", {3 * tokens * t_}, DType::kF32,
                                      Role::kTemporary, "m_d_X_y of every TP rank");
    SetGroup(b_.AddOp(mbp_ + "cross_entropy.m_d_X_y.all_gather", OpKind::kAllGather, {stats}, {all}, 0), t_,
             MegatronGroup::kTensor);
    stats = all;
  }
  // Reads the logits, writes the loss and the gradient over the logits.
  Op& ce = b_.AddOp(mbp_ + "cross_entropy", OpKind::kElementwise, {l16, stats, tokens_}, {loss},
                    5.0 * static_cast<double>(n));
  ce.bytes_written += Bytes(bytes * n);
  h->logits = l16;  // saved: now the gradient
  return loss;
}

TensorId GptBuilder::TeCrossEntropyBackward(const HeadState& h) {
  const int64_t n = S_ * B_ * V_ / t_;
  Op& mul = b_.AddOp(mbp_ + "cross_entropy.backward", OpKind::kElementwise, {h.logits}, {}, static_cast<double>(n));
  mul.bytes_written = Bytes(DTypeSize(cdt_) * n);
  return h.logits;
}

}  // namespace gpt_internal
}  // namespace gpusim
