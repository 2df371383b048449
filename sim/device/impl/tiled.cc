// Shape-aware matmuls over the roofline; see tiled.h.
#include "sim/device/impl/tiled.h"

#include <algorithm>

namespace gpusim {

SimTime TiledKernelModel::Duration(const TraceEvent& e, const DeviceSpec& d) const {
  const bool shaped = e.kind == OpKind::kMatmul && e.m > 0 && e.n > 0 && e.k > 0 &&
                      e.batch > 0 && d.sms > 0;
  if (!shaped) return roofline_.Duration(e, d);
  const MatmulTiling t = ChooseMatmulTiling(e.m, e.n, e.k, e.batch, d.sms, tiling_);
  const double bytes = static_cast<double>((e.bytes_read + e.bytes_written).value()) + t.split_k_bytes;
  const double mem_t = RooflineKernelModel::MemorySeconds(bytes, d);
  const double flop_t = RooflineKernelModel::MatmulSeconds(e.flops, e.dtype, d) / t.utilisation;
  return SimTime::FromSeconds(std::max(mem_t, flop_t)) + d.launch_overhead;
}

}  // namespace gpusim
