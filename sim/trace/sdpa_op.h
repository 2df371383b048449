// The fused scaled-dot-product-attention ops a PyTorch recording names
// (aten _scaled_dot_product_{cudnn,flash,efficient}_attention[_backward])
// and their 17 recorded facts (traces/FORMAT.md, Op facts: the SDPA table):
// read by the eager lowering (sim/lower/eager/device_memory_sdpa.h: what
// each backend allocates) and by the kernel model (sim/device/impl/
// attention.h: how long its kernels run).
#ifndef GPUSIM_SIM_TRACE_SDPA_OP_H_
#define GPUSIM_SIM_TRACE_SDPA_OP_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace gpusim {

// sdp_utils.cpp's SDPBackend order, as facts [12..15] code them.
enum class SdpaBackend { kMath = 0, kFlash = 1, kEfficient = 2, kCudnn = 3, kNone = 4 };

// "math", "flash", "efficient", "cudnn", "none".
std::string SdpaBackendName(SdpaBackend b);
// --sdpa-backend: flash, efficient, cudnn or math; InvalidArgument naming the
// choices otherwise.
absl::StatusOr<SdpaBackend> ParseSdpaBackend(std::string_view name);

// The six fused ops: their backend and direction, or nullopt for any other
// op.
struct SdpaOp {
  SdpaBackend backend;
  bool backward = false;
};
std::optional<SdpaOp> SdpaOpOf(std::string_view op);

// The 17 recorded facts (traces/FORMAT.md, Op facts: the SDPA table).
struct SdpaFacts {
  int64_t b = 0, hq = 0, hkv = 0, sq = 0, skv = 0, dqk = 0, dv = 0, elem = 0;
  bool causal = false;
  int64_t dropout_ppm = 0;
  bool requires_grad = false, mask = false;
  SdpaBackend by_class[4] = {};  // compute capability 7.x, 8.0, 9.0, 10.0
  int64_t cudnn_version = 0;
};
// InvalidArgument saying what was expected when `dims` is not 17 facts in
// range (zero sizes, Hq not a multiple of Hkv, an unknown backend code,
// tensors above 2^50 bytes).
absl::StatusOr<SdpaFacts> ParseSdpaFacts(const std::vector<int64_t>& dims);

}  // namespace gpusim

#endif  // GPUSIM_SIM_TRACE_SDPA_OP_H_
