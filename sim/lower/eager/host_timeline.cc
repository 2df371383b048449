#include "sim/lower/eager/host_timeline.h"

#include <algorithm>
#include <array>

namespace gpusim {
namespace {

// multi_tensor_apply's limits (Note [Eager host costs]).
constexpr std::array<int64_t, 5> kMaxTensors = {110, 64, 48, 36, 30};
constexpr int64_t kMaxBlocks = 320;
constexpr int64_t kChunkElements = 65536;

// torch _multi_tensor_adamw's device foreach calls, by list depth.
constexpr std::array<int, 8> kForeachAdamWDepths = {1, 2, 1, 3, 2, 1, 1, 3};

bool ReadsRole(const Program& p, const Op& op, Role role, bool entry_only) {
  for (TensorId t : op.inputs) {
    const Tensor& in = p.tensor(t);
    if (in.role == role && (!entry_only || in.entry_parameter)) return true;
  }
  return false;
}

bool WritesRole(const Program& p, const Op& op, Role role) {
  for (TensorId t : op.outputs) {
    if (p.tensor(t).role == role) return true;
  }
  return false;
}

// An output written in place into a donated input of `role`.
bool UpdatesInPlace(const Program& p, const Op& op, Role role) {
  for (TensorId t : op.outputs) {
    const Tensor& out = p.tensor(t);
    if (out.aliases != kNoTensor && p.tensor(out.aliases).role == role) return true;
  }
  return false;
}

bool IsModuleCall(const Program& p, const Op& op) {
  if (op.phase != Phase::kForward && !op.recompute) return false;
  if (op.kind != OpKind::kMatmul && op.kind != OpKind::kGather) return false;
  return ReadsRole(p, op, Role::kParameter, false);
}

bool IsWeightGradient(const Program& p, const Op& op) {
  if (op.phase != Phase::kBackward || op.recompute || op.kind == OpKind::kElementwise) return false;
  if (WritesRole(p, op, Role::kGradient)) return true;
  return op.outputs.empty() && ReadsRole(p, op, Role::kGradient, true);
}

// The updated tensor's elements (the first in-place output).
int64_t UpdatedElements(const Program& p, const Op& op) {
  for (TensorId t : op.outputs) {
    if (p.tensor(t).aliases != kNoTensor) return p.tensor(t).elements();
  }
  return 0;
}

}  // namespace

int64_t MultiTensorApplyLaunches(const std::vector<int64_t>& elements, int depth) {
  const int64_t max_tensors = kMaxTensors[static_cast<size_t>(std::clamp(depth, 1, 5) - 1)];
  int64_t launches = 0, tensors = 0, blocks = 0;
  for (size_t t = 0; t < elements.size(); ++t) {
    const int64_t chunks = std::max<int64_t>(1, (elements[t] + kChunkElements - 1) / kChunkElements);
    ++tensors;
    for (int64_t c = 0; c < chunks; ++c) {
      ++blocks;
      const bool tensor_done = c == chunks - 1;
      const bool last = tensor_done && t + 1 == elements.size();
      if ((tensors == max_tensors && tensor_done) || blocks == kMaxBlocks || last) {
        ++launches;
        blocks = 0;
        // A tensor cut mid-way starts the next launch's list.
        tensors = tensor_done ? 0 : 1;
      }
    }
  }
  return launches;
}

HostTimelineSummary ChargeHostTimeline(const Program& p, const HostTimelineOptions& o, LoweredStep* step) {
  HostTimelineSummary s;
  std::vector<double> ops(p.ops.size(), 0);
  std::vector<int64_t> modules(p.ops.size(), 0);
  // Decoder layers: 4 container calls at the first module call in each.
  for (const Region& r : p.regions) {
    if (r.kind != "layer") continue;
    for (OpId i = r.first; i <= r.last && static_cast<size_t>(i) < p.ops.size(); ++i) {
      if (IsModuleCall(p, p.op(i))) {
        modules[static_cast<size_t>(i)] += 4;
        break;
      }
    }
  }
  bool has_state = false;
  for (const Op& op : p.ops) {
    has_state |= op.phase == Phase::kOptimizer && UpdatesInPlace(p, op, Role::kOptimizerState);
  }
  std::vector<OpId> updates;
  for (const Op& op : p.ops) {
    const size_t i = static_cast<size_t>(op.id);
    if (op.phase == Phase::kOptimizer && op.kind == OpKind::kElementwise &&
        UpdatesInPlace(p, op, has_state ? Role::kOptimizerState : Role::kParameter)) {
      modules[i] = 0;
      updates.push_back(op.id);
      continue;
    }
    ops[i] = 1;
    ++s.launches;
    if (IsModuleCall(p, op)) ++modules[i];
    s.module_calls += modules[i];
    if (o.grad_hooks && IsWeightGradient(p, op)) {
      ++modules[i];
      ++s.grad_hooks;
    }
  }
  s.optimizer_updates = static_cast<int64_t>(updates.size());
  if (!updates.empty()) {
    std::vector<int64_t> elements;
    for (OpId id : updates) elements.push_back(UpdatedElements(p, p.op(id)));
    int64_t launches = 0;
    switch (o.optimizer) {
      case OptimizerLaunch::kForeachAdamW:
        for (int depth : kForeachAdamWDepths) launches += MultiTensorApplyLaunches(elements, depth);
        launches += static_cast<int64_t>(updates.size());  // CPU step tensors, one by one
        break;
      case OptimizerLaunch::kForeachSgd:
        launches = MultiTensorApplyLaunches(elements, 2);
        break;
      case OptimizerLaunch::kFusedAdam:
        launches = MultiTensorApplyLaunches(elements, 4);
        break;
    }
    s.optimizer_launches = launches;
    // Spread evenly over the updates in program order.
    const double each = static_cast<double>(launches) / static_cast<double>(updates.size());
    for (OpId id : updates) ops[static_cast<size_t>(id)] = each;
  }
  // Python calls of an op without an event go to the next op that has one.
  int64_t last_event = -1, pending_calls = 0;
  for (size_t i = 0; i < p.ops.size() && i < step->op_event.size(); ++i) {
    const Op& op = p.ops[i];
    s.python_calls += op.host_calls;
    pending_calls += op.host_calls;
    const int64_t e = step->op_event[i];
    if (e >= 0) {
      last_event = e;
      TraceEvent& ev = step->trace.events[static_cast<size_t>(e)];
      ev.host_ops = ops[i];
      ev.host_modules = modules[i] + pending_calls;
      ev.host_sync = false;
      pending_calls = 0;
    }
    if (op.host_sync && last_event >= 0) {
      TraceEvent& ev = step->trace.events[static_cast<size_t>(last_event)];
      s.syncs += ev.host_sync ? 0 : 1;
      ev.host_sync = true;
    }
  }
  return s;
}

int64_t ChargeRecordedHostTimeline(Trace* trace) {
  int64_t n = 0;
  for (TraceEvent& e : trace->events) {
    if (!IsTimed(e.type)) continue;
    // Note [Recorded host costs]: the recorded host work, else one host.op.
    e.host_ops = e.host_recorded ? 0 : 1;
    e.host_modules = 0;
    ++n;
  }
  return n;
}

}  // namespace gpusim
