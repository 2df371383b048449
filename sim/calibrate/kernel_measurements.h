// Per-op measurements from a recorded PyTorch profiler (Kineto) trace: GPU
// kernel durations, attributed to the ATen op that launched them, with the
// op's work (FLOPs, bytes, matmul shape) computed from its recorded input
// shapes. Calibration (calibrate.h) fits device efficiencies to them
// alongside measured step times.
//
// Note [Kernels to op measurements]
//   kernel events ("cat": "kernel") ── args "External id" ──► the cpu_op
//   with that External id: the innermost ATen op on the launching thread
//   (Kineto's CPU-GPU correlation; e.g. aten::addmm, not aten::linear).
// Every kernel is classified by its name (ClassifyKernel). The kernels of
// one op are one measurement: their durations summed (a split-K GEMM and its
// reduction, say) and the class of the longest. The op's work comes from
// "Input Dims" / "Input type" (record_shapes=True); see SizeAtenOp for the
// ops sized. A kernel is skipped — counted, never dropped silently — when no
// cpu_op has its External id, when the op has no recorded shapes, or when
// the op is not one SizeAtenOp knows.
//
// The prediction for a measurement is the device's kernel model
// (kernel_model.h) for one event of the op's kind, including the device's
// per-kernel launch_overhead: Kineto's kernel span holds a kernel's fixed
// start-up and drain, which the model's per-kernel constant stands for (the
// gap between back-to-back kernels is not in the span).
#ifndef GPUSIM_SIM_CALIBRATE_KERNEL_MEASUREMENTS_H_
#define GPUSIM_SIM_CALIBRATE_KERNEL_MEASUREMENTS_H_

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "sim/base/units.h"
#include "sim/import/recorded_trace.h"
#include "sim/trace/trace.h"

namespace gpusim {

enum class KernelClass { kGemm, kAttention, kMemory, kCollective, kOther };
inline constexpr int kNumKernelClasses = 5;
// "gemm", "attention", "memory", "collective", "other".
std::string_view KernelClassName(KernelClass c);

// By the kernel's (demangled) name, case-insensitively, first match wins:
//   collective  nccl (ncclKernel_*, ncclDevKernel_*), rccl
//   attention   flash, fmha, attention, sdpa (FlashAttention, cuDNN and
//               xFormers fused attention kernels)
//   gemm        gemm, xmma, cublas, cutlass, wgmma, hmma, s16816, sm90_
//               (cuBLAS / cuBLASLt / CUTLASS GEMM kernel names)
//   memory      elementwise, vectorized, unrolled, reduce, norm, softmax,
//               copy, fill, cat, index, gather, scatter, where, pointwise,
//               triton_ (PyTorch's ATen CUDA kernels and Inductor's fused
//               pointwise / reduction kernels)
//   other       everything else (convolutions' implicit GEMMs in cuDNN
//               without those words, sorts, RNG, ...)
KernelClass ClassifyKernel(std::string_view kernel_name);

// The work of one ATen op, as a timed trace event for the kernel model.
struct SizedOp {
  std::optional<TraceEvent> event;  // kind, flops, bytes, dtype, m/n/k/batch
  std::string skip_reason;          // when !event
};

// The ops sized from their recorded inputs (PyTorch's ATen signatures,
// aten/src/ATen/native/native_functions.yaml):
//   aten::mm (A[m,k], B[k,n])           2·m·n·k FLOPs, matmul m,n,k
//   aten::addmm (C, A[m,k], B[k,n])     2·m·n·k (the bias add is in the epilogue)
//   aten::bmm (A[b,m,k], B[b,k,n])      2·b·m·n·k, batch b
//   aten::baddbmm (C, A[b,m,k], B[b,k,n])  as bmm
//   aten::linear (X[..., k], W[n, k], b?)  m = product of X's leading dims
//   aten::_flash_attention_forward, aten::_efficient_attention_forward
//       (q, k, v as [b, s, h, d])       4·b·h·s_q·s_k·d, halved when causal
//   aten::_scaled_dot_product_flash_attention,
//   aten::_scaled_dot_product_efficient_attention,
//   aten::_scaled_dot_product_cudnn_attention (q, k, v as [b, h, s, d])
//   pointwise ops (add, sub, mul, div, gelu, relu, silu, tanh, sigmoid,
//       exp, neg, rsqrt, pow, where, masked_fill and their in-place `_`
//       forms): reads every tensor input, writes one tensor the size of the
//       largest (the broadcast shape)
//   aten::copy_ (dst, src): reads src, writes dst
//   aten::native_layer_norm, aten::_softmax, aten::_log_softmax: kind
//       reduce; read and write the input (weights and statistics ignored;
//       fp32 output when half_to_float), _softmax's input read as often as
//       its kernel reads it (Note [ATen softmax passes])
// Bytes are elements × the dtype's width ("Input type"); matmul bytes are
// A + B + C (+ the bias when given). Causality of attention comes from
// "Concrete Inputs" (is_causal); when it is not recorded the op is skipped.
SizedOp SizeAtenOp(const RecordedOp& op);

struct KernelMeasurement {
  KernelClass kernel_class = KernelClass::kOther;
  std::string op;           // the ATen op
  std::string kernel;       // its longest kernel's name
  int64_t kernels = 0;      // kernels summed
  SimTime measured;         // their summed durations
  TraceEvent event;         // the op's work, for the kernel model
};

struct KernelClassCounts {
  int64_t kernels = 0;        // kernels of this class in the trace
  int64_t sized_kernels = 0;  // of those, in a sized op
  SimTime kernel_time;        // their summed durations
};

struct KernelMeasurements {
  std::string trace;                      // the file
  std::string device_name;                // deviceProperties[0].name, if any
  std::vector<KernelMeasurement> ops;     // sized ops, in trace order
  std::array<KernelClassCounts, kNumKernelClasses> classes{};
  std::map<std::string, int64_t> skipped;  // reason -> kernels skipped
  int64_t kernels = 0;
  int64_t skipped_kernels = 0;
};

// Groups and sizes the kernels of `trace` (imported with keep_shapes,
// keep_gpu_ops and keep_cpu_ops).
KernelMeasurements ExtractKernelMeasurements(const RecordedTrace& trace);

// Imports `path` (ImportKinetoTrace) and extracts its measurements.
absl::StatusOr<KernelMeasurements> LoadKernelMeasurements(const std::string& path);

}  // namespace gpusim

#endif  // GPUSIM_SIM_CALIBRATE_KERNEL_MEASUREMENTS_H_
