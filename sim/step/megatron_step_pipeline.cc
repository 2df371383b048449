// See megatron_step_pipeline.h.
//
// Note [Megatron pipeline in time]
// megatron/core/pipeline_parallel/schedules.py runs each rank's schedule
// (models/megatron_schedule.h) and moves one tensor per pass boundary through
// megatron/core/pipeline_parallel/p2p_communication.py (_communicate):
//  - the message is [s / cp, b, h], s / t under --sequence-parallel, in the
//    params dtype (get_tensor_shapes, config.pipeline_dtype);
//  - the forward of (micro-batch, virtual stage k) needs the output of k - 1,
//    the backward of k the input gradient of k + 1 (the last virtual stage
//    starts its backward from its own loss); virtual stage k is chunk k / p
//    of pipeline rank k mod p (TransformerLayer._get_layer_offset), so under
//    the interleaved schedule rank p - 1 also sends to rank 0;
//  - 1F1B (forward_backward_pipelining_without_interleaving) and the
//    interleaved schedule under --no-overlap-p2p-communication batch each
//    step's sends and receives (batch_p2p_comm = not overlap_p2p_comm,
//    argument_utils.py), wait on them and then torch.cuda.synchronize()
//    (batch_p2p_sync): a sending rank computes nothing until its send has
//    arrived. With overlap_p2p_comm (the interleaved default) the sends are
//    isend/irecv whose requests are waited on only before the received
//    tensor is used (forward_backward_pipelining_with_interleaving, the
//    fwd_wait_handles / bwd_wait_handles): the sender goes on computing.
// Model: a rank's own step (its trace simulated alone) gives each slot's
// length as the time from the end of the slot before to its own end, and
// the tail after its last slot (the last buckets' reduce, the optimizer).
// The ranks are replayed together: a slot starts when its rank is free and
// its input has arrived (the producer's end plus one transfer,
// PointToPointTime over NVLink inside a node or the network between nodes);
// without overlap the sender is free only once its send has arrived. A
// receive is not held back by the receiver posting it late (the sender side
// is the one that blocks). The step is the last rank's end, so the bubble
// ((p - 1) passes at the ends of 1F1B, Narayanan et al. 2021 Sec. 2.2) comes
// out of the replay rather than a formula, uneven stages included.
#include "sim/step/megatron_step_pipeline.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "models/megatron_schedule.h"
#include "sim/base/status.h"
#include "sim/device/collective_model.h"
#include "sim/ir/dtype.h"

namespace gpusim {

MegatronSlotEvents SlotEventsOf(const Program& p, const LoweredStep& lowered) {
  MegatronSlotEvents out;
  if (lowered.op_event.size() != p.ops.size()) return out;
  for (const Region& r : p.regions) {
    if (r.kind != "pipeline_slot") continue;
    std::vector<int64_t> events;
    for (OpId i = r.first; i <= r.last; ++i) {
      const int64_t e = lowered.op_event[static_cast<size_t>(i)];
      if (e >= 0 && lowered.trace.events[static_cast<size_t>(e)].stream == kComputeStream) events.push_back(e);
    }
    out.push_back(std::move(events));
  }
  return out;
}

MegatronRankTimes RankTimesOf(const MegatronSlotEvents& slots, const SimResult& sim) {
  MegatronRankTimes t;
  SimTime last(0);
  for (const std::vector<int64_t>& events : slots) {
    for (int64_t e : events) last = Max(last, sim.end[static_cast<size_t>(e)]);
    t.slot_end.push_back(last);
  }
  t.own_step = sim.step_time;
  return t;
}

int64_t PipelineMessageBytes(const RunSpec& spec) {
  int64_t s = spec.batch.seq_len / spec.megatron.context;
  if (spec.parallelism.sequence_parallel) s /= spec.parallelism.tensor;
  return s * spec.batch.per_device * spec.model.d_model * DTypeSize(spec.model.compute_dtype);
}

bool CrossesNodes(const MegatronSpec& g, int64_t tensor, int64_t from, int64_t to) {
  const int64_t per_node = std::max<int64_t>(g.gpus_per_node, 1);
  const int64_t inner = tensor * g.context;  // tp and cp come first in both orders
  for (int64_t d = 0; d < g.data; ++d) {
    for (int64_t y = 0; y < inner; ++y) {
      // tp-cp-ep-dp-pp: rank = y + inner (d + data stage); tp-cp-ep-pp-dp:
      // rank = y + inner (stage + p d).
      auto rank = [&](int64_t stage) {
        return g.tp_pp_dp_mapping ? y + inner * (stage + g.pipeline * d) : y + inner * (d + g.data * stage);
      };
      if (rank(from) / per_node != rank(to) / per_node) return true;
    }
  }
  return false;
}

absl::StatusOr<MegatronPipelineTimes> SimulatePipeline(const std::vector<MegatronRankTimes>& ranks,
                                                       const RunSpec& spec, const DeviceSpec& device) {
  const MegatronSpec& g = spec.megatron;
  const int64_t p = g.pipeline, v = g.virtual_stages, m = g.microbatches, stages = p * v;
  GPUSIM_CHECK(static_cast<int64_t>(ranks.size()) == p);
  MegatronPipelineTimes out;
  CollectiveOptions links;
  links.gpus_per_node = g.gpus_per_node;
  const double bytes = static_cast<double>(PipelineMessageBytes(spec));
  if (p > 1 && device.nvlink_bandwidth <= 0 && device.pcie_bandwidth <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("device '", device.name, "': links.nvlink or links.pcie is needed to ",
                                                   "time the sends between pipeline stages"));
  }
  if (p > 1 && device.collective_efficiency <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("device '", device.name, "': efficiency.collective must be > 0 to ",
                                                   "time the sends between pipeline stages"));
  }
  for (int64_t r = 0; r < p; ++r) {
    const bool inter = p > 1 && CrossesNodes(g, spec.parallelism.tensor, r, (r + 1) % p);
    out.send_inter_node.push_back(inter);
    out.send_time.push_back(p > 1 ? PointToPointTime(bytes, inter, device, links) : SimTime(0));
  }
  // The link between neighbouring ranks a and b = a + 1 (mod p) carries both
  // directions at the same speed.
  auto transfer = [&](int64_t a, int64_t b) { return out.send_time[static_cast<size_t>((b + 1) % p == a ? b : a)]; };
  const bool blocking = !(g.overlap_p2p && v > 1);
  std::vector<std::vector<PipelineSlot>> schedule;
  for (int64_t r = 0; r < p; ++r) {
    schedule.push_back(MegatronSchedule(p, r, v, m, g.microbatch_group));
    if (ranks[static_cast<size_t>(r)].slot_end.size() != schedule.back().size()) {
      return absl::InternalError(absl::StrCat("pipeline rank ", r, ": ", ranks[static_cast<size_t>(r)].slot_end.size(),
                                              " slots simulated, its schedule has ", schedule.back().size()));
    }
  }
  const SimTime unset(-1);
  std::vector<SimTime> fwd_end(static_cast<size_t>(m * stages), unset), bwd_end = fwd_end;
  auto at = [&](int64_t mb, int64_t k) { return static_cast<size_t>(mb * stages + k); };
  std::vector<size_t> pos(static_cast<size_t>(p), 0);
  std::vector<SimTime> free(static_cast<size_t>(p), SimTime(0));
  out.rank_wait.assign(static_cast<size_t>(p), SimTime(0));
  size_t left = 0;
  for (const auto& s : schedule) left += s.size();
  while (left > 0) {
    bool moved = false;
    for (int64_t r = 0; r < p; ++r) {
      const size_t ri = static_cast<size_t>(r);
      const MegatronRankTimes& own = ranks[ri];
      while (pos[ri] < schedule[ri].size()) {
        const size_t i = pos[ri];
        const PipelineSlot& slot = schedule[ri][i];
        const int64_t k = slot.chunk * p + r;
        const bool has_input = slot.forward ? k > 0 : k + 1 < stages;
        SimTime arrival(0);
        if (has_input) {
          const int64_t src = slot.forward ? k - 1 : k + 1;
          const SimTime produced = slot.forward ? fwd_end[at(slot.microbatch, src)] : bwd_end[at(slot.microbatch, src)];
          if (produced == unset) break;
          arrival = produced + transfer(src % p, r);
        }
        const SimTime length = own.slot_end[i] - (i == 0 ? SimTime(0) : own.slot_end[i - 1]);
        const SimTime start = Max(free[ri], arrival);
        out.rank_wait[ri] += start - free[ri];
        const SimTime end = start + length;
        (slot.forward ? fwd_end : bwd_end)[at(slot.microbatch, k)] = end;
        const bool sends = slot.forward ? k + 1 < stages : k > 0;
        free[ri] = end;
        if (sends && blocking) free[ri] += transfer(r, slot.forward ? (k + 1) % p : (k - 1) % p);
        ++pos[ri];
        --left;
        moved = true;
      }
    }
    if (!moved) return absl::InternalError("the pipeline schedules wait on each other (no slot can start)");
  }
  SimTime slowest_own(0);
  for (int64_t r = 0; r < p; ++r) {
    const MegatronRankTimes& own = ranks[static_cast<size_t>(r)];
    const SimTime tail = own.own_step - (own.slot_end.empty() ? SimTime(0) : own.slot_end.back());
    out.rank_end.push_back(free[static_cast<size_t>(r)] + tail);
    out.step = Max(out.step, out.rank_end.back());
    slowest_own = Max(slowest_own, own.own_step);
  }
  out.bubble = out.step - slowest_own;
  return out;
}

}  // namespace gpusim
