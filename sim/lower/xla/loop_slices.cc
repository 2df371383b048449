#include "sim/lower/xla/loop_slices.h"

#include <algorithm>
#include <string>

#include "absl/strings/str_cat.h"
#include "sim/base/status.h"
#include "sim/lower/lower.h"
#include "sim/lower/stream_for.h"

namespace gpusim {

std::string_view SliceReaderName(SliceReader r) {
  switch (r) {
    case SliceReader::kFused: return "a loop fusion";
    case SliceReader::kGemm: return "a GEMM";
    case SliceReader::kDot: return "a dot";
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

SliceReader ResolveReader(const SliceRead& read) {
  if (read.kind != SliceReader::kDot) return read.kind;
  const DotDims& d = read.dot;
  return DotStaysGemm(d.lhs_non_contracting, d.rhs_non_contracting, d.contracting, d.lhs_vector, d.rhs_vector)
             ? SliceReader::kGemm
             : SliceReader::kFused;
}

bool SliceMaterialises(SliceReader reader, const XlaSpec& xla) {
  switch (reader) {
    case SliceReader::kFused: return false;
    case SliceReader::kAllGather: return true;  // not a DynamicSliceFusionRewriter match
    case SliceReader::kGemm:
    case SliceReader::kCustomCall:
    case SliceReader::kReduceScatter: return !xla.dynamic_slice_fusion;
    case SliceReader::kDot: break;
  }
  GPUSIM_CHECK(false);  // a kDot reader is resolved first (ResolveReader)
  return true;
}

bool SliceMaterialises(const std::vector<SliceReader>& readers, const XlaSpec& xla) {
  return std::any_of(readers.begin(), readers.end(), [&](SliceReader r) { return SliceMaterialises(r, xla); });
}

namespace {

std::string SourceWords(const LoopSlice& s) {
  switch (s.source) {
    case SliceSource::kStackedWeights: return absl::StrCat("stacked weights `", s.value, "`");
    case SliceSource::kStackedResidual: return absl::StrCat("stacked residual `", s.value, "`");
    case SliceSource::kScannedInput: return absl::StrCat("scanned input `", s.value, "`");
  }
  return s.value;
}

// Removes the ops `drop_op` marks and the tensors `read_as` gives a
// stand-in for (its readers read the stand-in instead), and renumbers the
// rest in order: the program a builder emitting neither would have written.
void CloseUp(const std::vector<bool>& drop_op, const std::vector<TensorId>& read_as, Program* p) {
  const size_t n_tensors = p->tensors.size(), n_ops = p->ops.size();
  std::vector<TensorId> tensor_id(n_tensors, kNoTensor);
  TensorId next_tensor = 0;
  for (size_t t = 0; t < n_tensors; ++t) {
    if (read_as[t] == kNoTensor) tensor_id[t] = next_tensor++;
  }
  auto remap_tensor = [&](TensorId t) {
    while (read_as[static_cast<size_t>(t)] != kNoTensor) t = read_as[static_cast<size_t>(t)];
    return tensor_id[static_cast<size_t>(t)];
  };
  // kept_before[i]: kept ops before op i; stand_in[i]: for a removed op, the
  // kept op before it on the compute stream (-1: none).
  std::vector<OpId> op_id(n_ops, -1), kept_before(n_ops + 1, 0), stand_in(n_ops, -1);
  OpId next_op = 0, last_compute = -1;
  for (size_t o = 0; o < n_ops; ++o) {
    kept_before[o] = next_op;
    if (drop_op[o]) {
      stand_in[o] = last_compute;
      continue;
    }
    op_id[o] = next_op++;
    if (StreamFor(p->ops[o]) == kComputeStream) last_compute = op_id[o];
  }
  kept_before[n_ops] = next_op;

  std::vector<Tensor> tensors;
  tensors.reserve(static_cast<size_t>(next_tensor));
  for (size_t t = 0; t < n_tensors; ++t) {
    if (tensor_id[t] == kNoTensor) continue;
    Tensor& x = p->tensors[t];
    x.id = tensor_id[t];
    if (x.aliases != kNoTensor) x.aliases = remap_tensor(x.aliases);
    tensors.push_back(std::move(x));
  }
  std::vector<Op> ops;
  ops.reserve(static_cast<size_t>(next_op));
  for (size_t o = 0; o < n_ops; ++o) {
    if (drop_op[o]) continue;
    Op& op = p->ops[o];
    op.id = op_id[o];
    for (TensorId& t : op.inputs) t = remap_tensor(t);
    for (TensorId& t : op.outputs) t = remap_tensor(t);
    std::vector<OpId> deps;
    for (OpId d : op.control_deps) {
      const OpId to = drop_op[static_cast<size_t>(d)] ? stand_in[static_cast<size_t>(d)] : op_id[static_cast<size_t>(d)];
      if (to >= 0) deps.push_back(to);
    }
    op.control_deps = std::move(deps);
    ops.push_back(std::move(op));
  }
  for (Region& r : p->regions) {
    const OpId first = kept_before[static_cast<size_t>(r.first)];
    r.last = kept_before[static_cast<size_t>(r.last) + 1] - 1;
    r.first = first;
  }
  p->tensors = std::move(tensors);
  p->ops = std::move(ops);
}

}  // namespace

void LowerLoopSlices(const XlaSpec& xla, Program* p) {
  std::vector<bool> drop_op(p->ops.size(), false);
  std::vector<TensorId> read_as(p->tensors.size(), kNoTensor);
  bool fused = false;
  std::vector<SliceReader> readers;
  for (const Op& op : p->ops) {
    if (op.loop_slice < 0) continue;
    GPUSIM_CHECK(op.kind == OpKind::kDynamicSlice && op.inputs.size() == 1 && op.outputs.size() == 1);
    const LoopSlice& s = p->loop_slices[static_cast<size_t>(op.loop_slice)];
    readers.clear();
    for (const SliceRead& r : s.readers) readers.push_back(ResolveReader(r));
    const auto why =
        std::find_if(readers.begin(), readers.end(), [&](SliceReader r) { return SliceMaterialises(r, xla); });
    Tensor& t = p->tensors[static_cast<size_t>(op.outputs[0])];
    if (why != readers.end()) {
      t.origin_kind = absl::StrCat("per-iteration slice of ", SourceWords(s), ", read by ",
                                   std::string(SliceReaderName(*why)));
      t.origin = absl::StrCat(t.origin_kind, " (a buffer of its own: Note [Materialised loop slices])");
    } else {
      drop_op[static_cast<size_t>(op.id)] = true;
      read_as[static_cast<size_t>(t.id)] = op.inputs[0];
      fused = true;
    }
  }
  if (fused) CloseUp(drop_op, read_as, p);
}

}  // namespace gpusim
