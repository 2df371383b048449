#include "sim/lower/xla/entry_schedule.h"

#include <algorithm>
#include <functional>
#include <limits>
#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "sim/lower/xla/donated_allocation.h"

namespace gpusim {
namespace {

// One instruction of the entry computation: an op, or a whole while loop.
struct Unit {
  std::vector<OpId> ops;
  bool is_while = false;
  std::string name;
  std::vector<int> preds;  // operand units, in operand order (ordering edges first)
  std::vector<int> succs;
};

// One HLO buffer of the entry computation.
struct Value {
  Bytes bytes;
  bool param = false;  // ignored by the List and DFS heuristics
  int def = -1;        // defining unit (-1: an entry parameter)
  bool to_end = false;  // live out of the computation
  std::set<int> readers;
};

class Scheduler {
 public:
  explicit Scheduler(const Program& p) : p_(p) {}

  void Build() {
    BuildUnits();
    BuildEdges();
    BuildValues();
    BodyPeaks();
  }

  std::vector<int> List() const;
  std::vector<int> Dfs() const;
  std::vector<int> PostOrder() const;
  Bytes Peak(const std::vector<int>& order) const;

  const std::vector<Unit>& units() const { return units_; }
  int unit_of(OpId op) const { return unit_of_[static_cast<size_t>(op)]; }

 private:
  void BuildUnits() {
    std::vector<int> region_of(p_.ops.size(), -1);
    for (size_t r = 0; r < p_.regions.size(); ++r) {
      const Region& reg = p_.regions[r];
      if (!reg.while_loop) continue;
      for (OpId o = reg.first; o <= reg.last && o < static_cast<OpId>(p_.ops.size()); ++o) {
        if (region_of[static_cast<size_t>(o)] < 0) region_of[static_cast<size_t>(o)] = static_cast<int>(r);
      }
    }
    unit_of_.assign(p_.ops.size(), -1);
    int open_region = -1;
    for (const Op& op : p_.ops) {
      const int r = region_of[static_cast<size_t>(op.id)];
      if (r < 0 || r != open_region) {
        Unit u;
        u.is_while = r >= 0;
        u.name = r >= 0 ? p_.regions[static_cast<size_t>(r)].name : op.name;
        units_.push_back(std::move(u));
        open_region = r;
      }
      units_.back().ops.push_back(op.id);
      unit_of_[static_cast<size_t>(op.id)] = static_cast<int>(units_.size()) - 1;
    }
  }

  void AddEdge(int from, int to, bool ordering) {
    if (from < 0 || from == to) return;
    Unit& u = units_[static_cast<size_t>(to)];
    if (std::find(u.preds.begin(), u.preds.end(), from) != u.preds.end()) return;
    if (ordering) {
      u.preds.insert(u.preds.begin() + ordering_preds_[static_cast<size_t>(to)]++, from);
    } else {
      u.preds.push_back(from);
    }
    units_[static_cast<size_t>(from)].succs.push_back(to);
  }

  // Data edges (producer → reader), in-place writes (an op without outputs
  // writes its first input: dynamic-update-slice, a copy to a host stack)
  // ordered against the other readers of that tensor, and control edges.
  void BuildEdges() {
    ordering_preds_.assign(units_.size(), 0);
    producer_.assign(p_.tensors.size(), -1);
    std::vector<int> last_writer(p_.tensors.size(), -1);
    std::vector<std::vector<int>> readers_since(p_.tensors.size());
    for (const Op& op : p_.ops) {
      const int u = unit_of(op.id);
      for (OpId dep : op.control_deps) {
        if (dep >= 0 && dep < static_cast<OpId>(p_.ops.size())) AddEdge(unit_of(dep), u, true);
      }
      for (size_t i = 0; i < op.inputs.size(); ++i) {
        const size_t t = static_cast<size_t>(op.inputs[i]);
        AddEdge(producer_[t], u, false);
        if (last_writer[t] >= 0) AddEdge(last_writer[t], u, true);
        const bool writes = i == 0 && op.outputs.empty();
        if (writes) {
          for (int r : readers_since[t]) AddEdge(r, u, true);
          readers_since[t].clear();
          last_writer[t] = u;
        } else {
          readers_since[t].push_back(u);
        }
      }
      for (TensorId t : op.outputs) producer_[static_cast<size_t>(t)] = u;
    }
  }

  void BuildValues() {
    TouchPositions();
    value_of_.assign(p_.tensors.size(), -1);
    std::map<TensorId, int> chain_value;  // donated parameter → its loop chain's buffer
    // Readers of every tensor, by unit.
    std::vector<std::set<int>> readers(p_.tensors.size());
    for (const Op& op : p_.ops) {
      for (TensorId t : op.inputs) readers[static_cast<size_t>(t)].insert(unit_of(op.id));
    }
    for (const Tensor& t : p_.tensors) {
      if (t.host) continue;
      const size_t ti = static_cast<size_t>(t.id);
      const int def = t.entry_parameter ? -1 : producer_[ti];
      std::set<int> outside = readers[ti];
      outside.erase(def);
      const bool internal = !t.entry_parameter && def >= 0 && units_[static_cast<size_t>(def)].is_while &&
                            outside.empty() && !t.live_out;
      if (internal) AddInternal(t, def);
      if (internal || (!t.entry_parameter && def < 0)) continue;
      // A version written outside any loop (AdamW's new moments and
      // parameters) is the parameter's buffer itself: input_output_alias
      // makes the output and the parameter one HloBuffer, and the copy
      // copy insertion puts between them is removed where the old value is
      // dead by then (RemoveUnnecessaryCopies), as it is when the kernel
      // that writes the new value is the old value's last reader. It adds
      // no bytes (the schedulers ignore parameters' buffers).
      const int param_value = t.aliases != kNoTensor ? value_of_[static_cast<size_t>(t.aliases)] : -1;
      if (!t.entry_parameter && param_value >= 0 && def >= 0 && !units_[static_cast<size_t>(def)].is_while &&
          !chain_value.count(t.aliases)) {
        values_[static_cast<size_t>(param_value)].readers.insert(outside.begin(), outside.end());
        value_of_[ti] = param_value;
        continue;
      }
      if (!t.entry_parameter && t.aliases != kNoTensor) {
        auto [it, fresh] = chain_value.emplace(t.aliases, static_cast<int>(values_.size()));
        if (fresh) {
          Value v;
          v.bytes = t.bytes();
          v.def = def;
          values_.push_back(v);
        }
        Value& v = values_[static_cast<size_t>(it->second)];
        v.def = std::min(v.def, def);
        v.to_end = v.to_end || t.live_out;
        v.readers.insert(outside.begin(), outside.end());
        value_of_[ti] = it->second;
        continue;
      }
      Value v;
      v.bytes = t.bytes();
      // A scalar made from nothing is an HLO constant: the heap simulator
      // ignores constants (HeapSimulator::IgnoreBuffer, heap_simulator.cc:517)
      // and so do the List and DFS heuristics (ListScheduler::IgnoreInstruction).
      if (def >= 0 && t.elements() <= 1 && p_.op(units_[static_cast<size_t>(def)].ops.front()).inputs.empty() &&
          !units_[static_cast<size_t>(def)].is_while) {
        continue;
      }
      v.param = t.entry_parameter;
      v.def = def;
      v.to_end = t.live_out;
      v.readers = outside;
      value_of_[ti] = static_cast<int>(values_.size());
      values_.push_back(v);
    }
    // A donated parameter shares its buffer with the output aliased to it.
    for (const Tensor& t : p_.tensors) {
      if (t.live_out && t.aliases != kNoTensor && value_of_[static_cast<size_t>(t.aliases)] >= 0) {
        values_[static_cast<size_t>(value_of_[static_cast<size_t>(t.aliases)])].to_end = true;
      }
    }
    defined_by_.assign(units_.size(), {});
    read_by_.assign(units_.size(), {});
    for (size_t v = 0; v < values_.size(); ++v) {
      if (values_[v].def >= 0) defined_by_[static_cast<size_t>(values_[v].def)].push_back(static_cast<int>(v));
      for (int r : values_[v].readers) read_by_[static_cast<size_t>(r)].push_back(static_cast<int>(v));
    }
  }

  // Note [Loop bodies in the schedule's peak]
  // DefaultMemoryScheduler compares its List, DFS and post-order schedules
  // of the module by HeapSimulator::MinimumMemoryForModule, one simulation
  // of the whole module in which a while body's values are live while the
  // loop runs (xla/hlo/transforms/simplifiers/hlo_memory_scheduler.cc,
  // openxla/xla 1c7545f1, DefaultMemoryScheduler::Run; HloLiveRange
  // flattens the body into the entry's sequence). So a schedule that keeps
  // a large value alive across a loop pays for it at the body's peak. The
  // body of a while unit keeps its order: its peak is the largest sum of
  // its own values (those neither read nor defined outside it) live at one
  // of its ops, added to what the entry holds at the while.
  void AddInternal(const Tensor& t, int unit) {
    const size_t ti = static_cast<size_t>(t.id);
    if (unit < 0 || first_at_[ti] < 0) return;
    std::vector<int64_t>& delta = internal_delta_[unit];
    if (delta.empty()) delta.assign(units_[static_cast<size_t>(unit)].ops.size() + 1, 0);
    delta[static_cast<size_t>(first_at_[ti])] += t.bytes().value();
    delta[static_cast<size_t>(last_at_[ti]) + 1] -= t.bytes().value();
  }

  // Each tensor's first and last op, as positions inside its op's unit.
  void TouchPositions() {
    first_at_.assign(p_.tensors.size(), -1);
    last_at_.assign(p_.tensors.size(), -1);
    for (const Unit& u : units_) {
      for (size_t k = 0; k < u.ops.size(); ++k) {
        const Op& op = p_.op(u.ops[k]);
        for (const std::vector<TensorId>* ts : {&op.inputs, &op.outputs}) {
          for (TensorId t : *ts) {
            const size_t ti = static_cast<size_t>(t);
            if (first_at_[ti] < 0) first_at_[ti] = static_cast<int64_t>(k);
            last_at_[ti] = static_cast<int64_t>(k);
          }
        }
      }
    }
  }

  // Computed once (Build), read by every Peak.
  void BodyPeaks() {
    body_peak_.assign(units_.size(), 0);
    for (const auto& [unit, delta] : internal_delta_) {
      int64_t cur = 0;
      for (int64_t d : delta) {
        cur += d;
        body_peak_[static_cast<size_t>(unit)] = std::max(body_peak_[static_cast<size_t>(unit)], cur);
      }
    }
  }
  int64_t BodyPeak(int unit) const { return body_peak_[static_cast<size_t>(unit)]; }

  bool ScalarUnit(int u) const {
    const Unit& unit = units_[static_cast<size_t>(u)];
    if (unit.is_while) return false;
    const Op& op = p_.op(unit.ops.front());
    if (op.outputs.empty()) return false;
    for (TensorId t : op.outputs) {
      if (p_.tensor(t).elements() > 1) return false;
    }
    return true;
  }

  Bytes Defined(int u) const {
    Bytes b(0);
    for (int v : defined_by_[static_cast<size_t>(u)]) b += values_[static_cast<size_t>(v)].bytes;
    return b;
  }

  const Program& p_;
  std::vector<Unit> units_;
  std::vector<int> unit_of_;
  std::vector<int> ordering_preds_;
  std::vector<int> producer_;  // per tensor: defining unit
  std::vector<Value> values_;
  std::vector<int> value_of_;
  std::vector<std::vector<int>> defined_by_, read_by_;
  std::map<int, std::vector<int64_t>> internal_delta_;  // while unit -> its body's live-bytes steps
  std::vector<int64_t> first_at_, last_at_;              // per tensor: positions in its unit
  std::vector<int64_t> body_peak_;                       // per unit
};

std::vector<int> Scheduler::List() const {
  const size_t n = units_.size();
  std::vector<int> pending(n);
  for (size_t u = 0; u < n; ++u) pending[u] = static_cast<int>(units_[u].preds.size());
  std::vector<int> uses(values_.size());
  for (size_t v = 0; v < values_.size(); ++v) {
    uses[v] = static_cast<int>(values_[v].readers.size()) + (values_[v].to_end ? 1 : 0);
  }
  struct Ready {
    int unit;
    int64_t seq;
  };
  std::vector<Ready> ready;
  int64_t seq = 0;
  for (size_t u = 0; u < n; ++u) {
    if (pending[u] == 0) ready.push_back({static_cast<int>(u), seq++});
  }
  using Priority = std::pair<int64_t, int64_t>;
  auto priority = [&](int u) -> Priority {
    if (ScalarUnit(u)) return {std::numeric_limits<int64_t>::max(), std::numeric_limits<int64_t>::max()};
    int64_t freed = 0;
    for (int v : read_by_[static_cast<size_t>(u)]) {
      const Value& val = values_[static_cast<size_t>(v)];
      if (!val.param && uses[static_cast<size_t>(v)] == 1) freed += val.bytes.value();
    }
    int64_t defined = 0;
    for (int v : defined_by_[static_cast<size_t>(u)]) defined += values_[static_cast<size_t>(v)].bytes.value();
    return {freed - defined, static_cast<int64_t>(units_[static_cast<size_t>(u)].succs.size())};
  };
  std::vector<int> order;
  order.reserve(n);
  while (!ready.empty()) {
    size_t best = 0;
    Priority best_p = priority(ready[0].unit);
    for (size_t i = 1; i < ready.size(); ++i) {
      const Priority pi = priority(ready[i].unit);
      if (pi > best_p || (pi == best_p && ready[i].seq > ready[best].seq)) {
        best = i;
        best_p = pi;
      }
    }
    const int u = ready[best].unit;
    ready.erase(ready.begin() + static_cast<std::ptrdiff_t>(best));
    order.push_back(u);
    for (int v : read_by_[static_cast<size_t>(u)]) --uses[static_cast<size_t>(v)];
    for (int s : units_[static_cast<size_t>(u)].succs) {
      if (--pending[static_cast<size_t>(s)] == 0) ready.push_back({s, seq++});
    }
  }
  return order;
}

std::vector<int> Scheduler::Dfs() const {
  const size_t n = units_.size();
  std::vector<int64_t> extra_users(n, 0), total_sizes(n, 0);
  int64_t cumulative = 0;
  // Units are in a topological order already (program order).
  for (size_t u = 0; u < n; ++u) {
    const Unit& unit = units_[u];
    extra_users[u] = unit.succs.empty() ? 0 : static_cast<int64_t>(unit.succs.size()) - 1;
    const int64_t own = Defined(static_cast<int>(u)).value();
    cumulative += own;
    total_sizes[u] = own;
    for (int pr : std::set<int>(unit.preds.begin(), unit.preds.end())) {
      extra_users[u] += extra_users[static_cast<size_t>(pr)];
      total_sizes[u] += total_sizes[static_cast<size_t>(pr)];
    }
    total_sizes[u] = std::min(total_sizes[u], cumulative);
    extra_users[u] = std::min<int64_t>(extra_users[u], static_cast<int64_t>(n));
  }
  auto before = [&](int a, int b) {
    if (extra_users[static_cast<size_t>(a)] != extra_users[static_cast<size_t>(b)]) {
      return extra_users[static_cast<size_t>(a)] > extra_users[static_cast<size_t>(b)];
    }
    if (total_sizes[static_cast<size_t>(a)] != total_sizes[static_cast<size_t>(b)]) {
      return total_sizes[static_cast<size_t>(a)] > total_sizes[static_cast<size_t>(b)];
    }
    const std::string &na = units_[static_cast<size_t>(a)].name, &nb = units_[static_cast<size_t>(b)].name;
    return na != nb ? na < nb : a < b;
  };
  std::vector<int> roots;
  for (size_t u = 0; u < n; ++u) {
    if (units_[u].succs.empty()) roots.push_back(static_cast<int>(u));
  }
  std::sort(roots.begin(), roots.end(), before);
  std::vector<char> state(n, 0);
  std::vector<int> order;
  order.reserve(n);
  // Iterative post-order DFS, operands in `before` order.
  for (int root : roots) {
    std::vector<std::pair<int, size_t>> stack;
    if (state[static_cast<size_t>(root)]) continue;
    auto sorted_preds = [&](int u) {
      std::vector<int> k(units_[static_cast<size_t>(u)].preds.begin(), units_[static_cast<size_t>(u)].preds.end());
      std::sort(k.begin(), k.end(), before);
      return k;
    };
    std::map<int, std::vector<int>> cache;
    stack.push_back({root, 0});
    state[static_cast<size_t>(root)] = 1;
    cache[root] = sorted_preds(root);
    while (!stack.empty()) {
      auto& [u, i] = stack.back();
      const std::vector<int>& k = cache[u];
      if (i < k.size()) {
        const int c = k[i++];
        if (!state[static_cast<size_t>(c)]) {
          state[static_cast<size_t>(c)] = 1;
          cache[c] = sorted_preds(c);
          stack.push_back({c, 0});
        }
        continue;
      }
      order.push_back(u);
      cache.erase(u);
      stack.pop_back();
    }
  }
  return order;
}

std::vector<int> Scheduler::PostOrder() const {
  const size_t n = units_.size();
  std::vector<char> state(n, 0);  // 0 new, 1 visiting, 2 visited
  std::vector<int> order;
  order.reserve(n);
  for (size_t root = 0; root < n; ++root) {
    if (!units_[root].succs.empty() || state[root]) continue;
    std::vector<int> stack = {static_cast<int>(root)};
    while (!stack.empty()) {
      const int u = stack.back();
      if (state[static_cast<size_t>(u)] == 0) {
        state[static_cast<size_t>(u)] = 1;
      } else {
        stack.pop_back();
        if (state[static_cast<size_t>(u)] != 2) {
          state[static_cast<size_t>(u)] = 2;
          order.push_back(u);
        }
        continue;
      }
      // Operands reversed so that the first is processed first; ordering
      // (control) predecessors pushed last, so processed before them.
      const Unit& unit = units_[static_cast<size_t>(u)];
      for (auto it = unit.preds.rbegin(); it != unit.preds.rend(); ++it) {
        if (state[static_cast<size_t>(*it)] != 2) stack.push_back(*it);
      }
    }
  }
  return order;
}

Bytes Scheduler::Peak(const std::vector<int>& order) const {
  std::vector<int> pos(units_.size());
  for (size_t i = 0; i < order.size(); ++i) pos[static_cast<size_t>(order[i])] = static_cast<int>(i);
  const int n = static_cast<int>(order.size());
  std::vector<int64_t> delta(static_cast<size_t>(n) + 2, 0);
  for (const Value& v : values_) {
    const int start = v.def < 0 ? 0 : pos[static_cast<size_t>(v.def)];
    int end = start;
    for (int r : v.readers) end = std::max(end, pos[static_cast<size_t>(r)]);
    if (v.to_end) end = n - 1;
    delta[static_cast<size_t>(start)] += v.bytes.value();
    delta[static_cast<size_t>(end) + 1] -= v.bytes.value();
  }
  int64_t cur = 0, peak = 0;
  for (int i = 0; i < n; ++i) {
    cur += delta[static_cast<size_t>(i)];
    // Note [Loop bodies in the schedule's peak].
    peak = std::max(peak, cur + BodyPeak(order[static_cast<size_t>(i)]));
  }
  return Bytes(peak);
}

// Rewrites p's ops in the order of `units`.
void Reorder(Program& p, const Scheduler& s, const std::vector<int>& order) {
  std::vector<OpId> new_id(p.ops.size(), -1);
  std::vector<Op> ops;
  ops.reserve(p.ops.size());
  for (int u : order) {
    for (OpId o : s.units()[static_cast<size_t>(u)].ops) {
      new_id[static_cast<size_t>(o)] = static_cast<OpId>(ops.size());
      ops.push_back(std::move(p.ops[static_cast<size_t>(o)]));
    }
  }
  for (Op& op : ops) {
    op.id = new_id[static_cast<size_t>(op.id)];
    for (OpId& d : op.control_deps) d = new_id[static_cast<size_t>(d)];
  }
  p.ops = std::move(ops);
  for (Region& r : p.regions) {
    if (r.last < r.first) continue;
    OpId lo = std::numeric_limits<OpId>::max(), hi = -1;
    for (OpId o = r.first; o <= r.last && o < static_cast<OpId>(new_id.size()); ++o) {
      lo = std::min(lo, new_id[static_cast<size_t>(o)]);
      hi = std::max(hi, new_id[static_cast<size_t>(o)]);
    }
    r.first = lo;
    r.last = hi;
  }
}

}  // namespace

std::string EntrySchedule::Describe() const {
  if (chosen == "compiled") return "entry schedule: the compiled module's own (is_scheduled=true), kept as printed";
  if (chosen == "program order") {
    return absl::StrCat("entry schedule: program order (no while loop; ", units,
                        " entry instructions not rescheduled: Note [Entry schedule])");
  }
  return absl::StrCat("entry schedule: list (peak ", FormatBytes(list_peak), "), dfs (", FormatBytes(dfs_peak),
                      "), post-order (", FormatBytes(post_order_peak), "); chose ", chosen, " (", units,
                      " entry instructions, a while counted once)");
}

absl::StatusOr<EntrySchedule> ScheduleEntry(Program& p) {
  EntrySchedule out;
  if (p.ops.empty()) {
    out.chosen = "list";
    return out;
  }
  Scheduler s(p);
  s.Build();
  // Note [Entry schedule], scope: only an entry computation around while
  // loops is rescheduled. Without one, gpusim's op IR is the whole program
  // and the three peaks differ by bytes the op IR does not model as HLO
  // does (fusions, constants, broadcasts), so program order (a post-order)
  // is kept. Checked on validation/h200_2026-12-04's unrolled 4-layer step:
  // what XLA's sequence does early that JAX's program order does late (each
  // layer's norm-weight gradient) is a fusion decision, not an order (Note
  // [Sibling multi-output fusion], hlo_multi_output.h), and with it program
  // order is within 0.2% of memory_analysis(); the three schedulers over
  // gpusim's op IR choose List there, 21% above it (they place the
  // weight-gradient dots and the barrier's f32 weight slices early, which
  // XLA's List over its own fusions does not).
  if (std::none_of(s.units().begin(), s.units().end(), [](const Unit& u) { return u.is_while; })) {
    out.chosen = "program order";
    out.units = static_cast<int64_t>(s.units().size());
    return out;
  }
  const std::vector<int> list = s.List(), dfs = s.Dfs(), post = s.PostOrder();
  if (list.size() != s.units().size() || dfs.size() != s.units().size() || post.size() != s.units().size()) {
    return absl::InternalError("entry schedule: the op graph has a cycle");
  }
  out.units = static_cast<int64_t>(s.units().size());
  out.list_peak = s.Peak(list);
  out.dfs_peak = s.Peak(dfs);
  out.post_order_peak = s.Peak(post);
  const Bytes best = Min(out.list_peak, Min(out.dfs_peak, out.post_order_peak));
  const std::vector<int>* chosen = &list;
  out.chosen = "list";
  if (best != out.list_peak) {
    chosen = best == out.dfs_peak ? &dfs : &post;
    out.chosen = best == out.dfs_peak ? "dfs" : "post-order";
  }
  Reorder(p, s, *chosen);
  ElideDonatedCopies(p, &out.decisions);
  return out;
}

}  // namespace gpusim
