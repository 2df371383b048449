// A Megatron-LM launch line, every rank: one simulated step per pipeline
// stage (every TP, CP and DP rank of a stage has the same shape: the
// vocabulary is padded to a multiple of TP, CP splits the sequence evenly),
// and the step time of the whole pipeline. Note [Megatron step time] in the
// .cc. sim/report/megatron_render.h renders it.
#ifndef GPUSIM_SIM_STEP_MEGATRON_STEP_H_
#define GPUSIM_SIM_STEP_MEGATRON_STEP_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "sim/config/spec.h"
#include "sim/step/megatron_step_pipeline.h"
#include "sim/step/step.h"

namespace gpusim {

struct MegatronRank {
  int64_t stage = 0;           // pipeline rank
  int64_t first_rank = 0;      // lowest global rank of the stage (Note [Megatron rank order])
  int64_t last_rank = 0;       // highest
  int64_t warmup = 0;          // forward passes before the first backward
  int64_t in_flight = 0;       // (micro-batch, chunk) activations held at once
  bool embedding = false, head = false;
  StepReport report;           // this rank's own step (its schedule, no waits on other stages)
  SimTime compute_per_pass;    // compute-stream time of one (micro-batch, chunk) forward + backward
  MegatronSlotEvents slots;    // its schedule's slots in its trace (calibration re-times them)
  SimTime send_time;           // one activation to the next stage (Note [Megatron pipeline in time])
  bool send_inter_node = false;
  SimTime pipeline_wait;       // its waits on neighbouring stages (MegatronPipelineTimes::rank_wait)
  SimTime pipeline_end;        // when its step ends in the pipeline
  // Mixture of experts (Note [MoE routing cases], models/gpt_moe.cc): the
  // report above is the balanced routing; this is the same rank built for
  // the bound (capacity-limited, or every token on this rank's experts).
  // report.fits is the bound's: it decides "fits".
  bool moe = false;
  Bytes moe_bound_peak;
  Bytes moe_bound_reserved;
  SimTime moe_bound_step;
  bool moe_balanced_fits = false;
};

struct MegatronReport {
  RunSpec spec;
  std::vector<MegatronRank> ranks;  // one per pipeline stage
  size_t peak = 0;                  // index of the rank with the largest peak allocated
  size_t last = 0;                  // the rank Megatron's training log reports (global rank world - 1)
  size_t moe_bound_peak = 0;        // MoE: the rank with the largest peak under the routing bound
  int64_t param_count = 0;          // the whole model (tied output counted once)
  SimTime bubble;                   // step_time - the slowest rank's own step (waits on other stages)
  SimTime step_time;                // the last rank's end, the ranks replayed together
  double model_tflops_per_device = 0;  // Megatron's formula (training.py num_floating_point_operations)
  double tokens_per_s_per_device = 0;
};

absl::StatusOr<MegatronReport> SimulateMegatron(const RunSpec& spec);

// The rank a single-step command (explain, diff, run --out) shows for a
// launch line: the stage with the largest peak allocated (ties: the first),
// its report carrying the whole pipeline's step time (its own step is in
// `own_step`); `stage` and `stages` say which it is.
struct MegatronRankView {
  StepReport report;
  int64_t stage = 0, stages = 0;
  int64_t first_rank = 0, last_rank = 0;
  SimTime own_step;
};
MegatronRankView PeakRankView(const MegatronReport& r);
// One line naming the rank shown, for the text outputs.
std::string DescribeRankView(const MegatronRankView& v);

// The compute-stream time of one (micro-batch, chunk) forward + backward of
// a rank whose trace `trace` simulated as `sim` (reported per rank; the step
// itself comes from SimulatePipeline, megatron_step_pipeline.h).
SimTime MegatronPassTime(const Trace& trace, const SimResult& sim, const MegatronSpec& g);

// FLOPs of one training step of the whole model as Megatron's
// num_floating_point_operations counts them (megatron/training/training.py).
double MegatronModelFlops(const RunSpec& spec);
// Parameters of the whole model (every TP shard, the tied output once).
int64_t MegatronParamCount(const RunSpec& spec);

}  // namespace gpusim

#endif  // GPUSIM_SIM_STEP_MEGATRON_STEP_H_
