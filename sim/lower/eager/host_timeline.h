// The host side of an eager (PyTorch) step: what the issuing Python thread
// spends on each op, charged to the lowered trace's timed events
// (TraceEvent::host_ops, host_modules) so that the engine's host timeline (Note [Host
// timeline] in sim/engine/engine.h) makes each kernel wait until the host
// has issued it. Read from op fields only (phase, kind, roles, regions,
// aliases), never from op names (issue 11).
//
// Note [Eager host costs]
// - Dispatch and launch: every op that has a timed event costs the device's
//   host.op (the Python binding, the dispatcher, the kernel launch call).
// - Python module calls, host.module each (nn.Module.__call__ ->
//   _call_impl with its hook checks, torch/nn/modules/module.py): a
//   forward op (or one recomputed under activation checkpointing, which
//   calls the modules again) of kind matmul or gather reading a parameter
//   is one call of a Linear or Embedding module; a decoder layer (a region
//   of kind "layer" with such ops) adds 4 container calls: the layer, its
//   attention block, the core attention, its MLP. For a Megatron-LM layer
//   under Transformer Engine that is the 8 calls of
//   megatron/core/transformer/transformer_layer.py TransformerLayer.forward
//   (SelfAttention, the fused norm + QKV LayerNormLinear, core attention,
//   the output projection, MLP, fc1, fc2, and the layer); the rest of a
//   Megatron iteration's Python (p2p calls, the linear layers' Python
//   backward, the unfused attention's inner modules) comes as Op::host_calls
//   from the builder (Note [Megatron iteration on the host],
//   models/gpt_megatron_host.cc).
// - Gradient hooks (grad_hooks, Megatron-LM's DDP): one host.module per
//   weight-gradient op of the backward, the Python hook
//   distributed_data_parallel.py _make_backward_post_hook registers per
//   parameter. A weight-gradient op is a backward op, not elementwise, that
//   writes a gradient or accumulates into a gradient buffer that exists
//   before the step (main_grad). torch's own DDP hooks are C++ (reducer).
// - The optimizer's updates (optimizer-phase elementwise ops writing an
//   optimizer state in place, or a parameter where no state exists) are
//   launched as the optimizer implementation launches them, not one kernel
//   per op:
//     foreach (torch.optim AdamW / SGD default on CUDA since torch 2.0:
//       torch/optim/optimizer.py _default_to_fused_or_foreach, called from
//       adamw.py adamw() with use_fused=False): AdamW's
//       _multi_tensor_adamw issues 8 device _foreach_ calls per step
//       (weight decay mul_, lerp_, mul_, addcmul_, sqrt, div_, add_,
//       addcdiv_, list depths 1 2 1 3 2 1 1 3) and steps its CPU `step`
//       tensors one by one (the slow CPU path of _foreach_add_: one
//       dispatch per tensor); SGD without momentum one _foreach_add_ of
//       depth 2 (sgd.py _multi_tensor_sgd);
//     fused_adam (Megatron-LM's optimizer: TE / apex FusedAdam,
//       multi_tensor_adam over [grads, params, exp_avg, exp_avg_sq], depth 4).
//   A multi_tensor_apply call launches a kernel whenever its tensor list
//   (depth_to_max_tensors {110, 64, 48, 36, 30} by depth) or its block list
//   (320 chunks of 65,536 elements) fills, and for the rest
//   (aten/src/ATen/native/cuda/MultiTensorApply.cuh multi_tensor_apply;
//   apex and TE csrc/multi_tensor_apply.cuh keep the same tables): each
//   launch costs host.op. The optimizer's host time is spread over its
//   update ops in program order.
// - A builder's own host facts (Op::host_calls, Op::host_sync): Python
//   calls that launch nothing (host.module each) and host syncs, carried
//   onto the op's event (a sync on an op without one goes to the nearest
//   earlier op that has one).
// Not modelled: the Python loop of the optimizer's _init_group, norm modules
// that are not fused into a linear, bias-gradient hooks (a bias's gradient
// is produced by its weight's gradient op), the per-dtype grouping of
// _group_tensors_by_device_and_dtype (one group), and the tensor count of a
// distributed optimizer's shard (one update op of the shard's elements).
//
// Note [Recorded host costs]
// A PyTorch step recorded by gpusim_torch (trace format 1.6) carries on
// each compute event the host work since the previous one (host=D,N,M,
// Note [Host work per kernel] in python/gpusim_torch/recorder.py), priced
// in place of host.op (HostIssueTime, sim/device/timing.h):
//   host.dispatch (14.4 us): an aten op dispatched from Python outside
//     autograd's engine (forward, loss, optimizer, zero_grad; views and CPU
//     scalars included): the Python binding (torch/csrc/autograd/generated/
//     python_variable_methods.cpp), the dispatcher's autograd kernel that
//     records the graph (VariableType), the op's CPU-side setup and, for a
//     kernel, cudaLaunchKernel;
//   host.node (24.2 us): a node autograd's engine runs (torch/csrc/autograd/
//     engine.cpp evaluate_function: the node's apply, its input buffers, its
//     ops' dispatch and launches);
//   host.python_module (51.5 us): an nn.Module call with the Python of its
//     forward (module.py _call_impl; the model's own Python between ops).
// Values: the ten test-size steps of validation/h200_2026-12-04 (host-bound:
// each step is 5-15x its kernels), split by phase with their Kineto traces:
// the main thread's forward span (before the first backward op) against D
// and M of the forward, the autograd thread's span against N, both scaled by
// the case's profiler inflation (the profiled step's CPU span over the
// unprofiled median step, 1.3-2.0x). Least squares, leave-one-out: forward
// median 22% (D, M), backward 13% (N); the whole host step with the three
// costs, in the fit: median 8%, at most 43% (bert_test);
// docs/validation_step_time.md. The host is the H200 machine's (a VM); a
// device file's host: block or `gpusim calibrate` replaces them.
// Not modelled: the optimizer's per-parameter Python loops apart from the
// ops they dispatch, torch.compile'd regions (charged host.op per kernel:
// their wrapper launches from Python), GIL contention, the first step's
// lazy initialisations (the recording is of a warm step).
#ifndef GPUSIM_SIM_LOWER_EAGER_HOST_TIMELINE_H_
#define GPUSIM_SIM_LOWER_EAGER_HOST_TIMELINE_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "sim/base/units.h"
#include "sim/ir/program.h"
#include "sim/lower/lower.h"
#include "sim/trace/trace.h"

namespace gpusim {

enum class OptimizerLaunch { kForeachAdamW, kForeachSgd, kFusedAdam };

struct HostTimelineOptions {
  OptimizerLaunch optimizer = OptimizerLaunch::kForeachAdamW;
  bool grad_hooks = false;  // Megatron-LM DDP: a Python hook per weight gradient
};

// What the host was charged for (for reports and tests).
struct HostTimelineSummary {
  int64_t launches = 0;            // ops charged host.op (outside the optimizer's updates)
  int64_t module_calls = 0;        // Python module calls (forward and recomputed)
  int64_t grad_hooks = 0;          // weight-gradient hooks
  int64_t optimizer_updates = 0;   // update ops of the optimizer
  int64_t optimizer_launches = 0;  // kernel launches (and CPU step dispatches) they cost
  int64_t python_calls = 0;        // Op::host_calls: Python calls that launch nothing themselves
  int64_t syncs = 0;               // Op::host_sync: the host waits for the device
};

// Kernel launches of one multi_tensor_apply call at list `depth` (1 to 5)
// over tensors of these element counts (Note [Eager host costs]).
int64_t MultiTensorApplyLaunches(const std::vector<int64_t>& elements, int depth);

// Charges `step`'s timed events of program `p` (lowered by LowerEager, so
// step->op_event maps ops to events) with what the host does to issue them
// (TraceEvent::host_ops, host_modules; the engine prices them with the
// device's host.op and host.module). Replaces any charge already there.
HostTimelineSummary ChargeHostTimeline(const Program& p, const HostTimelineOptions& options, LoweredStep* step);

// A recorded trace has no module or optimizer structure: every timed event
// is one dispatch (host.op). Returns the number charged.
int64_t ChargeRecordedHostTimeline(Trace* trace);

}  // namespace gpusim

#endif  // GPUSIM_SIM_LOWER_EAGER_HOST_TIMELINE_H_
