// The tiled kernel model (the default): the roofline of roofline.h with a
// shape-dependent matmul efficiency. A matmul with a known shape (m, n, k,
// batch on the TraceEvent) takes
//   t = max(flops / (peak · efficiency.matmul · utilisation),
//           (bytes + split_k_bytes) / (hbm · efficiency.memory)) + launch
// with utilisation and split_k_bytes from ChooseMatmulTiling on the device's
// SMs (matmul_tiling.h, Note [Tile and wave quantisation]). efficiency.matmul
// is thus the efficiency of a perfectly tiled GEMM. A fused attention op
// with its SDPA facts is timed by its backend's kernels (attention.h, Note
// [Fused attention time]) at efficiency.fused_attention, likewise the
// efficiency of a perfectly tiled attention kernel (efficiency.attention
// stays the roofline's, for attention ops without the facts: synthesized
// models, HLO). A channels-first 16-bit convolution adds cuDNN's layout
// transforms (conv.h, Note [cuDNN layout transforms]). Matmuls without a
// shape, and every other op, are timed by the roofline model.
#ifndef GPUSIM_SIM_DEVICE_IMPL_TILED_H_
#define GPUSIM_SIM_DEVICE_IMPL_TILED_H_

#include <cstdint>
#include <mutex>
#include <tuple>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "sim/device/impl/roofline.h"
#include "sim/device/kernel_model.h"
#include "sim/device/matmul_tiling.h"

namespace gpusim {

// Note [Unaligned GEMMs]
// A 16-bit GEMM whose leading dimension is not a multiple of 8 elements (a
// vocabulary of 50257 or 30522, a sequence of 197) has operands that are not
// 16-byte aligned, which the Hopper TMA/WGMMA kernels (cuBLASLt nvjet_*,
// sm90_xmma_*) require; cuBLAS then runs a CUTLASS kernel built for that
// alignment on the old mma.sync path, as the H200 Kineto traces show
// (validation/h200_2026-12-04/kineto): GPT-2's LM head (n = 50257, odd) ran
// cutlass_75_tensorop_bf16_s1688gemm_bf16_*_align1, BERT's MLM head
// (30522 = 2 x odd) cutlass_80_tensorop_bf16_s16816gemm_bf16_*_align2.
// Their rates, measured on an H200:
//   align1: 124.5 TFLOP/s, m=8192 n=50257 k=768 a @ b
//           (../shared/reference/h200_kernels.json), 0.126 of the 989 peak;
//   align2: 247 TFLOP/s, BERT's three MLM-head GEMMs (2 x 16384 x 30522 x 768
//           FLOP each, 9318 us together in bert_gpu.pt.trace.json.gz), 0.25.
// Each from one measurement: no held-out check yet. Alignment 4 (a multiple
// of 4, not of 8) was not measured and is timed as aligned. Which of m, n, k
// is a leading dimension depends on transposes the recorder does not see
// (dW = dYᵀ·X makes m one), so every dimension counts. Convolutions (op
// *convolution*) are not: cuDNN pads channels to its kernels' alignment.
constexpr double kUnalignedGemmShare = 124.5e12 / 989e12;
constexpr double kAlign2GemmShare = 247e12 / 989e12;
// The share of the tensor-core peak a bf16/fp16 matmul with an odd (align1)
// or 2-mod-4 (align2) dimension runs at; 0 for the others.
double UnalignedGemmShare(const TraceEvent& e);
// UnalignedGemmShare(e) > 0. REQUIRES: e.kind is kMatmul.
bool UnalignedHalfGemm(const TraceEvent& e);

// Note [ATen copy kernels]
// PyTorch's copies (copy_, _to_copy, clone, contiguous: aten/src/ATen/native/
// cuda/Copy.cu over CUDALoops.cuh) run one of three loops, and only one of
// them streams at the HBM rate of the roofline:
//   - contiguous, same dtype or float -> bfloat16 (Copy.cu
//     bfloat16_copy_kernel_cuda): the vectorised loop; roofline rate.
//   - contiguous with a cast the vectorised loop does not take (bf16 -> fp32,
//     the gradient casts of autocast): launch_unrolled_kernel with
//     LoadWithCast / StoreWithCast, unrolled_elementwise_kernel.
//   - a non-contiguous operand: launch_legacy_kernel, elementwise_kernel<128,
//     4> with per-element offset arithmetic (the recorder writes such a copy
//     as kind transpose, python/gpusim_torch/ops.py).
// The two slow loops' rates are measured, bytes read + written over kernel
// time of every aten::copy_ kernel in the H200 Kineto traces
// (validation/h200_2026-12-04/kineto, tools/collect/kineto_classes.py):
//   unrolled cast  gpt2 1.97, llama 1.97, bert 1.89, vit_b16 1.69 TB/s
//   strided        gpt2 1.26, llama 1.24, vit_b16 1.59 TB/s
// taken as shares of the 4.8 TB/s HBM3e peak (means 1.88 and 1.36 TB/s;
// leave-one-out: the mean of the others is off by at most 15% and 21%). Only events whose
// op is one of these ATen copies (EventOpName) are timed so: an XLA convert
// or copy is a fused kernel of its own.
// The HBM peak of the device the rates were measured on (H200 datasheet);
// a rate scales to another device as a share of its hbm_bandwidth.
constexpr double kMeasuredHbmPeak = 4.8e12;
constexpr double kCastCopyShare = 1.88e12 / kMeasuredHbmPeak;
constexpr double kStridedCopyShare = 1.36e12 / kMeasuredHbmPeak;
// The share of HBM bandwidth `e` streams at, when it is an ATen copy on a
// slow loop; 0 otherwise.
double AtenCopyShare(const TraceEvent& e);
// Note [ATen elementwise loops] (python/gpusim_torch/ops.py): a pointwise
// op runs one of TensorIterator's loops (aten/src/ATen/native/cuda/
// CUDALoops.cuh gpu_kernel_impl), and the recorder writes the slow one it
// takes as its one fact (trace format 1.8): 1 unrolled with casts, 2 legacy
// (OffsetCalculator per element), 3 legacy with casts. Their per-element
// work, not their bytes, bounds them, so each runs at a measured rate in
// elements (the output's): Note [Elementwise loop rates]
// (tools/collect/kineto_classes.py loop-rates over the five H200 *_gpu
// Kineto traces: 257, 315 and 190 G elements/s; per case 244-266,
// 312-382 and 190-193), scaled to another device by its HBM bandwidth as
// the copies' rates are. 0: no rule (the roofline).
inline constexpr double kElementwiseLoopRates[] = {0, 257e9, 315e9, 190e9};
// The seconds `e` takes on its loop at device `d`'s scale, or 0.
double AtenElementwiseSeconds(const TraceEvent& e, const DeviceSpec& d);

// Note [ATen reduction kernels]
// ATen's norms, softmaxes and reductions do not stream at the copy rate:
// a row or column reduction per block, Welford statistics in fp32, the
// layer-norm backward's separate gamma/beta column reduction
// (aten/src/ATen/native/cuda/layer_norm_kernel.cu GammaBetaBackwardCUDAKernel),
// and NCHW batch norm with one block per channel
// (aten/src/ATen/native/cuda/Normalization.cuh
// batch_norm_collect_statistics_kernel, batch_norm_backward_kernel: grid C).
// Their rates are measured as the recorder's bytes (read + written) of the
// op over the summed time of the kernels that op launched, in the H200
// Kineto traces (validation/h200_2026-12-04/kineto, *_gpu cases; per case,
// TB/s):
//   native_layer_norm            gpt2 1.93  bert 2.08  vit_b16 2.01
//   native_layer_norm_backward   gpt2 1.17  bert 1.29  vit_b16 1.39
//   sum (T elements/s read)      gpt2 0.63  bert 0.68  vit_b16 0.70  llama 0.56
//     (a reduction is bound by the elements it reads, not their bytes: the
//     bf16 sums of gpt2/bert/vit_b16 and llama's fp32 ones agree per element
//     (1.25, 1.35, 1.40 and 2.23 TB/s), so `sum` is a rate in elements of
//     the event's dtype)
//   _log_softmax                 gpt2 2.22  bert 2.20  llama 2.54
//   _log_softmax_backward_data   gpt2 2.84  bert 3.30  llama 2.91
//   native_batch_norm(_backward) resnet50 0.49 / 0.49 (the one NCHW batch-norm
//                                case: no held-out check; per layer the rate
//                                runs 0.07-0.78 TB/s, rising with C)
// Each rate is the mean over the cases; docs/validation_step_time.md has the
// leave-one-out error. Only events of these ATen ops (EventOpName) are
// timed so.
struct AtenReduceRateRow {
  const char* op;
  double bytes_per_s;     // or, when per_element, elements per second
  bool per_element = false;
};
inline constexpr AtenReduceRateRow kAtenReduceRates[] = {
    {"native_layer_norm", 2.01e12},          {"native_layer_norm_backward", 1.28e12},
    {"sum", 0.64e12, true},                  {"_log_softmax", 2.32e12},
    {"_log_softmax_backward_data", 3.02e12}, {"native_batch_norm", 0.49e12},
    {"native_batch_norm_backward", 0.49e12},
};
// The measured rate (bytes/s, at kMeasuredHbmPeak) of `e` when it is
// one of kAtenReduceRates' ops; 0 otherwise.
double AtenReduceRate(const TraceEvent& e);

class TiledKernelModel : public KernelModel {
 public:
  explicit TiledKernelModel(TilingOptions tiling = {}, CollectiveOptions collectives = {})
      : tiling_(std::move(tiling)), roofline_(collectives) {}
  std::string_view name() const override { return "tiled"; }
  SimTime Duration(const TraceEvent& e, const DeviceSpec& d) const override;

 private:
  // ChooseMatmulTiling is a pure function of the shape and the SM count, and
  // a step repeats each shape once a layer: its results are memoised (the
  // advisor's threads share the default model, hence the lock).
  MatmulTiling Tiling(int64_t m, int64_t n, int64_t k, int64_t batch, int sms) const;

  TilingOptions tiling_;
  RooflineKernelModel roofline_;  // everything but shaped matmuls
  mutable std::mutex mu_;
  mutable absl::flat_hash_map<std::tuple<int64_t, int64_t, int64_t, int64_t, int>, MatmulTiling> tilings_;  // by mu_
};

}  // namespace gpusim

#endif  // GPUSIM_SIM_DEVICE_IMPL_TILED_H_
