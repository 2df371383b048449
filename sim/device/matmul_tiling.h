// Matmul tiling on a GPU: how many output tiles a GEMM launches, how many
// waves they take on the device's SMs, and which fraction of the issued
// tensor-core work is useful. The shape-aware kernel model (impl/tiled.h)
// divides a matmul's ideal time by this utilisation.
//
// Note [Tile and wave quantisation]
// A GEMM C[m,n] = A[m,k]·B[k,n] is split into output tiles of tm×tn; each
// thread block (CTA) computes one tile by stepping through K in slices of kt
// (NVIDIA, "Matrix Multiplication Background User's Guide", sections "Tile
// Quantization" and "Wave Quantization"; CUTLASS media/docs/efficient_gemm.md).
//   tiles  = batch · ceil(m/tm) · ceil(n/tn) · split_k
//   waves  = ceil(tiles / SMs)            (one CTA per SM for the large tiles)
//   issued = waves · SMs · tm · tn · (ceil(k / (split_k·kt))·kt + k_overhead)
//   useful = batch · m · n · k
//   utilisation = useful / issued
// k_overhead charges each tile its pipeline fill and epilogue as extra K
// steps, so small K is slower; tile padding makes skinny m or n slower. The
// library's heuristic (cuBLAS, cuBLASLt) picks among several tile shapes and
// split-K factors; we take the candidate with the best utilisation, split-K
// paying for the fp32 partial sums it writes and reads back.
#ifndef GPUSIM_SIM_DEVICE_MATMUL_TILING_H_
#define GPUSIM_SIM_DEVICE_MATMUL_TILING_H_

#include <cstdint>
#include <vector>

namespace gpusim {

struct TileShape {
  int64_t m = 128;
  int64_t n = 128;
};

struct TilingOptions {
  // Output tile candidates: the CTA tiles of CUTLASS's SM80/SM90 GEMM
  // kernels and of cuBLAS's kernel names (e.g. sm90_xmma_gemm_..._256x128,
  // ..._128x128, ..._64x128); largest first, so ties keep the larger tile.
  std::vector<TileShape> tiles = {{256, 128}, {128, 256}, {128, 128},
                                  {128, 64},  {64, 128},  {64, 64}};
  // K slice per main-loop step: 64 bf16 elements (128 bytes, one TMA/cp.async
  // row) in CUTLASS's default SM90 tile shapes such as Shape<_128,_128,_64>.
  int64_t k_tile = 64;
  // Per-tile pipeline fill + epilogue, in K elements: two K slices. An
  // assumption (not measured): one slice of load latency before the first MMA
  // and one slice's time to convert and store the accumulator; its absolute
  // scale is absorbed by the fitted efficiency.matmul.
  int64_t k_overhead = 128;
  // Split-K factors tried when the tiles do not fill the SMs (cuBLAS and
  // CUTLASS's GemmSplitKParallel); each split must keep >= min_split_k
  // elements of K (four K slices, so the main loop still pipelines).
  std::vector<int64_t> split_k = {1, 2, 4, 8, 16};
  int64_t min_split_k = 256;
};

struct MatmulTiling {
  TileShape tile;
  int64_t split_k = 1;
  int64_t tiles = 0;         // CTAs launched (including split-K copies)
  int64_t waves = 0;
  double utilisation = 1.0;  // useful / issued tensor-core work, in (0, 1]
  // fp32 partial-sum traffic of split-K (written, then read by the
  // reduction): 2 · (split_k − 1) · batch · m · n · 4 bytes; 0 without split.
  double split_k_bytes = 0;
};

// REQUIRES: m, n, k, batch >= 1; sms >= 1.
MatmulTiling ChooseMatmulTiling(int64_t m, int64_t n, int64_t k, int64_t batch,
                                int sms, const TilingOptions& options = {});

// The tiling for one candidate (no search). REQUIRES: as above, split_k >= 1.
MatmulTiling EvaluateMatmulTiling(int64_t m, int64_t n, int64_t k,
                                  int64_t batch, int sms, TileShape tile,
                                  int64_t split_k, const TilingOptions& options);

}  // namespace gpusim

#endif  // GPUSIM_SIM_DEVICE_MATMUL_TILING_H_
