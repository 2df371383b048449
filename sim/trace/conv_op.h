// The recorded facts of a 2-D convolution (traces/FORMAT.md *Op facts*;
// python/gpusim_torch/ops.py conv_facts), read by the eager lowering (sim/
// lower/eager/device_memory_conv.h: cuDNN workspaces) and by the kernel
// model (sim/device/impl/conv.h: cuDNN's layout transforms).
#ifndef GPUSIM_SIM_TRACE_CONV_OP_H_
#define GPUSIM_SIM_TRACE_CONV_OP_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"

namespace gpusim {

// The memory format cuDNN runs a convolution in (aten/src/ATen/native/
// ConvUtils.h cudnn_conv_suggest_memory_format: channels-last when the input
// or the weight is laid out channels-last). kUnrecorded: a recording from
// before trace format 1.7, which did not write it.
enum class ConvLayout { kUnrecorded, kContiguous, kChannelsLast };

// [N, C, H, W, K, C/groups, R, S, stride h, w, padding h, w, dilation h, w,
// groups, transposed, element size], from format 1.7 the memory format
// (0 contiguous, 1 channels-last), and for convolution_backward the output
// mask (input, weight, bias).
struct ConvGeometry {
  int64_t n = 0, c = 0, h = 0, w = 0, k = 0, cg = 0, r = 0, s = 0;
  int64_t stride_h = 1, stride_w = 1, pad_h = 0, pad_w = 0, dil_h = 1, dil_w = 1, groups = 1;
  bool transposed = false;
  int64_t elem = 4;
  ConvLayout layout = ConvLayout::kUnrecorded;
  int64_t p = 0, q = 0;  // output height, width
  bool grad_input = false, grad_weight = false;  // backward only
};
// InvalidArgument saying what was expected when `dims` is not 17 (20 for a
// backward) facts, or 18 (21) with the memory format, in range.
absl::StatusOr<ConvGeometry> ParseConvFacts(const std::vector<int64_t>& dims, bool backward);

}  // namespace gpusim

#endif  // GPUSIM_SIM_TRACE_CONV_OP_H_
