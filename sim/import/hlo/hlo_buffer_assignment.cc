#include "sim/import/hlo/hlo_buffer_assignment.h"

#include <algorithm>
#include <map>
#include <numeric>
#include <set>
#include <tuple>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "sim/alloc/colocated_heap.h"
#include "sim/base/status.h"
#include "sim/lower/xla/fusion.h"

namespace gpusim {
namespace {

// xla/service/gpu/gpu_constants.h kXlaAllocatedBufferAlignBytes: the
// alignment of the buffers XLA allocates (temps and outputs).
constexpr int64_t kXlaAllocatedBufferAlignBytes = 128;

using ShapeIndex = std::vector<int64_t>;

struct Leaf {
  ShapeIndex index;
  const HloShape* shape = nullptr;
};

void Subshapes(const HloShape& s, ShapeIndex* prefix, std::vector<Leaf>* out) {
  out->push_back({*prefix, &s});
  if (!s.tuple) return;
  for (size_t k = 0; k < s.elements.size(); ++k) {
    prefix->push_back(static_cast<int64_t>(k));
    Subshapes(s.elements[k], prefix, out);
    prefix->pop_back();
  }
}

// ShapeUtil::ByteSizeOf with pointer size 8: a tuple is its pointer table.
int64_t ShapeBytes(const HloShape& s) {
  if (s.tuple) return 8 * static_cast<int64_t>(s.elements.size());
  return std::max<int64_t>(0, s.ArrayBytes());
}

int64_t ElementWidth(const std::string& element) {
  HloShape one;
  one.element = element;
  return one.ArrayBytes();
}

// ShapeUtil::Equal: element type, dimensions and layout.
bool SameShape(const HloShape& a, const HloShape& b) {
  return !a.tuple && !b.tuple && a.element == b.element && a.dims == b.dims && a.layout == b.layout;
}

// HloInstruction::IsElementwise's opcodes (xla/hlo/ir/hlo_instruction.cc
// IsElementwiseImpl).
bool IsElementwiseOpcode(const std::string& op) {
  static const std::set<std::string>* const k = new std::set<std::string>{
      "abs", "add", "and", "atan2", "bitcast-convert", "cbrt", "ceil", "clamp", "compare", "complex", "convert",
      "copy", "cosine", "count-leading-zeros", "divide", "erf", "exponential", "exponential-minus-one", "floor",
      "imag", "is-finite", "log", "log-plus-one", "logistic", "map", "maximum", "minimum", "multiply", "negate",
      "not", "or", "popcnt", "power", "real", "reduce-precision", "remainder", "round-nearest-afz",
      "round-nearest-even", "rsqrt", "select", "shift-left", "shift-right-arithmetic", "shift-right-logical", "sign",
      "sine", "sqrt", "stochastic-convert", "subtract", "tan", "tanh", "xor"};
  return k->count(op) > 0;
}

// Instructions that define no value and forward their operand's.
bool ForwardsOperand(const std::string& op) {
  return op == "bitcast" || op == "opt-barrier" || op == "add-dependency" || op == "domain";
}

struct Value {
  int comp = 0, ins = 0;
  ShapeIndex index;
  const HloShape* shape = nullptr;
  int64_t size = 0;
  std::vector<std::pair<int, int>> positions;  // beyond the definition
  std::vector<std::pair<int, int>> uses;
  int64_t start = 0, end = 0;
  std::pair<int, int> end_position;  // where the live range ends (a position)
  ShapeIndex end_index;
  bool live_out = false;
  int64_t id = 0;  // XLA's value id order: computations callees first, then the instruction order
};

// Per instruction: the subshapes of its result, and the value at each.
struct InsValues {
  std::vector<Leaf> leaves;
  std::vector<int> value;
  int At(const ShapeIndex& idx) const {
    for (size_t j = 0; j < leaves.size(); ++j) {
      if (leaves[j].index == idx) return value[j];
    }
    return -1;
  }
};

// The integers of "{1,2}" at `*at` (at its '{'); advances past the '}'.
bool BraceIndex(const std::string& s, size_t* at, ShapeIndex* out) {
  const size_t open = s.find('{', *at);
  const size_t close = open == std::string::npos ? open : s.find('}', open);
  if (close == std::string::npos) return false;
  for (absl::string_view t : absl::StrSplit(absl::string_view(s).substr(open + 1, close - open - 1), ',',
                                            absl::SkipWhitespace())) {
    int64_t v = 0;
    if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(t), &v)) return false;
    out->push_back(v);
  }
  *at = close + 1;
  return true;
}

// output_to_operand_aliasing={{1}: (0, {}), {2}: (1, {0})}: (output index,
// operand, operand index) triples; what does not read as one is dropped.
std::vector<std::tuple<ShapeIndex, int64_t, ShapeIndex>> OutputOperandAliasing(const std::string& text) {
  std::vector<std::tuple<ShapeIndex, int64_t, ShapeIndex>> out;
  size_t at = text.find('{');
  if (at == std::string::npos) return out;
  ++at;
  while (true) {
    ShapeIndex out_index, operand_index;
    if (!BraceIndex(text, &at, &out_index)) break;
    const size_t open = text.find('(', at), comma = open == std::string::npos ? open : text.find(',', open);
    int64_t operand = 0;
    if (comma == std::string::npos ||
        !absl::SimpleAtoi(absl::StripAsciiWhitespace(absl::string_view(text).substr(open + 1, comma - open - 1)),
                          &operand)) {
      break;
    }
    at = comma;
    if (!BraceIndex(text, &at, &operand_index)) break;
    out.emplace_back(std::move(out_index), operand, std::move(operand_index));
  }
  return out;
}

struct Allocation {
  int64_t size = 0;
  bool param = false, aliased = false, constant = false, tuple = false, live_out = false;
  std::vector<int> values;
};

}  // namespace

namespace hlo_internal {

class BufferAssigner {
 public:
  explicit BufferAssigner(const HloModule& m) : m_(m) {}

  absl::StatusOr<CompiledBufferAssignment> Run();

 private:
  absl::Status Error(int c, int i, const std::string& what) const {
    const HloInstruction& ins = Ins(c, i);
    return absl::InvalidArgumentError(absl::StrCat(m_.file, ":", ins.location.line, ":", ins.location.column, ": ",
                                                   ins.name, ": ", what));
  }
  const HloComputation& Comp(int c) const { return m_.computations[static_cast<size_t>(c)]; }
  const HloInstruction& Ins(int c, int i) const { return Comp(c).instructions[static_cast<size_t>(i)]; }
  int CompIndex(const std::string& name) const { return m_.by_name.at(name); }
  InsValues& Vs(int c, int i) { return vs_[static_cast<size_t>(c)][static_cast<size_t>(i)]; }

  int Find(int v) {
    while (parent_[static_cast<size_t>(v)] != v) {
      parent_[static_cast<size_t>(v)] = parent_[static_cast<size_t>(parent_[static_cast<size_t>(v)])];
      v = parent_[static_cast<size_t>(v)];
    }
    return v;
  }
  void Union(int a, int b) {
    a = Find(a);
    b = Find(b);
    if (a != b) parent_[static_cast<size_t>(std::max(a, b))] = std::min(a, b);
  }

  int Define(int c, int i, const Leaf& l) {
    Value v;
    v.comp = c;
    v.ins = i;
    v.index = l.index;
    v.shape = l.shape;
    v.size = ShapeBytes(*l.shape);
    values_.push_back(std::move(v));
    parent_.push_back(static_cast<int>(values_.size()) - 1);
    return static_cast<int>(values_.size()) - 1;
  }

  // Sets `to`'s values under `to_prefix` from `from`'s under `from_prefix`.
  void Forward(const InsValues& from, const ShapeIndex& from_prefix, InsValues* to, const ShapeIndex& to_prefix) {
    for (size_t j = 0; j < from.leaves.size(); ++j) {
      const ShapeIndex& fi = from.leaves[j].index;
      if (fi.size() < from_prefix.size() || !std::equal(from_prefix.begin(), from_prefix.end(), fi.begin())) continue;
      ShapeIndex ti = to_prefix;
      ti.insert(ti.end(), fi.begin() + static_cast<std::ptrdiff_t>(from_prefix.size()), fi.end());
      for (size_t k = 0; k < to->leaves.size(); ++k) {
        if (to->leaves[k].index == ti) to->value[k] = from.value[j];
      }
    }
  }

  absl::Status Visit(int c);
  absl::Status VisitInstruction(int c, int i);
  absl::Status VisitWhile(int c, int i, InsValues* out);
  void AddInPlacePairs(int c, int i);
  absl::Status EntryAliases();
  void Flatten(int c);
  void LiveRanges();
  void NormalizeAliasedBuffers();

  bool CanShare(int oc, int oi, const ShapeIndex& oidx, int uc, int ui, const ShapeIndex& uidx);
  bool FusionCanShare(int c, int user, int operand, const ShapeIndex& user_index);
  bool Interferes(int a, int b);
  bool MaybeAssign(Allocation& alloc, const std::vector<int>& buffer, int64_t size, bool live_out);
  void Allocate(std::vector<Allocation>* allocs, std::vector<int>* heap);
  CompiledBufferAssignment Heap(const std::vector<int>& heap);
  CompiledHeapValue Describe(int v) const;

  const HloModule& m_;
  std::vector<Value> values_;
  std::vector<int> parent_;
  std::vector<std::vector<InsValues>> vs_;
  std::vector<int> visited_;                 // per computation: 0 no, 1 visiting, 2 done
  std::vector<int> post_order_;              // computations, callees first
  std::map<int, std::pair<int, int>> caller_;  // body/condition -> (computation, while instruction)
  std::vector<std::vector<int64_t>> time_;   // flattened schedule position per instruction
  std::vector<std::pair<int64_t, int64_t>> span_;
  int64_t end_time_ = 0;
  std::map<int, std::vector<std::vector<int>>> users_;  // fused computation -> users per instruction
};

absl::Status BufferAssigner::Visit(int c) {
  if (visited_[static_cast<size_t>(c)] != 0) {
    return absl::InvalidArgumentError(absl::StrCat(m_.file, ": computation '", Comp(c).name,
                                                   "' is called by more than one while loop (not modelled)"));
  }
  visited_[static_cast<size_t>(c)] = 1;
  vs_[static_cast<size_t>(c)].resize(Comp(c).instructions.size());
  for (size_t i = 0; i < Comp(c).instructions.size(); ++i) RETURN_IF_ERROR(VisitInstruction(c, static_cast<int>(i)));
  visited_[static_cast<size_t>(c)] = 2;
  post_order_.push_back(c);
  return absl::OkStatus();
}

absl::Status BufferAssigner::VisitInstruction(int c, int i) {
  const HloInstruction& ins = Ins(c, i);
  InsValues out;
  ShapeIndex prefix;
  Subshapes(ins.shape, &prefix, &out.leaves);
  out.value.assign(out.leaves.size(), -1);
  const std::string& op = ins.opcode;
  const HloAsyncForm async = ClassifyAsync(op);
  auto define_rest = [&]() {
    for (size_t j = 0; j < out.leaves.size(); ++j) {
      if (out.value[j] < 0) out.value[j] = Define(c, i, out.leaves[j]);
    }
  };
  auto operand = [&](size_t k) -> const InsValues& { return Vs(c, ins.operands[k]); };
  if (op == "call" || op == "conditional" || op == "send" || op == "recv" || op == "send-done" ||
      op == "recv-done" || op == "async-update") {
    return Error(c, i, absl::StrCat("'", op, "' in a compiled module is not modelled (its buffer assignment)"));
  }
  if (op == "parameter" && c != m_.entry) {
    auto it = caller_.find(c);
    if (it == caller_.end()) return Error(c, i, "a parameter of a computation no while loop calls");
    const HloInstruction& w = Ins(it->second.first, it->second.second);
    Forward(Vs(it->second.first, w.operands[0]), {}, &out, {});
  } else if (op == "get-tuple-element") {
    int64_t k = 0;
    if (ins.operands.size() != 1 || !absl::SimpleAtoi(ins.attr("index"), &k)) return Error(c, i, "malformed get-tuple-element");
    Forward(operand(0), {k}, &out, {});
  } else if (ForwardsOperand(op) && ins.operands.size() == 1) {
    Forward(operand(0), {}, &out, {});
  } else if (op == "tuple") {
    for (size_t k = 0; k < ins.operands.size(); ++k) Forward(operand(k), {}, &out, {static_cast<int64_t>(k)});
  } else if (op == "while") {
    RETURN_IF_ERROR(VisitWhile(c, i, &out));
  } else if (async.done) {
    if (ins.operands.size() != 1) return Error(c, i, "an async done with other than one operand");
    Forward(operand(0), async.result_at < 0 ? ShapeIndex{} : ShapeIndex{async.result_at}, &out, {});
  } else if (async.start && async.operands_at >= 0) {
    const bool one = async.operands_at == 1;  // copy-start: {1} is its one operand
    for (size_t k = 0; k < ins.operands.size(); ++k) {
      ShapeIndex at = {async.operands_at};
      if (!one) at.push_back(static_cast<int64_t>(k));
      Forward(operand(k), {}, &out, at);
    }
  }
  define_rest();
  for (size_t j = 0; j < out.leaves.size(); ++j) {
    Value& v = values_[static_cast<size_t>(out.value[j])];
    if (v.comp != c || v.ins != i) v.positions.push_back({c, i});
  }
  vs_[static_cast<size_t>(c)][static_cast<size_t>(i)] = std::move(out);
  const bool uses = !(op == "get-tuple-element" || op == "tuple" || op == "parameter" || ForwardsOperand(op) ||
                      async.done);
  if (uses) {
    for (int o : ins.operands) {
      for (int v : Vs(c, o).value) values_[static_cast<size_t>(v)].uses.push_back({c, i});
    }
  }
  AddInPlacePairs(c, i);
  return absl::OkStatus();
}

absl::Status BufferAssigner::VisitWhile(int c, int i, InsValues* out) {
  const HloInstruction& ins = Ins(c, i);
  auto body = ins.called.find("body");
  auto cond = ins.called.find("condition");
  if (ins.operands.size() != 1 || body == ins.called.end() || cond == ins.called.end() || body->second.size() != 1 ||
      cond->second.size() != 1) {
    return Error(c, i, "while without one operand, body= and condition=");
  }
  const int b = CompIndex(body->second[0]), k = CompIndex(cond->second[0]);
  if (Comp(b).parameters.size() != 1 || Comp(k).parameters.size() != 1) {
    return Error(c, i, "a while body or condition without exactly one parameter");
  }
  caller_[b] = {c, i};
  caller_[k] = {c, i};
  RETURN_IF_ERROR(Visit(k));
  RETURN_IF_ERROR(Visit(b));
  const InsValues& init = Vs(c, ins.operands[0]);
  const InsValues& root = Vs(b, Comp(b).root);
  if (root.leaves.size() != init.leaves.size()) return Error(c, i, "the body's result does not match the loop state");
  for (size_t j = 0; j < init.leaves.size(); ++j) Union(init.value[j], root.value[j]);
  Forward(init, {}, out, {});
  return absl::OkStatus();
}

// HloDataflowAnalysis::GetInPlaceInputOutputPairs: the output and the
// operand it is written over are one buffer.
void BufferAssigner::AddInPlacePairs(int c, int i) {
  const HloInstruction& ins = Ins(c, i);
  auto pair = [&](const ShapeIndex& out_index, size_t operand, const ShapeIndex& operand_index) {
    if (operand >= ins.operands.size()) return;
    const int a = Vs(c, i).At(out_index), b = Vs(c, ins.operands[operand]).At(operand_index);
    if (a >= 0 && b >= 0) Union(a, b);
  };
  if (ins.opcode == "dynamic-update-slice" || ins.opcode == "scatter") pair({}, 0, {});
  if (ins.opcode == "fusion" && ins.called.count("calls") && !ins.called.at("calls").empty()) {
    const HloComputation& f = m_.computation(ins.called.at("calls")[0]);
    const HloInstruction& root = f.instructions[static_cast<size_t>(f.root)];
    std::vector<std::pair<ShapeIndex, int>> outs;
    if (root.opcode == "tuple") {
      for (size_t k = 0; k < root.operands.size(); ++k) outs.push_back({{static_cast<int64_t>(k)}, root.operands[k]});
    } else {
      outs.push_back({{}, f.root});
    }
    for (auto [idx, r] : outs) {
      while (f.instructions[static_cast<size_t>(r)].opcode == "bitcast") r = f.instructions[static_cast<size_t>(r)].operands[0];
      const HloInstruction& x = f.instructions[static_cast<size_t>(r)];
      if ((x.opcode != "dynamic-update-slice" && x.opcode != "scatter") || x.operands.empty()) continue;
      int p = x.operands[0];
      while (f.instructions[static_cast<size_t>(p)].opcode == "bitcast") p = f.instructions[static_cast<size_t>(p)].operands[0];
      const HloInstruction& param = f.instructions[static_cast<size_t>(p)];
      if (param.opcode == "parameter") pair(idx, static_cast<size_t>(param.parameter_number), {});
    }
  }
  for (const auto& [out_index, operand, operand_index] : OutputOperandAliasing(ins.attr("output_to_operand_aliasing"))) {
    pair(out_index, static_cast<size_t>(operand), operand_index);
  }
}

absl::Status BufferAssigner::EntryAliases() {
  const HloComputation& entry = Comp(m_.entry);
  const InsValues& root = Vs(m_.entry, entry.root);
  for (const HloAlias& a : m_.aliases) {
    if (a.parameter < 0 || static_cast<size_t>(a.parameter) >= entry.parameters.size()) {
      return absl::InvalidArgumentError(
          absl::StrCat(m_.file, ": input_output_alias names parameter ", a.parameter, ", which the entry does not have"));
    }
    const int out = root.At(a.output_index);
    const int param = Vs(m_.entry, entry.parameters[static_cast<size_t>(a.parameter)]).At(a.parameter_index);
    if (out < 0 || param < 0) {
      return absl::InvalidArgumentError(absl::StrCat(m_.file, ": input_output_alias {", absl::StrJoin(a.output_index, ","),
                                                     "}: (", a.parameter, ") names no value"));
    }
    Union(out, param);
  }
  for (int v : root.value) values_[static_cast<size_t>(v)].live_out = true;
  return absl::OkStatus();
}

// HloLiveRange::FlattenSchedule: a while's condition and body are flattened
// before the while itself.
void BufferAssigner::Flatten(int c) {
  const int64_t start = end_time_;
  for (size_t i = 0; i < Comp(c).instructions.size(); ++i) {
    const HloInstruction& ins = Comp(c).instructions[i];
    if (ins.opcode == "while") {
      Flatten(CompIndex(ins.called.at("condition")[0]));
      Flatten(CompIndex(ins.called.at("body")[0]));
    }
    time_[static_cast<size_t>(c)][i] = end_time_++;
  }
  span_[static_cast<size_t>(c)] = {start, end_time_};
}

// HloLiveRange::CalculateBufferStartEndMap.
void BufferAssigner::LiveRanges() {
  auto at = [&](int c, int i) {
    const HloComputation& comp = Comp(c);
    return comp.root == i ? span_[static_cast<size_t>(c)].second : time_[static_cast<size_t>(c)][static_cast<size_t>(i)];
  };
  for (Value& v : values_) {
    const HloInstruction& ins = Ins(v.comp, v.ins);
    v.start = ins.opcode == "parameter" ? span_[static_cast<size_t>(v.comp)].first
                                        : time_[static_cast<size_t>(v.comp)][static_cast<size_t>(v.ins)];
    v.end = at(v.comp, v.ins);
    v.end_position = {v.comp, v.ins};
    v.end_index = v.index;
    for (const auto& [c, i] : v.positions) {
      if (at(c, i) > v.end) {
        v.end = at(c, i);
        v.end_position = {c, i};
        v.end_index.clear();
      }
    }
    bool aliased = false;
    for (const HloAlias& a : m_.aliases) aliased = aliased || (a.parameter == ins.parameter_number && a.parameter_index == v.index);
    if (ins.opcode == "parameter" && v.comp == m_.entry && !aliased) {
      v.end = end_time_;
      continue;
    }
    for (const auto& [c, i] : v.uses) {
      const HloInstruction& u = Ins(c, i);
      int64_t t = time_[static_cast<size_t>(c)][static_cast<size_t>(i)];
      if (u.opcode == "while") {  // the init dies where the body starts
        const int b = CompIndex(u.called.at("body")[0]);
        t = Comp(b).parameters.empty() ? span_[static_cast<size_t>(b)].first
                                       : time_[static_cast<size_t>(b)][static_cast<size_t>(Comp(b).parameters[0])];
      }
      v.end = std::max(v.end, t);
    }
  }
}

// HloLiveRange::NormalizeAliasedBuffers: one buffer's values follow each other.
void BufferAssigner::NormalizeAliasedBuffers() {
  std::map<int, std::vector<int>> buffers;
  for (size_t v = 0; v < values_.size(); ++v) buffers[Find(static_cast<int>(v))].push_back(static_cast<int>(v));
  for (auto& [b, vs] : buffers) {
    std::sort(vs.begin(), vs.end(), [&](int x, int y) {
      const Value& a = values_[static_cast<size_t>(x)];
      const Value& c = values_[static_cast<size_t>(y)];
      return std::tie(a.start, a.end, a.id) < std::tie(c.start, c.end, c.id);
    });
    for (size_t k = 0; k + 1 < vs.size(); ++k) {
      Value& a = values_[static_cast<size_t>(vs[k])];
      Value& c = values_[static_cast<size_t>(vs[k + 1])];
      c.end = std::max(a.end, c.end);
      a.end = std::min(a.end, c.start);
    }
  }
}

// xla/service/gpu/buffer_sharing.cc FusionCanShareBufferHint: may fusion
// `user` write its output {user_index} over its operand `operand`?
bool BufferAssigner::FusionCanShare(int c, int user, int operand, const ShapeIndex& user_index) {
  const HloInstruction& u = Ins(c, user);
  const HloShape* user_sub = nullptr;
  for (const Leaf& l : Vs(c, user).leaves) {
    if (l.index == user_index) user_sub = l.shape;
  }
  const HloShape& op_shape = Ins(c, operand).shape;
  if (user_sub == nullptr || op_shape.tuple || user_sub->tuple) return false;
  if (!SameShape(op_shape, *user_sub) && (op_shape.ElementCount() != user_sub->ElementCount() ||
                                          ElementWidth(op_shape.element) != ElementWidth(user_sub->element))) {
    return false;
  }
  auto calls = u.called.find("calls");
  if (calls == u.called.end() || calls->second.empty()) return false;
  const int fc = CompIndex(calls->second[0]);
  const HloComputation& f = Comp(fc);
  auto& users = users_[fc];
  if (users.empty()) {
    users.resize(f.instructions.size());
    for (size_t x = 0; x < f.instructions.size(); ++x) {
      for (int o : f.instructions[x].operands) users[static_cast<size_t>(o)].push_back(static_cast<int>(x));
    }
  }
  auto op_of = [&](int x) { return f.instructions[static_cast<size_t>(x)].opcode; };
  int output = f.root;
  if (op_of(output) == "tuple") {
    const std::vector<int>& elements = f.instructions[static_cast<size_t>(output)].operands;
    if (user_index.empty() || user_index[0] < 0 || static_cast<size_t>(user_index[0]) >= elements.size()) return false;
    output = elements[static_cast<size_t>(user_index[0])];
  }
  const int non_bitcast_root = op_of(output) == "bitcast" ? f.instructions[static_cast<size_t>(output)].operands[0] : output;
  // The reduction emitter reads its hero reduction first (HloFusionAnalysis).
  int hero = -1;
  if (u.attr("kind") == "kInput") {
    std::vector<int> roots = op_of(f.root) == "tuple" ? f.instructions[static_cast<size_t>(f.root)].operands : std::vector<int>{f.root};
    for (int r : roots) {
      while (op_of(r) == "bitcast") r = f.instructions[static_cast<size_t>(r)].operands[0];
      if (op_of(r) == "reduce" && hero < 0) hero = r;
    }
  }
  size_t k = 0;
  while (k < u.operands.size() && u.operands[k] != operand) ++k;
  int param = -1;
  for (size_t x = 0; x < f.instructions.size(); ++x) {
    if (op_of(static_cast<int>(x)) == "parameter" && f.instructions[x].parameter_number == static_cast<int64_t>(k)) param = static_cast<int>(x);
  }
  if (param < 0) return false;
  const HloInstruction& nbr = f.instructions[static_cast<size_t>(non_bitcast_root)];
  std::vector<int> queue = {param};
  std::set<int> visited = {param};
  bool found = false;
  for (size_t q = 0; q < queue.size(); ++q) {
    const int x = queue[q];
    if (x == output) found = true;
    if (x == hero) continue;
    for (int h : users[static_cast<size_t>(x)]) {
      if (visited.insert(h).second) queue.push_back(h);
      const HloInstruction& hi = f.instructions[static_cast<size_t>(h)];
      if (h == non_bitcast_root && hi.opcode == "scatter") continue;
      if (nbr.opcode == "dynamic-update-slice" && hi.opcode == "dynamic-slice" && !hi.operands.empty() &&
          nbr.operands[0] == hi.operands[0]) {
        continue;
      }
      const bool dus_operand0 = hi.opcode == "dynamic-update-slice" && !hi.operands.empty() && hi.operands[0] == x;
      const bool elementwise = (IsElementwiseOpcode(hi.opcode) && hi.opcode != "copy") || dus_operand0;
      if (!elementwise && hi.opcode != "bitcast" && hi.opcode != "tuple" && h != hero) {
        const bool dus_update = h == non_bitcast_root && hi.opcode == "dynamic-update-slice" && hi.operands.size() > 1 &&
                                hi.operands[1] == x;
        if (!dus_update) return false;
      }
    }
  }
  if (op_of(f.root) == "tuple" && f.instructions[static_cast<size_t>(f.root)].operands.size() > 1 &&
      !IsElementwiseOpcode(nbr.opcode)) {
    for (int o : f.instructions[static_cast<size_t>(f.root)].operands) {
      if (o != output && visited.count(o)) return false;
    }
  }
  return found;
}

// HloDataflowAnalysis::CanShareOperandBufferWithUser with XLA-GPU's hints
// (buffer_sharing.cc CanShareBufferHint).
bool BufferAssigner::CanShare(int oc, int oi, const ShapeIndex& oidx, int uc, int ui, const ShapeIndex& uidx) {
  const HloInstruction& o = Ins(oc, oi);
  const HloInstruction& u = Ins(uc, ui);
  if (oc != uc || o.opcode == "constant") return false;
  if (std::find(u.operands.begin(), u.operands.end(), oi) == u.operands.end()) return false;
  if (u.opcode == "fusion") return FusionCanShare(uc, ui, oi, uidx);
  if (u.opcode == "custom-call") {
    // cuBLASLt writes D over its bias C (operand 2) when beta != 0.
    const std::string& cfg = u.attr("backend_config");
    const size_t b = cfg.find("\"beta\":");
    double beta = 0;
    if (u.attr("custom_call_target") != "\"__cublas$lt$matmul\"" || b == std::string::npos) return false;
    size_t e = b + 7;
    while (e < cfg.size() && (std::isdigit(static_cast<unsigned char>(cfg[e])) || cfg[e] == '.' || cfg[e] == '-')) ++e;
    if (!absl::SimpleAtod(cfg.substr(b + 7, e - b - 7), &beta)) return false;
    return beta != 0 && u.operands.size() > 2 && u.operands[2] == oi;
  }
  const HloShape* os = nullptr;
  const HloShape* us = nullptr;
  for (const Leaf& l : Vs(oc, oi).leaves) {
    if (l.index == oidx) os = l.shape;
  }
  for (const Leaf& l : Vs(uc, ui).leaves) {
    if (l.index == uidx) us = l.shape;
  }
  if (os == nullptr || us == nullptr || !SameShape(*os, *us)) return false;
  if (u.opcode == "dynamic-update-slice" || u.opcode == "scatter") return u.operands[0] == oi;
  return IsElementwiseOpcode(u.opcode);
}

// BufferAssigner::LiveRangeInterferes: ranges that overlap, unless one ends
// where the other begins and the later value may be written over the earlier.
bool BufferAssigner::Interferes(int a, int b) {
  const Value& x = values_[static_cast<size_t>(a)];
  const Value& y = values_[static_cast<size_t>(b)];
  if (x.start > y.end || y.start > x.end) return false;
  auto can_share = [&](const Value& user, const Value& operand) {
    const HloInstruction& ui = Ins(user.comp, user.ins);
    return ui.opcode != "copy" &&
           CanShare(operand.end_position.first, operand.end_position.second, operand.end_index, user.comp, user.ins,
                    user.index);
  };
  if (x.end == y.start) return !can_share(y, x);
  if (y.end == x.start) return !can_share(x, y);
  return true;
}

bool BufferAssigner::MaybeAssign(Allocation& alloc, const std::vector<int>& buffer, int64_t size, bool live_out) {
  if (size > alloc.size || alloc.constant || alloc.tuple || (alloc.param && !alloc.aliased)) return false;
  for (int assigned : alloc.values) {
    const Value& a = values_[static_cast<size_t>(assigned)];
    for (int v : buffer) {
      if (Interferes(v, assigned)) return false;
      const Value& nv = values_[static_cast<size_t>(v)];
      const HloInstruction& ni = Ins(nv.comp, nv.ins);
      if (ni.opcode != "copy" || nv.comp != a.comp) continue;
      // A copy never shares its operand's buffer.
      bool reads = std::find(ni.operands.begin(), ni.operands.end(), a.ins) != ni.operands.end();
      for (const auto& [c, i] : a.positions) {
        reads = reads || (c == nv.comp && std::find(ni.operands.begin(), ni.operands.end(), i) != ni.operands.end());
      }
      if (reads) return false;
    }
  }
  if (live_out && alloc.size != size) return false;
  alloc.values.insert(alloc.values.end(), buffer.begin(), buffer.end());
  alloc.live_out = alloc.live_out || live_out;
  return true;
}

// BufferAssigner::AssignBuffersForComputations / AssignSingleHloBuffer.
void BufferAssigner::Allocate(std::vector<Allocation>* allocs, std::vector<int>* heap) {
  std::map<int, std::vector<int>> by_root;
  for (size_t v = 0; v < values_.size(); ++v) by_root[Find(static_cast<int>(v))].push_back(static_cast<int>(v));
  struct Buffer {
    std::vector<int> values;
    int64_t size = 0, position = 0, id = 0;
    bool live_out = false;
  };
  std::vector<Buffer> buffers;
  // Post-order positions, the entry first (reverse post order of computations).
  std::map<int, int64_t> comp_rank;
  for (size_t k = 0; k < post_order_.size(); ++k) comp_rank[post_order_[post_order_.size() - 1 - k]] = static_cast<int64_t>(k);
  for (auto& [root, vs] : by_root) {
    Buffer b;
    b.values = vs;
    b.position = INT64_MAX;
    b.id = INT64_MAX;
    for (int v : vs) {
      const Value& x = values_[static_cast<size_t>(v)];
      b.size = std::max(b.size, x.size);
      b.live_out = b.live_out || x.live_out;
      b.position = std::min(b.position, comp_rank[x.comp] * (int64_t{1} << 32) + x.ins);
      b.id = std::min(b.id, x.id);
    }
    buffers.push_back(std::move(b));
  }
  std::sort(buffers.begin(), buffers.end(), [](const Buffer& a, const Buffer& b) {
    return std::make_tuple(-a.size, !a.live_out, a.position, a.id) < std::make_tuple(-b.size, !b.live_out, b.position, b.id);
  });
  std::vector<size_t> reusable;
  std::vector<int> alloc_of(values_.size(), -1);
  auto add = [&](Allocation a, const Buffer& b) {
    a.size = b.size;
    a.values = b.values;
    a.live_out = b.live_out;
    for (int v : b.values) alloc_of[static_cast<size_t>(v)] = static_cast<int>(allocs->size());
    allocs->push_back(std::move(a));
    return allocs->size() - 1;
  };
  auto try_in = [&](size_t a, const Buffer& b) {
    if (!MaybeAssign((*allocs)[a], b.values, b.size, b.live_out)) return false;
    for (int v : b.values) alloc_of[static_cast<size_t>(v)] = static_cast<int>(a);
    return true;
  };
  for (const Buffer& b : buffers) {
    Allocation a;
    int param = -1;
    bool tuple = false;
    for (int v : b.values) {
      const Value& x = values_[static_cast<size_t>(v)];
      const HloInstruction& ins = Ins(x.comp, x.ins);
      a.constant = a.constant || ins.opcode == "constant";
      if (ins.opcode == "parameter" && x.comp == m_.entry && param < 0) param = v;
      tuple = tuple || x.shape->tuple;
    }
    if (a.constant) {
      add(a, b);
      continue;
    }
    if (param >= 0) {
      const Value& x = values_[static_cast<size_t>(param)];
      a.param = true;
      for (const HloAlias& al : m_.aliases) {
        a.aliased = a.aliased || (al.parameter == Ins(x.comp, x.ins).parameter_number && al.parameter_index == x.index);
      }
      const size_t k = add(a, b);
      if (a.aliased) reusable.push_back(k);
      continue;
    }
    if (tuple) {
      a.tuple = true;
      add(a, b);
      continue;
    }
    bool done = false;
    for (size_t j = 0; j < b.values.size() && !done; ++j) {
      const Value& x = values_[static_cast<size_t>(b.values[j])];
      if (!x.index.empty()) continue;
      for (int o : Ins(x.comp, x.ins).operands) {
        const int u = Vs(x.comp, o).At({});
        if (u >= 0 && alloc_of[static_cast<size_t>(u)] >= 0 && try_in(static_cast<size_t>(alloc_of[static_cast<size_t>(u)]), b)) {
          done = true;
          break;
        }
      }
    }
    for (size_t k = reusable.size(); k-- > 0 && !done;) done = try_in(reusable[k], b);
    if (done) continue;
    if (!b.live_out) {
      heap->insert(heap->end(), b.values.begin(), b.values.end());
      continue;
    }
    reusable.push_back(add(a, b));
  }
}

CompiledHeapValue BufferAssigner::Describe(int v) const {
  const Value& x = values_[static_cast<size_t>(v)];
  const HloInstruction& ins = Ins(x.comp, x.ins);
  CompiledHeapValue d;
  d.instruction = ins.name;
  d.computation = Comp(x.comp).name;
  d.index = x.index.empty() ? "" : absl::StrCat("{", absl::StrJoin(x.index, ","), "}");
  d.shape = x.shape->ToString();
  const std::string& md = ins.attr("metadata");
  const size_t at = md.find("op_name=\"");
  if (at != std::string::npos) {
    const size_t end = md.find('"', at + 9);
    d.op_name = md.substr(at + 9, end == std::string::npos ? std::string::npos : end - at - 9);
  }
  d.size = Bytes(x.size);
  d.start = x.start;
  d.end = x.end;
  return d;
}

// HeapSimulator::RunComputation over the whole module, then the heap.
CompiledBufferAssignment BufferAssigner::Heap(const std::vector<int>& heap) {
  std::vector<int> order = heap;
  std::sort(order.begin(), order.end(), [&](int a, int b) {
    const Value& x = values_[static_cast<size_t>(a)];
    const Value& y = values_[static_cast<size_t>(b)];
    return std::tie(x.start, x.end, x.id) < std::tie(y.start, y.end, y.id);
  });
  std::vector<std::vector<int>> defined(static_cast<size_t>(end_time_) + 1), freed(static_cast<size_t>(end_time_) + 1);
  std::vector<bool> in_heap(values_.size(), false);
  std::map<int, int> buffer_values;
  for (size_t v = 0; v < values_.size(); ++v) ++buffer_values[Find(static_cast<int>(v))];
  std::map<int, int64_t> group_size;
  for (size_t v = 0; v < values_.size(); ++v) {
    const int b = Find(static_cast<int>(v));
    group_size[b] = std::max(group_size[b], values_[v].size);
  }
  for (int v : order) {
    const Value& x = values_[static_cast<size_t>(v)];
    if (group_size[Find(v)] == 0) continue;  // a 0-byte buffer sits at offset 0
    in_heap[static_cast<size_t>(v)] = true;
    defined[static_cast<size_t>(x.start)].push_back(v);
    freed[static_cast<size_t>(x.end)].push_back(v);
  }
  std::vector<ColocatedInterval> iv;
  std::vector<int> iv_value;
  std::vector<int64_t> iv_of(values_.size(), -1);
  std::map<int, int> first;
  int64_t event = 0;
  auto open = [&](int v, int64_t colocated_with) {
    iv_of[static_cast<size_t>(v)] = static_cast<int64_t>(iv.size());
    iv.push_back({Bytes(group_size[Find(v)]), event++, -1, colocated_with});
    iv_value.push_back(v);
  };
  for (int64_t t = 0; t <= end_time_; ++t) {
    for (int v : defined[static_cast<size_t>(t)]) {
      const int b = Find(v);
      if (first.count(b)) {
        open(v, iv_of[static_cast<size_t>(first[b])]);
        continue;
      }
      bool shared = false;
      const Value& x = values_[static_cast<size_t>(v)];
      const HloInstruction& ins = Ins(x.comp, x.ins);
      for (size_t k = 0; k < ins.operands.size() && !shared && buffer_values[b] == 1 && ins.opcode != "copy"; ++k) {
        const int u = Vs(x.comp, ins.operands[k]).At({});
        if (u < 0 || !in_heap[static_cast<size_t>(u)] || buffer_values[Find(u)] != 1) continue;
        Value& y = values_[static_cast<size_t>(u)];
        auto& f = freed[static_cast<size_t>(t)];
        if (y.end != t || std::find(f.begin(), f.end(), u) == f.end() || y.comp != x.comp ||
            y.ins != ins.operands[k] || !CanShare(y.comp, y.ins, y.index, x.comp, x.ins, x.index)) {
          continue;
        }
        iv[static_cast<size_t>(iv_of[static_cast<size_t>(u)])].end = event++;
        f.erase(std::find(f.begin(), f.end(), u));
        open(v, iv_of[static_cast<size_t>(u)]);
        y.end = x.end;
        shared = true;
      }
      if (!shared) {
        open(v, -1);
        first[b] = v;
      }
    }
    for (int v : freed[static_cast<size_t>(t)]) iv[static_cast<size_t>(iv_of[static_cast<size_t>(v)])].end = event++;
  }
  const ColocatedPlan plan = PackColocatedBestOf(iv, kXlaAllocatedBufferAlignBytes);
  CompiledBufferAssignment r;
  r.heap = plan.heap_size;
  r.heap_algorithm = plan.algorithm;
  r.heap_values = static_cast<int64_t>(iv.size());
  // The values live where the value reaching the heap's top is allocated.
  size_t top = 0;
  for (size_t k = 0; k < iv.size(); ++k) {
    if (plan.offsets[k] + iv[k].size > plan.offsets[top] + iv[top].size) top = k;
  }
  if (!iv.empty()) {
    const int64_t at = iv[top].start;
    std::vector<size_t> live;
    for (size_t k = 0; k < iv.size(); ++k) {
      if (iv[k].start <= at && at <= iv[k].end) live.push_back(k);
    }
    std::sort(live.begin(), live.end(), [&](size_t a, size_t b) { return plan.offsets[a] < plan.offsets[b]; });
    for (size_t k : live) {
      CompiledHeapValue d = Describe(iv_value[k]);
      d.offset = plan.offsets[k];
      r.at_peak.push_back(std::move(d));
    }
  }
  return r;
}

absl::StatusOr<CompiledBufferAssignment> BufferAssigner::Run() {
  const size_t n = m_.computations.size();
  vs_.resize(n);
  visited_.assign(n, 0);
  time_.resize(n);
  span_.assign(n, {0, 0});
  for (size_t c = 0; c < n; ++c) time_[c].assign(m_.computations[c].instructions.size(), 0);
  const HloComputation& entry = Comp(m_.entry);
  for (int p : entry.parameters) {
    if (Ins(m_.entry, p).shape.tuple) return Error(m_.entry, p, "a tuple-shaped entry parameter is not modelled");
  }
  RETURN_IF_ERROR(Visit(m_.entry));
  // XLA's value ids: computations callees first, each in instruction order.
  std::map<int, int64_t> rank;
  for (size_t k = 0; k < post_order_.size(); ++k) rank[post_order_[k]] = static_cast<int64_t>(k);
  std::vector<size_t> ids(values_.size());
  std::iota(ids.begin(), ids.end(), 0);
  std::stable_sort(ids.begin(), ids.end(), [&](size_t a, size_t b) {
    return std::make_pair(rank[values_[a].comp], values_[a].ins) < std::make_pair(rank[values_[b].comp], values_[b].ins);
  });
  for (size_t k = 0; k < ids.size(); ++k) values_[ids[k]].id = static_cast<int64_t>(k);
  RETURN_IF_ERROR(EntryAliases());
  Flatten(m_.entry);
  LiveRanges();
  NormalizeAliasedBuffers();
  std::vector<Allocation> allocs;
  std::vector<int> heap;
  Allocate(&allocs, &heap);
  CompiledBufferAssignment r = Heap(heap);
  r.schedule_length = end_time_;
  for (const Allocation& a : allocs) {
    if (a.param) r.argument += Bytes(a.size);
    if (a.param && a.aliased) r.alias += Bytes(a.size);
    if (a.live_out) r.output += Bytes(a.size);
    if (!a.param && !a.live_out && !a.constant) r.tuple_tables += Bytes(a.size);
  }
  r.temp = r.heap + r.tuple_tables;
  return r;
}

}  // namespace hlo_internal

absl::StatusOr<CompiledBufferAssignment> AssignCompiledBuffers(const HloModule& m) {
  if (!m.is_scheduled) {
    return absl::InvalidArgumentError(absl::StrCat(m.file, ": not a compiled module (no is_scheduled=true in its header)"));
  }
  hlo_internal::BufferAssigner a(m);
  return a.Run();
}
}  // namespace gpusim
