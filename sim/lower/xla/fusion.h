// XLA-GPU fusion over an imported HLO module: which instructions run as a
// kernel of their own, which fuse into their consumers, and which are views
// or control flow. The HLO importer (sim/import/hlo/hlo_to_program.h)
// materialises a buffer exactly where these rules say XLA's GPU pipeline
// would: Note [What materialises] in fusion.cc, with the XLA source of each
// rule.
#ifndef GPUSIM_SIM_LOWER_XLA_FUSION_H_
#define GPUSIM_SIM_LOWER_XLA_FUSION_H_

#include <cstdint>
#include <string_view>

namespace gpusim {

enum class HloOpClass {
  kParameter,  // parameter
  kConstant,   // constant: a read-only literal, fused into its users
  kFusible,    // elementwise, broadcast, iota, slices, concatenate, ...: fuse into consumers
  kView,       // bitcast, reshape, get-tuple-element, tuple: no kernel, no buffer
  kReduction,  // reduce, reduce-window: own kernel; operand chains fuse into it
  kKernel,     // dot, convolution, custom-call, sort, fft, rng, collectives: own kernel, operands materialised
  kInPlace,    // dynamic-update-slice, scatter: written into operand 0's buffer
  kControl,    // while, call, conditional
  kFusion,     // fusion (an optimised module): one kernel with its own computation
  kNoOp,       // after-all, opt-barrier, partition-id, replica-id: no memory
  kUnknown,
};

HloOpClass ClassifyHloOpcode(std::string_view opcode);

// True when the operands of an instruction of class `c` can be fused into
// its kernel, so that an operand chain of kFusible instructions needs no
// buffer of its own (loop and input fusion); false when the kernel reads
// materialised buffers (library calls, collectives, control flow).
bool OperandsFuseInto(HloOpClass c);

// The async pairs of a compiled module (xla/hlo/analysis/
// hlo_dataflow_analysis.cc UpdateAsyncStartValueSet, UpdateAsyncDoneValueSet,
// UpdateCopyStartValueSet, UpdateCopyDoneValueSet, the collectives' starts
// and dones): X-start runs the wrapped op and returns a tuple holding its
// operands at {operands_at} (-1: none), the result and a context; X-done
// returns the start's {result_at} ({} when -1).
struct HloAsyncForm {
  bool start = false, done = false;
  int64_t operands_at = -1;
  int64_t result_at = -1;
};
HloAsyncForm ClassifyAsync(std::string_view opcode);

// A dot's class from its shape, after XLA's dot strength reduction: no
// contraction (k = 1, an outer product) is a multiply of broadcasts, so
// kFusible; a vector-vector product (m = n = 1) a reduction; any other a
// library gemm, kKernel.
HloOpClass ClassifyDot(int64_t m, int64_t n, int64_t k);

}  // namespace gpusim

#endif  // GPUSIM_SIM_LOWER_XLA_FUSION_H_
