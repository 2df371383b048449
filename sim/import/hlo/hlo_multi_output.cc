#include "sim/import/hlo/hlo_multi_output.h"

#include <algorithm>
#include <vector>

namespace gpusim {
namespace hlo_internal {
namespace {

// The innermost loop region holding op `id`, or -1.
int LoopOf(const Program& p, OpId id) {
  int best = -1;
  for (size_t r = 0; r < p.regions.size(); ++r) {
    const Region& g = p.regions[r];
    if (g.kind != "loop" || id < g.first || id > g.last) continue;
    if (best < 0 || g.last - g.first < p.regions[static_cast<size_t>(best)].last -
                                           p.regions[static_cast<size_t>(best)].first) {
      best = static_cast<int>(r);
    }
  }
  return best;
}

bool Reads(const Op& op, TensorId t) { return std::find(op.inputs.begin(), op.inputs.end(), t) != op.inputs.end(); }

// Drops the ops marked `removed` (each merged into `merged_into`), then
// renumbers ops, control dependencies (a dependency on a merged op becomes
// one on the op it was merged into) and regions.
void RemoveMerged(Program* p, const std::vector<bool>& removed, const std::vector<OpId>& merged_into) {
  std::vector<OpId> new_id(p->ops.size(), -1);
  std::vector<Op> ops;
  for (size_t i = 0; i < p->ops.size(); ++i) {
    if (removed[i]) continue;
    new_id[i] = static_cast<OpId>(ops.size());
    ops.push_back(std::move(p->ops[i]));
  }
  auto resolve = [&](OpId id) {
    while (id >= 0 && removed[static_cast<size_t>(id)]) id = merged_into[static_cast<size_t>(id)];
    return id < 0 ? id : new_id[static_cast<size_t>(id)];
  };
  for (Op& op : ops) {
    op.id = static_cast<OpId>(&op - ops.data());
    std::vector<OpId> deps;
    for (OpId d : op.control_deps) {
      const OpId n = resolve(d);
      if (n >= 0 && n != op.id && std::find(deps.begin(), deps.end(), n) == deps.end()) deps.push_back(n);
    }
    op.control_deps = std::move(deps);
  }
  for (Region& r : p->regions) {
    OpId first = r.first, last = r.last;
    while (first <= last && removed[static_cast<size_t>(first)]) ++first;
    while (last >= first && removed[static_cast<size_t>(last)]) --last;
    r.first = first <= last ? new_id[static_cast<size_t>(first)] : 0;
    r.last = first <= last ? new_id[static_cast<size_t>(last)] : -1;
  }
  p->regions.erase(std::remove_if(p->regions.begin(), p->regions.end(), [](const Region& r) { return r.last < r.first; }),
                   p->regions.end());
  p->ops = std::move(ops);
}

}  // namespace

void FuseLiveOutProducers(Program* p, const std::set<OpId>& candidates) {
  std::vector<bool> removed(p->ops.size(), false);
  std::vector<OpId> merged_into(p->ops.size(), -1);
  for (OpId a : candidates) {
    Op& prod = p->ops[static_cast<size_t>(a)];
    if (prod.kind != OpKind::kElementwise || prod.outputs.empty()) continue;
    // One consumer reads the producer's outputs (an earlier merge may have
    // given it several); the result tuple reads only pointers.
    OpId consumer = -1;
    bool ok = true;
    for (size_t b = static_cast<size_t>(a) + 1; b < p->ops.size() && ok; ++b) {
      const Op& op = p->ops[b];
      if (removed[b] || op.name == "output tuple") continue;
      bool reads = false;
      for (TensorId t : prod.outputs) reads = reads || Reads(op, t);
      if (!reads) continue;
      if (consumer >= 0) ok = false;
      consumer = static_cast<OpId>(b);
    }
    if (!ok || consumer < 0) continue;
    Op& cons = p->ops[static_cast<size_t>(consumer)];
    if ((cons.kind != OpKind::kElementwise && cons.kind != OpKind::kReduce) || cons.phase != prod.phase ||
        LoopOf(*p, a) != LoopOf(*p, consumer)) {
      continue;
    }
    // The consumer reads the producer's inputs (each once) instead of its outputs.
    auto produced = [&](TensorId u) {
      return std::find(prod.outputs.begin(), prod.outputs.end(), u) != prod.outputs.end();
    };
    Bytes read = cons.bytes_read;
    std::vector<TensorId> inputs;
    for (TensorId u : cons.inputs) {
      if (produced(u)) {
        read -= Min(read, p->tensor(u).bytes());
      } else {
        inputs.push_back(u);
      }
    }
    Bytes shared(0);
    for (TensorId u : prod.inputs) {
      if (std::find(inputs.begin(), inputs.end(), u) != inputs.end()) {
        shared += p->tensor(u).bytes();
      } else {
        inputs.push_back(u);
      }
    }
    read += prod.bytes_read - Min(prod.bytes_read, shared);
    cons.inputs = std::move(inputs);
    for (TensorId t : prod.outputs) cons.outputs.push_back(t);
    cons.bytes_read = read;
    cons.bytes_written += prod.bytes_written;
    cons.flops += prod.flops;
    for (OpId d : prod.control_deps) cons.control_deps.push_back(d);
    removed[static_cast<size_t>(a)] = true;
    merged_into[static_cast<size_t>(a)] = consumer;
  }
  RemoveMerged(p, removed, merged_into);
}

// Note [Sibling multi-output fusion]
void FuseReductionSiblings(Program* p, const std::set<TensorId>& not_loop_fusions) {
  const size_t n = p->ops.size();
  // The last op writing each tensor (its producer, or an in-place writer).
  std::vector<OpId> last_write(p->tensors.size(), -1);
  for (const Op& op : p->ops) {
    for (TensorId t : op.outputs) last_write[static_cast<size_t>(t)] = op.id;
    if (op.outputs.empty() && !op.inputs.empty()) last_write[static_cast<size_t>(op.inputs[0])] = op.id;
  }
  auto elements = [&](TensorId t) { return p->tensor(t).elements(); };
  // The reduce's hero: its largest operand (the array it reduces).
  auto hero = [&](const Op& r) {
    int64_t e = 0;
    for (TensorId t : r.inputs) e = std::max(e, elements(t));
    return e;
  };
  std::vector<bool> removed(n, false);
  std::vector<OpId> merged_into(n, -1);
  std::vector<int> loop(n);
  for (size_t i = 0; i < n; ++i) loop[i] = LoopOf(*p, static_cast<OpId>(i));
  // The reduce ops outside loops reading each non-scalar tensor, in order
  // (a loop fusion looks only at the reduces of its own operands).
  std::vector<std::vector<OpId>> reduce_readers(p->tensors.size());
  for (const Op& r : p->ops) {
    if (loop[static_cast<size_t>(r.id)] >= 0 || r.kind != OpKind::kReduce || r.outputs.empty()) continue;
    for (TensorId t : r.inputs) {
      if (elements(t) > 1) reduce_readers[static_cast<size_t>(t)].push_back(r.id);
    }
  }
  for (size_t a = 0; a < n; ++a) {
    Op& s = p->ops[a];
    if (removed[a] || loop[a] >= 0 || s.kind != OpKind::kElementwise || s.outputs.empty() ||
        std::any_of(s.outputs.begin(), s.outputs.end(), [&](TensorId t) { return not_loop_fusions.count(t) > 0; })) {
      continue;
    }
    const int64_t shape = elements(s.outputs[0]);
    // Later reduces sharing an operand that is not an effective scalar
    // (IsProfitableOperand), in op order.
    std::set<OpId> siblings;
    for (TensorId t : s.inputs) {
      for (OpId b : reduce_readers[static_cast<size_t>(t)]) {
        if (b > static_cast<OpId>(a)) siblings.insert(b);
      }
    }
    for (OpId b : siblings) {
      const Op& r = p->ops[static_cast<size_t>(b)];
      if (removed[static_cast<size_t>(b)] || hero(r) != shape) continue;
      // Not connected: everything the reduce reads is written before the
      // loop fusion runs, so the fusion can compute both.
      bool ready = true;
      for (TensorId t : r.inputs) ready = ready && last_write[static_cast<size_t>(t)] < static_cast<OpId>(a);
      for (OpId d : r.control_deps) ready = ready && d < static_cast<OpId>(a);
      if (!ready) continue;
      Bytes read = s.bytes_read + r.bytes_read;
      for (TensorId t : r.inputs) {
        if (Reads(s, t)) {
          read -= Min(read, p->tensor(t).bytes());
        } else {
          s.inputs.push_back(t);
        }
      }
      s.bytes_read = read;
      s.bytes_written += r.bytes_written;
      s.flops += r.flops;
      for (TensorId t : r.outputs) {
        s.outputs.push_back(t);
        last_write[static_cast<size_t>(t)] = static_cast<OpId>(a);
      }
      for (OpId d : r.control_deps) s.control_deps.push_back(d);
      s.kind = OpKind::kReduce;  // MergeFusionInstructionIntoMultiOutput: an input (reduction) fusion
      removed[static_cast<size_t>(b)] = true;
      merged_into[static_cast<size_t>(b)] = static_cast<OpId>(a);
    }
  }
  RemoveMerged(p, removed, merged_into);
}

}  // namespace hlo_internal
}  // namespace gpusim
