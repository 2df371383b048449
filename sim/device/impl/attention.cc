// Fused attention kernels by backend and tile; see attention.h,
// Note [Fused attention time].
#include "sim/device/impl/attention.h"

#include <algorithm>
#include <cmath>
#include <string_view>
#include <vector>

#include "sim/device/impl/roofline.h"
#include "sim/device/timing.h"
#include "sim/trace/sdpa_op.h"

namespace gpusim {
namespace {

// CUDA C++ Programming Guide, Arithmetic Instructions (throughput per clock
// per SM): exp2 on the SFU, 32-bit integer multiply-add.
constexpr double kSfuExpPerClock = 16;
constexpr double kIntOpsPerClock = 64;
// Philox4x32-10: 10 rounds x (2 mulhi + 2 mullo + 2 LOP3) per 4 words.
constexpr double kPhiloxIntOpsPerElement = 10.0 * 6.0 / 4.0;
// FP32 instructions per score element (Note [Fused attention time]).
constexpr double kFwdFp32PerElement = 4;
constexpr double kBwdFp32PerElement = 6;
constexpr double kMaskFp32PerElement = 1;

int64_t TilesOf(int64_t a, int64_t b) { return (a + b - 1) / b; }
int64_t PadTo(int64_t a, int64_t b) { return TilesOf(a, b) * b; }

// FP32 lanes per SM (CUDA C++ Programming Guide, Arithmetic Instructions:
// 32-bit floating-point add, multiply, multiply-add).
double Fp32Lanes(const DeviceSpec& d) {
  if (d.cc_major < 8 || (d.cc_major == 8 && d.cc_minor == 0)) return 64;
  return 128;
}

// SM clocks per second of one SM.
double SmClock(const DeviceSpec& d) { return d.peak_fp32 / (2 * Fp32Lanes(d) * d.sms); }

AttentionTile FlashTile(const AttentionShape& s, const DeviceSpec& d) {
  const int64_t h = std::max(s.dqk, s.dv);
  const bool drop = s.dropout > 0;
  if (s.backward) {
    if (h <= 64) return {128, 128, 32};
    if (h <= 128) return {64, 128, 32};
    return {64, 64, 32};
  }
  if (h <= 32) return {128, 128, 32};
  if (h <= 64) return drop ? AttentionTile{128, 64, 32} : AttentionTile{128, 128, 32};
  if (h <= 96) return {128, 64, 32};
  if (h <= 128) return drop ? AttentionTile{128, 32, 32} : AttentionTile{128, 64, 32};
  if (h <= 160) return {128, 32, 32};
  if (h <= 192) return drop ? AttentionTile{64, 64, 32} : AttentionTile{128, 64, 32};
  if (h <= 224) return {128, 64, 32};
  return d.cc_major >= 9 ? AttentionTile{64, 64, 32} : AttentionTile{128, 64, 32};
}

AttentionTile EfficientTile(const AttentionShape& s) {
  const int64_t h = std::max(s.dqk, s.dv);
  if (!s.backward) return s.dv <= 64 ? AttentionTile{64, 64, 32} : AttentionTile{32, 128, 32};
  if (h <= 64) return {64, 64, 32};
  if (h <= 128) return s.elem == 4 ? AttentionTile{128, 64, 32} : AttentionTile{128, 128, 32};
  return {128, 64, 32};
}

double HbmSeconds(double bytes, const DeviceSpec& d) { return RooflineKernelModel::MemorySeconds(bytes, d); }

// The backward's helper kernels: the bytes each moves (Note [Fused
// attention time]).
std::vector<double> HelperBytes(const AttentionShape& s) {
  std::vector<double> out;
  if (!s.backward || s.backend == AttentionBackend::kEfficient) return out;
  const double rows = static_cast<double>(s.b * s.hq * s.sq);
  const double e = static_cast<double>(s.elem);
  out.push_back(rows * static_cast<double>(s.dv) * e * 2 + rows * 4);    // dot(dO, O): dO, O -> row sums
  out.push_back(rows * static_cast<double>(s.dqk) * (4 + e));            // dQ accumulator -> q's dtype
  if (s.backend == AttentionBackend::kCudnn && s.hq != s.hkv) {
    for (const int64_t dim : {s.dqk, s.dv}) {                              // dK, dV: Hq -> Hkv heads
      out.push_back(static_cast<double>(s.b * s.skv * dim) * e * static_cast<double>(s.hq + s.hkv));
    }
  }
  return out;
}

}  // namespace

std::optional<AttentionShape> FusedAttentionShape(const TraceEvent& e) {
  const std::optional<SdpaOp> op = SdpaOpOf(EventOpNameView(e));
  if (!op.has_value()) return std::nullopt;
  const absl::StatusOr<SdpaFacts> f = ParseSdpaFacts(e.dims);
  if (!f.ok()) return std::nullopt;  // the eager lowering refuses such facts by name
  AttentionShape s;
  switch (op->backend) {
    case SdpaBackend::kCudnn: s.backend = AttentionBackend::kCudnn; break;
    case SdpaBackend::kFlash: s.backend = AttentionBackend::kFlash; break;
    case SdpaBackend::kEfficient: s.backend = AttentionBackend::kEfficient; break;
    default: return std::nullopt;
  }
  s.backward = op->backward;
  s.b = f->b, s.hq = f->hq, s.hkv = f->hkv, s.sq = f->sq, s.skv = f->skv, s.dqk = f->dqk, s.dv = f->dv, s.elem = f->elem;
  s.causal = f->causal;
  s.dropout = static_cast<double>(f->dropout_ppm) / 1e6;
  s.mask = f->mask;
  return s;
}

AttentionTile ChooseAttentionTile(const AttentionShape& s, const DeviceSpec& d) {
  switch (s.backend) {
    case AttentionBackend::kCudnn: return s.backward ? AttentionTile{64, 64, 64} : AttentionTile{64, 128, 64};
    case AttentionBackend::kFlash: return FlashTile(s, d);
    case AttentionBackend::kEfficient: return EfficientTile(s);
  }
  return {64, 64, 64};
}

AttentionWork CountAttentionTiles(int64_t sq, int64_t skv, const AttentionTile& t, bool causal, bool backward) {
  const int64_t q_tiles = TilesOf(sq, t.m);
  const int64_t kv_tiles = TilesOf(skv, t.n);
  AttentionWork w;
  w.ctas = backward ? kv_tiles : q_tiles;
  w.iterations = w.ctas;  // one of fill and epilogue per CTA
  if (!causal) {
    w.iterations += q_tiles * kv_tiles;
    return w;
  }
  if (!backward) {
    for (int64_t i = 0; i < q_tiles; ++i) {
      const int64_t last_row = std::min(sq, (i + 1) * t.m) - 1;
      w.iterations += std::min(kv_tiles, last_row / t.n + 1);
    }
  } else {
    for (int64_t j = 0; j < kv_tiles; ++j) {
      const int64_t first_key = j * t.n;
      w.iterations += std::max<int64_t>(0, q_tiles - first_key / t.m);
    }
  }
  return w;
}

double AttentionIterationSeconds(const AttentionShape& s, const AttentionTile& t, const DeviceSpec& d) {
  const double dqk = static_cast<double>(PadTo(s.dqk, t.head_step));
  const double dv = static_cast<double>(PadTo(s.dv, t.head_step));
  const double elements = static_cast<double>(t.m * t.n);
  const double mma_flops = 2 * elements * (s.backward ? 3 * dqk + 2 * dv : dqk + dv);
  const DType dtype = s.elem == 4 ? DType::kF32 : DType::kBF16;
  const double mma = mma_flops / (d.PeakFlops(dtype) / d.sms);
  const double clock = SmClock(d);
  const double exp = elements / (kSfuExpPerClock * clock);
  const double fp32_ops = (s.backward ? kBwdFp32PerElement : kFwdFp32PerElement) + (s.mask ? kMaskFp32PerElement : 0);
  const double fp32 = elements * fp32_ops / (Fp32Lanes(d) * clock);
  const double philox = s.dropout > 0 ? elements * kPhiloxIntOpsPerElement / (kIntOpsPerClock * clock) : 0;
  return mma + exp + fp32 + philox;
}

double FusedAttentionKernelSeconds(const AttentionShape& s, const DeviceSpec& d, double efficiency) {
  const AttentionTile t = ChooseAttentionTile(s, d);
  const AttentionWork w = CountAttentionTiles(s.sq, s.skv, t, s.causal, s.backward);
  const double heads = static_cast<double>(s.b * s.hq);
  const double ctas = heads * static_cast<double>(w.ctas);
  const double sms = static_cast<double>(d.sms);
  const double utilisation = (ctas / sms) / std::ceil(ctas / sms);
  const double iterations = heads * static_cast<double>(w.iterations);
  return iterations * AttentionIterationSeconds(s, t, d) / efficiency / sms / utilisation;
}

SimTime FusedAttentionTime(const AttentionShape& s, double bytes, const DeviceSpec& d) {
  const double main = std::max(FusedAttentionKernelSeconds(s, d, d.fused_attention_efficiency), HbmSeconds(bytes, d));
  SimTime t = SimTime::FromSeconds(main) + d.launch_overhead;
  for (const double helper : HelperBytes(s)) t += SimTime::FromSeconds(HbmSeconds(helper, d)) + d.launch_overhead;
  return t;
}

}  // namespace gpusim
