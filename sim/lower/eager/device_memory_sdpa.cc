#include "sim/lower/eager/device_memory_sdpa.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "sim/base/status.h"

namespace gpusim {
namespace {

int64_t RoundUp(int64_t x, int64_t m) { return (x + m - 1) / m * m; }
int64_t CeilDiv(int64_t x, int64_t m) { return (x + m - 1) / m; }

// One mem-efficient backward kernel of dispatch_cutlassB (kernels/
// cutlassB.h): AttentionBackwardKernel<..., kBlockSizeI, kBlockSizeJ, kMaxK>.
struct CutlassBKernel {
  int64_t bi, bj, max_k;
};

// The first kernel of dispatch_cutlassB's list for `device` that covers
// `max_k` (Note [Fused attention workspaces]).
CutlassBKernel EfficientBackwardKernel(int64_t max_k, bool is_float, const DeviceSpec& device) {
  const int cc = device.cc_major * 10 + device.cc_minor;
  if (cc < 80) {  // sm70 / sm75 / sm50 lists: 64x64 throughout
    return {64, 64, max_k <= 32 ? 32 : max_k <= 64 ? 64 : max_k <= 128 ? 128 : 65536};
  }
  // sm86, sm89 and 12.x have ~100 KB of shared memory per block: the
  // 128-row k128 kernels are taken not to fit (an assumption).
  const bool small_smem = cc == 86 || cc == 89 || device.cc_major == 12;
  if (max_k <= 32) return {64, 64, 32};
  if (max_k <= 64) return {64, 64, 64};
  if (!is_float && max_k <= 96 && (cc == 86 || cc == 89)) return {128, 64, 96};
  if (max_k <= 128) {
    if (small_smem) return {64, 64, 128};
    return is_float ? CutlassBKernel{128, 64, 128} : CutlassBKernel{128, 128, 128};
  }
  return {128, 64, 65536};
}

TempStep Alloc(int slot, int64_t bytes, std::string what) { return TempStep{true, slot, Bytes(bytes), std::move(what)}; }
TempStep Free(int slot) { return TempStep{false, slot, Bytes(0), ""}; }

void Cudnn(const SdpaFacts& f, bool backward, OpTemporaries* t) {
  if (!backward) {
    if (f.sq > 1) {
      t->before.push_back(Alloc(0, 256, "cuDNN SDPA forward workspace"));
      t->after.push_back(Free(0));
    }
    return;
  }
  int64_t bytes = f.b * f.hq * f.sq * f.dqk * 4   // dQ_accum
                  + f.b * f.hq * f.sq * 4         // softmax_sum
                  + 256;                          // the engine's (measured)
  if (f.hq != f.hkv) bytes += f.b * f.hq * f.skv * (f.dqk + f.dv) * f.elem;  // dK/dV_fullhead
  if (f.cudnn_version <= 91500 && f.skv % 128 != 0) bytes += f.b * 2 * 4;   // padding-mask workaround
  t->before.push_back(Alloc(0, bytes, "cuDNN SDPA backward workspace"));
  t->after.push_back(Free(0));
}

void Flash(const SdpaFacts& f, bool backward, const DeviceSpec& device, bool deterministic, OpTemporaries* t) {
  if (!backward) {
    if (f.dropout_ppm > 0) {
      t->before.push_back(Alloc(0, 16, "flash rng_state (replaced)"));
      t->before.push_back(Free(0));
    }
    return;
  }
  const int64_t sq_rounded = RoundUp(f.sq, 128);
  const int64_t head = RoundUp(f.dqk, 8);
  const int64_t head_rounded = RoundUp(head, head <= 128 ? 32 : 64);
  const int64_t bh = f.b * f.hq;
  const int64_t nsplits = deterministic ? std::max<int64_t>(1, CeilDiv(device.sms, bh)) : 1;
  t->before.push_back(Alloc(0, bh * sq_rounded * 4, "flash softmax_d"));
  t->before.push_back(Alloc(1, nsplits * bh * sq_rounded * head_rounded * 4, "flash dq_accum"));
  int slots = 2;
  if (f.hq != f.hkv) {
    t->before.push_back(Alloc(2, f.b * f.skv * f.hq * head * f.elem, "flash dk_expanded"));
    t->before.push_back(Alloc(3, f.b * f.skv * f.hq * head * f.elem, "flash dv_expanded"));
    slots = 4;
  }
  for (int s = slots - 1; s >= 0; --s) t->after.push_back(Free(s));
}

void Efficient(const SdpaFacts& f, bool backward, const DeviceSpec& device, bool deterministic, OpTemporaries* t) {
  const bool is_float = f.elem == 4;
  const int64_t max_k = std::max(f.dqk, f.dv);
  const int64_t rows = f.b * f.sq * f.hq;  // B*M*nH
  if (!backward) {
    // kernel_forward.h: kSingleValueIteration = kMaxK <= kKeysPerBlock;
    // the sm80 kernels keep 64 or 128 keys per block, all k<=128 ones in one.
    if (max_k > 128 && !is_float) {
      t->before.push_back(Alloc(0, rows * f.dv * 4, "efficient output_accum"));
      t->after.push_back(Free(0));
    }
    return;
  }
  const CutlassBKernel k = EfficientBackwardKernel(max_k, is_float, device);
  const bool half = !is_float;
  const bool output_in_rf = half && k.max_k <= k.bi;
  const bool computes_delta = half && (output_in_rf || device.cc_major * 10 + device.cc_minor != 70);
  if (computes_delta) {
    t->before.push_back(Alloc(0, rows * 4, "efficient delta"));
  } else {
    // (grad_out.to(float) * out.to(float)).sum(-1).transpose(-2,-1).contiguous()
    int slot = 10;
    std::vector<int> temps;
    if (half) {
      t->before.push_back(Alloc(slot, rows * f.dv * 4, "efficient grad_out.float()"));
      temps.push_back(slot++);
      t->before.push_back(Alloc(slot, rows * f.dv * 4, "efficient out.float()"));
      temps.push_back(slot++);
    }
    t->before.push_back(Alloc(slot, rows * f.dv * 4, "efficient delta product"));
    const int product = slot++;
    t->before.push_back(Alloc(slot, rows * 4, "efficient delta row sums"));
    const int sums = slot++;
    t->before.push_back(Alloc(0, rows * 4, "efficient delta"));
    t->before.push_back(Free(sums));
    t->before.push_back(Free(product));
    for (auto it = temps.rbegin(); it != temps.rend(); ++it) t->before.push_back(Free(*it));
  }
  const bool accum_kv = half && !output_in_rf;
  int64_t splits = CeilDiv(f.skv, k.bj);
  if (f.b * f.hq >= 256 && f.skv <= 2 * k.bj) splits = 1;
  if (accum_kv) splits = std::min<int64_t>(splits, 200 / (f.b * f.hq));
  if (splits < 1 || deterministic) splits = 1;
  const int64_t gq = CeilDiv(f.sq, k.bi) * CeilDiv(f.dqk, k.bj) * (k.bi * k.bj + 4);
  const int64_t gk = accum_kv ? splits * k.bj * RoundUp(f.dqk, k.bi) : 0;
  const int64_t gv = accum_kv ? splits * k.bj * RoundUp(f.dv, k.bi) : 0;
  const int64_t bytes = f.b * f.hq * RoundUp(gk + gv + gq, 4) * 4;
  t->before.push_back(Alloc(1, bytes, "efficient backward workspace"));
  t->after.push_back(Free(0));
  t->after.push_back(Free(1));
}

}  // namespace

absl::StatusOr<int> SdpaCapabilityClass(const DeviceSpec& device) {
  switch (device.cc_major) {
    case 7: return 0;
    case 8: return 1;
    case 9: return 2;
    case 10:
    case 12: return 3;
    default: break;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "device '", device.name, "' (", device.source_file, ") has compute capability ", device.cc_major, ".",
      device.cc_minor, "; the recorded SDPA backend choices cover 7.x, 8.x, 9.x, 10.x and 12.x "
      "(sdp_utils.cpp select_sdp_backend)"));
}

absl::StatusOr<SdpaChoice> ChooseSdpaBackend(const SdpaOp& op, std::string_view op_name, const SdpaFacts& facts,
                                             const DeviceSpec& device, std::optional<SdpaBackend> forced) {
  const std::string recorded = SdpaBackendName(op.backend);
  if (forced.has_value()) {
    if (*forced == SdpaBackend::kMath || *forced == SdpaBackend::kNone) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--sdpa-backend ", SdpaBackendName(*forced), ": the recording holds the fused op ", std::string(op_name),
          ", not its math decomposition; record with `python3 -m gpusim_torch record STEP.py --sdpa-backend math`"));
    }
    return SdpaChoice{*forced, absl::StrCat("forced (--sdpa-backend ", SdpaBackendName(*forced), "; recorded as ",
                                            recorded, ")")};
  }
  ASSIGN_OR_RETURN(const int cls, SdpaCapabilityClass(device));
  const SdpaBackend chosen = facts.by_class[cls];
  const std::string where = absl::StrCat(device.name, " (compute capability ", device.cc_major, ".",
                                         device.cc_minor, ")");
  if (chosen == SdpaBackend::kMath || chosen == SdpaBackend::kNone) {
    return absl::InvalidArgumentError(absl::StrCat(
        "on ", where, " sdp_utils.cpp's rules choose ",
        chosen == SdpaBackend::kMath ? "the math fallback" : "no kernel", " for this call, recorded as the fused op ",
        std::string(op_name), " (", recorded, "), which has no math decomposition in the recording; record for that device "
        "(`python3 -m gpusim_torch record STEP.py --device ", device.name, "`)"));
  }
  if (chosen == op.backend) return SdpaChoice{chosen, "recorded choice (sdp_utils.cpp select_sdp_backend)"};
  return SdpaChoice{chosen, absl::StrCat("re-targeted: recorded as ", recorded, " for the recording's target; on ",
                                         where, " the rules choose ", SdpaBackendName(chosen),
                                         "; the saved tensors taken as recorded")};
}

OpTemporaries SdpaWorkspaces(const SdpaFacts& facts, bool backward, SdpaBackend backend, const DeviceSpec& device,
                             bool deterministic) {
  OpTemporaries t;
  switch (backend) {
    case SdpaBackend::kCudnn: Cudnn(facts, backward, &t); break;
    case SdpaBackend::kFlash: Flash(facts, backward, device, deterministic, &t); break;
    case SdpaBackend::kEfficient: Efficient(facts, backward, device, deterministic, &t); break;
    case SdpaBackend::kMath:
    case SdpaBackend::kNone: break;
  }
  return t;
}

}  // namespace gpusim
