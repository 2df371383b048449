#include "sim/lower/xla/fusion.h"

#include <map>
#include <string>

namespace gpusim {

// Note [What materialises]
// The unoptimised module JAX prints has one instruction per jnp operation;
// the GPU compiler fuses most of them away before buffer assignment. The
// importer keeps XLA's outcome, not its passes:
//  * Elementwise ops, broadcast, iota, convert, slice, dynamic-slice, pad,
//    concatenate, reverse, select, transpose and gather are loop-fusible
//    (xla/service/gpu/gpu_fusible.cc IsFusibleAsMultiOutputFusionRoot /
//    IsLoopFusibleAsProducer; xla/service/instruction_fusion.cc
//    InstructionFusion::IsExpensive keeps none of these apart): a chain of
//    them fuses into its consumer and has no buffer of its own
//    (xla/service/gpu/transforms/priority_fusion.cc fuses producers into all
//    their consumers). A fusible value is materialised (one loop fusion, one
//    buffer) only where a consumer needs a buffer: a library call, a
//    collective, control flow, loop state, an entry output.
//  * Constants are read-only literals placed in their own allocations (not
//    temps: buffer_assignment.cc, constants are "IsConstant" allocations);
//    scalar ones fuse into their users.
//  * Reductions (reduce, reduce-window) are kernels of their own whose
//    output is a buffer; their operand chains fuse in as input fusions
//    (gpu_fusible.cc IsReductionFromOrToContiguousDimensions,
//    IsInputFusibleReduction).
//  * Dots become cuBLAS / cuBLASLt custom calls (xla/service/gpu/
//    transforms/gemm_rewriter.cc), convolutions cuDNN calls
//    (conv_rewriter.cc); library calls read materialised operands, so a
//    fusible operand chain is materialised for them (and a dynamic-slice
//    feeding one is a buffer). Custom calls, sort, fft, rng and the
//    collectives likewise.
//  * Bitcasts and reshapes are views (layout assignment makes reshapes
//    bitcasts, xla/service/gpu/gpu_layout_assignment.cc; bitcasts own no
//    buffer, HloDataflowAnalysis: "kBitcast defines no value"); tuples and
//    get-tuple-element forward buffers (tuple_points_to_analysis.cc).
//  * dynamic-update-slice and scatter update operand 0's buffer in place
//    (xla/service/gpu/ir_emission_utils.cc
//    CanEmitFusedDynamicUpdateSliceInPlaceForGpu; copy_insertion.cc adds a
//    copy when the old value is still read later).
//  * call is inlined (xla/service/call_inliner.cc); while and conditional
//    are control flow (the importer handles their state).
//  * An optimised module's `fusion` instruction is one kernel.
HloOpClass ClassifyHloOpcode(std::string_view opcode) {
  static const std::map<std::string, HloOpClass, std::less<>>* const kClasses = [] {
    auto* m = new std::map<std::string, HloOpClass, std::less<>>();
    for (const char* op :
         {"abs", "add", "and", "atan2", "broadcast", "cbrt", "ceil", "clamp", "compare", "complex", "concatenate",
          "convert", "copy", "cosine", "divide", "dynamic-slice", "erf", "exponential", "exponential-minus-one", "floor",
          "gather", "imag", "iota", "is-finite", "log", "log-plus-one", "logistic", "maximum", "minimum",
          "multiply", "negate", "not", "or", "pad", "popcnt", "power", "real", "reduce-precision", "remainder",
          "reverse", "round-nearest-afz", "round-nearest-even", "rsqrt", "select", "shift-left",
          "shift-right-arithmetic", "shift-right-logical", "sign", "sine", "slice", "sqrt", "subtract", "tan",
          "tanh", "transpose", "xor", "stochastic-convert", "bitcast-convert", "count-leading-zeros", "map"}) {
      (*m)[op] = HloOpClass::kFusible;
    }
    for (const char* op : {"bitcast", "reshape", "get-tuple-element", "tuple"}) (*m)[op] = HloOpClass::kView;
    for (const char* op : {"reduce", "reduce-window"}) (*m)[op] = HloOpClass::kReduction;
    for (const char* op :
         {"dot", "convolution", "custom-call", "sort", "fft", "rng", "rng-bit-generator", "triangular-solve",
          "cholesky", "all-gather", "all-reduce", "reduce-scatter", "all-to-all", "collective-permute",
          "all-gather-start", "all-reduce-start", "collective-permute-start", "select-and-scatter",
          "batch-norm-training", "batch-norm-inference", "batch-norm-grad", "top-k", "ragged-all-to-all",
          "ragged-dot"}) {
      (*m)[op] = HloOpClass::kKernel;
    }
    for (const char* op : {"dynamic-update-slice", "scatter"}) (*m)[op] = HloOpClass::kInPlace;
    for (const char* op : {"while", "call", "conditional"}) (*m)[op] = HloOpClass::kControl;
    for (const char* op : {"after-all", "opt-barrier", "partition-id", "replica-id", "add-dependency",
                           "all-gather-done", "all-reduce-done", "collective-permute-done", "domain"}) {
      (*m)[op] = HloOpClass::kNoOp;
    }
    (*m)["parameter"] = HloOpClass::kParameter;
    (*m)["constant"] = HloOpClass::kConstant;
    (*m)["fusion"] = HloOpClass::kFusion;
    return m;
  }();
  auto it = kClasses->find(opcode);
  return it == kClasses->end() ? HloOpClass::kUnknown : it->second;
}

HloAsyncForm ClassifyAsync(std::string_view op) {
  HloAsyncForm f;
  auto ends = [&](std::string_view suffix) {
    return op.size() > suffix.size() && op.substr(op.size() - suffix.size()) == suffix;
  };
  if (op == "all-reduce-start") {
    f.start = true;
  } else if (op == "all-reduce-done") {
    f.done = true;
  } else if (op == "copy-start") {
    f.start = true;
    f.operands_at = 1;
  } else if (op == "copy-done") {
    f.done = true;
    f.result_at = 0;
  } else if (ends("-start")) {  // async-start and its printed forms: fusion-start, custom-call-start, ...
    f.start = true;
    f.operands_at = 0;
  } else if (ends("-done")) {
    f.done = true;
    f.result_at = 1;
  }
  return f;
}

bool OperandsFuseInto(HloOpClass c) {
  return c == HloOpClass::kFusible || c == HloOpClass::kReduction || c == HloOpClass::kInPlace;
}

// Note [Dot strength reduction]
// xla/hlo/transforms/simplifiers/algebraic_simplifier.cc HandleDot removes
// degenerate (size-1) contracting dimensions and rewrites a dot without
// contracting dimensions as multiply(broadcast, broadcast); the GPU
// simplifier (xla/service/gpu/transforms/algebraic_simplifier.cc
// ShouldStrengthReduceDotToReduce) turns vector-vector dots into
// reduce(multiply). Both then fuse like any elementwise op or reduction.
HloOpClass ClassifyDot(int64_t m, int64_t n, int64_t k) {
  if (k <= 1) return HloOpClass::kFusible;
  if (m <= 1 && n <= 1) return HloOpClass::kReduction;
  return HloOpClass::kKernel;
}

}  // namespace gpusim
