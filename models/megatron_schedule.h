// Megatron-LM's pipeline schedules, as the order in which one pipeline rank
// runs the forward and backward passes of its (micro-batch, model chunk)
// pairs: 1F1B (forward_backward_pipelining_without_interleaving) and the
// interleaved 1F1B of virtual pipeline stages
// (forward_backward_pipelining_with_interleaving), both in
// megatron/core/pipeline_parallel/schedules.py. Note [Megatron pipeline
// schedules] in the .cc gives the rules.
#ifndef GPUSIM_MODELS_MEGATRON_SCHEDULE_H_
#define GPUSIM_MODELS_MEGATRON_SCHEDULE_H_

#include <cstdint>
#include <vector>

namespace gpusim {

struct PipelineSlot {
  bool forward = true;
  int64_t microbatch = 0;
  int64_t chunk = 0;  // model chunk (virtual stage) on this rank
};

// Forward passes a rank runs before its first backward: 1F1B
// min(p - rank - 1, m); interleaved (p - rank - 1) x 2 + (v - 1) x group,
// at most m x v.
int64_t MegatronWarmup(int64_t pipeline, int64_t rank, int64_t chunks, int64_t microbatches, int64_t group);

// The order of one rank's passes. REQUIRES: pipeline >= 1, 0 <= rank <
// pipeline, chunks >= 1, microbatches >= 1, group >= 1 (chunks > 1: a
// multiple of group micro-batches).
std::vector<PipelineSlot> MegatronSchedule(int64_t pipeline, int64_t rank, int64_t chunks, int64_t microbatches,
                                           int64_t group);

// The most (micro-batch, chunk) forward passes whose backward has not run
// yet at any point of `s`: how many chunk activations the rank holds at once.
int64_t MaxInFlight(const std::vector<PipelineSlot>& s);

}  // namespace gpusim

#endif  // GPUSIM_MODELS_MEGATRON_SCHEDULE_H_
