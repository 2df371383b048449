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
  // Renumber: ops, control dependencies, regions.
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

}  // namespace hlo_internal
}  // namespace gpusim
