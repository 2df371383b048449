#include "sim/lower/xla/donated_allocation.h"

#include <algorithm>
#include <functional>
#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "sim/base/units.h"

namespace gpusim {
namespace {

// Built once and kept up to date as root copies are appended (one full scan
// per donated chain made the pass quadratic in the layer count).
struct Ranges {
  std::vector<OpId> producer, last_use;
  std::vector<std::vector<OpId>> writers;  // every op that writes t, in op order
  explicit Ranges(const Program& p) {
    for (const Op& op : p.ops) Add(p, op);
  }
  // REQUIRES: op is the last op of p.
  void Add(const Program& p, const Op& op) {
    producer.resize(p.tensors.size(), -1);
    last_use.resize(p.tensors.size(), -1);
    writers.resize(p.tensors.size());
    for (TensorId t : op.inputs) last_use[static_cast<size_t>(t)] = op.id;
    for (TensorId t : op.outputs) {
      producer[static_cast<size_t>(t)] = op.id;
      writers[static_cast<size_t>(t)].push_back(op.id);
    }
  }
  // The last op that touches t (its producer when unread).
  OpId end(TensorId t) const {
    return std::max(last_use[static_cast<size_t>(t)], producer[static_cast<size_t>(t)]);
  }
};


// Note [Donated allocation]: the donated chain's final value, displaced
// into a buffer of its own, is returned through a root copy into the
// donated parameter `param`, appended as the program's last op. Returns the
// copy's op.
OpId AppendRootCopy(Program& p, Ranges& r, TensorId param, TensorId final_value, std::string* decision) {
  const std::string pname = p.tensor(param).name;
  Tensor& fv = p.tensors[static_cast<size_t>(final_value)];
  const std::string out_name = fv.name;
  fv.live_out = false;
  fv.name = absl::StrCat(out_name, ".loop_value");
  Tensor out = fv;
  out.id = static_cast<TensorId>(p.tensors.size());
  out.name = out_name;
  out.live_out = true;
  out.aliases = param;
  out.origin = absl::StrCat(out_name, " (output): root copy into the donated `", pname,
                            "`, kept by the post-scheduling copy elision (Note [Donated allocation])");
  // diff sums it with the values of its kind, where the final value had one.
  if (out.origin_kind.empty()) out.origin_kind = absl::StrCat(out_name, " (output)");
  const Phase phase = p.op(r.producer[static_cast<size_t>(final_value)]).phase;
  p.tensors.push_back(out);
  Op copy;
  copy.id = static_cast<OpId>(p.ops.size());
  copy.name = absl::StrCat("root_copy.", out_name);
  copy.kind = OpKind::kCopy;
  copy.inputs = {final_value};
  copy.outputs = {out.id};
  copy.bytes_read = out.bytes();
  copy.bytes_written = out.bytes();
  copy.dtype = out.dtype;
  copy.phase = phase;
  p.ops.push_back(copy);
  r.Add(p, p.ops.back());
  absl::StrAppend(decision, "; the root copy `", copy.name, "` into `", pname, "` stays");
  return copy.id;
}

// The idle window of the donated `param`'s allocation: after the last
// reader of what it held (`held_until`), before `window_end`. The largest
// temps that fit in it, pairwise disjoint in time, are placed there.
void PlaceInIdleWindow(Program& p, const Ranges& after, TensorId param, const std::set<TensorId>& loop_state,
                       OpId held_until, OpId window_end, std::string* decision) {
  const Tensor& dst = p.tensor(param);
  const std::string pname = dst.name;
  const Bytes pbytes = dst.bytes();
  std::vector<TensorId> candidates;
  for (const Tensor& t : p.tensors) {
    if (t.entry_parameter || t.live_out || t.host || t.aliases != kNoTensor || t.bytes() > pbytes ||
        loop_state.count(t.id)) {
      continue;
    }
    const OpId def = after.producer[static_cast<size_t>(t.id)];
    if (def <= held_until || after.end(t.id) >= window_end) continue;
    candidates.push_back(t.id);
  }
  std::stable_sort(candidates.begin(), candidates.end(),
                   [&](TensorId a, TensorId b) { return p.tensor(a).bytes() > p.tensor(b).bytes(); });
  std::vector<std::pair<OpId, OpId>> taken;
  std::vector<std::string> placed;
  Bytes placed_bytes(0);
  for (TensorId c : candidates) {
    const OpId lo = after.producer[static_cast<size_t>(c)], hi = after.end(c);
    const bool overlaps = std::any_of(taken.begin(), taken.end(), [&](const std::pair<OpId, OpId>& iv) {
      return lo <= iv.second && iv.first <= hi;
    });
    if (overlaps) continue;
    taken.push_back({lo, hi});
    Tensor& t = p.tensors[static_cast<size_t>(c)];
    t.aliases = param;
    t.origin = absl::StrCat(t.origin, "; placed in the idle allocation of the donated `", pname,
                            "` (buffer_assignment.cc, Note [Donated allocation])");
    placed.push_back(t.name);
    placed_bytes += t.bytes();
  }
  absl::StrAppend(decision, "; `", pname, "`'s allocation is idle from op ", held_until, " to op ", window_end,
                  placed.empty() ? " and holds no temp" : absl::StrCat(" and holds ", placed.size(), " temp(s), ",
                                                                       FormatBytes(placed_bytes), ": ",
                                                                       absl::StrJoin(placed, ", ")));
}

}  // namespace

void ElideDonatedCopies(Program& p, std::vector<std::string>* decisions) {
  std::map<TensorId, std::vector<TensorId>> chains;
  std::set<TensorId> loop_state;  // values of a donated chain: one loop-state buffer each, never window temps
  for (const Tensor& t : p.tensors) {
    if (!t.entry_parameter && t.aliases != kNoTensor) {
      chains[t.aliases].push_back(t.id);
      loop_state.insert(t.id);
    }
  }
  Ranges r(p);
  for (auto& [param_key, members] : chains) {
    // A copy: clang 14 lambdas cannot capture a structured binding.
    const TensorId param = param_key;
    std::sort(members.begin(), members.end(), [&](TensorId a, TensorId b) {
      return r.producer[static_cast<size_t>(a)] < r.producer[static_cast<size_t>(b)];
    });
    // Segments: values connected by ops that read one and write the next
    // (a loop state and its in-place updates), the parameter's first.
    std::map<TensorId, TensorId> root_of;
    std::function<TensorId(TensorId)> find = [&](TensorId t) {
      auto it = root_of.find(t);
      if (it == root_of.end() || it->second == t) return t;
      return it->second = find(it->second);
    };
    std::set<TensorId> in_chain(members.begin(), members.end());
    in_chain.insert(param);
    // The ops that write a chain value, in program order (the only ops that
    // join segments).
    std::vector<OpId> chain_writers;
    for (TensorId t : in_chain) {
      const auto& w = r.writers[static_cast<size_t>(t)];
      chain_writers.insert(chain_writers.end(), w.begin(), w.end());
    }
    std::sort(chain_writers.begin(), chain_writers.end());
    chain_writers.erase(std::unique(chain_writers.begin(), chain_writers.end()), chain_writers.end());
    for (OpId id : chain_writers) {
      const Op& op = p.op(id);
      for (TensorId out : op.outputs) {
        if (!in_chain.count(out)) continue;
        for (TensorId in : op.inputs) {
          if (in_chain.count(in)) root_of[find(out)] = find(in);
        }
      }
    }
    std::map<TensorId, std::vector<TensorId>> segments;  // root → members in write order
    for (TensorId m : members) segments[find(m)].push_back(m);
    std::vector<std::vector<TensorId>> order;
    for (auto& [root, seg] : segments) order.push_back(seg);
    auto first_write = [&](const std::vector<TensorId>& seg) {
      return find(seg.front()) == find(param) ? OpId{-1} : r.producer[static_cast<size_t>(seg.front())];
    };
    std::stable_sort(order.begin(), order.end(), [&](const auto& a, const auto& b) {
      return first_write(a) < first_write(b);
    });
    OpId held_until = r.last_use[static_cast<size_t>(param)];
    TensorId held_by = param;
    std::vector<TensorId> displaced;
    for (const std::vector<TensorId>& seg : order) {
      if (first_write(seg) >= 0 && first_write(seg) < held_until) {
        displaced.insert(displaced.end(), seg.begin(), seg.end());
        continue;
      }
      for (TensorId m : seg) {
        if (r.end(m) >= held_until) held_by = m;
        held_until = std::max(held_until, r.end(m));
      }
    }
    if (displaced.empty()) continue;
    const std::string pname = p.tensor(param).name;
    const TensorId first = displaced.front();
    const OpId first_write_op = r.producer[static_cast<size_t>(first)];
    std::string decision = absl::StrCat("donated `", pname, "`: `", p.tensor(first).name, "` is written at op ",
                                        first_write_op, " (", p.op(first_write_op).name, ") while `",
                                        p.tensor(held_by).name, "` in that buffer is read until op ", held_until,
                                        " (", p.op(held_until).name, "): it and the ", displaced.size() - 1,
                                        " value(s) of its loop chain keep a buffer of their own");
    TensorId final_value = kNoTensor;
    for (TensorId d : displaced) {
      Tensor& m = p.tensors[static_cast<size_t>(d)];
      m.aliases = kNoTensor;
      m.origin = absl::StrCat(m.name, ": loop state of the chain returned in the donated `", p.tensor(param).name,
                              "`, in a buffer of its own: the entry schedule writes it while that allocation is "
                              "still read (Note [Donated allocation])");
      if (m.origin_kind.empty()) m.origin_kind = m.name;  // a kind of its own, unless its builder gave one
      if (m.live_out) final_value = m.id;
    }
    OpId window_end = static_cast<OpId>(p.ops.size());
    if (final_value != kNoTensor) window_end = AppendRootCopy(p, r, param, final_value, &decision);
    PlaceInIdleWindow(p, r, param, loop_state, held_until, window_end, &decision);
    decisions->push_back(decision);
  }
}

}  // namespace gpusim
