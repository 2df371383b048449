#include "sim/import/hlo/hlo_to_program.h"

#include "sim/import/hlo/hlo_multi_output.h"

#include <algorithm>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "sim/import/hlo/hlo_op_cost.h"
#include "sim/lower/xla/fusion.h"
#include "sim/base/status.h"
#include "sim/import/hlo/hlo_importer.h"
#include "sim/import/hlo/hlo_parser.h"

namespace gpusim {
namespace hlo_internal {

absl::StatusOr<Program> Importer::Run(HloImportStats* stats) {
  const HloComputation& entry = m_.entry_computation();
  RETURN_IF_ERROR(FindAliases(entry));
  std::vector<Node> args;
  for (size_t p = 0; p < entry.parameters.size(); ++p) {
    const HloInstruction& ins = entry.instructions[static_cast<size_t>(entry.parameters[p])];
    if (ins.shape.tuple) return Error(ins, "a tuple-shaped entry parameter (expected one array per parameter, as JAX lowers)");
    // An unpartitioned SPMD module has global shapes: one device's bytes
    // are only known after the partitioner (spmd_partitioner.cc) ran.
    if (m_.num_partitions > 1 && absl::StrContains(ins.attr("sharding"), "devices=")) {
      return Error(ins, absl::StrCat("sharding=", ins.attr("sharding"), " with num_partitions=", m_.num_partitions,
                                     ": the module is not partitioned yet; give the partitioned module "
                                     "(jax.jit(...).lower(...).compile().as_text()) or lower for one device"));
    }
    const bool donated = donated_.count(static_cast<int64_t>(p)) > 0;
    ASSIGN_OR_RETURN(DType dt, DTypeOf(ins, ins.shape));
    Node n;
    n.t = b_.AddArgument(ins.name, ins.shape.dims, dt, donated ? Role::kParameter : Role::kInputBatch, donated,
                         absl::StrCat("entry parameter ", p, " ", ins.shape.ToString(), donated ? " (donated)" : ""));
    b_.tensor(n.t).host = ins.shape.memory_space == 5;
    chain_[n.t] = n.t;
    args.push_back(n);
  }
  ASSIGN_OR_RETURN(Node root, Eval(entry, args, /*is_entry=*/true));
  RETURN_IF_ERROR(Outputs(entry, root));
  if (o_.trip_count > 0 && !trip_count_used_) {
    return absl::InvalidArgumentError(absl::StrCat(
        m_.file, ": loop.trip_count=", o_.trip_count,
        " is set, but no while loop needs it (every loop's trip count is known from the module)"));
  }
  if (stats != nullptr) {
    stats->instructions = static_cast<int64_t>(m_.InstructionCount());
    stats->trip_counts = trip_counts_;
  }
  Program program = b_.Finish();
  FuseLiveOutProducers(&program, live_out_fusions_);  // Note [Multi-output fusion of live-out values]
  if (!m_.is_scheduled) FuseReductionSiblings(&program, normalization_outputs_);  // Note [Sibling multi-output fusion]
  return program;

}

absl::Status Importer::FindAliases(const HloComputation& entry) {
  const HloInstruction& root = entry.instructions[static_cast<size_t>(entry.root)];
  const size_t outputs = root.shape.tuple ? root.shape.elements.size() : 1;
  output_alias_.assign(outputs, -1);
  for (const HloAlias& a : m_.aliases) {
    if (a.output_index.size() > 1 || !a.parameter_index.empty()) {
      return absl::UnimplementedError(absl::StrCat(m_.file, ": input_output_alias into nested tuples is not modelled"));
    }
    const size_t out = a.output_index.empty() ? 0 : static_cast<size_t>(a.output_index[0]);
    if (out >= outputs || a.parameter < 0 || static_cast<size_t>(a.parameter) >= entry.parameters.size()) {
      return absl::InvalidArgumentError(absl::StrCat(m_.file, ": input_output_alias {", out, "}: (", a.parameter,
                                                     ") names an output or parameter the entry does not have"));
    }
    output_alias_[out] = a.parameter;
    donated_.insert(a.parameter);
  }
  // Buffer donors: each unaliased output takes the first unused donor of
  // its shape (OptimizeInputOutputBufferAlias::Build).
  std::set<int64_t> used(donated_.begin(), donated_.end());
  for (size_t out = 0; out < outputs; ++out) {
    if (output_alias_[out] >= 0) continue;
    const HloShape& os = root.shape.tuple ? root.shape.elements[out] : root.shape;
    for (int64_t d : m_.buffer_donors) {
      if (d < 0 || static_cast<size_t>(d) >= entry.parameters.size() || used.count(d)) continue;
      const HloShape& ps = entry.instructions[static_cast<size_t>(entry.parameters[static_cast<size_t>(d)])].shape;
      if (ps.element != os.element || ps.dims != os.dims) continue;
      output_alias_[out] = d;
      used.insert(d);
      break;
    }
  }
  for (int64_t d : m_.buffer_donors) donated_.insert(d);
  // Homes: the definition an aliased output's value flows from.
  for (size_t out = 0; out < outputs; ++out) {
    if (output_alias_[out] < 0) continue;
    int def = root.shape.tuple && root.opcode == "tuple" ? root.operands[out] : entry.root;
    int index = -1;
    if (!root.shape.tuple || root.opcode == "tuple") {
      const HloInstruction& d = entry.instructions[static_cast<size_t>(def)];
      if (d.opcode == "get-tuple-element") {
        int64_t k = 0;
        if (absl::SimpleAtoi(d.attr("index"), &k)) {
          index = static_cast<int>(k);
          def = d.operands[0];
        }
      }
      home_[{def, index}] = output_alias_[out];
    }
  }
  return absl::OkStatus();

}

absl::StatusOr<Node> Importer::Instruction(const HloComputation& comp, int index, const HloInstruction& ins, const std::vector<Node>& ops, const std::vector<Node>& args, bool is_entry) {
  HloOpClass cls = ClassifyHloOpcode(ins.opcode);
  if (ins.opcode == "dot" && ops.size() == 2) {  // Note [Dot strength reduction] in fusion.cc
    const HloKernelCost d =
        DotKernelCost(ins, DeclaredOperandShape(comp, ins, 0), DeclaredOperandShape(comp, ins, 1));
    cls = ClassifyDot(d.m, d.n, d.k);
  }
  const Phase phase = PhaseOf(ins);
  if (m_.is_scheduled) {
    // Note [Compiled modules]
    const HloAsyncForm async = ClassifyAsync(ins.opcode);
    if (async.done) return AsyncDone(ins, ops, async);
    if (async.start && (cls == HloOpClass::kUnknown || async.operands_at >= 0)) return AsyncStart(comp, ins, ops, phase, async);
    if (cls == HloOpClass::kFusible) cls = HloOpClass::kKernel;
  }
  Node out;
  switch (cls) {
    case HloOpClass::kParameter:
      if (static_cast<size_t>(ins.parameter_number) >= args.size()) {
        return Error(ins, absl::StrCat("parameter(", ins.parameter_number, ") of a computation called with ",
                                       args.size(), " operands"));
      }
      return args[static_cast<size_t>(ins.parameter_number)];
    case HloOpClass::kConstant: {
      if (ins.shape.tuple) return Error(ins, "a tuple constant is not modelled");
      auto v = std::make_shared<Virtual>();
      v->name = ins.name;
      v->shape = ins.shape;
      v->phase = phase;
      out.v = v;
      return out;
    }
    case HloOpClass::kView:
      return View(ins, ops);
    case HloOpClass::kFusible:
      // algebraic_simplifier.cc HandleDynamicSlice / HandleSlice: a slice
      // of the whole operand is the operand.
      if ((ins.opcode == "dynamic-slice" || ins.opcode == "slice") && !ops.empty() && !ops[0].tuple &&
          ShapeOf(ops[0]).ElementCount() == ins.shape.ElementCount()) {
        return ops[0];
      }
      return Fuse(ins, ops, phase);
    case HloOpClass::kNoOp:
      if (ins.opcode == "opt-barrier" && !ops.empty()) return Barrier(ops[0]);
      if (ins.opcode == "add-dependency" && !ops.empty()) return ops[0];
      if (!ins.shape.tuple && ins.shape.element != "token") return Fuse(ins, {}, phase);
      return out;
    case HloOpClass::kReduction:
    case HloOpClass::kKernel:
    case HloOpClass::kFusion:
      return Kernel(comp, ins, ops, phase, cls);
    case HloOpClass::kInPlace:
      // HandleDynamicUpdateSlice: an update of the operand's whole shape
      // is the update.
      if (ins.opcode == "dynamic-update-slice" && ops.size() >= 2 && !ops[1].tuple &&
          ShapeOf(ops[1]).ElementCount() == ins.shape.ElementCount()) {
        return ops[1];
      }
      return InPlace(ins, ops, phase);
    case HloOpClass::kControl:
      if (ins.opcode == "call") {
        auto it = ins.called.find("to_apply");
        if (it == ins.called.end() || it->second.size() != 1) return Error(ins, "call without to_apply=");
        return Eval(m_.computation(it->second[0]), ops);
      }
      if (ins.opcode == "conditional") return Conditional(ins, ops);
      return While(comp, index, ins, ops.empty() ? Node{} : ops[0], is_entry);
    case HloOpClass::kUnknown:
      break;
  }
  return absl::UnimplementedError(absl::StrCat(m_.file, ":", ins.location.line, ":", ins.location.column, ": ",
                                               ins.name, ": opcode '", ins.opcode, "' is not modelled"));

}

// Note [Compiled modules]
// A compiled module (is_scheduled=true) is XLA's own kernels in XLA's own
// order: every instruction runs as it is (a fusion, a library call, a copy,
// a lone convert are each one kernel; nothing fuses further), the walk keeps
// the printed (scheduled) order, and the memory comes from XLA's buffer
// assignment of the module (hlo_buffer_assignment.h), not from these
// tensors. An X-start runs the op it wraps (a fusion-start its fusion) and
// returns its operands, result and context; X-done returns the result
// (ClassifyAsync in sim/lower/xla/fusion.h).
absl::StatusOr<Node> Importer::AsyncStart(const HloComputation& comp, const HloInstruction& ins,
                                          const std::vector<Node>& ops, Phase phase, const HloAsyncForm& async) {
  if (!ins.shape.tuple || (async.operands_at >= 0 && static_cast<size_t>(async.operands_at) >= ins.shape.elements.size())) {
    return Error(ins, "an async start whose result is not a tuple holding its operands");
  }
  HloInstruction wrapped = ins;
  const std::string base = ins.opcode.substr(0, ins.opcode.size() - std::string("-start").size());
  wrapped.opcode = base == "async" ? "fusion" : base;
  wrapped.shape = HloShape();
  wrapped.shape.tuple = true;
  for (size_t k = 0; k < ins.shape.elements.size(); ++k) {
    if (static_cast<int64_t>(k) != async.operands_at) wrapped.shape.elements.push_back(ins.shape.elements[k]);
  }
  HloOpClass cls = ClassifyHloOpcode(wrapped.opcode);
  if (cls != HloOpClass::kFusion && cls != HloOpClass::kReduction) cls = HloOpClass::kKernel;
  ASSIGN_OR_RETURN(Node r, Kernel(comp, wrapped, ops, phase, cls));
  Node out;
  out.tuple = true;
  size_t j = 0;
  for (size_t k = 0; k < ins.shape.elements.size(); ++k) {
    if (static_cast<int64_t>(k) != async.operands_at) {
      out.elements.push_back(r.elements[j++]);
      continue;
    }
    Node operands;
    operands.tuple = true;
    operands.elements = ops;
    out.elements.push_back(async.operands_at == 1 && ops.size() == 1 ? ops[0] : operands);
  }
  return out;
}

absl::StatusOr<Node> Importer::AsyncDone(const HloInstruction& ins, const std::vector<Node>& ops,
                                         const HloAsyncForm& async) {
  if (ops.size() != 1) return Error(ins, "an async done with other than one operand");
  if (async.result_at < 0) return ops[0];
  if (!ops[0].tuple || static_cast<size_t>(async.result_at) >= ops[0].elements.size()) {
    return Error(ins, absl::StrCat("the operand has no element {", async.result_at, "} to return"));
  }
  return ops[0].elements[static_cast<size_t>(async.result_at)];
}

absl::StatusOr<Node> Importer::View(const HloInstruction& ins, const std::vector<Node>& ops) {
  if (ins.opcode == "tuple") {
    Node t;
    t.tuple = true;
    t.elements = ops;
    return t;
  }
  if (ops.size() != 1) return Error(ins, "expected one operand");
  if (ins.opcode == "get-tuple-element") {
    int64_t k = -1;
    if (!absl::SimpleAtoi(ins.attr("index"), &k) || !ops[0].tuple || k < 0 ||
        static_cast<size_t>(k) >= ops[0].elements.size()) {
      return Error(ins, absl::StrCat("index=", ins.attr("index"), " is not an element of the operand tuple"));
    }
    return ops[0].elements[static_cast<size_t>(k)];
  }
  // bitcast / reshape: the operand's buffer, or a virtual of the new shape.
  if (ops[0].t != kNoTensor) return ops[0];
  if (!ops[0].v) return Error(ins, "reshape of a tuple");
  if (ops[0].v->materialised != kNoTensor) {
    Node n;
    n.t = ops[0].v->materialised;
    n.after = ops[0].after;
    MergeAfter(ops[0].v->after, &n.after);
    return n;
  }
  auto v = std::make_shared<Virtual>(*ops[0].v);
  v->shape = ins.shape;
  v->name = ins.name;
  v->materialised = kNoTensor;
  MergeAfter(ops[0].after, &v->after);
  Node n;
  n.v = v;
  return n;

}

absl::StatusOr<Node> Importer::Fuse(const HloInstruction& ins, const std::vector<Node>& ops, Phase phase) {
  if (ins.shape.tuple) return Error(ins, "a tuple-shaped elementwise result is not modelled");
  auto v = std::make_shared<Virtual>();
  v->name = ins.name;
  v->shape = ins.shape;
  v->phase = phase;
  v->flops = ElementwiseFlops(ins);
  const bool slicing = ins.opcode == "slice" || ins.opcode == "dynamic-slice" || ins.opcode == "gather";
  auto add = [&](TensorId t, Bytes bytes) {
    for (auto& [u, b] : v->inputs) {
      if (u == t) {
        b = Max(b, bytes);
        return;
      }
    }
    v->inputs.push_back({t, bytes});
  };
  for (size_t i = 0; i < ops.size(); ++i) {
    const Node& o = ops[i];
    if (o.tuple) return Error(ins, "a tuple operand of an elementwise instruction");
    const Bytes slice(slicing && i == 0 ? ins.shape.ArrayBytes() : -1);
    TensorId t = o.t != kNoTensor ? o.t : (o.v && o.v->materialised != kNoTensor ? o.v->materialised : kNoTensor);
    AfterOf(o, &v->after);  // Note [Optimization barrier]
    if (t != kNoTensor) {
      add(t, slice.value() >= 0 ? Min(slice, b_.program().tensor(t).bytes()) : b_.program().tensor(t).bytes());
    } else if (o.v) {
      for (const auto& [u, b] : o.v->inputs) add(u, slice.value() >= 0 ? Min(slice, b) : b);
      v->flops += o.v->flops;
      if (o.v->phase == Phase::kBackward) v->phase = Phase::kBackward;
    }
  }
  Node n;
  n.v = v;
  return n;

}

absl::StatusOr<Node> Importer::Kernel(const HloComputation& comp, const HloInstruction& ins,
                                      const std::vector<Node>& ops, Phase phase, HloOpClass cls) {
  // Costs from the declared operand shapes: a dot of reshape(materialised
  // buffer) contracts the reshape's dims, not the buffer's.
  std::vector<const HloShape*> shapes;
  for (size_t i = 0; i < ops.size() && i < ins.operands.size(); ++i) {
    shapes.push_back(&DeclaredOperandShape(comp, ins, i));
  }
  ASSIGN_OR_RETURN(HloKernelCost cost, [&]() -> absl::StatusOr<HloKernelCost> {
    auto c = KernelCost(m_, ins, shapes);
    if (!c.ok()) return Error(ins, std::string(c.status().message()));
    return c;
  }());
  if (cost.pass_through) {
    if (ops.size() != 1) return Error(ins, "an annotation custom-call with other than one operand");
    return ops[0];
  }
  std::vector<TensorId> inputs;
  Bytes read(0);
  if (cls == HloOpClass::kReduction) {
    cost.kind = OpKind::kReduce;
    ASSIGN_OR_RETURN(Node fused, Fuse(FakeElementwise(ins), ops, phase));
    for (const auto& [t, b] : fused.v->inputs) {
      inputs.push_back(t);
      read += b;
    }
    cost.flops += fused.v->flops;
  } else {
    for (const Node& o : ops) {
      std::vector<const Node*> leaves;
      Leaves(o, &leaves);
      for (const Node* l : leaves) {
        if (l->empty()) continue;
        ASSIGN_OR_RETURN(TensorId t, Buffer(*l));
        if (std::find(inputs.begin(), inputs.end(), t) == inputs.end()) {
          inputs.push_back(t);
          read += b_.program().tensor(t).bytes();
        }
      }
    }
  }
  // Results: one buffer per array element of the result shape.
  Node out;
  Bytes written(0);
  std::vector<TensorId> outputs;
  std::function<absl::StatusOr<Node>(const HloShape&, const std::string&)> make =
      [&](const HloShape& s, const std::string& name) -> absl::StatusOr<Node> {
    Node n;
    if (s.tuple) {
      n.tuple = true;
      for (size_t i = 0; i < s.elements.size(); ++i) {
        ASSIGN_OR_RETURN(Node e, make(s.elements[i], absl::StrCat(name, ".", i)));
        n.elements.push_back(std::move(e));
      }
      return n;
    }
    if (s.element == "token") return n;
    ASSIGN_OR_RETURN(DType dt, DTypeOf(ins, s));
    const TensorId home = outputs.empty() && !ins.shape.tuple ? HomeIfFree(current_home_) : kNoTensor;
    n.t = NewTensor(name, s, dt, Role::kTemporary, absl::StrCat(ins.opcode, " ", s.ToString()), home);
    outputs.push_back(n.t);
    written += Bytes(s.ArrayBytes());
    return n;
  };
  HloFusionTraffic traffic;
  if (ins.opcode == "fusion" && m_.is_scheduled) {  // Note [Fusion traffic] in hlo_op_cost.h
    std::vector<int64_t> operand_bytes;
    for (const Node& o : ops) {
      std::vector<const Node*> leaves;
      Leaves(o, &leaves);
      int64_t b = 0;
      for (const Node* l : leaves) b += l->t != kNoTensor ? b_.program().tensor(l->t).bytes().value() : 0;
      operand_bytes.push_back(b);
    }
    traffic = FusionTraffic(m_, ins, operand_bytes, std::max<int64_t>(0, ins.shape.ArrayBytes()));
    read = Bytes(0);
    for (int64_t b : traffic.read) read += Bytes(b);
  }
  const size_t in_place = static_cast<size_t>(traffic.in_place_operand);
  if (traffic.in_place_operand >= 0 && !ins.shape.tuple && in_place < ops.size() && ops[in_place].t != kNoTensor) {
    // A compiled in-place fusion writes its operand's buffer (Note [Compiled
    // modules]; copy insertion made that safe).
    const TensorId target = ops[in_place].t;
    inputs.erase(std::remove(inputs.begin(), inputs.end(), target), inputs.end());
    inputs.insert(inputs.begin(), target);
    if (ChainRoot(target) != kNoTensor) {
      out.t = NewTensor(ins.name, ins.shape, b_.program().tensor(target).dtype, b_.program().tensor(target).role,
                        absl::StrCat("fusion ", ins.name, " (in place)"), ChainRoot(target));
      outputs.push_back(out.t);
    } else {
      out.t = target;
    }
  } else {
    ASSIGN_OR_RETURN(out, make(ins.shape, ins.name));
  }
  if (traffic.in_place_operand >= 0 || !traffic.read.empty()) written = Bytes(traffic.written);
  Op& op = Emit(ins.name, cost.kind, phase, inputs, outputs, cost.flops);
  op.bytes_read = read;
  op.bytes_written = written;
  op.dtype = cost.dtype;
  op.m = cost.m;
  op.n = cost.n;
  op.k = cost.k;
  op.batch = cost.batch;
  op.group = cost.group;
  if (ins.opcode == "collective-permute" || ins.opcode == "collective-permute-start") {
    op.bytes_written = written + written;
  }
  RETURN_IF_ERROR(CheckSize());
  return out;

}

absl::StatusOr<Node> Importer::InPlace(const HloInstruction& ins, const std::vector<Node>& ops, Phase phase) {
  if (ops.size() < 2 || ops[0].tuple) return Error(ins, "expected an array operand 0 and an update");
  TensorId target = kNoTensor;
  const HloShape& s = ins.shape;
  ASSIGN_OR_RETURN(DType dt, DTypeOf(ins, s));
  if (ops[0].t != kNoTensor && Writable(ops[0].t)) {
    target = ops[0].t;
  } else if (ops[0].v && ops[0].v->materialised == kNoTensor && ops[0].v->inputs.empty()) {
    // A broadcast constant (the zeros JAX starts a stack from) is written
    // straight into the updated buffer.
    ASSIGN_OR_RETURN(target, Materialise(ops[0].v, Role::kTemporary, kNoTensor,
                                         absl::StrCat(ins.name, ": buffer updated in place")));
  } else {
    ASSIGN_OR_RETURN(TensorId src, Buffer(ops[0]));
    if (Writable(src)) {
      target = src;
    } else {
      target = Copy(ins.name, src, phase, Role::kTemporary,
                    absl::StrCat("copy of ", b_.program().tensor(src).name, " for ", ins.opcode, " ", ins.name,
                                 " (the old value is still read)"));
    }
  }
  // The update (and indices) fuse into the in-place kernel.
  std::vector<Node> rest(ops.begin() + 1, ops.end());
  ASSIGN_OR_RETURN(Node upd, Fuse(FakeElementwise(ins), rest, phase));
  std::vector<TensorId> inputs;
  Bytes read(0);
  for (const auto& [t, b] : upd.v->inputs) {
    inputs.push_back(t);
    read += b;
  }
  const HloShape update = ShapeOf(ops[ins.opcode == "scatter" ? ops.size() - 1 : 1]);
  const Bytes update_bytes(update.ArrayBytes());
  Node out;
  std::vector<TensorId> outs;
  if (ChainRoot(target) != kNoTensor) {
    out.t = NewTensor(ins.name, s, dt, b_.program().tensor(target).role, absl::StrCat(ins.opcode, " ", ins.name),
                      ChainRoot(target));
    outs.push_back(out.t);
  } else {
    out.t = target;
    // Written in place: the first input (entry_schedule.cc orders an op
    // without outputs after the earlier readers of its first input).
    inputs.erase(std::remove(inputs.begin(), inputs.end(), target), inputs.end());
    inputs.insert(inputs.begin(), target);
  }
  Op& op = Emit(ins.name, ins.opcode == "scatter" ? OpKind::kScatter : OpKind::kDynamicUpdateSlice, phase, inputs,
                outs, ins.opcode == "scatter" ? static_cast<double>(update.ElementCount()) : 0);
  op.bytes_read = read + (ins.opcode == "scatter" ? update_bytes : Bytes(0));
  op.bytes_written = update_bytes;
  op.dtype = dt;
  RETURN_IF_ERROR(CheckSize());
  return out;

}

// Note [Conditional branches]
// XLA's buffer assignment orders a conditional's branch computations, branch
// 0 before 1 before 2 ..., so their values have disjoint live ranges and
// share buffers (xla/hlo/analysis/hlo_ordering.cc, "we define the 0th branch
// computation to be ordered before the 1st one ... buffers can still be
// shared among branch computations"), and the conditional's result is one
// buffer every branch root writes (a phi value, HloDataflowAnalysis). So
// every branch is emitted, in order, each reading its own operand; a
// branch's temps die before the next branch starts, so the heap holds the
// largest branch's, beside the result buffer, which later branches write
// into (materialised values; a kernel result of its own stays its own).
// Which branch runs is data-dependent: branch 0 (or true_computation) is
// timed; the other branches' kernels keep their buffers and launches but
// no FLOPs or bytes.
absl::StatusOr<Node> Importer::Conditional(const HloInstruction& ins, const std::vector<Node>& ops) {
  std::vector<std::string> branches;
  if (auto it = ins.called.find("branch_computations"); it != ins.called.end() && !it->second.empty()) {
    branches = it->second;
  } else if (auto t = ins.called.find("true_computation"); t != ins.called.end() && !t->second.empty()) {
    branches.push_back(t->second[0]);
    if (auto f = ins.called.find("false_computation"); f != ins.called.end() && !f->second.empty()) {
      branches.push_back(f->second[0]);
    }
  } else {
    return Error(ins, "conditional without branch_computations= or true_computation=");
  }
  if (ops.size() < branches.size() + 1) {
    return Error(ins, absl::StrCat("conditional with ", branches.size(), " branches and ", ops.size() - 1,
                                   " branch operands"));
  }
  // The array leaves of a (possibly tuple) value, in order.
  std::function<void(Node&, std::vector<Node*>*)> leaves = [&](Node& n, std::vector<Node*>* out) {
    if (!n.tuple) {
      out->push_back(&n);
      return;
    }
    for (Node& e : n.elements) leaves(e, out);
  };
  ASSIGN_OR_RETURN(Node result, Eval(m_.computation(branches[0]), {ops[1]}));
  std::vector<Node*> result_leaves;
  leaves(result, &result_leaves);
  for (size_t k = 1; k < branches.size(); ++k) {
    const OpId first = b_.next_op();
    ASSIGN_OR_RETURN(Node r, Eval(m_.computation(branches[k]), {ops[k + 1]}));
    std::vector<Node*> rl;
    leaves(r, &rl);
    // Written into the shared result buffer (branch 0's result, once it is
    // a buffer of this conditional's own).
    for (size_t i = 0; i < rl.size() && i < result_leaves.size(); ++i) {
      Node& res = *result_leaves[i];
      if (res.empty() || rl[i]->empty()) continue;
      if (res.v && res.v->materialised == kNoTensor) {
        ASSIGN_OR_RETURN(res.t, Materialise(res.v));
        res.v.reset();
      }
      const TensorId into = res.t != kNoTensor ? res.t : res.v->materialised;
      if (rl[i]->v && rl[i]->v->materialised == kNoTensor && !b_.program().tensor(into).entry_parameter &&
          ChainRoot(into) == kNoTensor) {
        RETURN_IF_ERROR(Materialise(rl[i]->v, Role::kTemporary, into).status());
      }
    }
    for (OpId o = first; o < b_.next_op(); ++o) {
      Op& op = b_.op(o);
      op.flops = 0;
      op.bytes_read = Bytes(0);
      op.bytes_written = Bytes(0);
    }
  }
  return result;
}

}  // namespace hlo_internal

absl::StatusOr<Program> HloToProgram(const HloModule& m, const HloImportOptions& options, HloImportStats* stats) {
  hlo_internal::Importer imp(m, options);
  return imp.Run(stats);
}

absl::StatusOr<Program> ImportHloProgram(const std::string& path, const HloImportOptions& options,
                                         HloImportStats* stats) {
  ASSIGN_OR_RETURN(HloModule m, ReadHloModule(path));
  return HloToProgram(m, options, stats);
}

}  // namespace gpusim
