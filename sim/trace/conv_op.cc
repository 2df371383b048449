// The recorded facts of a 2-D convolution; see conv_op.h.
#include "sim/trace/conv_op.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace gpusim {

absl::StatusOr<ConvGeometry> ParseConvFacts(const std::vector<int64_t>& d, bool backward) {
  // Format 1.7 adds the memory format after the element size; a recording
  // from before it has one fact fewer (Note [cuDNN layout transforms]).
  const size_t base = backward ? 20 : 17;
  if (d.size() != base && d.size() != base + 1) {
    return absl::InvalidArgumentError(absl::StrCat("expected ", base, " convolution facts (", base + 1,
                                                   " from format 1.7, with the memory format), got ", d.size()));
  }
  const bool with_layout = d.size() == base + 1;
  const size_t want = d.size();
  constexpr int64_t kMax = int64_t{1} << 24;  // per dimension; keeps the products in int64
  for (size_t i = 0; i < want; ++i) {
    const bool flag = i == 15 || i >= 17;  // transposed, the memory format, the mask
    const bool may_be_zero = i == 10 || i == 11 || flag;
    if (d[i] < (may_be_zero ? 0 : 1) || d[i] > (flag ? 1 : kMax)) {
      return absl::InvalidArgumentError(
          absl::StrCat("convolution facts out of range at position ", i, ": ", absl::StrJoin(d, ",")));
    }
  }
  ConvGeometry g;
  g.n = d[0], g.c = d[1], g.h = d[2], g.w = d[3], g.k = d[4], g.cg = d[5], g.r = d[6], g.s = d[7];
  g.stride_h = d[8], g.stride_w = d[9], g.pad_h = d[10], g.pad_w = d[11], g.dil_h = d[12], g.dil_w = d[13];
  g.groups = d[14];
  g.transposed = d[15] != 0;
  g.elem = d[16];
  if (g.elem > 16) {
    return absl::InvalidArgumentError(absl::StrCat("convolution element size ", g.elem, " is not a dtype's"));
  }
  if (g.transposed) {
    g.p = (g.h - 1) * g.stride_h - 2 * g.pad_h + g.dil_h * (g.r - 1) + 1;
    g.q = (g.w - 1) * g.stride_w - 2 * g.pad_w + g.dil_w * (g.s - 1) + 1;
  } else {
    g.p = (g.h + 2 * g.pad_h - g.dil_h * (g.r - 1) - 1) / g.stride_h + 1;
    g.q = (g.w + 2 * g.pad_w - g.dil_w * (g.s - 1) - 1) / g.stride_w + 1;
  }
  if (g.p < 1 || g.q < 1) {
    return absl::InvalidArgumentError(absl::StrCat("convolution facts give an empty output: ", absl::StrJoin(d, ",")));
  }
  // The workspaces gpusim sizes are products of up to seven facts: refuse
  // facts whose input, output or im2col matrix no device could hold, so
  // that they stay in int64.
  constexpr __int128 kMaxBytes = __int128{1} << 50;
  const __int128 in = __int128{g.n} * g.c * g.h * g.w * g.elem;
  const __int128 out = __int128{g.n} * g.k * g.p * g.q * g.elem;
  const __int128 im2col = __int128{g.n} * g.c * g.r * g.s * g.p * g.q * g.elem;
  const __int128 tiles = __int128{(g.p + 3) / 4} * ((g.q + 3) / 4) * g.n * (g.c + g.k) * 144;
  if (in > kMaxBytes || out > kMaxBytes || im2col > kMaxBytes || tiles > kMaxBytes ||
      __int128{g.k} * g.c * 144 > kMaxBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "convolution facts describe tensors or workspaces above 2^50 bytes, not a device's: ", absl::StrJoin(d, ",")));
  }
  g.layout = !with_layout ? ConvLayout::kUnrecorded : d[17] != 0 ? ConvLayout::kChannelsLast : ConvLayout::kContiguous;
  if (backward) {
    const size_t mask = with_layout ? 18 : 17;
    g.grad_input = d[mask] != 0;
    g.grad_weight = d[mask + 1] != 0;
  }
  return g;
}

}  // namespace gpusim
