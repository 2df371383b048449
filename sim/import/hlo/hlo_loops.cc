#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "sim/base/checked.h"
#include "sim/base/status.h"
#include "sim/import/hlo/hlo_importer.h"
#include "sim/import/hlo/hlo_op_cost.h"

namespace gpusim {
namespace hlo_internal {

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
      // Exact in 128 bits: start = INT64_MIN or limit = INT64_MAX wrapped
      // `limit - start` and `span + step - 1` in int64, so a loop vanished
      // (0 trips) or slipped under the cap (negative; issue 27).
      const __int128 span = static_cast<__int128>(limit) - start + (dir == "LE" ? 1 : 0);
      if (span <= 0) return 0;
      const __int128 trips = (span + step - 1) / step;
      if (trips > kMaxExpandedIterations) {
        return Error(ins, absl::StrCat("the induction variable runs from ", start, " to ", limit, " (", dir, ") by ",
                                       step, ": more than ", kMaxExpandedIterations,
                                       " trips, more than the importer expands (Note [Bounded expansion] in "
                                       "sim/base/checked.h)"));
      }
      return static_cast<int64_t>(trips);
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
  // Every iteration is built, so the iterations bound the IR: at most
  // kMaxExpandedIterations in all, over every loop at every depth (Note
  // [Bounded expansion] in sim/base/checked.h), checked before this loop's
  // are built. An inner loop is reached once per outer trip, and each time
  // its trips count again: nested loops count as their product.
  if (trips > kMaxExpandedIterations - expanded_iterations_) {
    return Error(ins, absl::StrCat("trip count ", trips, " with ", expanded_iterations_,
                                   " iterations expanded before it (in all loops, nested ones once per enclosing "
                                   "trip) is more than the importer expands: at most ", kMaxExpandedIterations,
                                   " in all (Note [Bounded expansion] in sim/base/checked.h)"));
  }
  expanded_iterations_ += trips;
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
  b_.BeginRegion(absl::StrCat("while ", ins.name, " (", trips, " trips)"), "loop", /*while_loop=*/depth_ == 1);
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
    // After every output, reading none of their bytes (Note [Entry result tuple]).
    Op& op = Emit("output tuple", OpKind::kCopy, phase, std::vector<TensorId>(returned.begin(), returned.end()),
                  {table}, 0);
    op.bytes_read = Bytes(0);
    op.bytes_written = Bytes(0);
  }
  return absl::OkStatus();
}


}  // namespace hlo_internal
}  // namespace gpusim
