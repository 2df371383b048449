// Kineto kernels to per-op measurements; see kernel_measurements.h,
// Note [Kernels to op measurements].
#include "sim/calibrate/kernel_measurements.h"

#include <algorithm>
#include <cctype>
#include <set>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "sim/base/status.h"
#include "sim/import/kineto.h"

namespace gpusim {
namespace {

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

bool ContainsAny(const std::string& haystack, std::initializer_list<std::string_view> needles) {
  for (std::string_view n : needles) {
    if (haystack.find(n) != std::string::npos) return true;
  }
  return false;
}

// The element type of a recorded input ("Input type"); nullopt for a
// non-tensor ("Scalar", "ScalarList", "" for None) or a dtype gpusim lacks.
// Names as c10::toString(ScalarType) / caffe2::TypeMeta print them.
std::optional<DType> TensorDType(const std::string& t) {
  if (t == "c10::BFloat16") return DType::kBF16;
  if (t == "c10::Half") return DType::kF16;
  if (t == "float") return DType::kF32;
  if (t == "long int" || t == "long") return DType::kI64;
  if (t == "int") return DType::kI32;
  if (t == "bool") return DType::kPred;
  if (t == "unsigned char" || t == "signed char") return DType::kU8;
  if (t.rfind("c10::Float8", 0) == 0) return DType::kF8;
  return std::nullopt;
}

struct Input {
  bool tensor = false;
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;
  double elements() const {
    double n = 1;
    for (int64_t d : shape) n *= static_cast<double>(d);
    return n;
  }
  double bytes() const { return elements() * static_cast<double>(DTypeSize(dtype)); }
};

// Inputs with a known tensor dtype. A TensorList (nested dims) reads as a
// tensor with an empty shape and is refused by the callers that need shapes.
std::vector<Input> Inputs(const RecordedOp& op) {
  std::vector<Input> in(op.input_dims.size());
  for (size_t i = 0; i < in.size(); ++i) {
    in[i].shape = op.input_dims[i];
    if (i < op.input_types.size()) {
      if (std::optional<DType> t = TensorDType(op.input_types[i])) {
        in[i].tensor = true;
        in[i].dtype = *t;
      }
    }
  }
  return in;
}

SizedOp Skip(std::string reason) { return {std::nullopt, std::move(reason)}; }

TraceEvent Event(OpKind kind, DType dtype, double flops, double read, double written) {
  TraceEvent e;
  e.type = EventType::kCompute;
  e.kind = kind;
  e.dtype = dtype;
  e.flops = flops;
  e.bytes_read = Bytes(static_cast<int64_t>(read));
  e.bytes_written = Bytes(static_cast<int64_t>(written));
  return e;
}

SizedOp Matmul(const std::string& name, const Input& a, const Input& b, const Input* bias, int64_t batch,
               int64_t m, int64_t k, int64_t n) {
  if (m <= 0 || n <= 0 || k <= 0 || batch <= 0) return Skip(absl::StrCat("empty shape: ", name));
  const double bm = static_cast<double>(batch), dm = static_cast<double>(m), dn = static_cast<double>(n),
               dk = static_cast<double>(k);
  const double out = bm * dm * dn * static_cast<double>(DTypeSize(a.dtype));
  TraceEvent e = Event(OpKind::kMatmul, a.dtype, 2 * bm * dm * dn * dk,
                       a.bytes() + b.bytes() + (bias != nullptr ? bias->bytes() : 0), out);
  e.m = m;
  e.n = n;
  e.k = k;
  e.batch = batch;
  e.name = name;
  return {e, ""};
}

bool Shaped(const Input& in, size_t rank) { return in.tensor && in.shape.size() == rank; }

SizedOp SizeMatmul(const RecordedOp& op, const std::vector<Input>& in) {
  const std::string& n = op.name;
  if (n == "aten::mm" && in.size() >= 2 && Shaped(in[0], 2) && Shaped(in[1], 2) &&
      in[0].shape[1] == in[1].shape[0]) {
    return Matmul(n, in[0], in[1], nullptr, 1, in[0].shape[0], in[0].shape[1], in[1].shape[1]);
  }
  if (n == "aten::addmm" && in.size() >= 3 && Shaped(in[1], 2) && Shaped(in[2], 2) &&
      in[1].shape[1] == in[2].shape[0]) {
    return Matmul(n, in[1], in[2], in[0].tensor ? &in[0] : nullptr, 1, in[1].shape[0], in[1].shape[1],
                  in[2].shape[1]);
  }
  if (n == "aten::bmm" && in.size() >= 2 && Shaped(in[0], 3) && Shaped(in[1], 3) &&
      in[0].shape[0] == in[1].shape[0] && in[0].shape[2] == in[1].shape[1]) {
    return Matmul(n, in[0], in[1], nullptr, in[0].shape[0], in[0].shape[1], in[0].shape[2], in[1].shape[2]);
  }
  if (n == "aten::baddbmm" && in.size() >= 3 && Shaped(in[1], 3) && Shaped(in[2], 3) &&
      in[1].shape[0] == in[2].shape[0] && in[1].shape[2] == in[2].shape[1]) {
    return Matmul(n, in[1], in[2], in[0].tensor ? &in[0] : nullptr, in[1].shape[0], in[1].shape[1],
                  in[1].shape[2], in[2].shape[2]);
  }
  if (n == "aten::linear" && in.size() >= 2 && in[0].tensor && !in[0].shape.empty() && Shaped(in[1], 2) &&
      in[0].shape.back() == in[1].shape[1]) {
    int64_t m = 1;
    for (size_t i = 0; i + 1 < in[0].shape.size(); ++i) m *= in[0].shape[i];
    const Input* bias = in.size() >= 3 && in[2].tensor ? &in[2] : nullptr;
    return Matmul(n, in[0], in[1], bias, 1, m, in[0].shape.back(), in[1].shape[0]);
  }
  return Skip(absl::StrCat("unexpected shapes: ", n));
}

// Fused attention: q, k, v in [b, s, h, d] (flash/efficient forward) or
// [b, h, s, d] (the _scaled_dot_product_* entry points). `causal_arg`: the
// index of is_causal (or custom_mask_type) in Concrete Inputs.
SizedOp SizeAttention(const RecordedOp& op, const std::vector<Input>& in, bool bshd, size_t causal_arg) {
  if (in.size() < 3 || !Shaped(in[0], 4) || !Shaped(in[1], 4) || !Shaped(in[2], 4)) {
    return Skip(absl::StrCat("unexpected shapes: ", op.name));
  }
  if (causal_arg >= op.concrete_inputs.size() || op.concrete_inputs[causal_arg].empty()) {
    return Skip(absl::StrCat("causality not recorded: ", op.name));
  }
  const std::string& c = op.concrete_inputs[causal_arg];
  const bool causal = c == "True" || c == "true" || c == "1" || c == "2";
  const std::vector<int64_t>& q = in[0].shape;
  const std::vector<int64_t>& k = in[1].shape;
  const double b = static_cast<double>(q[0]);
  const double h = static_cast<double>(bshd ? q[2] : q[1]);
  const double sq = static_cast<double>(bshd ? q[1] : q[2]);
  const double sk = static_cast<double>(bshd ? k[1] : k[2]);
  const double d = static_cast<double>(q[3]);
  // Q·Kᵀ and P·V: 2 · (2·s_q·s_k·d) per head (FlashAttention paper's count).
  const double flops = 4 * b * h * sq * sk * d * (causal ? 0.5 : 1.0);
  TraceEvent e = Event(OpKind::kAttention, in[0].dtype, flops, in[0].bytes() + in[1].bytes() + in[2].bytes(),
                       in[0].bytes());
  e.name = op.name;
  return {e, ""};
}

const std::set<std::string>& PointwiseOps() {
  static const std::set<std::string>* s = [] {
    auto* out = new std::set<std::string>;
    for (const char* base : {"add", "sub", "mul", "div", "gelu", "relu", "silu", "tanh", "sigmoid", "exp", "neg",
                             "rsqrt", "pow", "where", "masked_fill"}) {
      out->insert(absl::StrCat("aten::", base));
      out->insert(absl::StrCat("aten::", base, "_"));
    }
    return out;
  }();
  return *s;
}

// Note [ATen softmax passes]
// How many times aten::_softmax's CUDA kernel reads its input, by the kernel
// PyTorch picks (aten/src/ATen/native/cuda/SoftMax.cu host_softmax, torch
// 2.x; dim from "Concrete Inputs", the last one when not recorded):
//   - a reduced dim that is not the last (inner_size > 1):
//     cunn_SpatialSoftMaxForward, three loops over the dim (max, sum of
//     exp, write): 3.
//   - dim <= 1024 elements and <= 4096 bytes: dispatch_softmax_forward
//     (PersistentSoftmax.cuh softmax_warp_forward), a row per warp held in
//     registers: 1.
//   - dim a multiple of ILP = 16 bytes / element and under the 48 KiB of
//     shared memory per block (cudaDeviceProp::sharedMemPerBlock):
//     cunn_SoftMaxForwardSmem caches the row in shared memory: 1.
//   - otherwise cunn_SoftMaxForward: ilpReduce for the max, ilpReduce for
//     the sum of exp, WriteFpropResults(Vectorized) for the output, each
//     reading the row from global memory: 3.
// OWLv2's attention softmax (dim 5185, odd) takes the last: its row is
// read three times. Its kernel is slower still than three streamed reads:
// with a 1024-thread block and a row shorter than ILP x 1024 elements,
// ilpReduce's vector loop never runs and every load is a 2-byte scalar one
// (docs/validation.md, "kineto-notes"). _log_softmax keeps one read: its
// rate (Note [ATen reduction kernels]) is measured over one read and one
// write, the passes inside it.
double SoftmaxInputPasses(const RecordedOp& op, const Input& x) {
  const int64_t rank = static_cast<int64_t>(x.shape.size());
  int64_t dim = rank - 1;
  if (op.concrete_inputs.size() > 1 && !op.concrete_inputs[1].empty()) {
    int64_t d = 0;
    if (absl::SimpleAtoi(op.concrete_inputs[1], &d)) dim = d < 0 ? d + rank : d;
  }
  if (dim != rank - 1) return 3;
  const int64_t size = static_cast<int64_t>(DTypeSize(x.dtype));
  const int64_t n = x.shape.back();
  if (n <= 1024 && n * size <= 4096) return 1;
  constexpr int64_t kSharedMemPerBlock = 48 * 1024;
  const int64_t ilp = 16 / size;
  const int64_t warps = (std::min<int64_t>(n, 1024) + 31) / 32;
  if (n % ilp == 0 && n < (kSharedMemPerBlock - warps * 4) / size) return 1;
  return 3;
}

SizedOp SizeMemory(const RecordedOp& op, const std::vector<Input>& in) {
  const std::string& n = op.name;
  if (n == "aten::copy_") {
    if (in.size() < 2 || !in[0].tensor || !in[1].tensor) return Skip("unexpected shapes: aten::copy_");
    TraceEvent e = Event(OpKind::kCopy, in[0].dtype, 0, in[1].bytes(), in[0].bytes());
    e.name = n;
    return {e, ""};
  }
  if (n == "aten::native_layer_norm" || n == "aten::_softmax" || n == "aten::_log_softmax") {
    if (in.empty() || !in[0].tensor || in[0].shape.empty()) return Skip(absl::StrCat("unexpected shapes: ", n));
    // Kind reduce, as the recorder writes these ops (python/gpusim_torch/
    // ops.py _REDUCE): the kernel model times native_layer_norm and
    // _log_softmax at their measured rates (Note [ATen reduction kernels]).
    const double read = n == "aten::_softmax" ? SoftmaxInputPasses(op, in[0]) * in[0].bytes() : in[0].bytes();
    // half_to_float (the third argument, True): the output is fp32
    // (SoftMax.cu host_softmax writes accscalar_t).
    const bool to_float = n != "aten::native_layer_norm" && op.concrete_inputs.size() > 2 &&
                          op.concrete_inputs[2] == "True";
    TraceEvent e = Event(OpKind::kReduce, in[0].dtype, 0, read, to_float ? in[0].elements() * 4 : in[0].bytes());
    e.name = n;
    return {e, ""};
  }
  if (PointwiseOps().contains(n)) {
    double read = 0;
    const Input* largest = nullptr;
    for (const Input& x : in) {
      if (!x.tensor) continue;
      read += x.bytes();
      if (largest == nullptr || x.elements() > largest->elements()) largest = &x;
    }
    if (largest == nullptr) return Skip(absl::StrCat("no tensor inputs: ", n));
    TraceEvent e = Event(OpKind::kElementwise, largest->dtype, 0, read, largest->bytes());
    e.name = n;
    return {e, ""};
  }
  return Skip(absl::StrCat("op not sized: ", n));
}

}  // namespace

std::string_view KernelClassName(KernelClass c) {
  switch (c) {
    case KernelClass::kGemm: return "gemm";
    case KernelClass::kAttention: return "attention";
    case KernelClass::kMemory: return "memory";
    case KernelClass::kCollective: return "collective";
    case KernelClass::kOther: return "other";
  }
  return "other";
}

KernelClass ClassifyKernel(std::string_view kernel_name) {
  const std::string n = Lower(kernel_name);
  if (ContainsAny(n, {"nccl", "rccl"})) return KernelClass::kCollective;
  if (ContainsAny(n, {"flash", "fmha", "attention", "sdpa"})) return KernelClass::kAttention;
  if (ContainsAny(n, {"gemm", "xmma", "cublas", "cutlass", "wgmma", "hmma", "s16816", "sm90_"})) {
    return KernelClass::kGemm;
  }
  if (ContainsAny(n, {"elementwise", "vectorized", "unrolled", "reduce", "norm", "softmax", "copy", "fill",
                      "cat", "index", "gather", "scatter", "where", "pointwise", "triton_"})) {
    return KernelClass::kMemory;
  }
  return KernelClass::kOther;
}

SizedOp SizeAtenOp(const RecordedOp& op) {
  if (!op.has_shapes) return Skip("no recorded shapes (record_shapes off)");
  const std::vector<Input> in = Inputs(op);
  const std::string& n = op.name;
  if (n == "aten::mm" || n == "aten::addmm" || n == "aten::bmm" || n == "aten::baddbmm" || n == "aten::linear") {
    return SizeMatmul(op, in);
  }
  // Argument positions: native_functions.yaml signatures.
  if (n == "aten::_flash_attention_forward") return SizeAttention(op, in, /*bshd=*/true, 8);
  if (n == "aten::_efficient_attention_forward") return SizeAttention(op, in, /*bshd=*/true, 9);
  if (n == "aten::_scaled_dot_product_flash_attention") return SizeAttention(op, in, false, 4);
  if (n == "aten::_scaled_dot_product_efficient_attention") return SizeAttention(op, in, false, 6);
  if (n == "aten::_scaled_dot_product_cudnn_attention") return SizeAttention(op, in, false, 6);
  return SizeMemory(op, in);
}

KernelMeasurements ExtractKernelMeasurements(const RecordedTrace& trace) {
  KernelMeasurements out;
  out.trace = trace.metadata.source_file;
  if (!trace.metadata.devices.empty()) out.device_name = trace.metadata.devices[0].name;
  absl::flat_hash_map<int64_t, const RecordedOp*> cpu_ops;
  for (const RecordedOp& op : trace.ops) {
    if (op.kind == RecordedOpKind::kCpuOp && op.external_id >= 0) cpu_ops.emplace(op.external_id, &op);
  }
  // Kernels grouped by External id, in order of their first kernel.
  struct Group {
    const RecordedOp* cpu = nullptr;
    std::vector<const RecordedOp*> kernels;
  };
  std::vector<Group> groups;
  absl::flat_hash_map<int64_t, size_t> group_of;
  auto skip = [&](const std::string& reason) {
    ++out.skipped_kernels;
    ++out.skipped[reason];
  };
  for (const RecordedOp& k : trace.ops) {
    if (k.kind != RecordedOpKind::kKernel) continue;
    ++out.kernels;
    KernelClassCounts& c = out.classes[static_cast<size_t>(ClassifyKernel(k.name))];
    ++c.kernels;
    c.kernel_time += k.duration;
    auto it = cpu_ops.find(k.external_id);
    if (k.external_id < 0 || it == cpu_ops.end()) {
      skip("no cpu_op with the kernel's External id");
      continue;
    }
    auto [g, inserted] = group_of.emplace(k.external_id, groups.size());
    if (inserted) groups.push_back({it->second, {}});
    groups[g->second].kernels.push_back(&k);
  }
  for (const Group& g : groups) {
    const SizedOp sized = SizeAtenOp(*g.cpu);
    if (!sized.event.has_value()) {
      for (size_t i = 0; i < g.kernels.size(); ++i) skip(sized.skip_reason);
      continue;
    }
    KernelMeasurement m;
    const RecordedOp* longest = g.kernels[0];
    for (const RecordedOp* k : g.kernels) {
      m.measured += k->duration;
      if (k->duration > longest->duration) longest = k;
      ++out.classes[static_cast<size_t>(ClassifyKernel(k->name))].sized_kernels;
    }
    m.kernel_class = ClassifyKernel(longest->name);
    m.op = g.cpu->name;
    m.kernel = longest->name;
    m.kernels = static_cast<int64_t>(g.kernels.size());
    m.event = *sized.event;
    out.ops.push_back(std::move(m));
  }
  return out;
}

absl::StatusOr<KernelMeasurements> LoadKernelMeasurements(const std::string& path) {
  KinetoImportOptions o;
  o.keep_shapes = true;
  o.keep_gpu_ops = true;
  o.keep_cpu_ops = true;
  ASSIGN_OR_RETURN(RecordedTrace t, ImportKinetoTrace(path, o));
  return ExtractKernelMeasurements(t);
}

}  // namespace gpusim
