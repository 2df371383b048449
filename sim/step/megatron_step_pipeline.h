// The pipeline of a Megatron-LM launch line in time: every stage's own step
// cut into its schedule's slots (one forward or backward pass of a
// (micro-batch, model chunk)), replayed together so that a slot waits for the
// activation or gradient it receives from the neighbouring stage, sent over
// the link between the two. Note [Megatron pipeline in time] in the .cc.
#ifndef GPUSIM_SIM_STEP_MEGATRON_STEP_PIPELINE_H_
#define GPUSIM_SIM_STEP_MEGATRON_STEP_PIPELINE_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "sim/base/units.h"
#include "sim/config/spec.h"
#include "sim/engine/engine.h"
#include "sim/ir/program.h"
#include "sim/lower/lower.h"

namespace gpusim {

// Per schedule slot of one rank's program (its "pipeline_slot" regions, in
// schedule order): the compute-stream events of the slot's ops.
using MegatronSlotEvents = std::vector<std::vector<int64_t>>;
MegatronSlotEvents SlotEventsOf(const Program& program, const LoweredStep& lowered);

// One rank's own step as the pipeline needs it: when each slot ended on the
// rank's own timeline (no waits on other stages), and the whole own step.
struct MegatronRankTimes {
  std::vector<SimTime> slot_end;
  SimTime own_step;
};
MegatronRankTimes RankTimesOf(const MegatronSlotEvents& slots, const SimResult& sim);

// One activation (or its gradient) sent from pipeline rank `from` to `to`:
// [s / cp (/ t under sequence parallelism), micro-batch, hidden] in the
// compute dtype (schedules.py get_tensor_shapes, pipeline_dtype).
int64_t PipelineMessageBytes(const RunSpec& spec);
// Whether any of the rank pairs of stages `from` and `to` sit on different
// nodes (megatron.gpus_per_node; rank order tp-cp-ep-dp-pp, or tp-cp-ep-pp-dp
// under --use-tp-pp-dp-mapping).
bool CrossesNodes(const MegatronSpec& g, int64_t tensor, int64_t from, int64_t to);

struct MegatronPipelineTimes {
  SimTime step;                        // the slowest rank's end
  SimTime bubble;                      // step - the slowest rank's own step
  std::vector<SimTime> rank_end;       // per pipeline rank
  // Per rank, time it waited on a neighbour: 1F1B, the time its p2p calls
  // held it, transfers included (Note [Late-posted receives]); interleaved,
  // its slots' waits for their input.
  std::vector<SimTime> rank_wait;
  std::vector<SimTime> send_time;      // per rank r: one message r -> r + 1 (mod p); 0 when p = 1
  std::vector<bool> send_inter_node;   // per rank r: that link crosses nodes
};

// REQUIRES: ranks.size() == spec.megatron.pipeline, each rank's slot_end one
// per slot of its MegatronSchedule.
absl::StatusOr<MegatronPipelineTimes> SimulatePipeline(const std::vector<MegatronRankTimes>& ranks,
                                                       const RunSpec& spec, const DeviceSpec& device);

}  // namespace gpusim

#endif  // GPUSIM_SIM_STEP_MEGATRON_STEP_PIPELINE_H_
