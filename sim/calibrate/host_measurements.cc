// The host phases of a Kineto trace; see host_measurements.h, Note [Host
// phase spans from Kineto] and Note [Dispatches from a Kineto trace].
#include "sim/calibrate/host_measurements.h"

#include <algorithm>
#include <map>
#include <set>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace gpusim {
namespace {

constexpr std::string_view kEvaluateFunction = "autograd::engine::evaluate_function: ";

// One cpu_op of the main thread's forward window, with its children.
struct OpNode {
  const RecordedOp* op = nullptr;
  std::vector<int> children;
};

// Dispatches under `n` as the recorder counts them (Note [Dispatches from a
// Kineto trace]).
int64_t Dispatches(const std::vector<OpNode>& nodes, const OpNode& n) {
  const bool decomposed = n.op->sequence >= 0 && std::any_of(n.children.begin(), n.children.end(), [&](int c) {
    return nodes[static_cast<size_t>(c)].op->sequence >= 0;
  });
  if (!decomposed) return 1;
  int64_t total = 0;
  for (int c : n.children) total += Dispatches(nodes, nodes[static_cast<size_t>(c)]);
  return total;
}

// The forward window's ops of `thread` in [begin, end) as a forest; the
// indices of its roots. Parents before children at equal starts (the
// longer first).
std::vector<int> Forest(const RecordedTrace& t, int32_t thread, SimTime begin, SimTime end,
                        std::vector<OpNode>& nodes) {
  std::vector<const RecordedOp*> ops;
  for (const RecordedOp& op : t.ops) {
    if (op.kind == RecordedOpKind::kCpuOp && op.thread == thread && op.start >= begin && op.start < end) {
      ops.push_back(&op);
    }
  }
  std::stable_sort(ops.begin(), ops.end(), [](const RecordedOp* a, const RecordedOp* b) {
    return a->start != b->start ? a->start < b->start : a->duration > b->duration;
  });
  std::vector<int> roots, open;
  for (const RecordedOp* op : ops) {
    while (!open.empty()) {
      const RecordedOp* top = nodes[static_cast<size_t>(open.back())].op;
      if (op->start < top->start + top->duration) break;
      open.pop_back();
    }
    const int id = static_cast<int>(nodes.size());
    nodes.push_back({op, {}});
    (open.empty() ? roots : nodes[static_cast<size_t>(open.back())].children).push_back(id);
    open.push_back(id);
  }
  return roots;
}

}  // namespace

absl::StatusOr<HostMeasurements> ExtractHostMeasurements(const RecordedTrace& t) {
  std::map<int32_t, SimTime> first;  // thread -> its first cpu_op's start
  std::set<int32_t> engine;
  int64_t profiler_steps = 0;
  SimTime last_end{0};
  for (const RecordedOp& op : t.ops) {
    if (op.kind == RecordedOpKind::kUserAnnotation && op.name.starts_with("ProfilerStep#")) ++profiler_steps;
    if (op.kind != RecordedOpKind::kCpuOp) continue;
    auto [it, inserted] = first.try_emplace(op.thread, op.start);
    if (!inserted) it->second = std::min(it->second, op.start);
    if (op.name.starts_with(kEvaluateFunction)) engine.insert(op.thread);
    last_end = std::max(last_end, op.start + op.duration);
  }
  if (first.empty()) return absl::InvalidArgumentError("no cpu_op events (the host side was not profiled)");
  if (profiler_steps > 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        profiler_steps, " ProfilerStep# ranges: the host fit reads one step per trace (export one step)"));
  }
  int32_t main = first.begin()->first;
  for (const auto& [thread, start] : first) {
    if (start < first[main]) main = thread;
  }
  if (engine.count(main) > 0) {
    return absl::InvalidArgumentError(
        "the backward ran on the main thread (a CPU step): its forward and backward cannot be told apart");
  }
  if (engine.empty()) {
    return absl::InvalidArgumentError(
        "no autograd engine thread (no autograd::engine::evaluate_function range): not a training step");
  }
  HostMeasurements h;
  h.engine_threads = static_cast<int>(engine.size());
  SimTime b0{0}, b1{0};
  bool seen = false;
  for (const RecordedOp& op : t.ops) {
    if (op.kind != RecordedOpKind::kCpuOp || engine.count(op.thread) == 0) continue;
    b0 = seen ? std::min(b0, op.start) : op.start;
    b1 = seen ? std::max(b1, op.start + op.duration) : op.start + op.duration;
    seen = true;
    if (op.name.starts_with(kEvaluateFunction)) ++h.nodes;
  }
  const SimTime t0 = first[main];
  h.forward_span = b0 - t0;
  h.backward_span = b1 - b0;
  h.cpu_span = last_end - t0;
  std::vector<OpNode> nodes;
  const std::vector<int> roots = Forest(t, main, t0, b0, nodes);
  h.top_level_ops = static_cast<int64_t>(roots.size());
  for (int r : roots) h.dispatches += Dispatches(nodes, nodes[static_cast<size_t>(r)]);
  bool any_module = false;
  int64_t modules = 0;
  for (const RecordedOp& op : t.ops) {
    if (op.kind != RecordedOpKind::kModuleCall) continue;
    any_module = true;
    // A module call encloses its ops: it starts before the first one.
    if (op.thread == main && op.start < b0) ++modules;
  }
  if (any_module) h.module_calls = modules;
  return h;
}

}  // namespace gpusim
