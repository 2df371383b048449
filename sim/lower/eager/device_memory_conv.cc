#include "sim/lower/eager/device_memory_conv.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

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
