// What a Megatron-LM iteration does besides its layers and optimizer
// update: the pipeline's p2p calls and their host syncs, the loss and
// gradient checks, the gradient clip, the per-iteration reductions and
// logging. See gpt_builder.h.
//
// Note [Megatron iteration on the host]
// Read from NVIDIA/Megatron-LM at 57a0267 (2026-07, the commit of the
// functional test in validation/measured.json). Every op below is a kernel
// (the eager host timeline charges host.op for it, Note [Eager host costs]
// in sim/lower/eager/host_timeline.h); a .item(), a bool() of a CUDA tensor
// or a torch.cuda.synchronize() is an Op::host_sync: the host stops until
// the device has run what it was given (Note [Host syncs],
// sim/engine/engine.h), so what the host issues next does not overlap it.
//  - Pipeline p2p (PP > 1, 1F1B): batch_p2p_comm = not overlap_p2p_comm
//    (training/argument_utils.py; non-interleaved runs set
//    overlap_p2p_comm False, arguments.py) and batch_p2p_sync defaults True
//    (core/model_parallel_config.py), so every
//    P2PCommunicator._communicate ends in torch.cuda.synchronize()
//    (core/pipeline_parallel/p2p_communication.py). Which calls sit
//    between two passes: Note [Late-posted receives]
//    (sim/step/megatron_step_pipeline.cc). Each call is a Python call
//    (host.module) before the next pass and a sync after the pass before.
//    The interleaved schedule overlaps its p2p by default: not charged.
//  - A linear layer's backward is a Python torch.autograd.Function that
//    autograd's engine calls back into (a PyNode): Transformer Engine's
//    _Linear.backward (pytorch/module/linear.py) and
//    _LayerNormLinear.backward (layernorm_linear.py), or under
//    --transformer-impl local Megatron's
//    LinearWithGradAccumulationAndAsyncCommunication.backward
//    (core/tensor_parallel/layers.py), the output layer's too. Its Python
//    body is charged as one Python call (host.module) on the layer's weight
//    gradient (WeightGrad, gpt_megatron.cc), beside the kernels it launches.
//  - get_batch (pretrain_gpt.py, on the first and the last stage, each
//    micro-batch): TP rank 0 copies the data loader's tokens, labels,
//    loss_mask, attention_mask and position_ids to the device
//    (.cuda(non_blocking=True)) and get_batch_on_this_tp_rank
//    (training/utils) broadcasts each over the TP group: 5 copies and, with
//    TP > 1, 5 broadcasts of [b, s] (priced as all-reduces of the same
//    bytes: gpusim has no broadcast kind; at a few KB both are latency).
//  - The loss (pretrain_gpt.py loss_func, last stage, each micro-batch):
//    losses * loss_mask, sum, loss_mask.sum(), clone, to(int), clone, cat,
//    and in schedules.py forward_step output_tensor /= num_tokens and
//    /= num_microbatches: 9 small kernels. With check_for_nan_in_loss_and_grad
//    (the default, arguments.py --no-check-for-nan-in-loss-and-grad) the
//    rerun state machine (core/rerun_state_machine.py validate_result, mode
//    disabled) evaluates `if rejection_func(result)` for torch.isnan and
//    torch.isinf: a kernel and a sync each.
//  - Gradient buckets (core/distributed/param_and_grad_buffer.py
//    start_grad_sync -> check_grads, under the same flag): per bucket
//    grad_data.norm(p=2) over the bucket, then isnan and isinf, each a sync.
//  - The clip (core/optimizer/clip_grads.py, with Transformer Engine's
//    multi_tensor_scale_tensor): the norm stays a tensor (pow), clip_coeff =
//    max_norm / (norm + 1e-6) (add, div), clamp_max_, and
//    multi_tensor_scale_tensor over [grads, grads]: no sync.
//  - --log-num-zeros-in-grad (clip_grads.py count_zeros_fp32): per
//    parameter count_nonzero, numel - x, and + total: 3 kernels; an
//    all-reduce over the model-parallel group; .item().
//  - train_step (training/training.py): logical_and_across_model_parallel_
//    group(update_successful) and reduce_max_stat_across_model_parallel_
//    group(grad_norm) (training/utils/common_utils.py): each a torch.tensor
//    copied to the device, an all-reduce over the model-parallel group and
//    a .item(); the same for num_zeros with --log-num-zeros-in-grad. The
//    last stage averages the micro-batches' losses: vstack, sum, an
//    all-reduce over the data-parallel group, div.
//  - train(): optimizer.get_loss_scale().item() every iteration (a sync);
//    --log-params-norm: calc_params_l2_norm (common_utils.py):
//    multi_tensor_l2norm over the fp32 main params, norm * norm, zeros, an
//    all-reduce over data parallel, add, zeros_like, add, an all-reduce over
//    model parallel, .item(); training_log on the last stage:
//    loss_dict[key].float().sum().item() and the running sum (2 kernels,
//    a sync).
// Parameters are counted as torch holds them: a LayerNorm's weight and bias
// are two (gpusim keeps them as one tensor), the rest one each; a rank
// counts all of its own (the TP-duplicate filter skips some on TP ranks
// other than 0, which wait for rank 0 in the all-reduce anyway). Under the
// distributed optimizer count_zeros runs over the shard's parameter
// fragments: 1/d of them.
// Not modelled: the DDP gradient scaling pass (grad_data *= 1/d, one
// bandwidth pass per bucket), the Python of train_step's bookkeeping that
// launches nothing, timers (--timing-log-level 0 only times the iteration),
// report_memory (only the first logged iteration), and the syncs of the
// interleaved schedule under --no-overlap-p2p-communication.
#include <algorithm>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "models/gpt_builder.h"

namespace gpusim {
namespace gpt_internal {

// The p2p calls between pass `i - 1` and pass `i` of this rank's 1F1B
// schedule (i == schedule size: after the last pass), Note [Late-posted
// receives] in sim/step/megatron_step_pipeline.cc.
int64_t GptBuilder::P2pCallsBefore(size_t i) const {
  if (g_.pipeline <= 1 || g_.virtual_stages > 1) return 0;
  const int64_t send_next = last_stage_ ? 0 : 1, send_prev = first_stage_ ? 0 : 1;
  if (i == 0) return schedule_.empty() ? 0 : send_prev;  // recv_forward
  const bool prev_fwd = schedule_[i - 1].forward;
  if (i == schedule_.size()) return prev_fwd ? 0 : send_prev;  // send_backward
  const bool fwd = schedule_[i].forward;
  if (prev_fwd && fwd) return send_next + send_prev;    // send_forward, recv_forward
  if (prev_fwd && !fwd) return send_next;               // send_forward_recv_backward
  if (!prev_fwd && fwd) return send_prev;               // send_backward_recv_forward
  return send_prev + send_next;                         // send_backward, recv_backward
}

void GptBuilder::PipelineHostCalls(size_t i, OpId first) {
  const int64_t calls = P2pCallsBefore(i);
  if (calls == 0) return;
  if (i > 0 && first > 0) b_.op(first - 1).host_sync = true;  // the pass before ends in a synchronize()
  if (first < b_.next_op()) {
    b_.op(first).host_calls += calls;
  } else {
    pending_host_calls_ += calls;
  }
}

TensorId GptBuilder::SmallKernels(const std::string& name, int64_t n, std::vector<TensorId> reads, DType dtype) {
  TensorId out = kNoTensor;
  for (int64_t k = 0; k < n; ++k) {
    out = b_.AddTensor(absl::StrCat(name, ".", k), {1}, dtype, Role::kTemporary, "a scalar of " + name);
    b_.AddOp(absl::StrCat(name, ".", k), OpKind::kElementwise, reads, {out}, 1);
    reads = {out};
  }
  return out;
}

TensorId GptBuilder::SyncedCheck(const std::string& name, TensorId value, bool nan_only) {
  TensorId v = value;
  if (!g_.check_for_nan) return v;
  for (const char* check : {"isnan", "isinf"}) {
    if (nan_only && std::string(check) == "isinf") continue;
    SmallKernels(absl::StrCat(name, ".", check), 1, {v}, DType::kPred);
    b_.op(b_.next_op() - 1).host_sync = true;
  }
  return v;
}

void GptBuilder::GetBatch() {
  const int64_t bytes = B_ * Sfull_ / cp_ * DTypeSize(DType::kI64);
  for (const char* key : {"tokens", "labels", "loss_mask", "attention_mask", "position_ids"}) {
    const std::string name = absl::StrCat(mbp_, "get_batch.", key);
    Op& copy = b_.AddOp(name + ".cuda", OpKind::kHostToDevice, {}, {}, 0);
    copy.bytes_read = copy.bytes_written = Bytes(bytes);
    copy.on_compute_stream = true;  // issued on the current stream
    if (t_ <= 1) continue;
    Op& bc = b_.AddOp(name + ".broadcast", OpKind::kAllReduce, {}, {}, 0);
    bc.bytes_read = bc.bytes_written = Bytes(bytes);
    SetGroup(bc, t_, MegatronGroup::kTensor);
  }
}

void GptBuilder::LossFunc(TensorId loss) {
  const TensorId l = SmallKernels(mbp_ + "loss_func", 9, {loss}, DType::kF32);
  // Note [SimuMax pretrain_deepseekv2.py] (sim/config/megatron_args.cc).
  SyncedCheck(mbp_ + "loss_func", l, g_.script == "pretrain_deepseekv2.py");
}

void GptBuilder::CheckBucketGrads(const Bucket& bk) {
  if (!g_.check_for_nan) return;
  const std::string name = absl::StrCat("grad_check.bucket", checked_buckets_++);
  TensorId norm = b_.AddTensor(name + ".norm", {1}, DType::kF32, Role::kTemporary, "a bucket's gradient norm");
  Op& op = b_.AddOp(name + ".norm", OpKind::kReduce, bk.grads, {norm}, 2.0 * static_cast<double>(bk.elements));
  if (!reduce_ops_.empty()) op.control_deps.push_back(reduce_ops_.back());
  SyncedCheck(name, norm);
}

int64_t GptBuilder::TorchParams() const {
  int64_t n = 0;
  for (const std::string& p : param_order_) {
    const bool norm = absl::EndsWith(p, "ln1") || absl::EndsWith(p, "ln2") || absl::EndsWith(p, "q_ln") ||
                      absl::EndsWith(p, "k_ln") || absl::EndsWith(p, "kv_ln") || p == "ln_f";
    n += norm && !g_.rms_norm ? 2 : 1;
  }
  return n;
}

// The model-parallel group: TP x PP.
void GptBuilder::ReduceOverModelParallel(const std::string& name, TensorId x) {
  const int64_t mp = t_ * g_.pipeline;
  if (mp <= 1) return;
  SetGroup(b_.AddOp(name + ".all_reduce", OpKind::kAllReduce, {x}, {}, 0), mp, MegatronGroup::kModel);
}

void GptBuilder::ClipGrads(TensorId norm, const std::vector<TensorId>& grads, int64_t local) {
  const TensorId coeff = SmallKernels("clip.coeff", 4, {norm}, DType::kF32);  // pow, add, div, clamp_max_
  std::vector<TensorId> ins = grads;
  ins.push_back(coeff);
  Op& scale = b_.AddOp("clip.scale", OpKind::kElementwise, ins, {}, static_cast<double>(local));
  scale.bytes_read = scale.bytes_written = Bytes(local * DTypeSize(DType::kF32));
  scale.dtype = DType::kF32;
}

void GptBuilder::CountZeros() {
  if (!g_.log_num_zeros_in_grad) return;
  const int64_t d = g_.distributed_optimizer ? dp_ * cp_ : 1;
  const int64_t params = (TorchParams() + d - 1) / d;
  const TensorId total = SmallKernels("count_zeros", 3 * params, {}, DType::kI64);
  ReduceOverModelParallel("count_zeros", total);
  b_.op(b_.next_op() - 1).host_sync = true;  // total_num_zeros.item()
}

// reduce_max_stat / logical_and across the model-parallel group: a tensor
// copied to the device, an all-reduce, a .item().
void GptBuilder::ModelParallelStat(const std::string& name) {
  const TensorId x = SmallKernels(name, 1, {}, DType::kF32);
  ReduceOverModelParallel(name, x);
  b_.op(b_.next_op() - 1).host_sync = true;
}

void GptBuilder::IterationTail() {
  int64_t main_elements = 0;
  for (const std::string& p : param_order_) main_elements += b_.tensor(params_.at(p)).elements();
  if (g_.distributed_optimizer) main_elements = OptimizerShardElements();
  ModelParallelStat("train_step.update_successful");
  ModelParallelStat("train_step.grad_norm");
  if (g_.log_num_zeros_in_grad) ModelParallelStat("train_step.num_zeros");
  if (last_stage_) {
    const TensorId l = SmallKernels("train_step.loss_reduced", 2, {}, DType::kF32);  // vstack, sum
    if (dp_ * cp_ > 1) {
      SetGroup(b_.AddOp("train_step.loss_reduced.all_reduce", OpKind::kAllReduce, {l}, {}, 0), dp_ * cp_,
               MegatronGroup::kDataContext);
    }
    SmallKernels("train_step.loss_reduced.div", 1, {l}, DType::kF32);
  }
  // get_loss_scale().item(): the copy to the host drains the iteration's queue.
  SmallKernels("train.loss_scale.item", 1, {}, DType::kF32);
  b_.op(b_.next_op() - 1).host_sync = true;
  if (g_.log_params_norm) {
    TensorId sq = b_.AddTensor("params_norm.l2norm", {1}, DType::kF32, Role::kTemporary, "the params' L2 norm");
    Op& op = b_.AddOp("params_norm.l2norm", OpKind::kReduce, {}, {sq}, 2.0 * static_cast<double>(main_elements));
    op.bytes_read = Bytes(main_elements * DTypeSize(DType::kF32));
    op.dtype = DType::kF32;
    const TensorId n2 = SmallKernels("params_norm.square", 2, {sq}, DType::kF32);  // norm * norm, zeros
    if (dp_ * cp_ > 1) {
      SetGroup(b_.AddOp("params_norm.sharded.all_reduce", OpKind::kAllReduce, {n2}, {}, 0), dp_ * cp_,
               MegatronGroup::kDataContext);
    }
    const TensorId sum = SmallKernels("params_norm.sum", 3, {n2}, DType::kF32);  // add, zeros_like, add
    ReduceOverModelParallel("params_norm", sum);
    b_.op(b_.next_op() - 1).host_sync = true;  // norm_2.item()
  }
  if (last_stage_) {
    SmallKernels("training_log.loss", 2, {}, DType::kF32);  // .float().sum(), the running sum
    b_.op(b_.next_op() - 1).host_sync = true;              // .item()
  }
}

}  // namespace gpt_internal
}  // namespace gpusim
