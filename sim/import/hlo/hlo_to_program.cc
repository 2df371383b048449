#include "sim/import/hlo/hlo_to_program.h"

#include <algorithm>
#include <functional>
#include <set>
#include <map>
#include <memory>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "sim/base/status.h"
#include "sim/import/hlo/hlo_op_cost.h"
#include "sim/import/hlo/hlo_parser.h"
#include "sim/ir/builder.h"
#include "sim/lower/xla/fusion.h"

namespace gpusim {
namespace {

// Note [Imported buffers]
// The importer walks the module in its text (post) order, inlining calls
// and expanding every while loop iteration by iteration, and keeps for each
// instruction a Node: an array value or a tuple of them. An array value is
// either materialised (a Program tensor: a buffer) or virtual: a chain of
// fusible instructions not yet written anywhere, with the materialised
// tensors it reads (Note [What materialises] in sim/lower/xla/fusion.cc).
// A virtual value becomes one loop-fusion op and one buffer where a
// consumer needs a buffer; memoised, so a chain with several such consumers
// is written once.
//
// Buffers written in place — a dynamic-update-slice's operand, a while
// loop's state — follow XLA's copy insertion (xla/service/copy_insertion.cc
// AddCopiesForWhile, AddCopiesForInPlaceOperation): the write goes into the
// old value's buffer when nothing still live reads the old value, and into a
// copy otherwise. Liveness is a reference count per tensor over the values
// the walk still holds (an instruction's value is held until its last user
// has run). In the Program, a write into a temp buffer is an op with the
// buffer among its inputs and no output (the tensor lives until its last
// reader, as one buffer); a write into an entry parameter's buffer (a
// donated parameter, or an output aliased to one) produces a new tensor
// that `aliases` the parameter.
//
// While loops (N = the trip count): N = 0 returns the init; N = 1 is
// inlined (xla/service/while_loop_simplifier.cc); otherwise each tuple
// element of the loop state is one buffer for the whole loop (the init's
// buffer when the init dies at the loop and may be written, else a copy of
// it), each iteration's body temporaries are the body's own, and the body's
// results are written into the state (in place when their fusion may, else
// through a copy). The condition computation is not emitted: a scalar
// compare whose pred buffer is negligible.
//
// Outputs: input_output_alias entries, then buffer donors matched to outputs
// of equal shape in order (xla/service/optimize_input_output_buffer_alias.cc),
// write outputs into parameter buffers; the value flowing to such an output
// (through while results) is written into the parameter's buffer from its
// definition when the parameter is dead by then. The entry's tuple result
// has an index table of 8 bytes per element (ShapeUtil::ByteSizeOf with
// pointer size 8), part of memory_analysis()'s output size.

struct Virtual {
  std::string name;
  HloShape shape;
  std::vector<std::pair<TensorId, Bytes>> inputs;  // materialised tensors read, bytes read of each
  double flops = 0;
  Phase phase = Phase::kForward;
  TensorId materialised = kNoTensor;
};

struct Node {
  TensorId t = kNoTensor;          // materialised array
  std::shared_ptr<Virtual> v;      // virtual array
  bool tuple = false;
  std::vector<Node> elements;
  bool empty() const { return !tuple && t == kNoTensor && !v; }
};

void Leaves(const Node& n, std::vector<const Node*>* out) {
  if (n.tuple) {
    for (const Node& e : n.elements) Leaves(e, out);
  } else {
    out->push_back(&n);
  }
}

class Importer {
 public:
  Importer(const HloModule& m, const HloImportOptions& o)
      : m_(m), o_(o), b_(m.name.empty() ? "hlo" : m.name) {}

  absl::StatusOr<Program> Run(HloImportStats* stats) {
    const HloComputation& entry = m_.entry_computation();
    RETURN_IF_ERROR(FindAliases(entry));
    std::vector<Node> args;
    for (size_t p = 0; p < entry.parameters.size(); ++p) {
      const HloInstruction& ins = entry.instructions[static_cast<size_t>(entry.parameters[p])];
      if (ins.shape.tuple) return Error(ins, "a tuple-shaped entry parameter (expected one array per parameter, as JAX lowers)");
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
    return b_.Finish();
  }

 private:
  static constexpr int64_t kMaxOps = int64_t{1} << 24;

  absl::Status Error(const HloInstruction& ins, const std::string& what) const {
    return absl::InvalidArgumentError(
        absl::StrCat(m_.file, ":", ins.location.line, ":", ins.location.column, ": ", ins.name, ": ", what));
  }

  absl::StatusOr<DType> DTypeOf(const HloInstruction& ins, const HloShape& s) const {
    auto d = HloElementDType(s.element);
    if (!d.ok()) return Error(ins, std::string(d.status().message()));
    return *d;
  }

  // --- donation and aliasing ---------------------------------------------------

  absl::Status FindAliases(const HloComputation& entry) {
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

  // The donated parameter whose buffer `t` is (a version of), or kNoTensor.
  TensorId ChainRoot(TensorId t) const {
    auto it = chain_.find(t);
    return it == chain_.end() ? kNoTensor : it->second;
  }

  // Whether the buffer of `t` may be written now: no held value reads it,
  // and it is not a read-only (non-donated) parameter or an output.
  bool Writable(TensorId t) const {
    const Tensor& x = b_.program().tensor(t);
    const TensorId root = ChainRoot(t);
    if (root != kNoTensor && !b_.program().tensor(root).donated) return false;
    if (root != kNoTensor) {
      auto cur = current_.find(root);
      if ((cur == current_.end() ? root : cur->second) != t) return false;
    }
    if (x.live_out) return false;
    auto it = refs_.find(t);
    return it == refs_.end() || it->second == 0;
  }

  // --- reference counts ----------------------------------------------------------

  void Refs(const Node& n, std::vector<TensorId>* out) const {
    if (n.tuple) {
      for (const Node& e : n.elements) Refs(e, out);
    } else if (n.t != kNoTensor) {
      out->push_back(n.t);
    } else if (n.v) {
      if (n.v->materialised != kNoTensor) out->push_back(n.v->materialised);
      for (const auto& [t, bytes] : n.v->inputs) out->push_back(t);
    }
  }

  struct Held {
    Node node;
    int uses = 0;
    std::vector<TensorId> refs;
  };

  // `count_refs` false: every user only extracts elements (get-tuple-
  // element), whose own values hold what they read.
  void Hold(Held& h, Node n, int uses, bool count_refs = true) {
    h.node = std::move(n);
    h.uses = uses;
    if (uses <= 0 || !count_refs) return;
    Refs(h.node, &h.refs);
    for (TensorId t : h.refs) ++refs_[t];
  }

  void Release(Held& h) {
    if (--h.uses > 0) return;
    for (TensorId t : h.refs) --refs_[t];
    h.refs.clear();
  }

  // --- emission --------------------------------------------------------------------

  absl::Status CheckSize() const {
    if (static_cast<int64_t>(b_.program().ops.size()) > kMaxOps) {
      return absl::InvalidArgumentError(absl::StrCat(m_.file, ": more than ", kMaxOps,
                                                     " ops once while loops are expanded; the IR is built per iteration"));
    }
    return absl::OkStatus();
  }

  Phase PhaseOf(const HloInstruction& ins) const {
    // JAX names the transposed (backward) jaxpr's ops "transpose(jvp(...))"
    // in op_name metadata (jax/_src/interpreters/ad.py backward_pass).
    const std::string& md = ins.attr("metadata");
    if (absl::StrContains(md, "transpose(")) return Phase::kBackward;
    return Phase::kForward;
  }

  Op& Emit(const std::string& name, OpKind kind, Phase phase, std::vector<TensorId> inputs,
           std::vector<TensorId> outputs, double flops) {
    b_.set_phase(phase);
    return b_.AddOp(name, kind, std::move(inputs), std::move(outputs), flops);
  }

  // A new tensor for an array result; in parameter `home`'s buffer when given.
  TensorId NewTensor(const std::string& name, const HloShape& s, DType dt, Role role, const std::string& origin,
                     TensorId home = kNoTensor) {
    TensorId t = b_.AddTensor(name, s.dims, dt, role, origin);
    if (s.memory_space == 5) b_.tensor(t).host = true;
    if (home != kNoTensor) {
      b_.tensor(t).aliases = home;
      b_.tensor(t).origin = absl::StrCat(origin, ", in the buffer of parameter ", b_.program().tensor(home).name);
      chain_[t] = home;
      current_[home] = t;
    }
    return t;
  }

  // Writes virtual `v` as one loop fusion: into `into` (a temp buffer
  // written in place, or a parameter chain's next version), else a new
  // buffer. Returns the tensor holding the value.
  // `memo`: later readers of the virtual read this buffer (not for loop
  // state, which the loop overwrites).
  absl::StatusOr<TensorId> Materialise(const std::shared_ptr<Virtual>& v, Role role = Role::kTemporary,
                                       TensorId into = kNoTensor, const std::string& why = "", bool memo = true) {
    if (v->materialised != kNoTensor && into == kNoTensor) return v->materialised;
    auto dt = HloElementDType(v->shape.element);
    if (!dt.ok()) return absl::InvalidArgumentError(absl::StrCat(m_.file, ": ", v->name, ": ", dt.status().message()));
    std::vector<TensorId> ins;
    Bytes read(0);
    for (const auto& [t, bytes] : v->inputs) {
      ins.push_back(t);
      read += bytes;
    }
    TensorId out = kNoTensor;
    std::vector<TensorId> outs;
    if (into != kNoTensor && ChainRoot(into) != kNoTensor) {
      out = NewTensor(v->name, v->shape, *dt, role, why.empty() ? absl::StrCat("fusion ", v->name) : why, ChainRoot(into));
      outs.push_back(out);
    } else if (into != kNoTensor) {
      out = into;
      if (std::find(ins.begin(), ins.end(), into) == ins.end()) ins.push_back(into);
    } else {
      out = NewTensor(v->name, v->shape, *dt, role, why.empty() ? absl::StrCat("fusion ", v->name) : why);
      outs.push_back(out);
    }
    Op& op = Emit(absl::StrCat("fusion.", v->name), OpKind::kElementwise, v->phase, ins, outs, v->flops);
    op.bytes_read = read;
    op.bytes_written = Bytes(v->shape.ArrayBytes());
    op.dtype = *dt;
    if (into == kNoTensor && memo) v->materialised = out;
    RETURN_IF_ERROR(CheckSize());
    return out;
  }

  absl::StatusOr<TensorId> Buffer(const Node& n) {
    if (n.t != kNoTensor) return n.t;
    if (n.v) return Materialise(n.v);
    return absl::InternalError("a tuple or empty value where an array was expected");
  }

  // Copies `src` into `into` (a temp written in place or a parameter
  // chain), or into a new buffer. Returns the destination tensor.
  TensorId Copy(const std::string& name, TensorId src, Phase phase, Role role, const std::string& origin,
                TensorId into = kNoTensor) {
    const Tensor s = b_.program().tensor(src);
    HloShape sh;
    sh.dims = s.shape;
    TensorId dst = into;
    std::vector<TensorId> ins = {src}, outs;
    if (into == kNoTensor || ChainRoot(into) != kNoTensor) {
      dst = b_.AddTensor(name, s.shape, s.dtype, role, origin);
      if (into != kNoTensor) {
        const TensorId root = ChainRoot(into);
        b_.tensor(dst).aliases = root;
        chain_[dst] = root;
        current_[root] = dst;
      }
      outs.push_back(dst);
    } else {
      ins.push_back(into);
    }
    Op& op = Emit("copy." + name, OpKind::kCopy, phase, ins, outs, 0);
    op.bytes_read = s.bytes();
    op.bytes_written = s.bytes();
    op.dtype = s.dtype;
    return dst;
  }

  // --- the walk -----------------------------------------------------------------------

  absl::StatusOr<Node> Eval(const HloComputation& comp, const std::vector<Node>& args, bool is_entry = false) {
    if (++depth_ > 64) return absl::InvalidArgumentError(absl::StrCat(m_.file, ": calls nested more than 64 deep"));
    const size_t n = comp.instructions.size();
    // Dead code (hlo_dce.cc): what the root does not reach is not run.
    std::vector<bool> live(n, false);
    live[static_cast<size_t>(comp.root)] = true;
    for (size_t i = n; i-- > 0;) {
      if (!live[i]) continue;
      for (int o : comp.instructions[i].operands) live[static_cast<size_t>(o)] = true;
    }
    std::vector<int> users(n, 0);
    std::vector<bool> extracted_only(n, true);
    for (size_t i = 0; i < n; ++i) {
      if (!live[i]) continue;
      const HloInstruction& ins = comp.instructions[i];
      for (int o : ins.operands) {
        ++users[static_cast<size_t>(o)];
        if (ins.opcode != "get-tuple-element") extracted_only[static_cast<size_t>(o)] = false;
      }
    }
    ++users[static_cast<size_t>(comp.root)];
    extracted_only[static_cast<size_t>(comp.root)] = false;
    std::vector<Held> held(n);
    for (size_t i = 0; i < n; ++i) {
      const HloInstruction& ins = comp.instructions[i];
      if (!live[i]) continue;
      std::vector<Node> ops;
      ops.reserve(ins.operands.size());
      for (int o : ins.operands) ops.push_back(held[static_cast<size_t>(o)].node);
      for (int o : ins.operands) Release(held[static_cast<size_t>(o)]);
      current_home_ = kNoTensor;
      if (is_entry) {
        auto h = home_.find({static_cast<int>(i), -1});
        if (h != home_.end()) current_home_ = ParamTensor(comp, h->second);
      }
      ASSIGN_OR_RETURN(Node r, Instruction(comp, static_cast<int>(i), ins, ops, args, is_entry));
      const bool count_refs = !(r.tuple && extracted_only[i]);
      Hold(held[i], std::move(r), users[i], count_refs);
    }
    Node root = held[static_cast<size_t>(comp.root)].node;
    Release(held[static_cast<size_t>(comp.root)]);
    --depth_;
    return root;
  }

  TensorId ParamTensor(const HloComputation& entry, int64_t p) const {
    (void)entry;
    return static_cast<TensorId>(p);  // entry parameters are the first tensors, in order
  }

  // The current version of donated parameter `home`'s buffer when it may be
  // written now, else kNoTensor.
  TensorId HomeIfFree(TensorId home) const {
    if (home == kNoTensor) return kNoTensor;
    const TensorId cur = current_.count(home) ? current_.at(home) : home;
    return Writable(cur) ? cur : kNoTensor;
  }

  absl::StatusOr<Node> Instruction(const HloComputation& comp, int index, const HloInstruction& ins,
                                   const std::vector<Node>& ops, const std::vector<Node>& args, bool is_entry) {
    HloOpClass cls = ClassifyHloOpcode(ins.opcode);
    if (ins.opcode == "dot" && ops.size() == 2) {  // Note [Dot strength reduction] in fusion.cc
      const HloKernelCost d = DotKernelCost(ins, ShapeOf(ops[0]), ShapeOf(ops[1]));
      cls = ClassifyDot(d.m, d.n, d.k);
    }
    const Phase phase = PhaseOf(ins);
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
        if (ins.opcode == "opt-barrier" && !ops.empty()) return ops[0];
        if (ins.opcode == "add-dependency" && !ops.empty()) return ops[0];
        if (!ins.shape.tuple && ins.shape.element != "token") return Fuse(ins, {}, phase);
        return out;
      case HloOpClass::kReduction:
      case HloOpClass::kKernel:
      case HloOpClass::kFusion:
        return Kernel(ins, ops, phase, cls);
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

  absl::StatusOr<Node> View(const HloInstruction& ins, const std::vector<Node>& ops) {
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
      return n;
    }
    auto v = std::make_shared<Virtual>(*ops[0].v);
    v->shape = ins.shape;
    v->name = ins.name;
    v->materialised = kNoTensor;
    Node n;
    n.v = v;
    return n;
  }

  // A fusible instruction: a virtual value reading its operands' buffers.
  absl::StatusOr<Node> Fuse(const HloInstruction& ins, const std::vector<Node>& ops, Phase phase) {
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

  absl::StatusOr<Node> Kernel(const HloInstruction& ins, const std::vector<Node>& ops, Phase phase, HloOpClass cls) {
    std::vector<const HloShape*> shapes;
    std::vector<HloShape> op_shapes;
    op_shapes.reserve(ops.size());
    for (const Node& o : ops) op_shapes.push_back(ShapeOf(o));
    for (const HloShape& s : op_shapes) shapes.push_back(&s);
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
    ASSIGN_OR_RETURN(out, make(ins.shape, ins.name));
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

  // The reduction's operand fusion, as an elementwise instruction of the
  // reduction's name (its own FLOPs come from KernelCost).
  static HloInstruction FakeElementwise(const HloInstruction& ins) {
    HloInstruction e;
    e.name = ins.name;
    e.opcode = "copy";
    e.shape = ins.shape.tuple && !ins.shape.elements.empty() ? ins.shape.elements[0] : ins.shape;
    return e;
  }

  HloShape ShapeOf(const Node& n) const {
    HloShape s;
    if (n.tuple) {
      s.tuple = true;
      for (const Node& e : n.elements) s.elements.push_back(ShapeOf(e));
      return s;
    }
    if (n.v) return n.v->shape;
    if (n.t != kNoTensor) {
      const Tensor& t = b_.program().tensor(n.t);
      s.dims = t.shape;
      s.element = std::string(DTypeName(t.dtype));
      if (s.element == "i32") s.element = "s32";
      if (s.element == "i64") s.element = "s64";
      if (s.element == "f8") s.element = "f8e4m3fn";
    }
    return s;
  }

  // dynamic-update-slice / scatter: into operand 0's buffer when it may be
  // written, else into a copy of it.
  absl::StatusOr<Node> InPlace(const HloInstruction& ins, const std::vector<Node>& ops, Phase phase) {
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
      if (std::find(inputs.begin(), inputs.end(), target) == inputs.end()) inputs.push_back(target);
    }
    Op& op = Emit(ins.name, ins.opcode == "scatter" ? OpKind::kScatter : OpKind::kDynamicUpdateSlice, phase, inputs,
                  outs, ins.opcode == "scatter" ? static_cast<double>(update.ElementCount()) : 0);
    op.bytes_read = read + (ins.opcode == "scatter" ? update_bytes : Bytes(0));
    op.bytes_written = update_bytes;
    op.dtype = dt;
    RETURN_IF_ERROR(CheckSize());
    return out;
  }

  // conditional: the branch taken is not known statically; every branch's
  // result is written into one result buffer, and the first branch's body
  // (branch 0, or true_computation) is costed.
  absl::StatusOr<Node> Conditional(const HloInstruction& ins, const std::vector<Node>& ops) {
    std::string branch;
    if (auto it = ins.called.find("branch_computations"); it != ins.called.end() && !it->second.empty()) {
      branch = it->second[0];
    } else if (auto t = ins.called.find("true_computation"); t != ins.called.end() && !t->second.empty()) {
      branch = t->second[0];
    } else {
      return Error(ins, "conditional without branch_computations= or true_computation=");
    }
    if (ops.size() < 2) return Error(ins, "conditional without branch operands");
    return Eval(m_.computation(branch), {ops[1]});
  }

  absl::StatusOr<Node> While(const HloComputation& comp, int index, const HloInstruction& ins, const Node& init,
                             bool is_entry);
  absl::StatusOr<int64_t> TripCount(const HloComputation& comp, const HloInstruction& ins);
  absl::Status Outputs(const HloComputation& entry, const Node& root);

  const HloModule& m_;
  const HloImportOptions& o_;
  ProgramBuilder b_;
  int depth_ = 0;
  std::set<int64_t> donated_;
  std::vector<int64_t> output_alias_;                 // per output: parameter or -1
  std::map<std::pair<int, int>, int64_t> home_;       // (entry instruction, tuple index) -> parameter
  TensorId current_home_ = kNoTensor;
  absl::flat_hash_map<TensorId, TensorId> chain_;     // tensor -> donated parameter whose buffer it is
  absl::flat_hash_map<TensorId, TensorId> current_;   // parameter -> latest version of its buffer
  absl::flat_hash_map<TensorId, int> refs_;           // tensor -> held values reading it
  bool trip_count_used_ = false;
  std::vector<int64_t> trip_counts_;
};


// The trip count: known_trip_count from the backend config, else the
// induction-variable pattern JAX's scan and fori_loop lower to (xla/service/
// while_loop_analysis.cc ComputeWhileLoopTripCount: the condition compares a
// state element against a constant, the body adds a constant step to it, the
// init is a constant), else loop.trip_count.
absl::StatusOr<int64_t> Importer::TripCount(const HloComputation& comp, const HloInstruction& ins) {
  const int64_t known = KnownTripCount(ins);
  if (known >= 0) return known;
  auto cond_it = ins.called.find("condition");
  auto body_it = ins.called.find("body");
  if (cond_it == ins.called.end() || body_it == ins.called.end() || cond_it->second.size() != 1 ||
      body_it->second.size() != 1) {
    return Error(ins, "while without condition= and body=");
  }
  const HloComputation& cond = m_.computation(cond_it->second[0]);
  const HloComputation& body = m_.computation(body_it->second[0]);
  auto int_constant = [](const HloComputation& c, int i, int64_t* v) {
    const HloInstruction& x = c.instructions[static_cast<size_t>(i)];
    return x.opcode == "constant" && !x.shape.tuple && x.shape.dims.empty() && absl::SimpleAtoi(x.literal, v);
  };
  auto gte_of_param = [](const HloComputation& c, int i, int64_t* k) {
    const HloInstruction& x = c.instructions[static_cast<size_t>(i)];
    if (x.opcode != "get-tuple-element" || x.operands.size() != 1) return false;
    const HloInstruction& p = c.instructions[static_cast<size_t>(x.operands[0])];
    return p.opcode == "parameter" && p.parameter_number == 0 && absl::SimpleAtoi(x.attr("index"), k);
  };
  const HloInstruction& cmp = cond.instructions[static_cast<size_t>(cond.root)];
  if (cmp.opcode == "compare" && cmp.operands.size() == 2) {
    std::string dir = cmp.attr("direction");
    int a = cmp.operands[0], c = cmp.operands[1];
    int64_t k = -1, limit = 0, start = 0, step = 0;
    if (!gte_of_param(cond, a, &k)) {
      std::swap(a, c);
      static const std::map<std::string, std::string> kFlip = {{"LT", "GT"}, {"GT", "LT"}, {"LE", "GE"}, {"GE", "LE"}};
      dir = kFlip.count(dir) ? kFlip.at(dir) : dir;
    }
    bool ok = gte_of_param(cond, a, &k) && int_constant(cond, c, &limit) && (dir == "LT" || dir == "LE");
    const HloInstruction& init = comp.instructions[static_cast<size_t>(ins.operands[0])];
    ok = ok && init.opcode == "tuple" && static_cast<size_t>(k) < init.operands.size() &&
         int_constant(comp, init.operands[static_cast<size_t>(k)], &start);
    const HloInstruction& broot = body.instructions[static_cast<size_t>(body.root)];
    ok = ok && broot.opcode == "tuple" && static_cast<size_t>(k) < broot.operands.size();
    if (ok) {
      const HloInstruction& add = body.instructions[static_cast<size_t>(broot.operands[static_cast<size_t>(k)])];
      int64_t k2 = -1;
      ok = add.opcode == "add" && add.operands.size() == 2 &&
           ((gte_of_param(body, add.operands[0], &k2) && int_constant(body, add.operands[1], &step)) ||
            (gte_of_param(body, add.operands[1], &k2) && int_constant(body, add.operands[0], &step))) &&
           k2 == k && step > 0;
    }
    if (ok) {
      const int64_t span = limit - start + (dir == "LE" ? 1 : 0);
      return span <= 0 ? 0 : (span + step - 1) / step;
    }
  }
  if (o_.trip_count > 0) {
    trip_count_used_ = true;
    return o_.trip_count;
  }
  return Error(ins, "the trip count is unknown (no known_trip_count in backend_config, no induction variable "
                    "compared against a constant); give it with --set loop.trip_count=N");
}

namespace {

// `shape` with its leaves replaced by `leaves` in order.
Node Rebuild(const Node& shape, const std::vector<TensorId>& leaves, size_t* next) {
  Node n;
  if (shape.tuple) {
    n.tuple = true;
    for (const Node& e : shape.elements) n.elements.push_back(Rebuild(e, leaves, next));
    return n;
  }
  n.t = leaves[(*next)++];
  return n;
}

}  // namespace

absl::StatusOr<Node> Importer::While(const HloComputation& comp, int index, const HloInstruction& ins,
                                     const Node& init, bool is_entry) {
  ASSIGN_OR_RETURN(const int64_t trips, TripCount(comp, ins));
  trip_counts_.push_back(trips);
  const HloComputation& body = m_.computation(ins.called.at("body")[0]);
  if (trips == 0) return init;
  if (trips == 1) return Eval(body, {init});  // while_loop_simplifier.cc: a single trip is inlined
  const Phase phase = PhaseOf(ins);
  std::vector<const Node*> leaves;
  Leaves(init, &leaves);
  std::vector<TensorId> state(leaves.size(), kNoTensor);
  std::set<TensorId> taken;
  // Elements the body returns unchanged are loop-invariant: read in place,
  // never copied (copy_insertion.cc: no interference, the copy is removed).
  std::vector<bool> invariant(leaves.size(), false);
  const HloInstruction& broot = body.instructions[static_cast<size_t>(body.root)];
  if (init.tuple && leaves.size() == init.elements.size() && broot.opcode == "tuple" &&
      broot.operands.size() == leaves.size()) {
    for (size_t k = 0; k < leaves.size(); ++k) {
      const HloInstruction& e = body.instructions[static_cast<size_t>(broot.operands[k])];
      int64_t idx = -1;
      invariant[k] = e.opcode == "get-tuple-element" && absl::SimpleAtoi(e.attr("index"), &idx) &&
                     idx == static_cast<int64_t>(k) &&
                     body.instructions[static_cast<size_t>(e.operands[0])].opcode == "parameter";
    }
  }
  b_.BeginRegion(absl::StrCat("while ", ins.name, " (", trips, " trips)"), "loop");
  for (size_t k = 0; k < leaves.size(); ++k) {
    const Node& v = *leaves[k];
    if (v.empty()) continue;
    TensorId home = kNoTensor;
    if (is_entry && init.tuple && leaves.size() == init.elements.size()) {
      auto h = home_.find({index, static_cast<int>(k)});
      if (h != home_.end()) home = static_cast<TensorId>(h->second);
    }
    const TensorId free_home = HomeIfFree(home);
    const std::string what = absl::StrCat("while ", ins.name, " loop state {", k, "}");
    TensorId t = v.t != kNoTensor ? v.t : (v.v && v.v->materialised != kNoTensor ? v.v->materialised : kNoTensor);
    if (t != kNoTensor && invariant[k] && home == kNoTensor) {
      state[k] = t;
    } else if (t != kNoTensor) {
      const bool in_home = home == kNoTensor || ChainRoot(t) == home;
      if (Writable(t) && in_home && !taken.count(t)) {
        state[k] = t;  // the init dies here: the loop runs in its buffer
      } else {
        state[k] = Copy(absl::StrCat(ins.name, ".state", k), t, phase, Role::kLoopState,
                        absl::StrCat(what, " (copy of its init, which is still read or read-only)"), free_home);
      }
    } else if (v.v) {
      ASSIGN_OR_RETURN(state[k], Materialise(v.v, Role::kLoopState, free_home, what, /*memo=*/false));
    } else {
      return Error(ins, "a while loop state element with no value");
    }
    taken.insert(state[k]);
  }
  for (int64_t it = 0; it < trips; ++it) {
    size_t next = 0;
    Node arg = Rebuild(init, state, &next);
    ASSIGN_OR_RETURN(Node r, Eval(body, {arg}));
    std::vector<const Node*> out;
    Leaves(r, &out);
    if (out.size() != leaves.size()) return Error(ins, "the body's result does not match the loop state");
    // Which new values are not yet in their state buffer, and which state
    // buffers other new values still read (those are written last, through
    // a temp: copy insertion's copies).
    std::vector<TensorId> fresh(out.size(), kNoTensor);
    std::vector<bool> pending(out.size(), false), conflict(out.size(), false);
    for (size_t k = 0; k < out.size(); ++k) {
      if (state[k] == kNoTensor) continue;
      const Node& n = *out[k];
      TensorId t = n.t != kNoTensor ? n.t : (n.v && n.v->materialised != kNoTensor ? n.v->materialised : kNoTensor);
      if (t == state[k]) continue;
      const TensorId root = ChainRoot(state[k]);
      if (t != kNoTensor && root != kNoTensor && ChainRoot(t) == root && current_[root] == t) {
        state[k] = t;  // written in place, a new version of the parameter's buffer
        continue;
      }
      fresh[k] = t;
      pending[k] = true;
    }
    for (size_t k = 0; k < out.size(); ++k) {
      if (!pending[k]) continue;
      for (size_t j = 0; j < out.size() && !conflict[k]; ++j) {
        if (j == k) continue;
        std::vector<TensorId> refs;
        Refs(*out[j], &refs);
        conflict[k] = std::find(refs.begin(), refs.end(), state[k]) != refs.end();
      }
      if (conflict[k] && fresh[k] == kNoTensor) {
        ASSIGN_OR_RETURN(fresh[k], Materialise(out[k]->v));
      }
    }
    for (int pass = 0; pass < 2; ++pass) {
      for (size_t k = 0; k < out.size(); ++k) {
        if (!pending[k] || conflict[k] != (pass == 1)) continue;
        const std::string what = absl::StrCat("while ", ins.name, " loop state {", k, "}");
        if (fresh[k] == kNoTensor) {
          ASSIGN_OR_RETURN(state[k], Materialise(out[k]->v, Role::kLoopState, state[k], what, /*memo=*/false));
        } else {
          state[k] = Copy(absl::StrCat(ins.name, ".state", k), fresh[k], phase, Role::kLoopState,
                          absl::StrCat(what, " (copy of the body's result)"), state[k]);
        }
      }
    }
    RETURN_IF_ERROR(CheckSize());
  }
  b_.EndRegion();
  size_t next = 0;
  return Rebuild(init, state, &next);
}

// The entry's outputs: aliased ones into their parameter's buffer, the
// others in buffers of their own (a parameter or a value returned twice is
// copied: an output buffer is the output's alone).
absl::Status Importer::Outputs(const HloComputation& entry, const Node& root) {
  std::vector<Node> outs = root.tuple ? root.elements : std::vector<Node>{root};
  const HloInstruction& rins = entry.instructions[static_cast<size_t>(entry.root)];
  const Phase phase = PhaseOf(rins);
  std::set<TensorId> returned;
  // Aliased outputs overwrite their parameter's buffer: an output that still
  // reads another's parameter is written first (AdamW: the new parameter
  // reads mu and nu before their new values overwrite them); a cycle is
  // broken by writing one output to a temp first.
  std::vector<size_t> order;
  for (size_t i = 0; i < outs.size(); ++i) {
    if (output_alias_[i] < 0) order.push_back(i);
  }
  {
    std::vector<size_t> left;
    for (size_t i = 0; i < outs.size(); ++i) {
      if (output_alias_[i] >= 0) left.push_back(i);
    }
    auto cur_of = [&](size_t i) {
      const TensorId param = static_cast<TensorId>(output_alias_[i]);
      auto it = current_.find(param);
      return it == current_.end() ? param : it->second;
    };
    auto reads = [&](size_t j, size_t i) {  // does output j read output i's parameter buffer?
      std::vector<TensorId> refs;
      Refs(outs[j], &refs);
      return std::find(refs.begin(), refs.end(), cur_of(i)) != refs.end();
    };
    size_t stuck = 0;
    while (!left.empty()) {
      bool progressed = false;
      for (size_t a = 0; a < left.size(); ++a) {
        const size_t i = left[a];
        bool blocked = false;
        for (size_t j : left) blocked = blocked || (j != i && reads(j, i));
        if (blocked) continue;
        order.push_back(i);
        left.erase(left.begin() + static_cast<std::ptrdiff_t>(a));
        progressed = true;
        break;
      }
      if (progressed) continue;
      if (++stuck > 2 * outs.size()) {  // only values that are buffers already: any order
        order.insert(order.end(), left.begin(), left.end());
        break;
      }
      const size_t k = left.front();  // a cycle: k's value goes to a temp first, copied in later
      if (outs[k].v && outs[k].v->materialised == kNoTensor) {
        ASSIGN_OR_RETURN(TensorId t, Materialise(outs[k].v));
        outs[k] = Node{t, nullptr, false, {}};
      }
      left.erase(left.begin());
      left.push_back(k);
    }
  }
  for (size_t i : order) {
    {
      const int64_t p = output_alias_[i];
      const Node& e = outs[i];
      if (e.empty()) continue;
      if (e.tuple) return Error(rins, absl::StrCat("output ", i, " is a nested tuple (not modelled)"));
      const std::string name = absl::StrCat("output.", i);
      TensorId t = e.t != kNoTensor ? e.t : (e.v && e.v->materialised != kNoTensor ? e.v->materialised : kNoTensor);
      TensorId result = kNoTensor;
      if (p >= 0) {
        const TensorId param = static_cast<TensorId>(p);
        const TensorId cur = current_.count(param) ? current_[param] : param;
        if (t != kNoTensor && t != param && ChainRoot(t) == param && cur == t) {
          result = t;
        } else if (t == param) {
          // Returned unchanged: the output is the parameter's own buffer.
          result = Copy(name, t, phase, Role::kParameter, absl::StrCat("output ", i, ": parameter ", p,
                                                                       " returned unchanged, in place"), param);
          Op& op = b_.op(b_.next_op() - 1);
          op.bytes_read = Bytes(0);
          op.bytes_written = Bytes(0);
        } else if (t == kNoTensor && HomeIfFree(param) != kNoTensor) {
          ASSIGN_OR_RETURN(result, Materialise(e.v, Role::kParameter, HomeIfFree(param),
                                               absl::StrCat("output ", i, " (aliased with parameter ", p, ")")));
        } else {
          ASSIGN_OR_RETURN(TensorId src, Buffer(e));
          result = Copy(name, src, phase, Role::kParameter,
                        absl::StrCat("output ", i, ", copied into the buffer of parameter ", p), param);
        }
        b_.tensor(result).role = b_.program().tensor(param).role;
      } else {
        if (t == kNoTensor) {
          ASSIGN_OR_RETURN(t, Materialise(e.v, Role::kActivation, kNoTensor, absl::StrCat("output ", i)));
        }
        const Tensor& x = b_.program().tensor(t);
        if (x.entry_parameter || ChainRoot(t) != kNoTensor || returned.count(t) || x.live_out) {
          result = Copy(name, t, phase, Role::kActivation, absl::StrCat("output ", i, " (a copy: its value's buffer is not the output's to own)"));
        } else {
          result = t;
        }
      }
      b_.tensor(result).live_out = true;
      if (b_.program().tensor(result).origin.empty()) b_.tensor(result).origin = absl::StrCat("output ", i);
      returned.insert(result);
    }
  }
  if (root.tuple) {
    const int64_t n = static_cast<int64_t>(outs.size());
    TensorId table = b_.AddTensor("output tuple index table", {8 * n}, DType::kU8, Role::kScalar,
                                  absl::StrCat("the entry result's tuple of ", n, " pointers (8 B each)"));
    b_.tensor(table).live_out = true;
    Emit("output tuple", OpKind::kCopy, phase, {}, {table}, 0);
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<Program> HloToProgram(const HloModule& m, const HloImportOptions& options, HloImportStats* stats) {
  Importer imp(m, options);
  return imp.Run(stats);
}

absl::StatusOr<Program> ImportHloProgram(const std::string& path, const HloImportOptions& options,
                                         HloImportStats* stats) {
  ASSIGN_OR_RETURN(HloModule m, ReadHloModule(path));
  return HloToProgram(m, options, stats);
}

}  // namespace gpusim
