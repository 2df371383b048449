#include "sim/lower/xla/loop_slices.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace gpusim {

std::string_view SliceReaderName(SliceReader r) {
  switch (r) {
    case SliceReader::kFused: return "a loop fusion";
    case SliceReader::kGemm: return "a GEMM";
    case SliceReader::kCustomCall: return "a custom call";
    case SliceReader::kAllGather: return "an all-gather";
    case SliceReader::kReduceScatter: return "a reduce-scatter";
  }
  return "?";
}

bool DotStaysGemm(int64_t lhs_non_contracting, int64_t rhs_non_contracting, int64_t contracting,
                  bool lhs_vector, bool rhs_vector) {
  // GpuAlgebraicSimplifierVisitor::ShouldStrengthReduceDotToReduce: vector ·
  // vector dots, and dots under the 10,000,000 threshold, become reduces.
  if (lhs_vector && rhs_vector) return false;
  constexpr int64_t kThreshold = 10'000'000;
  const double size = (static_cast<double>(lhs_non_contracting) + static_cast<double>(rhs_non_contracting)) *
                      static_cast<double>(contracting);
  return size >= static_cast<double>(kThreshold);
}

bool SliceMaterialises(SliceReader reader, const XlaSpec& xla) {
  switch (reader) {
    case SliceReader::kFused: return false;
    case SliceReader::kAllGather: return true;  // not a DynamicSliceFusionRewriter match
    case SliceReader::kGemm:
    case SliceReader::kCustomCall:
    case SliceReader::kReduceScatter: return !xla.dynamic_slice_fusion;
  }
  return true;
}

bool SliceMaterialises(const std::vector<SliceReader>& readers, const XlaSpec& xla) {
  return std::any_of(readers.begin(), readers.end(), [&](SliceReader r) { return SliceMaterialises(r, xla); });
}

TensorId MaterialiseSlice(ProgramBuilder& b, TensorId source, const std::vector<int64_t>& shape, DType dtype,
                          Role role, const std::string& name, const std::string& what, SliceReader reader) {
  const TensorId t = b.AddTensor(name, shape, dtype, role,
                                 absl::StrCat("per-iteration slice of ", what, ", read by ", std::string(SliceReaderName(reader)),
                                              " (a buffer of its own: Note [Materialised loop slices])"));
  Op& op = b.AddOp(name, OpKind::kDynamicSlice, {source}, {t}, 0);
  op.bytes_read = b.tensor(t).bytes();
  op.dtype = dtype;
  return t;
}

}  // namespace gpusim
