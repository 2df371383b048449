// Ring collectives, α–β: how long an NCCL all-gather, reduce-scatter or
// all-reduce of S bytes takes over n ranks.
//
// Note [Ring collectives]
// nccl-tests doc/PERFORMANCE.md defines bus bandwidth so that it is
// comparable with the link bandwidth: busbw = algbw · f with
//   all-gather, reduce-scatter: f = (n−1)/n
//   all-reduce:                 f = 2(n−1)/n
//   broadcast:                  f = 1 (busbw = algbw: the root's buffer
//                               passes every link of the chain once)
// where algbw = S / t and S is the full buffer (the all-gather output, the
// reduce-scatter or all-reduce input). Hence t = f · S / busbw. NCCL's own
// cost model (src/graph/tuning.cc, ncclTopoTuneModel) adds a latency of
// nsteps·hwLat, nsteps = n−1 (AG, RS, broadcast) or 2(n−1) (AR), with the inter-node
// steps (nNodes−1, or 2(nNodes−1)) charged the network latency:
//   t = (steps − inter_steps)·α_intra + inter_steps·α_inter + f · S / (bw · eff)
// bw is the slowest link of the ring: NVLink inside a node, the network
// (one NIC per GPU) once the ring crosses nodes. eff is efficiency.collective
// (achieved bus bandwidth / link peak).
//
// Which nodes a group spans follows from its ranks, not its size: a
// data-parallel group under TP 8 has one rank per node. The op says how many
// nodes (Op::group_nodes, set by the Megatron builder from Megatron's rank
// order, models/megatron_ranks.h); when it does not, the group is taken as
// consecutive ranks, ceil(n / gpus_per_node) nodes. With nNodes = n (one
// rank a node) every step is an inter-node step; with k ranks a node the
// ring crosses the network nNodes times (NCCL joins each node's ranks, one
// segment of the ring, to the next node's over the network: src/graph/
// connect.cc connectRings), the hierarchical split above.
#ifndef GPUSIM_SIM_DEVICE_COLLECTIVE_MODEL_H_
#define GPUSIM_SIM_DEVICE_COLLECTIVE_MODEL_H_

#include <cstdint>

#include "sim/base/units.h"
#include "sim/config/spec.h"
#include "sim/ir/program.h"

namespace gpusim {

struct CollectiveOptions {
  // GPUs sharing one NVLink domain: 8 in DGX/HGX A100 and H100 nodes (NVIDIA
  // DGX A100 / DGX H100 datasheets). Groups up to this size are intra-node.
  int64_t gpus_per_node = 8;
  // Per-step latency of an inter-node ring step: NCCL src/graph/tuning.cc
  // hwLat[NCCL_HW_NET][Ring][Simple] = 9.6 us. Intra-node steps use the
  // device's links.latency.
  SimTime network_step_latency = SimTime(9600);
};

// NCCL bus-bandwidth factor f for `kind` over n ranks (0 when n <= 1).
// REQUIRES: IsCollective(kind).
double BusBandwidthFactor(OpKind kind, int64_t n);

// Ring latency steps for `kind` over n ranks: n−1 (2(n−1) for all-reduce).
int64_t RingSteps(OpKind kind, int64_t n);

// Time of one collective moving `full_bytes` (S above) over `group` ranks
// spanning `nodes` nodes (0: consecutive ranks, from options.gpus_per_node).
// Zero when group <= 1. Falls back to PCIe when the device has no NVLink, and
// to the intra-node link when it has no network bandwidth.
SimTime CollectiveTime(OpKind kind, double full_bytes, int64_t group,
                       const DeviceSpec& d, const CollectiveOptions& options = {}, int64_t nodes = 0);

// One point-to-point NCCL send/recv of `bytes` between two ranks, α–β as
// above with one step: the link's latency plus bytes / (bw · eff), over
// NVLink (PCIe without it) inside a node, the network between nodes (NCCL's
// p2p runs the Simple protocol over the same transports; tuning.cc prices
// no p2p, so the ring's per-step latency and efficiency stand for it).
SimTime PointToPointTime(double bytes, bool inter_node, const DeviceSpec& d, const CollectiveOptions& options = {});

}  // namespace gpusim

#endif  // GPUSIM_SIM_DEVICE_COLLECTIVE_MODEL_H_
