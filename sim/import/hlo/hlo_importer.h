// Internal to the HLO importer (hlo_to_program.h): the walk over a module
// that builds Program IR, shared by hlo_to_program.cc (values, fusion,
// kernels, in-place updates) and hlo_loops.cc (while loops, outputs).
#ifndef GPUSIM_SIM_IMPORT_HLO_HLO_IMPORTER_H_
#define GPUSIM_SIM_IMPORT_HLO_HLO_IMPORTER_H_

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
#include "sim/import/hlo/hlo_normalization.h"
#include "sim/import/hlo/hlo_op_cost.h"
#include "sim/import/hlo/hlo_parser.h"
#include "sim/ir/builder.h"
#include "sim/lower/xla/fusion.h"

#include "sim/import/hlo/hlo_to_program.h"

namespace gpusim {
namespace hlo_internal {

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
  std::vector<OpId> after;  // Note [Optimization barrier]: writes a reader waits for
};

struct Node {
  TensorId t = kNoTensor;          // materialised array
  std::shared_ptr<Virtual> v;      // virtual array
  bool tuple = false;
  std::vector<Node> elements;
  // Note [Optimization barrier]: the writes of every operand of the barrier
  // this value came through; whatever reads it runs after them.
  std::vector<OpId> after;
  bool empty() const { return !tuple && t == kNoTensor && !v; }
};

inline void Leaves(const Node& n, std::vector<const Node*>* out) {
  if (n.tuple) {
    for (const Node& e : n.elements) Leaves(e, out);
  } else {
    out->push_back(&n);
  }
}

// Adds `ops` to `into`, each once, keeping `into`'s order.
inline void MergeAfter(const std::vector<OpId>& ops, std::vector<OpId>* into) {
  for (OpId o : ops) {
    if (std::find(into->begin(), into->end(), o) == into->end()) into->push_back(o);
  }
}

// The barrier writes a reader of `n` waits for (Note [Optimization barrier]).
inline void AfterOf(const Node& n, std::vector<OpId>* out) {
  if (n.tuple) {
    for (const Node& e : n.elements) AfterOf(e, out);
    return;
  }
  MergeAfter(n.after, out);
  if (n.v) MergeAfter(n.v->after, out);
}

class Importer {
 public:
  Importer(const HloModule& m, const HloImportOptions& o)
      : m_(m), o_(o), b_(m.name.empty() ? "hlo" : m.name) {}

  absl::StatusOr<Program> Run(HloImportStats* stats);

 private:
  // Note [Bounded expansion] (sim/base/checked.h) bounds the iterations;
  // this bounds what they build: 2^18 ops (some 1.5 KB each through
  // import, lowering and the engine: about 400 MB; issue 27 measured 1M
  // ops at 12 s and 1.5 GB), checked after every op and every iteration.
  static constexpr int64_t kMaxOps = int64_t{1} << 18;

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

  absl::Status FindAliases(const HloComputation& entry);

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
    const OpId id = b_.next_op();
    // The last write of each buffer (Note [Optimization barrier]): an op's
    // outputs, or its first input when it writes that in place.
    for (TensorId t : outputs) writer_[t] = id;
    if (outputs.empty() && !inputs.empty()) writer_[inputs[0]] = id;
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
      // The buffer written in place is the op's first input (the convention
      // the entry schedule orders in-place writes by: entry_schedule.cc).
      ins.erase(std::remove(ins.begin(), ins.end(), into), ins.end());
      ins.insert(ins.begin(), into);
    } else {
      out = NewTensor(v->name, v->shape, *dt, role, why.empty() ? absl::StrCat("fusion ", v->name) : why);
      outs.push_back(out);
    }
    Op& op = Emit(absl::StrCat("fusion.", v->name), OpKind::kElementwise, v->phase, ins, outs, v->flops);
    MergeAfter(v->after, &op.control_deps);
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
      ins.insert(ins.begin(), into);  // written in place: the first input
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
    // Operands of the entry's result tuple (Note [Live-out values are not fused]).
    std::vector<bool> live_out(n, false);
    if (is_entry && comp.instructions[static_cast<size_t>(comp.root)].opcode == "tuple") {
      for (int o : comp.instructions[static_cast<size_t>(comp.root)].operands) live_out[static_cast<size_t>(o)] = true;
    }
    // Note [Normalisation fusions] (hlo_normalization.h).
    const std::vector<bool> normalization = NormalizationFusionOutputs(comp, live);
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
      const OpId first_op = b_.next_op();
      std::vector<OpId> after;
      if (ins.opcode != "call") {  // a call's body reads its arguments' `after` itself
        for (const Node& o : ops) AfterOf(o, &after);
      }
      ASSIGN_OR_RETURN(Node r, Instruction(comp, static_cast<int>(i), ins, ops, args, is_entry));
      // Note [Optimization barrier]: what this instruction ran waits for the
      // barrier writes its operands came through.
      for (OpId o = first_op; !after.empty() && o < b_.next_op(); ++o) MergeAfter(after, &b_.op(o).control_deps);
      if (normalization[i] && r.v && r.v->materialised == kNoTensor) {
        ASSIGN_OR_RETURN(TensorId t, Materialise(r.v, Role::kTemporary, kNoTensor,
                                                 absl::StrCat("normalisation fusion ", ins.name,
                                                              " (Note [Normalisation fusions])")));
        normalization_outputs_.insert(t);
      }
      if (live_out[i] && users[i] > 1 && r.v && r.v->materialised == kNoTensor) {
        RETURN_IF_ERROR(MaterialiseLiveOut(r.v));
      }
      const bool count_refs = !(r.tuple && extracted_only[i]);
      Hold(held[i], std::move(r), users[i], count_refs);
    }
    Node root = held[static_cast<size_t>(comp.root)].node;
    Release(held[static_cast<size_t>(comp.root)]);
    --depth_;
    return root;
  }

  // Note [Live-out values are not fused]
  // XLA's priority fusion fuses a producer only into all of its users or
  // none (xla/service/gpu/transforms/priority_fusion.cc
  // CanFuseWithAllNonBitcastUsers, at the commit jax 0.5.0 pins); the
  // entry's result tuple is not a fusible user, so a fusible value that is
  // an output and also read by other instructions is one loop fusion whose
  // buffer those readers read (the new Adam moments read by the parameter
  // update, the new parameters read by a norm), not a chain each reader
  // recomputes. It is written where Outputs() would write it: into its
  // donated parameter's buffer when that may be written now, else (the old
  // value still read) it is left to Outputs() as before.
  absl::Status MaterialiseLiveOut(const std::shared_ptr<Virtual>& v) {
    if (current_home_ == kNoTensor) {
      RETURN_IF_ERROR(Materialise(v, Role::kActivation, kNoTensor, "entry output").status());
      live_out_fusions_.insert(b_.next_op() - 1);
      return absl::OkStatus();
    }
    const TensorId home = HomeIfFree(current_home_);
    if (home == kNoTensor) return absl::OkStatus();
    ASSIGN_OR_RETURN(TensorId t, Materialise(v, Role::kParameter, home,
                                             absl::StrCat("entry output (aliased with parameter ",
                                                          b_.program().tensor(current_home_).name, ")")));
    v->materialised = t;
    live_out_fusions_.insert(b_.next_op() - 1);  // Note [Multi-output fusion of live-out values]
    return absl::OkStatus();
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
                                   const std::vector<Node>& ops, const std::vector<Node>& args, bool is_entry);

  absl::StatusOr<Node> View(const HloInstruction& ins, const std::vector<Node>& ops);

  // Note [Compiled modules] in hlo_to_program.cc.
  absl::StatusOr<Node> AsyncStart(const HloComputation& comp, const HloInstruction& ins, const std::vector<Node>& ops,
                                  Phase phase, const HloAsyncForm& async);
  absl::StatusOr<Node> AsyncDone(const HloInstruction& ins, const std::vector<Node>& ops, const HloAsyncForm& async);

  // Note [Optimization barrier]
  // An opt-barrier is not fusible (xla/service/gpu/transforms/
  // priority_fusion.cc IsFusible, openxla/xla 1aea1581: kOptimizationBarrier
  // is neither elementwise nor among the fusible opcodes), so no producer
  // fuses into it: every array it passes is a buffer (jax.checkpoint's
  // rematerialised inputs, the f32 weight slices of a scanned layer, are
  // written before the barrier and read after it). The barrier itself
  // forwards those buffers (HloDataflowAnalysis: kOptimizationBarrier
  // defines no value), but it is one instruction: whatever reads one of its
  // outputs (a get-tuple-element of it) is scheduled after the barrier, so
  // after every operand's write (HloInstruction::operands are the
  // scheduler's edges; hlo_memory_scheduler.cc and latency_hiding_scheduler.cc
  // schedule only instructions whose operands are scheduled). jax.checkpoint
  // puts the layer's residuals, its weights and the cotangent arriving from
  // the layer above into one barrier (jax/_src/ad_checkpoint.py
  // remat_transpose, optimization_barrier), so nothing of a layer's
  // recomputation, not even the bf16 convert of a weight slice, can run
  // before the backward of the layer above. Each output Node carries those
  // writes (`after`), which become control dependencies of the ops that
  // read it (Eval, Materialise).
  absl::StatusOr<Node> Barrier(const Node& n) {
    ASSIGN_OR_RETURN(Node out, BarrierBuffers(n));
    std::vector<const Node*> leaves;
    Leaves(out, &leaves);
    std::vector<OpId> writes;
    for (const Node* l : leaves) {
      if (l->t == kNoTensor) continue;
      auto w = writer_.find(l->t);
      if (w != writer_.end()) MergeAfter({w->second}, &writes);
      MergeAfter(l->after, &writes);
    }
    std::sort(writes.begin(), writes.end());
    SetAfter(writes, &out);
    return out;
  }
  absl::StatusOr<Node> BarrierBuffers(const Node& n) {
    if (n.tuple) {
      Node t;
      t.tuple = true;
      for (const Node& e : n.elements) {
        ASSIGN_OR_RETURN(Node b, BarrierBuffers(e));
        t.elements.push_back(std::move(b));
      }
      return t;
    }
    if (n.empty() || n.t != kNoTensor) return n;
    Node b;
    ASSIGN_OR_RETURN(b.t, Buffer(n));
    return b;
  }
  static void SetAfter(const std::vector<OpId>& writes, Node* n) {
    if (n->tuple) {
      for (Node& e : n->elements) SetAfter(writes, &e);
      return;
    }
    if (!n->empty()) n->after = writes;
  }

  // A fusible instruction: a virtual value reading its operands' buffers.
  absl::StatusOr<Node> Fuse(const HloInstruction& ins, const std::vector<Node>& ops, Phase phase);

  absl::StatusOr<Node> Kernel(const HloComputation& comp, const HloInstruction& ins, const std::vector<Node>& ops,
                              Phase phase, HloOpClass cls);

  // Operand i's shape as the HLO text declares it (a reshape or bitcast of a
  // materialised buffer keeps the buffer, not the view's dims, in its Node;
  // a dot's dimension numbers index the declared dims).
  static const HloShape& DeclaredOperandShape(const HloComputation& comp, const HloInstruction& ins, size_t i) {
    return comp.instructions[static_cast<size_t>(ins.operands[i])].shape;
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
  absl::StatusOr<Node> InPlace(const HloInstruction& ins, const std::vector<Node>& ops, Phase phase);

  // conditional: every branch in order, into one result buffer; branch 0
  // (or true_computation) is timed (Note [Conditional branches]).
  absl::StatusOr<Node> Conditional(const HloInstruction& ins, const std::vector<Node>& ops);

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
  absl::flat_hash_map<TensorId, OpId> writer_;        // tensor -> the op that last wrote it
  absl::flat_hash_map<TensorId, TensorId> current_;   // parameter -> latest version of its buffer
  absl::flat_hash_map<TensorId, int> refs_;           // tensor -> held values reading it
  bool trip_count_used_ = false;
  std::set<OpId> live_out_fusions_;                  // loop fusions MaterialiseLiveOut wrote
  std::set<TensorId> normalization_outputs_;         // Note [Normalisation fusions]: not loop fusions
  std::vector<int64_t> trip_counts_;
  int64_t expanded_iterations_ = 0;                  // Note [Bounded expansion]: every loop's trips so far
};



}  // namespace hlo_internal
}  // namespace gpusim

#endif  // GPUSIM_SIM_IMPORT_HLO_HLO_IMPORTER_H_
