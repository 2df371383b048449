#include "sim/lower/eager/device_memory_conv.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace gpusim {

absl::StatusOr<CudnnAssumption> ParseCudnnAssumption(std::string_view name) {
  if (name == "none") return CudnnAssumption::kNone;
  if (name == "gemm") return CudnnAssumption::kGemm;
  if (name == "winograd_nonfused") return CudnnAssumption::kWinogradNonfused;
  if (name == "bound") return CudnnAssumption::kBound;
  return absl::InvalidArgumentError(
      absl::StrCat("--cudnn-workspace '", std::string(name), "': expected none, gemm, winograd_nonfused or bound"));
}

std::string CudnnAssumptionName(CudnnAssumption a) {
  switch (a) {
    case CudnnAssumption::kNone: return "none";
    case CudnnAssumption::kGemm: return "gemm";
    case CudnnAssumption::kWinogradNonfused: return "winograd_nonfused";
    case CudnnAssumption::kBound: return "bound";
  }
  return "none";
}

std::string ConvDirectionName(ConvDirection d) {
  switch (d) {
    case ConvDirection::kForward: return "forward";
    case ConvDirection::kBackwardData: return "backward data";
    case ConvDirection::kBackwardFilter: return "backward filter";
  }
  return "forward";
}

absl::StatusOr<ConvGeometry> ParseConvFacts(const std::vector<int64_t>& d, bool backward) {
  const size_t want = backward ? 20 : 17;
  if (d.size() != want) {
    return absl::InvalidArgumentError(absl::StrCat("expected ", want, " convolution facts, got ", d.size()));
  }
  constexpr int64_t kMax = int64_t{1} << 24;  // per dimension; keeps the products in int64
  for (size_t i = 0; i < want; ++i) {
    const bool flag = i == 15 || i >= 17;
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
  if (backward) {
    g.grad_input = d[17] != 0;
    g.grad_weight = d[18] != 0;
  }
  return g;
}

int64_t WinogradNonfusedBytes(const ConvGeometry& g) {
  // F(4x4, 3x3): 6x6 input tiles per 4x4 output tile; transformed input,
  // filter and output in float (checked on float convolutions only).
  if (g.transposed || g.groups != 1 || g.r != 3 || g.s != 3 || g.stride_h != 1 || g.stride_w != 1 ||
      g.dil_h != 1 || g.dil_w != 1 || g.elem != 4) {
    return -1;
  }
  const int64_t tiles = ((g.p + 3) / 4) * ((g.q + 3) / 4);
  return (g.n * g.c * tiles + g.k * g.c + g.n * g.k * tiles) * 36 * 4;
}

int64_t GemmForwardBytes(const ConvGeometry& g) {
  // Explicit im2col of the whole batch: (C * R * S) x (N * P * Q) elements.
  if (g.transposed || g.groups != 1) return -1;
  return g.n * g.c * g.r * g.s * g.p * g.q * g.elem;
}

ConvWorkspace AssumedWorkspace(CudnnAssumption a, ConvDirection d, const ConvGeometry& g) {
  ConvWorkspace ws;
  const int64_t wino = WinogradNonfusedBytes(g);
  const int64_t gemm = d == ConvDirection::kForward ? GemmForwardBytes(g) : -1;
  switch (a) {
    case CudnnAssumption::kNone:
      ws.algorithm = "none";
      return ws;
    case CudnnAssumption::kGemm:
      ws.algorithm = "gemm";
      ws.sized = gemm >= 0;
      ws.bytes = std::max<int64_t>(gemm, 0);
      return ws;
    case CudnnAssumption::kWinogradNonfused:
      ws.algorithm = "winograd_nonfused";
      ws.sized = wino >= 0;
      ws.bytes = std::max<int64_t>(wino, 0);
      return ws;
    case CudnnAssumption::kBound:
      ws.algorithm = gemm > wino ? "gemm" : wino >= 0 ? "winograd_nonfused" : "none";
      ws.bytes = std::max<int64_t>({gemm, wino, 0});
      return ws;
  }
  return ws;
}

}  // namespace gpusim
