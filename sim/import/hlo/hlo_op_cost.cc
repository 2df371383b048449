#include "sim/import/hlo/hlo_op_cost.h"

#include <set>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "sim/base/status.h"
#include "sim/lower/xla/fusion.h"

namespace gpusim {
namespace {

std::vector<int64_t> BraceInts(const std::string& text) {
  std::vector<int64_t> out;
  absl::string_view s = absl::StripAsciiWhitespace(text);
  s = absl::StripPrefix(s, "{");
  s = absl::StripSuffix(s, "}");
  for (absl::string_view p : absl::StrSplit(s, ',', absl::SkipWhitespace())) {
    int64_t v = 0;
    if (absl::SimpleAtoi(absl::StripAsciiWhitespace(p), &v)) out.push_back(v);
  }
  return out;
}

int64_t Product(const std::vector<int64_t>& dims, const std::set<int64_t>& keep, bool in) {
  int64_t p = 1;
  for (size_t i = 0; i < dims.size(); ++i) {
    if ((keep.count(static_cast<int64_t>(i)) > 0) == in) p *= dims[i];
  }
  return p;
}

// dot: [batch] x (m x k) @ (k x n) from the dimension numbers.
HloKernelCost DotCost(const HloInstruction& ins, const HloShape& lhs, const HloShape& rhs) {
  HloKernelCost c;
  c.kind = OpKind::kMatmul;
  const std::vector<int64_t> lc = BraceInts(ins.attr("lhs_contracting_dims"));
  const std::vector<int64_t> lb = BraceInts(ins.attr("lhs_batch_dims"));
  const std::vector<int64_t> rc = BraceInts(ins.attr("rhs_contracting_dims"));
  const std::vector<int64_t> rb = BraceInts(ins.attr("rhs_batch_dims"));
  std::set<int64_t> lcs(lc.begin(), lc.end()), lbs(lb.begin(), lb.end());
  std::set<int64_t> rcs(rc.begin(), rc.end()), rbs(rb.begin(), rb.end());
  std::set<int64_t> lboth = lcs, rboth = rcs;
  lboth.insert(lbs.begin(), lbs.end());
  rboth.insert(rbs.begin(), rbs.end());
  c.batch = Product(lhs.dims, lbs, true);
  c.k = Product(lhs.dims, lcs, true);
  c.m = Product(lhs.dims, lboth, false);
  c.n = Product(rhs.dims, rboth, false);
  c.flops = 2.0 * static_cast<double>(c.batch) * static_cast<double>(c.m) * static_cast<double>(c.n) *
            static_cast<double>(c.k);
  return c;
}

// convolution: 2 x output elements x (kernel elements / output features),
// the output-feature dimension of the kernel from dim_labels (`b01f_01io->b01f`).
HloKernelCost ConvCost(const HloInstruction& ins, const HloShape& out, const HloShape& kernel) {
  HloKernelCost c;
  c.kind = OpKind::kMatmul;
  const std::string& labels = ins.attr("dim_labels");
  const size_t us = labels.find('_'), arrow = labels.find("->");
  int64_t per_output = kernel.ElementCount();
  if (us != std::string::npos && arrow != std::string::npos) {
    const std::string kl = labels.substr(us + 1, arrow - us - 1);
    const size_t o = kl.find('o');
    if (o != std::string::npos && o < kernel.dims.size() && kernel.dims[o] > 0) per_output /= kernel.dims[o];
  }
  c.flops = 2.0 * static_cast<double>(out.ElementCount()) * static_cast<double>(per_output);
  return c;
}

const HloShape& FirstArray(const HloShape& s) {
  if (!s.tuple || s.elements.empty()) return s;
  return FirstArray(s.elements[0]);
}

// Custom-call targets gpusim sizes and times. cuDNN fused attention
// (xla/service/gpu/cublas_cudnn.cc kCudnnfMHA*CallTarget) reads Q [B,T,N,H]
// and K [B,S,N,H]: 4·B·N·T·S·H FLOPs forward, twice that backward
// (two matmuls forward, four backward). cuBLAS gemms (kGemmCallTarget,
// kCublasLtMatmulCallTarget) are [batch] m x k @ k x n over their first two
// operands.
absl::StatusOr<HloKernelCost> CustomCallCost(const HloInstruction& ins,
                                             const std::vector<const HloShape*>& operands) {
  std::string target = ins.attr("custom_call_target");
  target = std::string(absl::StripSuffix(absl::StripPrefix(target, "\""), "\""));
  HloKernelCost c;
  static const std::set<std::string>* const kAnnotations = new std::set<std::string>{
      "Sharding", "SPMDFullToShardShape", "SPMDShardToFullShape", "annotate_device_placement",
      "MoveToHost", "MoveToDevice", "X64Combine", "X64SplitLow", "X64SplitHigh", "LayoutConstraint"};
  if (kAnnotations->count(target)) {
    c.pass_through = true;
    return c;
  }
  if (absl::StartsWith(target, "__cudnn$fmha") || absl::StartsWith(target, "__cudnn$fhma")) {
    c.kind = OpKind::kAttention;
    if (operands.size() >= 2 && operands[0]->dims.size() == 4 && operands[1]->dims.size() == 4) {
      const std::vector<int64_t>& q = operands[0]->dims;
      const std::vector<int64_t>& k = operands[1]->dims;
      c.flops = 4.0 * static_cast<double>(q[0]) * static_cast<double>(q[2]) * static_cast<double>(q[1]) *
                static_cast<double>(k[1]) * static_cast<double>(q[3]);
      if (absl::StrContains(target, "Backward")) c.flops *= 2;
    }
    return c;
  }
  if (target == "__cublas$gemm" || target == "__cublas$lt$matmul" || target == "__cublas$lt$matmul$f8") {
    c.kind = OpKind::kMatmul;
    if (operands.size() >= 2 && operands[0]->dims.size() >= 2 && operands[1]->dims.size() >= 2) {
      const std::vector<int64_t>& a = operands[0]->dims;
      const std::vector<int64_t>& b = operands[1]->dims;
      c.m = a[a.size() - 2];
      c.k = a.back();
      c.n = b.back();
      for (size_t i = 0; i + 2 < a.size(); ++i) c.batch *= a[i];
      c.flops = 2.0 * static_cast<double>(c.batch * c.m) * static_cast<double>(c.n * c.k);
    }
    return c;
  }
  if (target == "cu_threefry2x32" || target == "__gpu$xla.gpu.ext.cholesky") {
    c.flops = static_cast<double>(FirstArray(ins.shape).ElementCount());
    return c;
  }
  return absl::UnimplementedError(absl::StrCat(
      "custom-call target '", target,
      "' is not modelled (known: __cudnn$fmha*, __cublas$gemm, __cublas$lt$matmul, cu_threefry2x32, and the "
      "annotations Sharding, SPMDFullToShardShape, SPMDShardToFullShape, annotate_device_placement, MoveToHost, "
      "MoveToDevice)"));
}

// FLOPs of a fused computation: its dots, convolutions and elementwise ops.
double FusedFlops(const HloModule& m, const HloComputation& comp, int depth) {
  double f = 0;
  for (const HloInstruction& ins : comp.instructions) {
    std::vector<const HloShape*> ops;
    for (int o : ins.operands) ops.push_back(&comp.instructions[static_cast<size_t>(o)].shape);
    if (ins.opcode == "dot" && ops.size() == 2) {
      f += DotCost(ins, *ops[0], *ops[1]).flops;
    } else if (ins.opcode == "convolution" && ops.size() == 2) {
      f += ConvCost(ins, ins.shape, *ops[1]).flops;
    } else if (ins.opcode == "reduce" && !ops.empty()) {
      f += static_cast<double>(ops[0]->ElementCount());
    } else if (ClassifyHloOpcode(ins.opcode) == HloOpClass::kFusible) {
      f += ElementwiseFlops(ins);
    } else if (ins.opcode == "fusion" && depth < 8) {
      for (const auto& [key, names] : ins.called) {
        for (const std::string& n : names) f += FusedFlops(m, m.computation(n), depth + 1);
      }
    }
  }
  return f;
}

bool FusionHas(const HloModule& m, const HloComputation& comp, const std::string& opcode) {
  for (const HloInstruction& ins : comp.instructions) {
    if (ins.opcode == opcode) return true;
  }
  (void)m;
  return false;
}

}  // namespace

HloFusionTraffic FusionTraffic(const HloModule& m, const HloInstruction& fusion,
                               const std::vector<int64_t>& operand_bytes, int64_t result_bytes) {
  HloFusionTraffic t;
  t.read = operand_bytes;
  t.written = result_bytes;
  auto calls = fusion.called.find("calls");
  if (calls == fusion.called.end() || calls->second.size() != 1) return t;
  const HloComputation& f = m.computation(calls->second[0]);
  std::vector<std::vector<int>> users(f.instructions.size());
  for (size_t i = 0; i < f.instructions.size(); ++i) {
    for (int o : f.instructions[i].operands) users[static_cast<size_t>(o)].push_back(static_cast<int>(i));
  }
  auto through_bitcasts = [&](int i) {
    while (f.instructions[static_cast<size_t>(i)].opcode == "bitcast" && !f.instructions[static_cast<size_t>(i)].operands.empty()) {
      i = f.instructions[static_cast<size_t>(i)].operands[0];
    }
    return i;
  };
  const int root = through_bitcasts(f.root);
  const HloInstruction& r = f.instructions[static_cast<size_t>(root)];
  const int in_place = r.opcode == "dynamic-update-slice" && r.operands.size() > 1 ? through_bitcasts(r.operands[0]) : -1;
  if (in_place >= 0) t.written = std::min(result_bytes, std::max<int64_t>(0, f.instructions[static_cast<size_t>(r.operands[1])].shape.ArrayBytes()));
  for (size_t p = 0; p < f.parameters.size() && p < t.read.size(); ++p) {
    const int param = f.parameters[p];
    if (param == in_place) {
      t.read[p] = 0;
      t.in_place_operand = static_cast<int64_t>(p);
      continue;
    }
    int64_t sliced = 0;
    bool only_sliced = !users[static_cast<size_t>(param)].empty();
    for (int u : users[static_cast<size_t>(param)]) {
      const HloInstruction& x = f.instructions[static_cast<size_t>(u)];
      const bool slice = (x.opcode == "dynamic-slice" || x.opcode == "slice" || x.opcode == "gather") &&
                         !x.operands.empty() && x.operands[0] == param;
      only_sliced = only_sliced && slice;
      if (slice) sliced += std::max<int64_t>(0, x.shape.ArrayBytes());
    }
    if (only_sliced) t.read[p] = std::min(t.read[p], sliced);
  }
  return t;
}

HloKernelCost DotKernelCost(const HloInstruction& ins, const HloShape& lhs, const HloShape& rhs) {
  return DotCost(ins, lhs, rhs);
}

absl::StatusOr<DType> HloElementDType(const std::string& e) {
  if (e == "f32") return DType::kF32;
  if (e == "bf16") return DType::kBF16;
  if (e == "f16" || e == "s16" || e == "u16") return DType::kF16;
  if (e == "s32" || e == "u32") return DType::kI32;
  if (e == "s64" || e == "u64" || e == "f64" || e == "c64") return DType::kI64;
  if (e == "s8" || e == "u8") return DType::kU8;
  if (e == "pred") return DType::kPred;
  if (absl::StartsWith(e, "f8")) return DType::kF8;
  return absl::UnimplementedError(absl::StrCat("element type '", e, "' has no gpusim dtype of its size"));
}

double ElementwiseFlops(const HloInstruction& ins) {
  static const std::set<std::string>* const kMoves = new std::set<std::string>{
      "broadcast", "slice", "dynamic-slice", "concatenate", "pad", "reverse", "transpose", "copy", "iota",
      "gather", "convert", "bitcast-convert", "reshape", "bitcast"};
  if (kMoves->count(ins.opcode) || ins.shape.tuple) return 0;
  return static_cast<double>(ins.shape.ElementCount());
}

int64_t CollectiveGroupSize(const HloInstruction& ins, int64_t devices) {
  const std::string& g = ins.attr("replica_groups");
  if (g.empty() || g == "{}") return devices;
  if (g[0] == '[') {  // iota form [groups,size]<=[devices]
    const size_t close = g.find(']');
    std::vector<int64_t> dims = BraceInts(g.substr(1, close - 1));
    return dims.empty() ? devices : dims.back();
  }
  // {{0,1,2,3},{4,5,6,7}}: the first group's size.
  const size_t open = g.find('{', 1), close = g.find('}', open == std::string::npos ? 0 : open);
  if (open == std::string::npos || close == std::string::npos) return devices;
  return static_cast<int64_t>(BraceInts(g.substr(open, close - open + 1)).size());
}

int64_t KnownTripCount(const HloInstruction& ins) {
  const std::string& cfg = ins.attr("backend_config");
  const size_t at = cfg.find("known_trip_count");
  if (at == std::string::npos) return -1;
  const size_t n = cfg.find("\"n\"", at);
  if (n == std::string::npos) return -1;
  size_t i = cfg.find(':', n);
  if (i == std::string::npos) return -1;
  ++i;
  while (i < cfg.size() && (cfg[i] == ' ' || cfg[i] == '"' || cfg[i] == '\\')) ++i;
  size_t j = i;
  while (j < cfg.size() && std::isdigit(static_cast<unsigned char>(cfg[j]))) ++j;
  int64_t v = -1;
  if (!absl::SimpleAtoi(cfg.substr(i, j - i), &v)) return -1;
  return v;
}

absl::StatusOr<HloKernelCost> KernelCost(const HloModule& m, const HloInstruction& ins,
                                         const std::vector<const HloShape*>& operands) {
  HloKernelCost c;
  const HloShape& out = FirstArray(ins.shape);
  if (!out.tuple) {
    auto dt = HloElementDType(operands.empty() ? out.element : FirstArray(*operands[0]).element);
    if (dt.ok()) c.dtype = *dt;
  }
  const int64_t devices = m.num_partitions * m.replica_count;
  const std::string& op = ins.opcode;
  if (op == "dot" && operands.size() == 2) {
    HloKernelCost d = DotCost(ins, *operands[0], *operands[1]);
    d.dtype = c.dtype;
    return d;
  }
  if (op == "convolution" && operands.size() == 2) {
    HloKernelCost d = ConvCost(ins, out, *operands[1]);
    d.dtype = c.dtype;
    return d;
  }
  if (op == "custom-call") {
    ASSIGN_OR_RETURN(HloKernelCost d, CustomCallCost(ins, operands));
    d.dtype = c.dtype;
    return d;
  }
  if (op == "reduce" || op == "reduce-window") {
    c.kind = OpKind::kReduce;
    for (const HloShape* s : operands) c.flops += static_cast<double>(s->ElementCount()) / 2;
    return c;
  }
  if (op == "all-gather" || op == "all-gather-start") c.kind = OpKind::kAllGather;
  if (op == "reduce-scatter") c.kind = OpKind::kReduceScatter;
  if (op == "all-reduce" || op == "all-reduce-start") c.kind = OpKind::kAllReduce;
  // all-to-all: every device sends (n-1)/n of its buffer, the bus factor
  // of an all-gather of the same bytes (NCCL tests, PERFORMANCE.md).
  if (op == "all-to-all" || op == "ragged-all-to-all") c.kind = OpKind::kAllGather;
  if (IsCollective(c.kind)) {
    c.group = CollectiveGroupSize(ins, devices);
    return c;
  }
  // collective-permute: one send and one receive of the buffer, timed as a
  // two-device all-gather of twice its bytes (set by the importer).
  if (op == "collective-permute" || op == "collective-permute-start") {
    c.kind = OpKind::kAllGather;
    c.group = 2;
    return c;
  }
  if (op == "fusion") {
    for (const auto& [key, names] : ins.called) {
      for (const std::string& n : names) {
        const HloComputation& fc = m.computation(n);
        c.flops += FusedFlops(m, fc, 0);
        if (FusionHas(m, fc, "dot") || FusionHas(m, fc, "convolution")) c.kind = OpKind::kMatmul;
        else if (c.kind != OpKind::kMatmul && FusionHas(m, fc, "reduce")) c.kind = OpKind::kReduce;
      }
    }
    return c;
  }
  if (op == "sort") {
    const double n = static_cast<double>(out.ElementCount());
    c.flops = n * 16;  // a few passes of a radix / merge sort; memory-bound in practice
    return c;
  }
  c.flops = static_cast<double>(out.ElementCount());
  return c;
}

}  // namespace gpusim
