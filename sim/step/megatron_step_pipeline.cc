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
// The ranks are replayed together; a transfer is PointToPointTime over
// NVLink inside a node or the network between nodes. The step is the last
// rank's end, so the bubble ((p - 1) passes at the ends of 1F1B, Narayanan
// et al. 2021 Sec. 2.2) comes out of the replay rather than a formula,
// uneven stages included.
//
// Note [Late-posted receives]
// Under 1F1B every p2p call is a batch: _communicate hands its isends and
// irecvs to torch.distributed.batch_isend_irecv (_batched_p2p_ops, one NCCL
// group), waits on every request, then torch.cuda.synchronize(). An NCCL
// send of a message larger than the connection's FIFO (NCCL_BUFFSIZE, 4 MiB
// for Simple) cannot complete before the peer posts the matching receive, so
// a message moves at max(sender posts, receiver posts) + transfer, and the
// call ends when its last message has. Which calls sit between two passes
// follows forward_backward_pipelining_without_interleaving: before the first
// pass recv_forward; between two forwards (warm-up) send_forward, then
// recv_forward, two calls; forward then backward (steady state) one
// send_forward_recv_backward; backward then forward one
// send_backward_recv_forward; between two backwards (cool-down)
// send_backward, then recv_backward; after the last pass send_backward. The
// first stage has no backward sends or forward receives, the last no
// forward sends or backward receives (p2p_communication.py skips them).
// So the steady state's pairs rendezvous: a rank that finishes its forward
// early waits in send_forward_recv_backward until its neighbour finishes
// the backward whose gradient it sends.
//   The interleaved schedule keeps the simpler rule (a slot starts when its
// rank is free and its input has arrived, the producer's end plus one
// transfer; under --no-overlap-p2p-communication the sender is free only
// once its send has arrived): with --overlap-p2p-communication (its
// default) each receive is posted one step ahead of the pass that needs it
// (the fwd_wait_handles / bwd_wait_handles), so a send is not held by a
// late receive there.
#include "sim/step/megatron_step_pipeline.h"

#include <algorithm>
#include <functional>

#include "absl/strings/str_cat.h"
#include "models/megatron_ranks.h"
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
  // Note [Megatron rank order] (models/megatron_ranks.h).
  const int64_t per_node = std::max<int64_t>(g.gpus_per_node, 1);
  MegatronCoords c;
  for (c.dp = 0; c.dp < g.data; ++c.dp) {
    for (c.cp = 0; c.cp < g.context; ++c.cp) {
      for (c.tp = 0; c.tp < tensor; ++c.tp) {
        MegatronCoords a = c, b = c;
        a.pp = from;
        b.pp = to;
        if (MegatronGlobalRank(g, tensor, a) / per_node != MegatronGlobalRank(g, tensor, b) / per_node) return true;
      }
    }
  }
  return false;
}

namespace {

// The ranks' ends: each rank's free time (out.rank_end, when its last slot
// and send are done) plus the tail of its own step after its last slot.
MegatronPipelineTimes Finish(const std::vector<MegatronRankTimes>& ranks, MegatronPipelineTimes& out) {
  SimTime slowest_own(0);
  for (size_t r = 0; r < ranks.size(); ++r) {
    const MegatronRankTimes& own = ranks[r];
    const SimTime tail = own.own_step - (own.slot_end.empty() ? SimTime(0) : own.slot_end.back());
    out.rank_end[r] += tail;
    out.step = Max(out.step, out.rank_end[r]);
    slowest_own = Max(slowest_own, own.own_step);
  }
  out.bubble = out.step - slowest_own;
  return out;
}

// One batched p2p call of a rank (Note [Late-posted receives]): the
// messages it sends and receives, each named by its direction, micro-batch
// and sending rank.
struct P2pCall {
  std::vector<int64_t> sends, recvs;
};
struct OneFOneBItem {
  bool is_slot = false;
  size_t slot = 0;
  P2pCall call;
};

std::vector<OneFOneBItem> OneFOneBItems(const std::vector<PipelineSlot>& s, int64_t r, int64_t p, int64_t m) {
  auto msg = [&](bool forward, int64_t mb, int64_t sender) { return ((forward ? 0 : m) + mb) * p + sender; };
  auto input = [&](const PipelineSlot& x) -> std::vector<int64_t> {
    if (x.forward) return r > 0 ? std::vector<int64_t>{msg(true, x.microbatch, r - 1)} : std::vector<int64_t>{};
    return r + 1 < p ? std::vector<int64_t>{msg(false, x.microbatch, r + 1)} : std::vector<int64_t>{};
  };
  auto output = [&](const PipelineSlot& x) -> std::vector<int64_t> {
    if (x.forward) return r + 1 < p ? std::vector<int64_t>{msg(true, x.microbatch, r)} : std::vector<int64_t>{};
    return r > 0 ? std::vector<int64_t>{msg(false, x.microbatch, r)} : std::vector<int64_t>{};
  };
  std::vector<OneFOneBItem> items;
  auto call = [&](std::vector<int64_t> sends, std::vector<int64_t> recvs) {
    if (sends.empty() && recvs.empty()) return;
    OneFOneBItem it;
    it.call.sends = std::move(sends);
    it.call.recvs = std::move(recvs);
    items.push_back(std::move(it));
  };
  for (size_t i = 0; i < s.size(); ++i) {
    if (i == 0) {
      call({}, input(s[i]));
    } else if (s[i - 1].forward != s[i].forward) {
      call(output(s[i - 1]), input(s[i]));  // send_forward_recv_backward, send_backward_recv_forward
    } else {
      call(output(s[i - 1]), {});  // send_forward / send_backward, then
      call({}, input(s[i]));       // recv_forward / recv_backward
    }
    OneFOneBItem it;
    it.is_slot = true;
    it.slot = i;
    items.push_back(std::move(it));
  }
  if (!s.empty()) call(output(s.back()), {});
  return items;
}

// The 1F1B ranks replayed call by call (Note [Late-posted receives]): sets
// out.rank_end (before the tails) and out.rank_wait, the time each rank's
// p2p calls held it. REQUIRES: each rank's slot_end one per slot of its
// schedule.
absl::Status ReplayOneFOneB(const std::vector<MegatronRankTimes>& ranks,
                            const std::vector<std::vector<PipelineSlot>>& schedule,
                            const std::function<SimTime(int64_t, int64_t)>& transfer, MegatronPipelineTimes& out) {
  const int64_t p = static_cast<int64_t>(ranks.size());
  int64_t m = 0;
  for (const PipelineSlot& x : schedule.front()) m = std::max(m, x.microbatch + 1);
  std::vector<std::vector<OneFOneBItem>> items;
  for (int64_t r = 0; r < p; ++r) items.push_back(OneFOneBItems(schedule[static_cast<size_t>(r)], r, p, m));
  const SimTime unset(-1);
  std::vector<SimTime> send_post(static_cast<size_t>(2 * m * p), unset), recv_post = send_post;
  std::vector<size_t> pos(static_cast<size_t>(p), 0);
  std::vector<bool> posted(static_cast<size_t>(p), false);
  std::vector<SimTime> free(static_cast<size_t>(p), SimTime(0));
  out.rank_wait.assign(static_cast<size_t>(p), SimTime(0));
  size_t left = 0;
  for (const auto& it : items) left += it.size();
  while (left > 0) {
    bool moved = false;
    for (int64_t r = 0; r < p; ++r) {
      const size_t ri = static_cast<size_t>(r);
      while (pos[ri] < items[ri].size()) {
        const OneFOneBItem& it = items[ri][pos[ri]];
        if (it.is_slot) {
          const std::vector<SimTime>& end = ranks[ri].slot_end;
          free[ri] += end[it.slot] - (it.slot == 0 ? SimTime(0) : end[it.slot - 1]);
        } else {
          if (!posted[ri]) {
            for (int64_t x : it.call.sends) send_post[static_cast<size_t>(x)] = free[ri];
            for (int64_t x : it.call.recvs) recv_post[static_cast<size_t>(x)] = free[ri];
            posted[ri] = true;
            moved = true;
          }
          SimTime done = free[ri];
          bool ready = true;
          for (const auto* list : {&it.call.sends, &it.call.recvs}) {
            for (int64_t x : *list) {
              const SimTime a = send_post[static_cast<size_t>(x)], b = recv_post[static_cast<size_t>(x)];
              if (a == unset || b == unset) {
                ready = false;
                continue;
              }
              const int64_t sender = x % p, receiver = x / p < m ? sender + 1 : sender - 1;
              done = Max(done, Max(a, b) + transfer(sender, receiver));
            }
          }
          if (!ready) break;
          out.rank_wait[ri] += done - free[ri];
          free[ri] = done;
          posted[ri] = false;
        }
        ++pos[ri];
        --left;
        moved = true;
      }
    }
    if (!moved) return absl::InternalError("the pipeline schedules wait on each other (no p2p call can complete)");
  }
  out.rank_end = free;
  return absl::OkStatus();
}

}  // namespace

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
  if (v == 1) {
    RETURN_IF_ERROR(ReplayOneFOneB(ranks, schedule, transfer, out));
    return Finish(ranks, out);
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
  out.rank_end = free;
  return Finish(ranks, out);
}

}  // namespace gpusim
