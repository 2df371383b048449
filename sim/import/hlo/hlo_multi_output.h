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

// Note [Sibling multi-output fusion]
// XLA-GPU's multi-output fusion pass also fuses siblings: two fusions that
// read a common operand (not an effective scalar) and are not connected
// become one multi-output fusion (xla/service/gpu/transforms/
// multi_output_fusion.cc MultiOutputFusion::FuseSiblings, CanFuseSiblings,
// IsProfitableOperand, openxla/xla 1a677b5c; a loop fusion that takes a
// reduction becomes an input fusion). The shapes must agree
// (gpu_fusible.cc ShapesCompatibleForMultiOutputFusion): a reduction's
// hero is the array it reduces, a loop fusion's its output. The fused
// kernel runs where both can: what it computes of the later sibling is
// written with the earlier. A norm's weight gradient (sum over tokens of the
// cotangent times the normalised input) is such a sibling of the norm's
// input gradient, so its inputs (the layer's projections' input gradients)
// die in the layer's backward, not at the optimizer where JAX's program
// order puts the reduction of an unrolled layer stack.
// Each reduce op is merged into the first earlier loop fusion (an
// elementwise op with outputs, none in `not_loop_fusions`: a normalisation
// fusion's) that reads one
// of its non-scalar inputs, whose output has as many elements as the
// reduce's largest input, and before which every input of the reduce is
// written. Scope: ops outside while loops (a loop body's iterations are
// built one after another and are not told apart here), loop fusion with
// reduction only (loop-loop and reduction-reduction siblings, whose
// compatibility needs the reduced dimensions, are not fused);
// FusionFitsInBudget's operand and shared-memory limits are not checked.
void FuseReductionSiblings(Program* p, const std::set<TensorId>& not_loop_fusions);

}  // namespace hlo_internal
}  // namespace gpusim

#endif  // GPUSIM_SIM_IMPORT_HLO_HLO_MULTI_OUTPUT_H_
