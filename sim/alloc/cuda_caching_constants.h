// The size constants of PyTorch's CUDA caching allocator
// (c10/cuda/CUDACachingAllocator.cpp, namespace c10::cuda::CUDACachingAllocator,
// the constants at its top; unchanged from torch 2.0 to 2.15), shared by
// the allocator model (pytorch_caching.cc) and the replay's inference of a
// recording's start state (sim/replay/warm_start.cc, snapshot_replay.cc),
// so the two cannot drift apart.
#ifndef GPUSIM_SIM_ALLOC_CUDA_CACHING_CONSTANTS_H_
#define GPUSIM_SIM_ALLOC_CUDA_CACHING_CONSTANTS_H_

#include <cstdint>

namespace gpusim::cuda_caching {

inline constexpr int64_t kMinBlockSize = 512;        // every size rounded to a multiple (round_size)
inline constexpr int64_t kSmallSize = 1048576;       // largest "small" request: 1 MiB (get_pool)
inline constexpr int64_t kSmallBuffer = 2097152;     // small-pool segments: 2 MiB
inline constexpr int64_t kLargeBuffer = 20971520;    // segments for 1–10 MiB requests: 20 MiB
inline constexpr int64_t kMinLargeAlloc = 10485760;  // below this, large requests get kLargeBuffer
inline constexpr int64_t kRoundLarge = 2097152;      // larger segments: the request rounded to 2 MiB

}  // namespace gpusim::cuda_caching

#endif  // GPUSIM_SIM_ALLOC_CUDA_CACHING_CONSTANTS_H_
