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

namespace {

// One lowering of a program: the buffers and events made so far, and per
// tensor its buffer, producing event and whether an output took it over.
class EagerLowering {
 public:
  EagerLowering(const Program& p, const LowerOptions& options, const ComputeGraph& graph)
      : p_(p), options_(options), graph_(graph), buffer_of_(p.tensors.size(), -1),
        producer_event_(p.tensors.size(), -1), handed_on_(p.tensors.size(), false), op_event_(p.ops.size(), -1),
        op_first_event_(p.ops.size(), -1), op_last_event_(p.ops.size(), -1) {
    Trace& tr = out_.trace;
    tr.name = p.name;
    tr.streams = {{kComputeStream, "compute"}, {kCollectiveStream, "collective"}, {kHostCopyStream, "host_copy"}};
    // Upper bounds, so that the event and buffer vectors never reallocate
    // (a TraceEvent is large; moving them dominated lowering).
    size_t max_events = p.tensors.size();
    for (const Op& op : p.ops) max_events += 1 + op.inputs.size() + 2 * op.outputs.size();
    tr.events.reserve(max_events);
    out_.event_phase.reserve(max_events);
    out_.buffers.reserve(p.tensors.size());
  }

  absl::StatusOr<LoweredStep> Run() {
    RETURN_IF_ERROR(EntryTensors());
    RETURN_IF_ERROR(CheckAliasChains(p_, graph_));
    for (const Op& op : p_.ops) {
      op_first_event_[static_cast<size_t>(op.id)] = static_cast<int64_t>(out_.trace.events.size());
      AllocOutputs(op);
      ASSIGN_OR_RETURN(TraceEvent e, OpEvent(op));
      const int64_t idx = Emit(std::move(e), op.phase);
      op_event_[static_cast<size_t>(op.id)] = idx;
      out_.op_event.push_back(idx);
      for (TensorId t : op.outputs) producer_event_[static_cast<size_t>(t)] = idx;
      FreeDead(op);
      op_last_event_[static_cast<size_t>(op.id)] = static_cast<int64_t>(out_.trace.events.size()) - 1;
    }
    RETURN_IF_ERROR(Repeats());
    return std::move(out_);
  }

 private:
  BufferId AddBuffer(const Tensor& t) {
    BufferInfo b;
    b.id = static_cast<BufferId>(out_.buffers.size());
    b.name = t.name;
    b.origin = t.origin;
    b.origin_kind = t.origin_kind;
    b.role = t.role;
    b.bytes = t.bytes();
    b.argument = t.entry_parameter;
    b.output = t.live_out;
    const BufferId id = b.id;
    out_.buffers.push_back(std::move(b));
    return id;
  }

  int64_t Emit(TraceEvent e, Phase ph) {
    out_.trace.events.push_back(std::move(e));
    out_.event_phase.push_back(ph);
    return static_cast<int64_t>(out_.trace.events.size()) - 1;
  }

  // Entry parameters exist before the step; live-out outputs are counted,
  // and an output aliasing an input must alias a donated one of its size.
  absl::Status EntryTensors() {
    for (const Tensor& t : p_.tensors) {
      if (t.entry_parameter) {
        out_.argument_bytes += t.bytes();
        BufferId id = AddBuffer(t);
        buffer_of_[static_cast<size_t>(t.id)] = id;
        TraceEvent e;
        e.type = EventType::kAlloc;
        e.buffer = id;
        e.size = t.bytes();
        e.role = t.role;
        e.name = t.name;
        e.phase = Phase::kOther;
        Emit(std::move(e), Phase::kOther);
      }
      if (t.live_out) {
        out_.output_bytes += t.bytes();
        if (t.aliases != kNoTensor) {
          const Tensor& src = p_.tensor(t.aliases);
          if (!src.entry_parameter || !src.donated) {
            return absl::InvalidArgumentError(absl::StrCat("output '", t.name, "' aliases '", src.name,
                                                           "', which is not a donated entry parameter"));
          }
          if (src.bytes() != t.bytes()) {
            return absl::InvalidArgumentError(
                absl::StrCat("output '", t.name, "' aliases '", src.name, "' of a different size"));
          }
          out_.alias_bytes += t.bytes();
        }
      }
    }
    return absl::OkStatus();
  }

  // Note [Gemm results are not written over]
  // XLA-GPU emits a dot as a cuBLAS / cuBLASLt custom call whose result is
  // a tuple (result, s8 workspace): `custom-call.9 = (bf16[32,2048,2048],
  // s8[33554432]) custom-call(...), custom_call_target="__cublas$lt$matmul"`
  // in the compiled Llama steps (validation/h200_2026-12-04/hlo/*.opt.hlo.gz),
  // read by its consumers through a get-tuple-element. The heap simulator
  // lets a value take a dying operand's buffer only when its instruction is
  // a user of the instruction defining that operand's value (openxla/xla
  // 0e06ac82 xla/service/heap_simulator/heap_simulator.cc
  // HeapSimulator::RunComputation: `value->instruction()->IsUserOf(
  // operand_value->instruction()) && ... CanShareOperandBufferWithUser`),
  // and the fusion reading the gemm's result is a user of the
  // get-tuple-element, not of the custom call that defines the value: the
  // consumer gets a buffer of its own, and the gemm's result stays live
  // until that consumer has run. In the L4 rolled step, the softmax
  // backward `loop_convert_fusion.8` (bf16[32,2048,2048], 268 MB) is
  // allocated beside its operand `custom-call.9` {0} (dP, 268 MB), which
  // dies there. Not modelled: the autotuner may emit a dot as a Triton gemm
  // fusion instead (`gemm_fusion_dot.N`, an array result that may be shared);
  // which one it picks is decided on the GPU.
  //
  // Note [Operand buffer reuse]: an elementwise op may write its output
  // into an operand's buffer when that operand dies here and has the
  // same size (XLA HloDataflowAnalysis::CanShareOperandBufferWithUser,
  // "may_reuse_operand_buffers" in xla_semantics.md §2).
  TensorId ReusableOperand(const Op& op, const Tensor& tensor) const {
    if (!options_.reuse_operand_buffers || (op.kind != OpKind::kElementwise && op.kind != OpKind::kConvert)) {
      return kNoTensor;
    }
    for (TensorId u : op.inputs) {
      const Tensor& in = p_.tensor(u);
      if (in.entry_parameter || in.live_out || in.aliases != kNoTensor || handed_on_[static_cast<size_t>(u)] ||
          graph_.last_use(u) != op.id || in.bytes() != tensor.bytes()) {
        continue;
      }
      if (std::count(op.inputs.begin(), op.inputs.end(), u) != 1) continue;
      if (!options_.reuse_matmul_results && graph_.producer(u) >= 0 &&
          p_.op(graph_.producer(u)).kind == OpKind::kMatmul) {
        continue;  // Note [Gemm results are not written over]
      }
      return u;
    }
    return kNoTensor;
  }

  // Each output's buffer: none for pinned host memory, the aliased input's,
  // a dying operand's, or a new one allocated just before the op.
  void AllocOutputs(const Op& op) {
    for (TensorId t : op.outputs) {
      const Tensor& tensor = p_.tensor(t);
      if (tensor.host) {  // pinned host memory: no device buffer
        out_.host_bytes += tensor.bytes();
        continue;
      }
      if (tensor.aliases != kNoTensor) {
        buffer_of_[static_cast<size_t>(t)] = buffer_of_[static_cast<size_t>(tensor.aliases)];
        continue;
      }
      if (const TensorId donor = ReusableOperand(op, tensor); donor != kNoTensor) {
        handed_on_[static_cast<size_t>(donor)] = true;
        buffer_of_[static_cast<size_t>(t)] = buffer_of_[static_cast<size_t>(donor)];
        continue;
      }
      BufferId id = AddBuffer(tensor);
      buffer_of_[static_cast<size_t>(t)] = id;
      out_.buffers[static_cast<size_t>(id)].phase = op.phase;
      TraceEvent e;
      e.type = EventType::kAlloc;
      e.stream = StreamFor(op);
      e.buffer = id;
      e.size = tensor.bytes();
      e.role = tensor.role;
      e.name = tensor.name;
      e.phase = op.phase;
      out_.buffers[static_cast<size_t>(id)].alloc_event = Emit(std::move(e), op.phase);
    }
  }

  // The op's timed event: its work, the buffers it uses, and the events on
  // other streams it waits for (producers and control dependencies).
  absl::StatusOr<TraceEvent> OpEvent(const Op& op) const {
    const Trace& tr = out_.trace;
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
      if (!p_.tensor(t).host) e.uses.push_back(buffer_of_[static_cast<size_t>(t)]);
    }
    for (TensorId t : op.outputs) {
      if (!p_.tensor(t).host) e.uses.push_back(buffer_of_[static_cast<size_t>(t)]);
    }
    std::sort(e.uses.begin(), e.uses.end());
    e.uses.erase(std::unique(e.uses.begin(), e.uses.end()), e.uses.end());
    for (TensorId t : op.inputs) {
      int64_t pe = producer_event_[static_cast<size_t>(t)];
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
      const int64_t de = op_event_[static_cast<size_t>(dep)];
      if (tr.events[static_cast<size_t>(de)].stream != e.stream &&
          std::find(e.after.begin(), e.after.end(), de) == e.after.end()) {
        e.after.push_back(de);
      }
    }
    return e;
  }

  // Free every buffer whose last reader this op is (or, unread, its producer).
  void FreeDead(const Op& op) {
    touched_.assign(op.inputs.begin(), op.inputs.end());
    touched_.insert(touched_.end(), op.outputs.begin(), op.outputs.end());
    std::sort(touched_.begin(), touched_.end());
    touched_.erase(std::unique(touched_.begin(), touched_.end()), touched_.end());
    for (TensorId t : touched_) {
      const Tensor& tensor = p_.tensor(t);
      if (tensor.host || tensor.entry_parameter || tensor.live_out || tensor.aliases != kNoTensor) continue;
      if (handed_on_[static_cast<size_t>(t)]) continue;  // lives on as this op's output
      OpId last = graph_.last_use(t);
      if (last < 0) last = graph_.producer(t);
      if (last != op.id) continue;
      BufferId id = buffer_of_[static_cast<size_t>(t)];
      TraceEvent f;
      f.type = EventType::kFree;
      f.stream = StreamFor(op);
      f.buffer = id;
      f.phase = op.phase;
      out_.buffers[static_cast<size_t>(id)].free_event = Emit(std::move(f), op.phase);
    }
  }

  // Note [Rolled loop built once]: the events of each repeated region.
  absl::Status Repeats() {
    Trace& tr = out_.trace;
    for (const Region& reg : p_.regions) {
      if (reg.repeat <= 1 || reg.last < reg.first) continue;
      if (reg.kind != "layer" && reg.kind != "iteration") {
        return absl::InvalidArgumentError(absl::StrCat("region '", reg.name, "': repeat ", reg.repeat,
                                                       " on a region that is not a loop iteration"));
      }
      tr.repeats.push_back({op_first_event_[static_cast<size_t>(reg.first)],
                            op_last_event_[static_cast<size_t>(reg.last)], reg.repeat});
    }
    std::sort(tr.repeats.begin(), tr.repeats.end(),
              [](const TraceRepeat& a, const TraceRepeat& b) { return a.first < b.first; });
    for (size_t i = 1; i < tr.repeats.size(); ++i) {
      if (tr.repeats[i].first <= tr.repeats[i - 1].last) {
        return absl::InvalidArgumentError("repeated regions overlap");
      }
    }
    return absl::OkStatus();
  }

  const Program& p_;
  const LowerOptions& options_;
  const ComputeGraph& graph_;
  LoweredStep out_;
  // Buffer of each tensor: its own, or the donated input it aliases.
  std::vector<BufferId> buffer_of_;
  std::vector<int64_t> producer_event_;
  std::vector<bool> handed_on_;  // buffer passed to an output
  std::vector<int64_t> op_event_;
  std::vector<TensorId> touched_;
  std::vector<int64_t> op_first_event_, op_last_event_;
};

}  // namespace

absl::StatusOr<LoweredStep> LowerEager(const Program& p, const LowerOptions& options) {
  RETURN_IF_ERROR(CheckTensorSizes(p));
  ASSIGN_OR_RETURN(ComputeGraph graph, ComputeGraph::Build(p));
  return EagerLowering(p, options, graph).Run();
}

}  // namespace gpusim
