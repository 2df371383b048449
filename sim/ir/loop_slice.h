// Per-iteration loop slices as a front-end emits them: a dynamic-slice of a
// stacked or scanned operand at the loop counter, with what the slice is
// and what reads it. Whether the slice becomes a buffer of its own is the
// XLA lowering's decision (sim/lower/xla/loop_slices.h LowerLoopSlices,
// Note [Materialised loop slices]), never the builder's.
#ifndef GPUSIM_SIM_IR_LOOP_SLICE_H_
#define GPUSIM_SIM_IR_LOOP_SLICE_H_

#include <cstdint>
#include <string>
#include <vector>

namespace gpusim {

// What reads a loop slice.
enum class SliceReader {
  kFused,          // elementwise / reduce / cast: the slice fuses into its loop fusion
  kGemm,           // a GEMM (a layer's projection, its weight gradient)
  kDot,            // a dot XLA may strength-reduce: lowering decides from its `DotDims`
  kCustomCall,     // cuDNN attention and other library calls
  kAllGather,
  kReduceScatter,
};

// A dot [lhs_non_contracting x contracting] @ [contracting x rhs_non_contracting]
// (`*_vector`: that operand has no non-contracting dimension).
struct DotDims {
  int64_t lhs_non_contracting = 0;
  int64_t rhs_non_contracting = 0;
  int64_t contracting = 0;
  bool lhs_vector = false;
  bool rhs_vector = false;
};

// One reader of a slice; `dot` for kDot only.
struct SliceRead {
  SliceReader kind = SliceReader::kFused;
  DotDims dot;
};

// What the sliced operand is, for the slice's origin in `explain`.
enum class SliceSource {
  kStackedWeights,   // a scanned layer stack's parameters
  kStackedResidual,  // a residual stacked by the forward loop for the backward one
  kScannedInput,     // an xs operand of lax.scan
};

// The annotation of a kDynamicSlice op (Op::loop_slice indexes
// Program::loop_slices): its input 0 is the stack, its one output the slice.
struct LoopSlice {
  SliceSource source = SliceSource::kStackedResidual;
  std::string value;               // the sliced value's name ("w2", "act")
  std::vector<SliceRead> readers;  // every read of the slice in its iteration
};

}  // namespace gpusim

#endif  // GPUSIM_SIM_IR_LOOP_SLICE_H_
