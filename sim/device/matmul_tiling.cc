// Tile and wave quantisation of GEMMs; see matmul_tiling.h.
#include "sim/device/matmul_tiling.h"

#include "sim/base/status.h"

namespace gpusim {
namespace {

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

}  // namespace

MatmulTiling EvaluateMatmulTiling(int64_t m, int64_t n, int64_t k,
                                  int64_t batch, int sms, TileShape tile,
                                  int64_t split_k,
                                  const TilingOptions& options) {
  GPUSIM_CHECK(m >= 1 && n >= 1 && k >= 1 && batch >= 1 && sms >= 1);
  GPUSIM_CHECK(split_k >= 1 && tile.m >= 1 && tile.n >= 1);
  MatmulTiling t;
  t.tile = tile;
  t.split_k = split_k;
  t.tiles = batch * CeilDiv(m, tile.m) * CeilDiv(n, tile.n) * split_k;
  t.waves = CeilDiv(t.tiles, sms);
  const int64_t k_per_split = CeilDiv(k, split_k);
  const double k_issued = static_cast<double>(
      CeilDiv(k_per_split, options.k_tile) * options.k_tile + options.k_overhead);
  const double issued = static_cast<double>(t.waves) * sms *
                        static_cast<double>(tile.m * tile.n) * k_issued;
  const double useful = static_cast<double>(batch) * static_cast<double>(m) *
                        static_cast<double>(n) * static_cast<double>(k);
  t.utilisation = useful / issued;
  t.split_k_bytes = 2.0 * static_cast<double>(split_k - 1) *
                    static_cast<double>(batch) * static_cast<double>(m) *
                    static_cast<double>(n) * 4.0;
  return t;
}

MatmulTiling ChooseMatmulTiling(int64_t m, int64_t n, int64_t k, int64_t batch,
                                int sms, const TilingOptions& options) {
  MatmulTiling best;
  bool have = false;
  for (const TileShape& tile : options.tiles) {
    for (int64_t s : options.split_k) {
      if (s > 1 && (k / s < options.min_split_k)) continue;
      MatmulTiling t = EvaluateMatmulTiling(m, n, k, batch, sms, tile, s, options);
      // Split-K only when the unsplit tiles leave SMs idle in their one wave.
      if (s > 1 && batch * ((m + tile.m - 1) / tile.m) *
                           ((n + tile.n - 1) / tile.n) >= sms) {
        continue;
      }
      if (!have || t.utilisation > best.utilisation * (1 + 1e-12)) {
        best = t;
        have = true;
      }
    }
  }
  GPUSIM_CHECK(have);
  return best;
}

}  // namespace gpusim
