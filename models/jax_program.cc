#include "models/jax_program.h"

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "models/rolled_loop.h"
#include "sim/base/status.h"
#include "sim/ir/builder.h"
#include "sim/ir/loop_slice.h"

namespace gpusim {
namespace {

struct ValueType {
  std::vector<int64_t> shape;
  DType dtype = DType::kF32;
  int64_t elements() const {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
  }
  bool scalar() const { return shape.empty(); }
};

std::string ShapeText(const ValueType& v) {
  std::vector<std::string> d;
  for (int64_t x : v.shape) d.push_back(std::to_string(x));
  return absl::StrCat(std::string(DTypeName(v.dtype)), "[", absl::StrJoin(d, ","), "]");
}

// A value as a body op reads it: a tensor, and how many of its bytes one
// read touches (a slice of a stack or of a scanned input).
struct Ref {
  TensorId t = kNoTensor;
  Bytes read;
};

class JaxProgramBuilder {
 public:
  explicit JaxProgramBuilder(const RunSpec& s)
      : s_(s), p_(s.program), b_(s.program.name.empty() ? "program" : s.program.name) {
    T_ = s.loop.trip_count;
    rolled_ = s.loop.mode == "rolled" && T_ >= 2;  // trip count 1 is inlined, 0 deleted
  }

  absl::StatusOr<Program> Build() {
    RETURN_IF_ERROR(DeclareInputs());
    RETURN_IF_ERROR(InferTypes());
    Analyse();
    b_.set_phase(Phase::kForward);
    Forward();
    b_.set_phase(Phase::kBackward);
    Backward();
    RETURN_IF_ERROR(Outputs());
    b_.set_entry_result_tuple(true);  // Note [Entry result tuple] (sim/lower/xla/entry_tuple.h)
    return b_.Finish();
  }

 private:
  // --- declarations and static analysis --------------------------------------

  // Unrolled, every iteration's ops are built, so the trip count bounds the
  // IR. A rolled loop past RolledBuiltOnceAbove() trips is built once (Note
  // [Rolled loop built once], sim/lower/lower.h; models/rolled_loop.h): its
  // IR does not grow with the trips.
  static constexpr int64_t kMaxTrips = int64_t{1} << 16;
  static constexpr int64_t kMaxRolledTrips = int64_t{1} << 30;  // an iteration index fits Op::layer

  // A value's bytes, stacked over the trip count as a residual is, must fit
  // in int64 (Bytes).
  absl::Status CheckSize(const ValueType& v, const std::string& where) const {
    int64_t n = 0;
    bool overflow = __builtin_mul_overflow(std::max<int64_t>(T_, 1), int64_t{8}, &n);
    for (int64_t d : v.shape) overflow = overflow || __builtin_mul_overflow(n, d, &n);
    if (overflow) {
      return absl::InvalidArgumentError(absl::StrCat(
          where, ": ", ShapeText(v), " stacked over trip_count ", T_, " exceeds 2^63 - 1 bytes"));
    }
    return absl::OkStatus();
  }

  absl::Status DeclareInputs() {
    if (T_ < 0) return absl::InvalidArgumentError("loop.trip_count: expected >= 0");
    if (T_ > (rolled_ ? kMaxRolledTrips : kMaxTrips)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "loop.trip_count: ", T_, " iterations is more than a program's IR is built for (at most ",
          rolled_ ? absl::StrCat(kMaxRolledTrips, " rolled") :
                    absl::StrCat(kMaxTrips, " unrolled, where every iteration's ops are built"),
          ")"));
    }
    for (const ProgramInputSpec& in : p_.inputs) {
      ValueType v;
      v.dtype = in.dtype;
      for (int64_t d : in.shape) v.shape.push_back(d < 0 ? T_ : d);
      RETURN_IF_ERROR(CheckSize(v, absl::StrCat("program.inputs.", in.name)));
      const Role role = std::find(p_.grad.begin(), p_.grad.end(), in.name) != p_.grad.end()
                            ? Role::kParameter
                            : Role::kInputBatch;
      input_[in.name] = b_.AddArgument(in.name, v.shape, v.dtype, role, in.donate,
                                       absl::StrCat("argument ", in.name, in.donate ? " (donated)" : ""));
      input_type_[in.name] = v;
    }
    return absl::OkStatus();
  }

  absl::Status InferTypes() {
    for (const auto& [c, init] : p_.carry) {
      type_[c] = init == "zero" ? ValueType{{}, DType::kF32} : input_type_.at(init);
      carries_.push_back(c);
    }
    for (const auto& [x, src] : p_.xs) {
      ValueType v = input_type_.at(src);
      v.shape.erase(v.shape.begin());
      type_[x] = v;
      xs_.insert(x);
    }
    for (const auto& [k, src] : p_.consts) {
      type_[k] = input_type_.at(src);
      invariant_.insert(k);
    }
    for (const ProgramOpSpec& op : p_.body) {
      std::vector<ValueType> in;
      for (const std::string& n : op.in) in.push_back(type_.at(n));
      ValueType out;
      const std::string where = absl::StrCat("program.scan.body: op '", op.out, "' (", op.op, ")");
      if (op.op == "matmul") {
        const ValueType &a = in[0], &w = in[1];
        if (a.shape.empty() || w.shape.size() != 2 || a.shape.back() != w.shape[0]) {
          return absl::InvalidArgumentError(absl::StrCat(where, ": cannot multiply ", ShapeText(a), " by ",
                                                         ShapeText(w), " (expected [..., k] @ [k, n])"));
        }
        out = a;
        out.shape.back() = w.shape[1];
      } else if (op.op == "sum") {
        out = ValueType{{}, in[0].dtype};
      } else if (op.op == "scale") {
        if (!in[1].scalar()) {
          return absl::InvalidArgumentError(
              absl::StrCat(where, ": the second operand must be a scalar, got ", ShapeText(in[1])));
        }
        out = in[0];
      } else {  // mul, add: equal shapes, or one scalar broadcast
        if (in[0].shape != in[1].shape && !in[0].scalar() && !in[1].scalar()) {
          return absl::InvalidArgumentError(absl::StrCat(where, ": shapes ", ShapeText(in[0]), " and ",
                                                         ShapeText(in[1]), " differ"));
        }
        out = in[0].scalar() ? in[1] : in[0];
      }
      RETURN_IF_ERROR(CheckSize(out, where));
      type_[op.out] = out;
      if (std::all_of(op.in.begin(), op.in.end(), [&](const std::string& n) { return invariant_.count(n) > 0; })) {
        invariant_.insert(op.out);
      }
    }
    for (const auto& [c, v] : p_.carry_out) {
      if (type_.at(c).shape != type_.at(v).shape) {
        return absl::InvalidArgumentError(absl::StrCat("program.scan.carry_out.", c, ": ", ShapeText(type_.at(v)),
                                                       " does not match the carry's ", ShapeText(type_.at(c))));
      }
    }
    return absl::OkStatus();
  }

  std::string CarryOut(const std::string& c) const {
    for (const auto& [k, v] : p_.carry_out) {
      if (k == c) return v;
    }
    return c;
  }

  std::string InitOf(const std::string& c) const {
    for (const auto& [k, v] : p_.carry) {
      if (k == c) return v;
    }
    return "zero";
  }

  // Active: depends on a differentiated input. Useful: its cotangent can
  // reach the loss. Residuals: the values the backward rules read.
  void Analyse() {
    const std::set<std::string> grads(p_.grad.begin(), p_.grad.end());
    for (const std::string& c : carries_) {
      if (grads.count(InitOf(c))) active_.insert(c);
    }
    for (const auto& [k, src] : p_.consts) {
      if (grads.count(src)) active_.insert(k);
    }
    for (bool changed = true; changed;) {
      changed = false;
      for (const ProgramOpSpec& op : p_.body) {
        for (const std::string& in : op.in) {
          if (active_.count(in) && active_.insert(op.out).second) changed = true;
        }
      }
      for (const std::string& c : carries_) {
        if (active_.count(CarryOut(c)) && active_.insert(c).second) changed = true;
      }
    }
    useful_.insert(p_.loss);
    for (bool changed = true; changed;) {
      changed = false;
      for (const std::string& c : carries_) {
        if (useful_.count(c) && active_.count(CarryOut(c)) && useful_.insert(CarryOut(c)).second) changed = true;
      }
      for (auto it = p_.body.rbegin(); it != p_.body.rend(); ++it) {
        if (!useful_.count(it->out)) continue;
        for (const std::string& in : it->in) {
          if (active_.count(in) && useful_.insert(in).second) changed = true;
        }
      }
    }
    residuals_ = NeededResiduals(useful_);
    // The last iteration: only the loss's cotangent flows in (the other final
    // carries are unused), so fewer values matter there.
    std::set<std::string> last_useful = {CarryOut(p_.loss)};
    for (auto it = p_.body.rbegin(); it != p_.body.rend(); ++it) {
      if (!last_useful.count(it->out)) continue;
      for (const std::string& in : it->in) {
        if (useful_.count(in)) last_useful.insert(in);
      }
    }
    final_needed_ = NeededResiduals(last_useful);
    for (auto it = p_.body.rbegin(); it != p_.body.rend(); ++it) {
      if (!final_needed_.count(it->out)) continue;
      for (const std::string& in : it->in) final_needed_.insert(in);
    }
  }

  // Values the backward rules of the useful ops read.
  std::set<std::string> NeededResiduals(const std::set<std::string>& useful) const {
    std::set<std::string> r;
    for (const ProgramOpSpec& op : p_.body) {
      if (!useful.count(op.out)) continue;
      if (op.op == "matmul" || op.op == "mul" || op.op == "scale") {
        if (useful.count(op.in[0])) r.insert(op.in[1]);
        if (useful.count(op.in[1])) r.insert(op.in[0]);
      }
    }
    return r;
  }

  // --- forward ------------------------------------------------------------------

  Bytes SizeOf(const std::string& name) const {
    const ValueType& v = type_.at(name);
    return Bytes(v.elements() * DTypeSize(v.dtype));
  }

  Op& Emit(const std::string& name, OpKind kind, const std::vector<Ref>& ins, std::vector<TensorId> outs,
           double flops) {
    std::vector<TensorId> ids;
    Bytes read(0);
    for (const Ref& r : ins) {
      ids.push_back(r.t);
      read += r.read;
    }
    Op& op = b_.AddOp(name, kind, ids, std::move(outs), flops);
    op.bytes_read = read;
    op.dtype = DType::kF32;
    return op;
  }

  Ref Whole(TensorId t) { return {t, b_.tensor(t).bytes()}; }

  TensorId NewValue(const std::string& tensor_name, const std::string& value, Role role, const std::string& origin) {
    const ValueType& v = type_.at(value);
    return b_.AddTensor(tensor_name, v.shape, v.dtype, role, origin);
  }

  // A donated input that initialises exactly one carry: under XLA the loop
  // state of that carry (rolled) lives in the parameter's buffer.
  TensorId DonatedInit(const std::string& c) const {
    const std::string init = InitOf(c);
    if (init == "zero") return kNoTensor;
    int uses = 0;
    for (const auto& [k, v] : p_.carry) uses += v == init;
    for (const auto& [k, v] : p_.xs) uses += v == init;
    for (const auto& [k, v] : p_.consts) uses += v == init;
    const TensorId t = input_.at(init);
    return uses == 1 && b_.program().tensor(t).donated ? t : kNoTensor;
  }

  void Forward() {
    std::map<std::string, Ref> cur;
    for (const std::string& c : carries_) {
      const std::string init = InitOf(c);
      if (init == "zero") {
        TensorId z = NewValue(c + ".init", c, Role::kLoopState, "initial carry " + c + " (zero)");
        Emit(c + ".init", OpKind::kElementwise, {}, {z}, 0);
        cur[c] = Whole(z);
      } else if (rolled_ && DonatedInit(c) == kNoTensor) {
        // Copy insertion: a loop state that starts from a read-only value
        // (a non-donated parameter, or one used again) gets a copy.
        TensorId st = NewValue(c + ".loop_state", c, Role::kLoopState,
                               absl::StrCat("while-loop state of carry ", c, " (copy of its initial value)"));
        Emit(c + ".state_copy", OpKind::kCopy, {Whole(input_.at(init))}, {st}, 0);
        cur[c] = Whole(st);
      } else {
        cur[c] = Whole(input_.at(init));
      }
    }
    if (rolled_) {
      for (const std::string& r : residuals_) {
        if (xs_.count(r)) continue;          // an xs slice: the scanned input itself is the residual
        if (invariant_.count(r)) continue;   // hoisted: stored once
        const ValueType& v = type_.at(r);
        std::vector<int64_t> shape = v.shape;
        shape.insert(shape.begin(), T_);
        TensorId st = b_.AddTensor(
            "residual_stack." + r, shape, v.dtype, Role::kResidual,
            absl::StrFormat("residual stack of %s `%s`, %d x %s%s", carries_set().count(r) ? "carry" : "value", r,
                            T_, FormatBytes(SizeOf(r)),
                            carries_set().count(r) ? " (carries are never forwarded; slot 0 copies the initial carry)"
                                                   : ""));
        Emit("residual_stack." + r + ".init", OpKind::kElementwise, {}, {st}, 0);
        stack_[r] = st;
      }
    }
    // Loop-invariant values (consts and ops on them only) are computed once,
    // before the loop: JAX hoists such residuals out of the scan
    // (_scan_partial_eval, "loop-invariant residuals"), and XLA CSEs the
    // unrolled copies. A residual among them is stored once.
    std::map<std::string, Ref> hoisted;
    for (const auto& [k, src] : p_.consts) hoisted[k] = Whole(input_.at(src));
    if (T_ > 0) {
      for (const ProgramOpSpec& op : p_.body) {
        if (!invariant_.count(op.out)) continue;
        std::vector<Ref> ins;
        for (const std::string& n : op.in) ins.push_back(hoisted.at(n));
        TensorId out = NewValue("hoisted." + op.out, op.out, residuals_.count(op.out) ? Role::kResidual
                                                                                      : Role::kActivation,
                                absl::StrCat(op.out, ": loop-invariant, computed once before the loop"));
        b_.tensor(out).origin_kind = op.out;  // each hoisted value a kind of its own, as diff sums it
        Emit("hoisted." + op.out, KindOf(op), ins, {out}, Flops(op));
        hoisted[op.out] = Whole(out);
      }
    }
    vals_hoisted_ = hoisted;
    vals_.clear();
    // The loop: the initial carries and stacks above are set up before the
    // XLA while (entry computation), the iterations are its body (Note
    // [Rolled loop built once]: past RolledBuiltOnceAbove() trips, one
    // steady iteration stands for all but the edges).
    b_.BeginRegion(rolled_ ? "forward while loop" : "forward (unrolled)", "loop", rolled_);
    for (const LoopIteration& iteration : LoopIterations(T_, rolled_, /*descending=*/false)) {
      const int64_t t = iteration.index;
      b_.set_layer(static_cast<int>(t));
      BeginIteration(t, iteration.repeat);
      std::map<std::string, Ref>& v = vals_[t];
      v.insert(hoisted.begin(), hoisted.end());
      for (const std::string& c : carries_) v[c] = cur[c];
      for (const auto& [x, src] : p_.xs) {
        v[x] = {input_.at(src), SizeOf(x)};
        if (!rolled_) continue;
        // Note [Materialised loop slices] (sim/lower/xla/loop_slices.h):
        // the forward body reads its slice of a scanned input; lowering
        // decides from its readers whether that slice is a buffer.
        LoopSlice slice{SliceSource::kScannedInput, x, {}};
        for (const ProgramOpSpec& op : p_.body) {
          if (invariant_.count(op.out)) continue;
          for (size_t i = 0; i < op.in.size(); ++i) {
            if (op.in[i] != x) continue;
            slice.readers.push_back(op.op == "matmul" ? DotRead(op, false) : SliceRead{});
          }
        }
        const ValueType& xt = type_.at(x);
        v[x] = Whole(b_.AddLoopSlice(absl::StrCat("iter", t, ".slice_", x), input_.at(src), xt.shape, xt.dtype,
                                     Role::kActivation, std::move(slice)));
      }
      const std::string it = absl::StrCat("iter", t, ".");
      if (rolled_) {
        for (const std::string& c : carries_) {
          if (stack_.count(c)) StoreToStack(c, v.at(c), it);
        }
      }
      for (const ProgramOpSpec& op : p_.body) {
        if (invariant_.count(op.out)) continue;  // hoisted
        if (!rolled_ && t == T_ - 1 && !final_needed_.count(op.out)) {
          // Unrolled: in the last iteration only values the backward pass
          // reads are kept; the new carries and the loss value feed nothing
          // (jax.grad returns no primal) and are removed as dead code.
          final_dead_.insert(op.out);
          continue;
        }
        std::vector<Ref> ins;
        for (const std::string& n : op.in) ins.push_back(v.at(n));
        // A carry's next value computed elementwise from the state: in
        // place in the loop-state buffer (a donated parameter's buffer
        // when the state started there).
        std::string carry_of;
        for (const std::string& c : carries_) {
          if (CarryOut(c) == op.out) carry_of = c;
        }
        TensorId out = NewValue(it + op.out, op.out, carry_of.empty() ? Role::kActivation : Role::kLoopState,
                                absl::StrCat(op.out, " of iteration ", t));
        if (rolled_ && !carry_of.empty() && op.op != "matmul" && DonatedInit(carry_of) != kNoTensor) {
          b_.tensor(out).aliases = DonatedInit(carry_of);
          b_.tensor(out).origin = absl::StrCat("carry ", carry_of, " of iteration ", t + 1,
                                              ", in place in the donated parameter's buffer (loop state)");
        }
        Emit(it + op.out, KindOf(op), ins, {out}, Flops(op));
        v[op.out] = Whole(out);
        if (rolled_ && stack_.count(op.out)) StoreToStack(op.out, v.at(op.out), it);
      }
      for (const std::string& c : carries_) {
        if (v.count(CarryOut(c))) cur[c] = v.at(CarryOut(c));
      }
      if (rolled_) b_.EndRegion();
    }
    b_.EndRegion();
    b_.set_layer(-1);
  }

  // Rolled: an iteration of the while body is a region of its own, standing
  // for `repeat` iterations (Region::repeat; kind "iteration", so per-layer
  // times leave it out as before).
  void BeginIteration(int64_t t, int64_t repeat) {
    if (!rolled_) return;
    b_.BeginRegion(absl::StrCat("iter", t), "iteration");
    b_.set_region_repeat(repeat);
  }

  std::set<std::string> carries_set() const { return {carries_.begin(), carries_.end()}; }

  void StoreToStack(const std::string& r, const Ref& value, const std::string& it) {
    Op& op = Emit(it + "stack_" + r, OpKind::kDynamicUpdateSlice, {Whole(stack_.at(r)), value}, {}, 0);
    op.bytes_read = value.read;
    op.bytes_written = value.read;
  }

  OpKind KindOf(const ProgramOpSpec& op) const {
    if (op.op == "matmul") return OpKind::kMatmul;
    if (op.op == "sum") return OpKind::kReduce;
    return OpKind::kElementwise;
  }

  double Flops(const ProgramOpSpec& op) const {
    const ValueType& out = type_.at(op.out);
    if (op.op == "matmul") return 2.0 * static_cast<double>(out.elements()) * type_.at(op.in[0]).shape.back();
    if (op.op == "sum") return static_cast<double>(type_.at(op.in[0]).elements());
    return static_cast<double>(out.elements());
  }

  // --- backward -----------------------------------------------------------------

  // The residual `name` of iteration t as the backward pass reads it.
  // Rolled, a stacked residual (or a scanned input) is a dynamic-slice of
  // its stack at its first read in the iteration; lowering decides whether
  // it is a buffer (Note [Materialised loop slices]).
  Ref Residual(int64_t t, const std::string& name) {
    const bool sliced = rolled_ && t >= 0 && (stack_.count(name) || xs_.count(name));
    if (sliced) {
      auto it = slice_.find({t, name});
      if (it == slice_.end()) {
        const ValueType& v = type_.at(name);
        const bool stacked = stack_.count(name) > 0;
        const TensorId src = stacked ? stack_.at(name) : input_.at(XsSource(name));
        const TensorId sl = b_.AddLoopSlice(
            absl::StrCat("iter", t, ".slice_", name), src, v.shape, v.dtype, Role::kResidual,
            {stacked ? SliceSource::kStackedResidual : SliceSource::kScannedInput, name, BackwardReaders(name)});
        it = slice_.emplace(std::make_pair(t, name), sl).first;
      }
      return Whole(it->second);
    }
    if (rolled_ && stack_.count(name)) return {stack_.at(name), SizeOf(name)};
    if (t < 0) return vals_hoisted_.at(name);
    return vals_.at(t).at(name);
  }

  std::string XsSource(const std::string& x) const {
    for (const auto& [k, src] : p_.xs) {
      if (k == x) return src;
    }
    return x;
  }

  // The dot that reads `op`'s operands in the backward pass: da = dc @ wᵀ,
  // or (`weight_grad`) dw = aᵀ·dc, an outer product when a is a vector (a
  // broadcast multiply, fused). Lowering decides whether XLA keeps it a
  // GEMM (DotStaysGemm in sim/lower/xla/loop_slices.h).
  SliceRead DotRead(const ProgramOpSpec& op, bool weight_grad) const {
    const ValueType &a = type_.at(op.in[0]), &w = type_.at(op.in[1]);
    const int64_t k = a.shape.back(), n = w.shape[1];
    const int64_t m = a.elements() / std::max<int64_t>(k, 1);
    const bool a_vector = a.shape.size() == 1;
    if (weight_grad && a_vector) return SliceRead{};
    if (weight_grad) return {SliceReader::kDot, {k, n, m, false, false}};
    return {SliceReader::kDot, {m, k, n, a_vector, false}};
  }

  // What reads residual `name` in a backward iteration.
  std::vector<SliceRead> BackwardReaders(const std::string& name) const {
    std::vector<SliceRead> r;
    for (const ProgramOpSpec& op : p_.body) {
      if (!useful_.count(op.out) || invariant_.count(op.out)) continue;
      const std::string& a = op.in[0];
      const std::string b = op.in.size() > 1 ? op.in[1] : "";
      const bool da = useful_.count(a) > 0, db = !b.empty() && useful_.count(b) > 0;
      if (op.op == "matmul") {
        if (da && b == name) r.push_back(DotRead(op, false));
        if (db && a == name) r.push_back(DotRead(op, true));
      } else if (op.op == "mul" || op.op == "scale") {
        if ((da && b == name) || (db && a == name)) r.push_back(SliceRead{});
      }
    }
    return r;
  }

  // The carry whose gradient output will be written into a donated input:
  // its cotangent loop state lives in that buffer (rolled).
  TensorId CotangentHome(const std::string& c) const {
    if (!rolled_) return kNoTensor;
    const std::string init = InitOf(c);
    if (init == "zero" || std::find(p_.grad.begin(), p_.grad.end(), init) == p_.grad.end()) return kNoTensor;
    return DonatedInit(c);
  }

  // Adds a contribution to ct[name]. `make` emits the contribution given the
  // existing partial (or kNoTensor); elementwise contributions fuse with
  // the accumulation (one loop fusion), others are added after.
  // `kind`: Tensor::origin_kind, where `what` is a kind's words and more.
  TensorId NewCotangent(const std::string& name, int64_t t, const std::string& what, const std::string& kind = "") {
    TensorId ct = NewValue(absl::StrCat("iter", t, ".ct_", name), name, Role::kTemporary,
                           absl::StrCat("cotangent of ", name, " in iteration ", t, " (", what, ")"));
    if (!kind.empty()) b_.tensor(ct).origin_kind = absl::StrCat("cotangent of ", name, " in iteration ", t, " (", kind, ")");
    if (carries_set().count(name) && CotangentHome(name) != kNoTensor) {
      b_.tensor(ct).origin_kind.clear();  // the words below are whole
      b_.tensor(ct).aliases = CotangentHome(name);
      b_.tensor(ct).role = Role::kGradient;
      b_.tensor(ct).origin = absl::StrCat("cotangent of carry ", name, " (backward loop state, in the buffer of ",
                                          "the donated input its gradient is returned in)");
    }
    return ct;
  }

  void Accumulate(std::map<std::string, Ref>& ct, const std::string& name, int64_t t, const std::string& opname,
                  OpKind kind, std::vector<Ref> ins, double flops, bool fusable) {
    auto it = ct.find(name);
    if (it != ct.end() && fusable) {
      ins.insert(ins.begin(), it->second);
      TensorId out = NewCotangent(name, t, "accumulated");
      Emit(opname, OpKind::kElementwise, ins, {out}, flops + static_cast<double>(type_.at(name).elements()));
      it->second = Whole(out);
      return;
    }
    TensorId part = NewCotangent(name, t, "contribution");
    if (it != ct.end()) b_.tensor(part).aliases = kNoTensor;  // a separate term, added below
    Emit(opname, kind, ins, {part}, flops);
    if (it == ct.end()) {
      ct[name] = Whole(part);
      return;
    }
    TensorId sum = NewCotangent(name, t, "sum of contributions");
    Emit(opname + ".add", OpKind::kElementwise, {it->second, Whole(part)}, {sum},
         static_cast<double>(type_.at(name).elements()));
    it->second = Whole(sum);
  }

  void Backward() {
    // Cotangents of the final carries: 1 for the loss; zeros elsewhere —
    // instantiated as loop state when rolled (_scan_transpose
    // instantiate_zeros), symbolic (absent) when unrolled.
    std::map<std::string, Ref> ct_carry;
    for (const std::string& c : carries_) {
      if (c == p_.loss) {
        TensorId one = NewValue("ct_" + c + ".seed", c, Role::kTemporary, "d loss / d loss = 1");
        Emit("ct_" + c + ".seed", OpKind::kElementwise, {}, {one}, 0);
        ct_carry[c] = Whole(one);
      } else if (rolled_ && useful_.count(c)) {
        TensorId z = NewCotangent(c, T_, "zeros: instantiated carry cotangent", "zeros");
        Emit("ct_" + c + ".zeros", OpKind::kElementwise, {}, {z}, 0);
        ct_carry[c] = Whole(z);
      }
    }
    // Cotangents of loop-invariant values accumulate across iterations: in
    // the rolled backward loop they are accumulator carries instantiated as
    // zeros (_scan_transpose ct_consts).
    std::map<std::string, Ref> ct_inv;
    if (rolled_) {
      for (const auto& [k, src] : p_.consts) {
        if (!useful_.count(k)) continue;
        TensorId z = NewValue("ct_" + k + ".zeros", k, Role::kLoopState,
                              "accumulated cotangent of loop-invariant " + k + " (backward loop state)");
        Emit("ct_" + k + ".zeros", OpKind::kElementwise, {}, {z}, 0);
        ct_inv[k] = Whole(z);
      }
    }
    b_.BeginRegion(rolled_ ? "backward while loop" : "backward (unrolled)", "loop", rolled_);
    for (const LoopIteration& iteration : LoopIterations(T_, rolled_, /*descending=*/true)) {
      const int64_t t = iteration.index;
      b_.set_layer(static_cast<int>(t));
      BeginIteration(t, iteration.repeat);
      std::map<std::string, Ref> ct = ct_inv;
      for (const std::string& c : carries_) {
        auto it = ct_carry.find(c);
        if (it == ct_carry.end()) continue;
        const std::string out = CarryOut(c);
        if (ct.count(out)) {
          Accumulate(ct, out, t, absl::StrCat("iter", t, ".ct_", out, ".merge"), OpKind::kElementwise,
                     {it->second}, 0, true);
        } else {
          ct[out] = it->second;
        }
      }
      for (auto op = p_.body.rbegin(); op != p_.body.rend(); ++op) {
        if (invariant_.count(op->out)) continue;  // its VJP runs once, after the loop
        EmitVjp(*op, t, ct);
      }
      for (auto& [k, v] : ct) {
        if (invariant_.count(k)) ct_inv[k] = v;
      }
      ct_carry.clear();
      for (const std::string& c : carries_) {
        if (ct.count(c)) ct_carry[c] = ct.at(c);
      }
      if (rolled_) b_.EndRegion();
    }
    b_.EndRegion();
    b_.set_layer(-1);
    for (auto op = p_.body.rbegin(); op != p_.body.rend(); ++op) {
      if (invariant_.count(op->out)) EmitVjp(*op, -1, ct_inv);
    }
    final_ct_ = ct_carry;
    for (const auto& [k, src] : p_.consts) {
      if (ct_inv.count(k)) final_const_ct_[k] = ct_inv.at(k);
    }
  }

  // The backward rule of one body op in iteration t (-1: a hoisted op).
  void EmitVjp(const ProgramOpSpec& body_op, int64_t t, std::map<std::string, Ref>& ct) {
        const ProgramOpSpec* op = &body_op;
        auto dc = ct.find(op->out);
        if (dc == ct.end()) return;
        const Ref g = dc->second;
        const std::string pre = t < 0 ? std::string("hoisted.vjp_") : absl::StrCat("iter", t, ".vjp_");
        const std::string& a = op->in[0];
        const std::string b = op->in.size() > 1 ? op->in[1] : "";
        const bool da = useful_.count(a) > 0, db = !b.empty() && useful_.count(b) > 0;
        const double n = static_cast<double>(type_.at(op->out).elements());
        if (op->op == "matmul") {
          // c = a @ w: da = dc @ wᵀ (reads w), dw = aᵀ dc (reads a; an outer
          // product when a is a vector, fused with the accumulation).
          const double k = static_cast<double>(type_.at(a).shape.back());
          if (da) Accumulate(ct, a, t, pre + op->out + ".da", OpKind::kMatmul, {g, Residual(t, b)}, 2 * n * k, false);
          if (db) {
            const bool outer = type_.at(a).shape.size() == 1;
            Accumulate(ct, b, t, pre + op->out + ".dw", outer ? OpKind::kElementwise : OpKind::kMatmul,
                       {Residual(t, a), g}, 2 * n * k, outer);
          }
        } else if (op->op == "sum") {
          if (da) Accumulate(ct, a, t, pre + op->out + ".da", OpKind::kElementwise, {g},
                             static_cast<double>(type_.at(a).elements()), true);
        } else if (op->op == "add") {
          if (da) Accumulate(ct, a, t, pre + op->out + ".da", OpKind::kElementwise, {g}, 0, true);
          if (db) Accumulate(ct, b, t, pre + op->out + ".db", OpKind::kElementwise, {g}, 0, true);
        } else {  // mul / scale: d(a·b): da = dc·b, db = dc·a (summed when a scalar)
          // The reduction reads dc before the in-place update overwrites it.
          if (db) {
            const bool reduce = type_.at(b).scalar() && !type_.at(op->out).scalar();
            Accumulate(ct, b, t, pre + op->out + ".db", reduce ? OpKind::kReduce : OpKind::kElementwise,
                       {g, Residual(t, a)}, 2 * n, !reduce);
          }
          if (da) {
            const bool reduce = type_.at(a).scalar() && !type_.at(op->out).scalar();
            Accumulate(ct, a, t, pre + op->out + ".da", reduce ? OpKind::kReduce : OpKind::kElementwise,
                       {g, Residual(t, b)}, n, !reduce);
          }
        }
  }

  // --- outputs ----------------------------------------------------------------

  // jax.grad returns one gradient per differentiated input, in order. With
  // donate_argnums, each output takes the first unused donated input of the
  // same shape and dtype (jax/_src/interpreters/pxla.py donation matching).
  absl::Status Outputs() {
    std::set<TensorId> used;
    for (const std::string& in : p_.grad) {
      Ref g{kNoTensor, Bytes(0)};
      std::vector<Ref> parts;
      for (const std::string& c : carries_) {
        if (InitOf(c) == in && final_ct_.count(c)) parts.push_back(final_ct_.at(c));
      }
      for (const auto& [k, src] : p_.consts) {
        if (src == in && final_const_ct_.count(k)) parts.push_back(final_const_ct_.at(k));
      }
      for (const Ref& part : parts) {
        if (g.t == kNoTensor) {
          g = part;
        } else {
          TensorId sum = b_.AddTensor("grad." + in + ".sum", input_type_.at(in).shape, input_type_.at(in).dtype,
                                      Role::kGradient, "sum of the gradients of the uses of " + in);
          Emit("grad." + in + ".sum", OpKind::kElementwise, {g, part}, {sum}, 0);
          g = Whole(sum);
        }
      }
      const TensorId src = input_.at(in);
      if (g.t == kNoTensor || b_.tensor(g.t).entry_parameter) {
        TensorId z = b_.AddTensor("grad." + in, input_type_.at(in).shape, input_type_.at(in).dtype, Role::kGradient,
                                  "gradient of " + in + " (zero: the loss does not depend on it)");
        Emit("grad." + in + ".zeros", OpKind::kElementwise, {}, {z}, 0);
        g = Whole(z);
      }
      Tensor& out = b_.tensor(g.t);
      out.live_out = true;
      out.role = Role::kGradient;
      out.name = "grad." + in;
      if (out.origin.empty() || out.aliases == kNoTensor) out.origin = "gradient of " + in + " (output)";
      if (out.aliases == kNoTensor) {
        for (const ProgramInputSpec& d : p_.inputs) {
          const TensorId cand = input_.at(d.name);
          const Tensor& ct = b_.tensor(cand);
          if (!ct.donated || used.count(cand) || ct.shape != out.shape || ct.dtype != out.dtype) continue;
          out.aliases = cand;
          break;
        }
      }
      if (out.aliases != kNoTensor) used.insert(out.aliases);
      (void)src;
    }
    return absl::OkStatus();
  }

  const RunSpec& s_;
  const ProgramSpec& p_;
  ProgramBuilder b_;
  int64_t T_ = 0;
  bool rolled_ = false;
  std::map<std::string, TensorId> input_;
  std::map<std::string, ValueType> input_type_;
  std::map<std::string, ValueType> type_;
  std::vector<std::string> carries_;
  std::set<std::string> xs_;
  std::set<std::string> active_, useful_, residuals_;
  std::map<std::string, TensorId> stack_;
  std::map<int64_t, std::map<std::string, Ref>> vals_;  // by iteration built
  std::set<std::string> final_dead_;
  std::set<std::string> final_needed_;  // values the last unrolled iteration must compute
  std::map<std::string, Ref> final_ct_;
  std::map<std::string, Ref> final_const_ct_;
  std::map<std::string, Ref> vals_hoisted_;
  std::map<std::pair<int64_t, std::string>, TensorId> slice_;  // (iteration, residual) slices
  std::set<std::string> invariant_;   // consts and ops on them only
};

}  // namespace

absl::StatusOr<Program> BuildJaxProgram(const RunSpec& spec) {
  if (!spec.program.present) return absl::InvalidArgumentError("no program section");
  JaxProgramBuilder b(spec);
  return b.Build();
}

}  // namespace gpusim
