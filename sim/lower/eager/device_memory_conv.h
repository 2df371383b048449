// cuDNN convolution workspaces of a recorded PyTorch step (Note [cuDNN
// convolution workspaces]), inserted by AddEagerDeviceMemory
// (device_memory.h) under a named assumption, since the algorithm, and so
// the workspace, is chosen on the real GPU.
//
// Note [cuDNN convolution workspaces]
// The mechanism (aten/src/ATen/native/cudnn/Conv_v7.cpp): each cudnn
// convolution direction (forward, backward data, backward filter) runs
// AlgoIterator::try_all. It looks the convolution's parameters up in a
// per-direction BenchmarkCache; on a miss, findAlgorithms asks cuDNN for its
// candidates: with cudnn.benchmark off, cuDNN's heuristics
// (cudnnGet*Algorithm_v7), with it on, timing (cudnnFind*AlgorithmEx) in a
// scratch Workspace of getMaxWorkspaceSize bytes: the largest
// getWorkspaceSize of any algorithm that fits in the caching allocator's
// largest free block (cacheInfo), allocated through the caching allocator
// and freed when the search returns. getValidAlgorithms keeps the successful
// (and, deterministic, the deterministic) results in cuDNN's order; try_all
// then calls the op with each in turn: allocate_workspace (at::empty of
// perf.memory bytes through the caching allocator), the kernel, the
// workspace freed on return; an out-of-memory error on the workspace falls
// back to the next candidate, the first that runs is cached. With
// cudnn.deterministic and benchmark off only DEFAULT_ALGO runs
// (onlyDefaultAlgorithm). torch 2.x's cuDNN v8 path (Conv_v8.cpp
// run_single_conv) does the same with the cudnn frontend: a benchmark_cache
// hit runs its plan; otherwise, without benchmark, heuristic then fallback
// engine configs (get_configs_from_heuristics, try_configs), with benchmark
// get_plans_from_find: generate_and_filter_plans keeps the plans whose
// workspace fits get_available_workspace() (cacheInfo's largest block) and
// allocates the largest of them through the caching allocator for the
// timing, halving it on out-of-memory and dropping the plans above; then
// try_plans. run_conv_plan allocates the plan's workspace per call and
// frees it on return; an out-of-memory error moves to the next plan.
//
// Which algorithm wins is cuDNN's (heuristics or measured time), so gpusim
// does not claim to know it: --cudnn-workspace names the assumption.
//   none (the default): every convolution runs without a workspace (as
//     implicit GEMM does): a lower bound.
//   gemm: the forward's explicit-GEMM algorithm (im2col of the whole batch:
//     N * C * R * S * P * Q * element bytes).
//   winograd_nonfused: the F(4x4, 3x3) transform buffers, for 3x3 stride-1
//     dilation-1 ungrouped float convolutions, in each direction:
//     (N * C * T + K * C + N * K * T) * 36 * 4 bytes, T = ceil(P/4) * ceil(Q/4).
//   bound: per direction the largest of the algorithms gpusim sizes (the
//     two above); cuDNN's other algorithms (FFT, FFT tiling, precomputed
//     GEMM, ALGO_0/1/3) are not sized, so it bounds only those.
// Checked against the V100 ResNet-50 Kineto trace (cudnn.benchmark=True,
// torch 1.9, workspaces allocated and freed inside aten::cudnn_convolution*):
// Winograd-nonfused equals the recorded workspace exactly for 64 channels at
// 56x56 (backward filter, 116,195,328 B), 256 at 14x14 (47,185,920 B) and 512
// at 7x7 (56,623,104 B) in all three directions; GEMM for the 512-channel 3x3
// stride-2 forward at 14x14 (28,901,376 B, the trace's im2col4d_kernel and
// explicit_convolve_sgemm). Elsewhere the trace picked algorithms gpusim
// does not size (0.4 MB for 64 channels at 56x56, 60,817,408 B at 28x28).
#ifndef GPUSIM_SIM_LOWER_EAGER_DEVICE_MEMORY_CONV_H_
#define GPUSIM_SIM_LOWER_EAGER_DEVICE_MEMORY_CONV_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "sim/trace/conv_op.h"
#include "sim/base/units.h"

namespace gpusim {

enum class CudnnAssumption { kNone, kGemm, kWinogradNonfused, kBound };

// "none", "gemm", "winograd_nonfused", "bound"; InvalidArgument naming the
// choices otherwise.
absl::StatusOr<CudnnAssumption> ParseCudnnAssumption(std::string_view name);
std::string CudnnAssumptionName(CudnnAssumption a);

// Workspace bytes of one algorithm for `g`, or -1 when the algorithm does not
// apply to it (or gpusim cannot size it there).
int64_t WinogradNonfusedBytes(const ConvGeometry& g);
int64_t GemmForwardBytes(const ConvGeometry& g);

enum class ConvDirection { kForward, kBackwardData, kBackwardFilter };
std::string ConvDirectionName(ConvDirection d);

// The workspace `a` assumes for direction `d` of `g`: bytes (0: none) and the
// algorithm it stands for; sized false when the assumption's algorithm does
// not apply to this convolution (then bytes 0).
struct ConvWorkspace {
  int64_t bytes = 0;
  std::string algorithm;
  bool sized = true;
};
ConvWorkspace AssumedWorkspace(CudnnAssumption a, ConvDirection d, const ConvGeometry& g);

}  // namespace gpusim

#endif  // GPUSIM_SIM_LOWER_EAGER_DEVICE_MEMORY_CONV_H_
