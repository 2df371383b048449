// cuDNN's layout transforms around a convolution of channels-first tensors,
// added to the convolution's implicit GEMM by the tiled kernel model
// (tiled.h).
//
// Note [cuDNN layout transforms]
// cuDNN's tensor-core convolution kernels read and write NHWC. A 16-bit
// convolution whose tensors are channels-first (PyTorch's default memory
// format: cudnn_conv_suggest_memory_format in aten/src/ATen/native/
// ConvUtils.h picks NCHW unless the input or the weight is channels-last)
// therefore runs behind transposes: NVIDIA's Deep Learning Performance
// guide ("Convolutional Layers User's Guide", Tensor Core requirements:
// "NCHW ... cuDNN automatically transposes ... overhead") and, kernel by
// kernel, the H200 Kineto traces (validation/h200_2026-12-04/kineto,
// cuDNN 9.19, torchvision resnet50 and vit_b16 in bf16): around each
// direction's sm90_xmma_{fprop,dgrad,wgrad}_implicit_gemm_*_nhwc kernel,
// cudnn::engines_precompiled::nchwToNhwcKernel on each activation it reads
// and on the weight when R x S > 1 (a 1x1 weight is the same in both
// layouts), and nhwcToNchwKernel on what it writes (the weight gradient only
// when R x S > 1):
//   forward       X, W -> Y
//   backward data dY, W -> dX
//   backward filter X, dY -> dW
// One kernel per tensor, each a read and a write of it.
// Not transformed:
//   - a 1x1, stride-1, unpadded, undilated, ungrouped convolution: in NCHW
//     it is a GEMM (W[K x C] by X[C x HW] per image) and cuDNN runs cuBLASLt
//     (nvjet_* kernels) in every direction. The traces show cuDNN's
//     heuristics (closed source) leaving this path in places: at 7x7 and
//     some 14x14 layers of resnet50 the 1x1 convolutions take the NHWC
//     kernels with their transforms (58 of resnet50's 226 transform kernels
//     are in such layers); this rule does not time those.
//   - channels-last convolutions, 32-bit ones, transposed or grouped ones
//     (depthwise: convnext's conv2d_c1_k1_nhwc_specialized runs on
//     channels-last tensors; grouped channels-first ones were not measured),
//     and devices without tensor cores (compute capability < 7.0, or none
//     given: an AMD device's MIOpen is not cuDNN).
// Rates (kernel time less one launch_overhead each, bytes read + written):
//   - a tensor with 8 channels or more: 2.60 TB/s on an H200, 0.54 of its
//     4.8 TB/s HBM peak (the 81 resnet50_gpu convolutions whose transform
//     kernels this rule names one for one; a least-squares line through the
//     same kernels gives 2.5 us + bytes / 2.49 TB/s). Held out: resnet50_test
//     (batch 2, 64x64 images): 542 us predicted, 511 us recorded (+6%).
//   - fewer than 8 channels (an RGB image, a stem's weight): the transform
//     writes 3-element rows, 0.28 TB/s, 0.059 of the peak: the 139.8 us of
//     resnet50's [64, 3, 224, 224] input (vit_b16's same input: 140.1 us;
//     the same tensor twice, not an independent check).
//
// Note [Small-channel convolutions]
// A 16-bit convolution whose input channels per group are not a multiple of
// 8 (an RGB stem: C = 3) cannot feed the Hopper TMA/WGMMA kernels (16-byte
// alignment, as in Note [Unaligned GEMMs], tiled.h): cuDNN pads C to 8 and
// runs a CUTLASS kernel on the sm80 mma.sync path
// (cutlass_tensorop_bf16_s16816fprop_optimized_bf16_256x64_32x4_nhwc_align8
// in the H200 traces). Its forward runs at 103 TFLOP/s of the padded FLOPs,
// 0.104 of the 989 TFLOP/s bf16 peak: resnet50's 7x7 stem
// ([64, 3, 224, 224] x [64, 3, 7, 7], 40.3 padded GFLOP in 389.4 us) and,
// a different shape, vit_b16's 16x16 patch embedding ([64, 3, 224, 224] x
// [768, 3, 16, 16], 39.5 padded GFLOP in 384.8 us: 102.6 TFLOP/s). The
// backward's kernels (a wgrad only: an image needs no gradient) vary more,
// 170 and 266 TFLOP/s of the padded FLOPs: they are timed by the tiled
// model on the padded FLOPs.
// A recording from before trace format 1.7 has no memory format
// (ConvLayout::kUnrecorded): it is timed as channels-first, PyTorch's
// default, and the report says so.
#ifndef GPUSIM_SIM_DEVICE_IMPL_CONV_H_
#define GPUSIM_SIM_DEVICE_IMPL_CONV_H_

#include <optional>

#include "sim/config/spec.h"
#include "sim/trace/conv_op.h"
#include "sim/trace/trace.h"

namespace gpusim {

inline constexpr double kConvTransformShare = 2.60e12 / 4.8e12;
inline constexpr double kConvSmallChannelTransformShare = 0.28e12 / 4.8e12;
inline constexpr int64_t kConvSmallChannels = 8;
inline constexpr double kSmallChannelConvForwardShare = 103e12 / 989e12;

// The transform kernels of one convolution op (forward, or a backward with
// its output mask): how many, and the bytes they move at each rate.
struct ConvTransforms {
  int kernels = 0;
  double bytes = 0;             // read + written, tensors of >= 8 channels
  double small_channel_bytes = 0;  // read + written, tensors of < 8 channels
};
// The transforms cuDNN runs for `g` on device `d` (none when the rule above
// does not apply).
ConvTransforms CudnnLayoutTransforms(const ConvGeometry& g, bool backward, const DeviceSpec& d);
// Their time, launches included.
SimTime CudnnLayoutTransformTime(const ConvTransforms& t, const DeviceSpec& d);
// A recorded convolution event's facts (op convolution, _convolution or
// convolution_backward with valid facts; backward set for the last); nullopt
// for any other event.
std::optional<ConvGeometry> ConvEventGeometry(const TraceEvent& e, bool* backward);
// Note [Small-channel convolutions]: the factor a 16-bit convolution's FLOPs
// grow by with C/groups padded to 8 (1 when it needs no padding), and the
// share of the tensor-core peak its forward kernel runs at (0: no such rule).
double ConvChannelPadding(const ConvGeometry& g);
double SmallChannelConvShare(const ConvGeometry& g, bool backward, const DeviceSpec& d);

}  // namespace gpusim

#endif  // GPUSIM_SIM_DEVICE_IMPL_CONV_H_
