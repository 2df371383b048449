// The tiled kernel model (the default): the roofline of roofline.h with a
// shape-dependent matmul efficiency. A matmul with a known shape (m, n, k,
// batch on the TraceEvent) takes
//   t = max(flops / (peak · efficiency.matmul · utilisation),
//           (bytes + split_k_bytes) / (hbm · efficiency.memory)) + launch
// with utilisation and split_k_bytes from ChooseMatmulTiling on the device's
// SMs (matmul_tiling.h, Note [Tile and wave quantisation]). efficiency.matmul
// is thus the efficiency of a perfectly tiled GEMM. Matmuls without a shape,
// and every other op, are timed by the roofline model.
#ifndef GPUSIM_SIM_DEVICE_IMPL_TILED_H_
#define GPUSIM_SIM_DEVICE_IMPL_TILED_H_

#include <cstdint>
#include <mutex>
#include <tuple>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "sim/device/impl/roofline.h"
#include "sim/device/kernel_model.h"
#include "sim/device/matmul_tiling.h"

namespace gpusim {

class TiledKernelModel : public KernelModel {
 public:
  explicit TiledKernelModel(TilingOptions tiling = {}, CollectiveOptions collectives = {})
      : tiling_(std::move(tiling)), roofline_(collectives) {}
  std::string_view name() const override { return "tiled"; }
  SimTime Duration(const TraceEvent& e, const DeviceSpec& d) const override;

 private:
  // ChooseMatmulTiling is a pure function of the shape and the SM count, and
  // a step repeats each shape once a layer: its results are memoised (the
  // advisor's threads share the default model, hence the lock).
  MatmulTiling Tiling(int64_t m, int64_t n, int64_t k, int64_t batch, int sms) const;

  TilingOptions tiling_;
  RooflineKernelModel roofline_;  // everything but shaped matmuls
  mutable std::mutex mu_;
  mutable absl::flat_hash_map<std::tuple<int64_t, int64_t, int64_t, int64_t, int>, MatmulTiling> tilings_;  // by mu_
};

}  // namespace gpusim

#endif  // GPUSIM_SIM_DEVICE_IMPL_TILED_H_
