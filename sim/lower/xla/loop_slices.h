// Materialised loop slices: which per-iteration slices of a stacked or
// loop-carried operand XLA's GPU compiler writes to a buffer of their own.
// Front-ends emit every such slice as an annotated dynamic-slice
// (sim/ir/loop_slice.h, ProgramBuilder::AddLoopSlice); LowerLoopSlices
// below decides each one.
//
// Note [Materialised loop slices]
// A rolled loop reads one slice of a stacked operand per iteration: the
// backward `while` of grad(scan) reads each residual with
// dynamic-slice(stack, i) (jax v0.5.0 jax/_src/lax/control_flow/loops.py:
// _scan_transpose, line 741, binds scan_p with the residual stacks as xs;
// _scan_impl's body_fun, line 468, reads xs with
// slicing.dynamic_index_in_dim), and a scan over stacked parameters reads
// each layer's slice the same way in both directions. Whether that slice is
// a buffer depends on its consumers (openxla/xla a91d9c30, 2025-01-17):
//  - elementwise ops and reductions take the dynamic-slice into their loop
//    fusion and read the stack in place (no buffer);
//  - a dot stays a GEMM unless GpuAlgebraicSimplifierVisitor::
//    ShouldStrengthReduceDotToReduce (xla/service/gpu/transforms/
//    algebraic_simplifier.cc:119) rewrites it: both operands vectors, or
//    (lhs_non_contracting + rhs_non_contracting) x contracting < 10,000,000
//    (IsMatrixMultiplicationTooSmallForRewriting, xla/service/gpu/
//    matmul_utils.cc:810) — DotStaysGemm below;
//  - GemmFusion does not pull the slice into a Triton GEMM at the default
//    xla_gpu_triton_fusion_level 2 (xla/debug_options_flags.cc:224):
//    IsInputWorthFusing (xla/service/gpu/triton_tiling_propagation.cc:949)
//    refuses an input whose operands exceed its output by more than 1 KiB
//    unless it has one user and only parameter/constant operands — a slice
//    of a loop-state get-tuple-element has neither; the cuBLAS path needs a
//    real operand buffer too;
//  - custom calls (cuDNN attention) and collectives take buffer operands;
//  - DynamicSliceFusionRewriter, which would let a cuBLAS GEMM
//    (IsLegacyCublasMatmul), a library custom call or a reduce-scatter read
//    the slice at an offset of the stack, runs only under
//    xla_gpu_enable_dynamic_slice_fusion (RunDynamicSliceFusionPasses,
//    xla/service/gpu/gpu_compiler.cc:1303), default false
//    (xla/debug_options_flags.cc:158); it does not match all-gathers
//    (dynamic_slice_fusion_rewriter.cc:532).
// So, unless every consumer fuses it, the slice is written to a fresh
// buffer each iteration, live from the slice to its last use in that
// iteration, and the fusing consumers read that buffer too. The run config
// key `xla.dynamic_slice_fusion: true` stands for the debug option.
//
// A slice every reader fuses is no buffer: LowerLoopSlices removes its
// dynamic-slice and tensor, and its readers read the stack in place (one
// slice's bytes per read, as the builder counted them). The ids after it
// close up, so the program is the one a builder emitting no slice would
// have written: a control dependency on the removed op moves to the op
// before it on the compute stream (the point in that stream's order the
// fused slice stood at), a region keeps the ops it had. The pass changes
// reads only, never what a reader writes: buffer assignment sizes each
// logical buffer from its HLO shape (Compiler::BufferSizeBytesFunction,
// xla/service/compiler.h), and the slice's readers keep theirs — dW = Xᵀ·dY
// of a fused weight slice is one layer's [k, n], not the stack (a builder
// that sized it from the operand it read once charged a 4-layer llama7b
// stack: LoopSlicesTest.AFusedWeightSliceLeavesTheWeightGradientOneLayer).
#ifndef GPUSIM_SIM_LOWER_XLA_LOOP_SLICES_H_
#define GPUSIM_SIM_LOWER_XLA_LOOP_SLICES_H_

#include <cstdint>
#include <string_view>
#include <vector>

#include "sim/config/spec.h"
#include "sim/ir/loop_slice.h"
#include "sim/ir/program.h"

namespace gpusim {

std::string_view SliceReaderName(SliceReader r);  // "a GEMM", "a custom call", ...

// A dot [lhs_nc x k] @ [k x rhs_nc] (sizes of the non-contracting and
// contracting dimensions; `*_vector`: that operand has no non-contracting
// dimension) stays a GEMM rather than a reduce / multiply.
bool DotStaysGemm(int64_t lhs_non_contracting, int64_t rhs_non_contracting, int64_t contracting,
                  bool lhs_vector, bool rhs_vector);

// A reader as XLA keeps it: a kDot becomes kGemm or kFused (DotStaysGemm).
SliceReader ResolveReader(const SliceRead& read);

// Whether a slice read by `reader` is its own buffer under `xla`.
// REQUIRES: reader != kDot (resolve it first).
bool SliceMaterialises(SliceReader reader, const XlaSpec& xla);

// Whether a slice read by all of `readers` is its own buffer.
bool SliceMaterialises(const std::vector<SliceReader>& readers, const XlaSpec& xla);

// Decides every annotated loop slice of `p` (Op::loop_slice): a buffer of
// its own, whose origin then reads "per-iteration slice of stacked
// residual `w2`, read by a GEMM (...)", or fused into its readers and
// removed. The step pipeline runs it on every program
// (sim/step/model_program.h).
void LowerLoopSlices(const XlaSpec& xla, Program* p);

}  // namespace gpusim

#endif  // GPUSIM_SIM_LOWER_XLA_LOOP_SLICES_H_
