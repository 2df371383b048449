#include "sim/trace/sdpa_op.h"

#include <algorithm>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace gpusim {

std::string SdpaBackendName(SdpaBackend b) {
  switch (b) {
    case SdpaBackend::kMath: return "math";
    case SdpaBackend::kFlash: return "flash";
    case SdpaBackend::kEfficient: return "efficient";
    case SdpaBackend::kCudnn: return "cudnn";
    case SdpaBackend::kNone: return "none";
  }
  return "none";
}

absl::StatusOr<SdpaBackend> ParseSdpaBackend(std::string_view name) {
  if (name == "flash") return SdpaBackend::kFlash;
  if (name == "efficient") return SdpaBackend::kEfficient;
  if (name == "cudnn") return SdpaBackend::kCudnn;
  if (name == "math") return SdpaBackend::kMath;
  return absl::InvalidArgumentError(
      absl::StrCat("--sdpa-backend '", std::string(name), "': expected flash, efficient, cudnn or math"));
}

std::optional<SdpaOp> SdpaOpOf(std::string_view op) {
  constexpr std::string_view kPrefix = "_scaled_dot_product_";
  constexpr std::string_view kSuffix = "_backward";
  if (!op.starts_with(kPrefix)) return std::nullopt;
  std::string_view rest = op.substr(kPrefix.size());
  SdpaOp o;
  if (rest.ends_with(kSuffix)) {
    o.backward = true;
    rest.remove_suffix(kSuffix.size());
  }
  if (rest == "cudnn_attention") {
    o.backend = SdpaBackend::kCudnn;
  } else if (rest == "flash_attention") {
    o.backend = SdpaBackend::kFlash;
  } else if (rest == "efficient_attention") {
    o.backend = SdpaBackend::kEfficient;
  } else {
    return std::nullopt;
  }
  return o;
}

absl::StatusOr<SdpaFacts> ParseSdpaFacts(const std::vector<int64_t>& d) {
  if (d.size() != 17) {
    return absl::InvalidArgumentError(absl::StrCat(
        "expected 17 SDPA facts (B, Hq, Hkv, Sq, Skv, Dqk, Dv, element size, causal, dropout ppm, requires grad, "
        "mask, backend on 7.x, 8.0, 9.0, 10.0, cuDNN version), got ",
        d.size()));
  }
  constexpr int64_t kMax = int64_t{1} << 24;  // per size; keeps the products below in int64
  static constexpr const char* kNames[] = {"B", "Hq", "Hkv", "Sq", "Skv", "Dqk", "Dv"};
  for (int i = 0; i < 7; ++i) {
    if (d[i] < 1 || d[i] > kMax) {
      return absl::InvalidArgumentError(absl::StrCat("SDPA fact [", i, "] ", kNames[i], " = ", d[i],
                                                     ": expected 1 to 2^24 (", absl::StrJoin(d, ","), ")"));
    }
  }
  if (d[7] != 1 && d[7] != 2 && d[7] != 4 && d[7] != 8) {
    return absl::InvalidArgumentError(absl::StrCat("SDPA fact [7] element size = ", d[7], ": expected 1, 2, 4 or 8"));
  }
  for (int i : {8, 10, 11}) {
    if (d[i] != 0 && d[i] != 1) {
      return absl::InvalidArgumentError(absl::StrCat("SDPA fact [", i, "] = ", d[i], ": expected 0 or 1"));
    }
  }
  if (d[9] < 0 || d[9] > 1000000) {
    return absl::InvalidArgumentError(
        absl::StrCat("SDPA fact [9] dropout = ", d[9], ": expected 0 to 1000000 parts per million"));
  }
  for (int i = 12; i < 16; ++i) {
    if (d[i] < 0 || d[i] > 4) {
      return absl::InvalidArgumentError(absl::StrCat(
          "SDPA fact [", i, "] backend code = ", d[i], ": expected 0 math, 1 flash, 2 efficient, 3 cudnn or 4 none"));
    }
  }
  if (d[16] < 0) {
    return absl::InvalidArgumentError(absl::StrCat("SDPA fact [16] cuDNN version = ", d[16], ": expected >= 0"));
  }
  if (d[1] % d[2] != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("SDPA facts: Hq = ", d[1], " is not a multiple of Hkv = ", d[2]));
  }
  // The largest transient is a product of B, Hq, one sequence length and
  // both head dims (with small factors): refuse facts no device could hold.
  constexpr __int128 kMaxBytes = __int128{1} << 50;
  const __int128 q = __int128{d[0]} * d[1] * ((std::max(d[3], d[4]) + 127) / 128 * 128) * (std::max(d[5], d[6]) + 128) * 8;
  if (q > kMaxBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "SDPA facts describe tensors or workspaces above 2^50 bytes, not a device's: ", absl::StrJoin(d, ",")));
  }
  SdpaFacts f;
  f.b = d[0], f.hq = d[1], f.hkv = d[2], f.sq = d[3], f.skv = d[4], f.dqk = d[5], f.dv = d[6], f.elem = d[7];
  f.causal = d[8] != 0;
  f.dropout_ppm = d[9];
  f.requires_grad = d[10] != 0;
  f.mask = d[11] != 0;
  for (int i = 0; i < 4; ++i) f.by_class[i] = static_cast<SdpaBackend>(d[12 + i]);
  f.cudnn_version = d[16];
  return f;
}

}  // namespace gpusim
