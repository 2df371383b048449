#include "sim/lower/lower.h"

#include <algorithm>
#include <map>

#include "absl/strings/str_cat.h"
#include "sim/base/status.h"
#include "sim/ir/compute_graph.h"
#include "sim/lower/stream_for.h"

namespace gpusim {
namespace {

EventType EventTypeFor(OpKind k) {
  if (IsCollective(k)) return EventType::kCollective;
  if (k == OpKind::kHostToDevice || k == OpKind::kDeviceToHost) return EventType::kCopy;
  return EventType::kCompute;
}

// Tensors that alias a donated input share its buffer one after another:
// each must be dead (its last reader run) by the time the next is written,
// or the in-place write would clobber a value still needed.
absl::Status CheckAliasChains(const Program& p, const ComputeGraph& graph) {
  std::map<TensorId, std::vector<TensorId>> chains;
  for (const Tensor& t : p.tensors) {
    if (t.aliases != kNoTensor) chains[t.aliases].push_back(t.id);
  }
  for (auto& [src, chain] : chains) {
    chain.insert(chain.begin(), src);
    std::sort(chain.begin() + 1, chain.end(),
              [&](TensorId a, TensorId b) { return graph.producer(a) < graph.producer(b); });
    for (size_t i = 0; i + 1 < chain.size(); ++i) {
      const OpId next_write = graph.producer(chain[i + 1]);
      if (graph.last_use(chain[i]) > next_write) {
        return absl::InternalError(absl::StrCat("buffer of '", p.tensor(src).name, "': '",
                                                p.tensor(chain[i + 1]).name, "' is written by op ", next_write,
                                                " while '", p.tensor(chain[i]).name, "' is still read by op ",
                                                graph.last_use(chain[i])));
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace

StreamId StreamFor(const Op& op) {
  if (op.on_compute_stream) return kComputeStream;
  if (IsCollective(op.kind)) return kCollectiveStream;
  if (op.kind == OpKind::kHostToDevice || op.kind == OpKind::kDeviceToHost) return kHostCopyStream;
  return kComputeStream;
}

absl::StatusOr<LoweredStep> LowerEager(const Program& p, const LowerOptions& options) {
  RETURN_IF_ERROR(CheckTensorSizes(p));
  ASSIGN_OR_RETURN(ComputeGraph graph, ComputeGraph::Build(p));
  LoweredStep out;
  Trace& tr = out.trace;
  tr.name = p.name;
  tr.streams = {{kComputeStream, "compute"}, {kCollectiveStream, "collective"}, {kHostCopyStream, "host_copy"}};

  // Upper bounds, so that the event and buffer vectors never reallocate
  // (a TraceEvent is large; moving them dominated lowering).
  size_t max_events = p.tensors.size();
  for (const Op& op : p.ops) max_events += 1 + op.inputs.size() + 2 * op.outputs.size();
  tr.events.reserve(max_events);
  out.event_phase.reserve(max_events);
  out.buffers.reserve(p.tensors.size());

  // Buffer of each tensor: its own, or the donated input it aliases.
  std::vector<BufferId> buffer_of(p.tensors.size(), -1);
  auto add_buffer = [&](const Tensor& t) {
    BufferInfo b;
    b.id = static_cast<BufferId>(out.buffers.size());
    b.name = t.name;
    b.origin = t.origin;
    b.origin_kind = t.origin_kind;
    b.role = t.role;
    b.bytes = t.bytes();
    b.argument = t.entry_parameter;
    b.output = t.live_out;
    const BufferId id = b.id;
    out.buffers.push_back(std::move(b));
    return id;
  };
  auto emit = [&](TraceEvent e, Phase ph) {
    tr.events.push_back(std::move(e));
    out.event_phase.push_back(ph);
    return static_cast<int64_t>(tr.events.size()) - 1;
  };

  for (const Tensor& t : p.tensors) {
    if (t.entry_parameter) {
      out.argument_bytes += t.bytes();
      BufferId id = add_buffer(t);
      buffer_of[static_cast<size_t>(t.id)] = id;
      TraceEvent e;
      e.type = EventType::kAlloc;
      e.buffer = id;
      e.size = t.bytes();
      e.role = t.role;
      e.name = t.name;
      e.phase = Phase::kOther;
      emit(std::move(e), Phase::kOther);
    }
    if (t.live_out) {
      out.output_bytes += t.bytes();
      if (t.aliases != kNoTensor) {
        const Tensor& src = p.tensor(t.aliases);
        if (!src.entry_parameter || !src.donated) {
          return absl::InvalidArgumentError(absl::StrCat("output '", t.name, "' aliases '", src.name,
                                                         "', which is not a donated entry parameter"));
        }
        if (src.bytes() != t.bytes()) {
          return absl::InvalidArgumentError(
              absl::StrCat("output '", t.name, "' aliases '", src.name, "' of a different size"));
        }
        out.alias_bytes += t.bytes();
      }
    }
  }

  RETURN_IF_ERROR(CheckAliasChains(p, graph));
  std::vector<int64_t> producer_event(p.tensors.size(), -1);
  std::vector<bool> handed_on(p.tensors.size(), false);  // buffer passed to an output
  std::vector<int64_t> op_event(p.ops.size(), -1);
  std::vector<TensorId> touched;
  // Note [Rolled loop built once]: the events of each repeated region.
  std::vector<int64_t> op_first_event(p.ops.size(), -1), op_last_event(p.ops.size(), -1);
  for (const Op& op : p.ops) {
    op_first_event[static_cast<size_t>(op.id)] = static_cast<int64_t>(tr.events.size());
    for (TensorId t : op.outputs) {
      const Tensor& tensor = p.tensor(t);
      if (tensor.host) {  // pinned host memory: no device buffer
        out.host_bytes += tensor.bytes();
        continue;
      }
      if (tensor.aliases != kNoTensor) {
        buffer_of[static_cast<size_t>(t)] = buffer_of[static_cast<size_t>(tensor.aliases)];
        continue;
      }
      // Note [Operand buffer reuse]: an elementwise op may write its output
      // into an operand's buffer when that operand dies here and has the
      // same size (XLA HloDataflowAnalysis::CanShareOperandBufferWithUser,
      // "may_reuse_operand_buffers" in xla_semantics.md §2).
      if (options.reuse_operand_buffers &&
          (op.kind == OpKind::kElementwise || op.kind == OpKind::kConvert)) {
        TensorId donor = kNoTensor;
        for (TensorId u : op.inputs) {
          const Tensor& in = p.tensor(u);
          if (in.entry_parameter || in.live_out || in.aliases != kNoTensor || handed_on[static_cast<size_t>(u)] ||
              graph.last_use(u) != op.id || in.bytes() != tensor.bytes()) {
            continue;
          }
          if (std::count(op.inputs.begin(), op.inputs.end(), u) != 1) continue;
          donor = u;
          break;
        }
        if (donor != kNoTensor) {
          handed_on[static_cast<size_t>(donor)] = true;
          buffer_of[static_cast<size_t>(t)] = buffer_of[static_cast<size_t>(donor)];
          continue;
        }
      }
      BufferId id = add_buffer(tensor);
      buffer_of[static_cast<size_t>(t)] = id;
      out.buffers[static_cast<size_t>(id)].phase = op.phase;
      TraceEvent e;
      e.type = EventType::kAlloc;
      e.stream = StreamFor(op);
      e.buffer = id;
      e.size = tensor.bytes();
      e.role = tensor.role;
      e.name = tensor.name;
      e.phase = op.phase;
      out.buffers[static_cast<size_t>(id)].alloc_event = emit(std::move(e), op.phase);
    }
    TraceEvent e;
    e.type = EventTypeFor(op.kind);
    e.stream = StreamFor(op);
    e.name = op.name;
    e.kind = op.kind;
    e.flops = op.flops;
    e.bytes_read = op.bytes_read;
    e.bytes_written = op.bytes_written;
    e.dtype = op.dtype;
    e.phase = op.phase;
    e.group = op.group;
    e.group_nodes = op.group_nodes;
    e.recompute = op.recompute;
    e.m = op.m;
    e.n = op.n;
    e.k = op.k;
    e.batch = op.batch;
    for (TensorId t : op.inputs) {
      if (!p.tensor(t).host) e.uses.push_back(buffer_of[static_cast<size_t>(t)]);
    }
    for (TensorId t : op.outputs) {
      if (!p.tensor(t).host) e.uses.push_back(buffer_of[static_cast<size_t>(t)]);
    }
    std::sort(e.uses.begin(), e.uses.end());
    e.uses.erase(std::unique(e.uses.begin(), e.uses.end()), e.uses.end());
    for (TensorId t : op.inputs) {
      int64_t pe = producer_event[static_cast<size_t>(t)];
      if (pe >= 0 && tr.events[static_cast<size_t>(pe)].stream != e.stream &&
          std::find(e.after.begin(), e.after.end(), pe) == e.after.end()) {
        e.after.push_back(pe);
      }
    }
    for (OpId dep : op.control_deps) {
      if (dep < 0 || dep >= op.id) {
        return absl::InvalidArgumentError(
            absl::StrCat("op '", op.name, "': control dependency ", dep, " is not an earlier op"));
      }
      const int64_t de = op_event[static_cast<size_t>(dep)];
      if (tr.events[static_cast<size_t>(de)].stream != e.stream &&
          std::find(e.after.begin(), e.after.end(), de) == e.after.end()) {
        e.after.push_back(de);
      }
    }
    const int64_t idx = emit(std::move(e), op.phase);
    op_event[static_cast<size_t>(op.id)] = idx;
    out.op_event.push_back(idx);
    for (TensorId t : op.outputs) producer_event[static_cast<size_t>(t)] = idx;
    // Free every buffer whose last reader this op is (or, unread, its producer).
    auto maybe_free = [&](TensorId t) {
      const Tensor& tensor = p.tensor(t);
      if (tensor.host || tensor.entry_parameter || tensor.live_out || tensor.aliases != kNoTensor) return;
      if (handed_on[static_cast<size_t>(t)]) return;  // lives on as this op's output
      OpId last = graph.last_use(t);
      if (last < 0) last = graph.producer(t);
      if (last != op.id) return;
      BufferId id = buffer_of[static_cast<size_t>(t)];
      TraceEvent f;
      f.type = EventType::kFree;
      f.stream = StreamFor(op);
      f.buffer = id;
      f.phase = op.phase;
      out.buffers[static_cast<size_t>(id)].free_event = emit(std::move(f), op.phase);
    };
    touched.assign(op.inputs.begin(), op.inputs.end());
    touched.insert(touched.end(), op.outputs.begin(), op.outputs.end());
    std::sort(touched.begin(), touched.end());
    touched.erase(std::unique(touched.begin(), touched.end()), touched.end());
    for (TensorId t : touched) maybe_free(t);
    op_last_event[static_cast<size_t>(op.id)] = static_cast<int64_t>(tr.events.size()) - 1;
  }
  for (const Region& reg : p.regions) {
    if (reg.repeat <= 1 || reg.last < reg.first) continue;
    if (reg.kind != "layer" && reg.kind != "iteration") {
      return absl::InvalidArgumentError(absl::StrCat("region '", reg.name, "': repeat ", reg.repeat,
                                                     " on a region that is not a loop iteration"));
    }
    tr.repeats.push_back({op_first_event[static_cast<size_t>(reg.first)],
                          op_last_event[static_cast<size_t>(reg.last)], reg.repeat});
  }
  std::sort(tr.repeats.begin(), tr.repeats.end(),
            [](const TraceRepeat& a, const TraceRepeat& b) { return a.first < b.first; });
  for (size_t i = 1; i < tr.repeats.size(); ++i) {
    if (tr.repeats[i].first <= tr.repeats[i - 1].last) {
      return absl::InvalidArgumentError("repeated regions overlap");
    }
  }
  return out;
}

}  // namespace gpusim
