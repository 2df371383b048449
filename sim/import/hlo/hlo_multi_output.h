// Multi-output fusion of the loop fusions the importer writes for entry
// outputs (Note [Multi-output fusion of live-out values]).
#ifndef GPUSIM_SIM_IMPORT_HLO_HLO_MULTI_OUTPUT_H_
#define GPUSIM_SIM_IMPORT_HLO_HLO_MULTI_OUTPUT_H_

#include <set>

#include "sim/ir/program.h"

namespace gpusim {
namespace hlo_internal {

// Note [Multi-output fusion of live-out values]
// A fusible entry output that other instructions read is its own loop
// fusion (Note [Live-out values are not fused]); XLA's multi-output fusion
// pass then fuses such a producer into its consumer as one kernel with
// both results (xla/service/gpu/transforms/multi_output_fusion.cc
// MultiOutputFusion::DoProducerConsumerMultiOutputFusion, producer a loop
// fusion, consumer a loop or reduction fusion: gpu_fusible.cc
// IsProducerMultiOutputFusible / IsFusibleAsMultiOutputFusionRoot), so an
// AdamW update is one kernel reading the gradient, both moments and the
// parameter once and writing the three new values, and the parameter-norm
// reduce is fused into it. Each producer in `candidates` (op ids of such
// loop fusions) whose one output is read by exactly one elementwise or
// reduce op of the same phase and loop (besides the result tuple, which
// reads no bytes) is merged into that op: the consumer reads the
// producer's inputs instead of its output and also writes it. Ops and
// regions are renumbered.
void FuseLiveOutProducers(Program* p, const std::set<OpId>& candidates);

}  // namespace hlo_internal
}  // namespace gpusim

#endif  // GPUSIM_SIM_IMPORT_HLO_HLO_MULTI_OUTPUT_H_
