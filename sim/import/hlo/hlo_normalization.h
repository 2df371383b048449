// Normalisation diamonds (softmax, layer norms) as XLA-GPU fuses them: the
// instructions of an unoptimised computation whose value a Triton
// normalisation fusion writes to a buffer.
//
// Note [Normalisation fusions]
// xla/service/gpu/transforms/softmax_rewriter_triton.cc (openxla/xla
// 717d5469) matches a "closed reduction diamond" before priority fusion
// (MatchesTritonCompatibleClosedReductionDiamondImpl): a root that is an
// elementwise binary op whose operand 1 reaches, through trivially fusible
// ops (IsTriviallyFusible: one user, and a bitcast, a unary elementwise op,
// or a binary one with one splat operand), a broadcast that is not along the
// last dimension, which reaches a reduce over the last dimension only with
// a constant init; broadcast and reduce have one use each; the producer is
// the reduce's operand walked back through trivially fusible ops, and it
// reaches the root's operand 0 the same way (which has one user unless it
// is the producer). The diamond becomes one Triton fusion (MakeFusionForDiamond),
// which priority fusion does not fuse into non-Triton consumers
// (priority_fusion.cc IsFusible: a kCustom fusion is not fusible) but
// extends over Triton-compatible consumers: a single elementwise consumer,
// and the next diamond when this one's output is its producer and feeds
// nothing else (jax.nn.softmax's max and sum diamonds become one kernel).
// Where the chain stops, its value is the fusion's output: a buffer, even
// when several consumers read it (the recomputed softmax of a
// jax.checkpoint backward, whose exp feeds the sum, the probabilities and
// their cotangent, writes that exp in f32).
//
// One outcome is not derived from the structure: the rewriter keeps a
// diamond only when its cost model (DecideIfShouldFuseAndMaybeSetBlockLevel
// Parameters, use_cost_model_to_evaluate_fusions) estimates the Triton
// kernel faster than the same instructions through the reduction pipeline
// (RunFusionPipeline: ReductionSplitter, TreeReductionRewriter, priority
// fusion). gpusim does not run that model; it takes the case that decides
// it on these modules: a row longer than the row-reduction race-free bound
// (reduction_utils.cc ReductionDimensionRaceFreeBound, 1024 threads x 16
// elements) is split by TreeReductionRewriter into two kernels that use
// every SM, which the model prefers to one Triton block per row (the
// cross-entropy over a 32000-word vocabulary stays unfused in XLA-GPU's
// compiled modules, the attention softmax over 2048 keys is a Triton
// fusion). An approximation, named as one.
//
// In the unoptimised module JAX's reshapes and the broadcasts that only add
// or drop size-1 dimensions are views (the algebraic simplifier makes them
// bitcasts before the rewriter runs), and calls are opaque producers.
#ifndef GPUSIM_SIM_IMPORT_HLO_HLO_NORMALIZATION_H_
#define GPUSIM_SIM_IMPORT_HLO_HLO_NORMALIZATION_H_

#include <vector>

#include "sim/import/hlo/hlo_module.h"

namespace gpusim {

// Per instruction of `comp`: true when it is where a normalisation fusion's
// chain ends (its value is written to a buffer). `live`: the instructions
// the root reaches (dead ones are not users).
std::vector<bool> NormalizationFusionOutputs(const HloComputation& comp, const std::vector<bool>& live);

}  // namespace gpusim

#endif  // GPUSIM_SIM_IMPORT_HLO_HLO_NORMALIZATION_H_
