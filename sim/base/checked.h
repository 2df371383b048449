// Checked int64 arithmetic for byte and element counts that come from input
// (config keys, trace fields): a product or sum that would not fit in int64
// is an input error naming its factors, never a wrapped (negative, or
// silently small) size.
//
//   ASSIGN_OR_RETURN(int64_t bytes, CheckedProduct({{"batch.per_device", b},
//                                                   {"batch.seq_len", s},
//                                                   {"model.d_model", d},
//                                                   {"bytes per element", 4}}));
//   -> "batch.per_device × batch.seq_len × model.d_model × bytes per element
//       = 8 × 4096 × 1000000000000 × 4 exceeds 2^63 - 1"
#ifndef GPUSIM_SIM_BASE_CHECKED_H_
#define GPUSIM_SIM_BASE_CHECKED_H_

#include <cstdint>
#include <initializer_list>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace gpusim {

// The largest device memory gpusim models: 2^46 bytes (64 TiB, some 450
// times an H200's). Device files refuse a larger memory.cuda_total, and the
// allocators clamp requests to it (sim/alloc/allocator.h, Note [Huge
// requests]), which keeps every rounding in range, and the PyTorch caching
// allocator's 48-bit size keys exact.
inline constexpr int64_t kMaxDeviceBytes = int64_t{1} << 46;

// Note [Bounded expansion]
// gpusim builds its IR per iteration where the input repeats work: an HLO
// while loop's trips (sim/import/hlo/hlo_loops.cc), a YAML program's loops,
// a Megatron step's micro-batches (sim/config/megatron_args.cc). One rule
// bounds all of them: at most kMaxExpandedIterations iterations are built
// in all, counted over every loop at every nesting depth (two nested loops
// of 300 trips are 300 + 300 x 300 iterations, not two loops under the cap;
// issue 27 found 1M ops, 12 s and 1.5 GB from a 1 KB HLO of two loops each
// under a per-loop cap). 65,536 iterations of a few-op body build in well
// under a second; a real scan (MaxText's 80 layers, Megatron's few thousand
// micro-batches at most) is far below it.
inline constexpr int64_t kMaxExpandedIterations = int64_t{1} << 16;

// One named operand: `name` is what the user can change (a key path such as
// "model.d_model") or a constant's meaning ("bytes per element").
struct NamedInt {
  std::string_view name;
  int64_t value;
};

// a × b and a + b; false when the exact result does not fit in int64.
inline bool CheckedMul(int64_t a, int64_t b, int64_t* out) { return !__builtin_mul_overflow(a, b, out); }
inline bool CheckedAdd(int64_t a, int64_t b, int64_t* out) { return !__builtin_add_overflow(a, b, out); }

// The product / sum of `operands`, or InvalidArgument "n1 × n2 ... = v1 × v2
// ... exceeds 2^63 - 1[ (what)]" (" + " for sums). REQUIRES: operands >= 0
// for a product's message to be meaningful (negative operands are computed
// exactly all the same).
absl::StatusOr<int64_t> CheckedProduct(std::initializer_list<NamedInt> operands, std::string_view what = "");
absl::StatusOr<int64_t> CheckedSum(std::initializer_list<NamedInt> operands, std::string_view what = "");

}  // namespace gpusim

#endif  // GPUSIM_SIM_BASE_CHECKED_H_
