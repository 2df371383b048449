// The sort and scan temporaries PyTorch's CUDA indexing kernels allocate
// through the caching allocator, sized from the op facts the recorder writes
// (traces/FORMAT.md *Op facts*) for a modelled device. Used by
// AddEagerDeviceMemory (device_memory.h).
//
// Note [Index put sort temporaries]
// index_put_with_sort_kernel (aten/src/ATen/native/cuda/Indexing.cu; CUDA
// takes it for accumulate=true or deterministic algorithms,
// TensorAdvancedIndexing.cpp _index_put_impl_; the backward of weight[ids]
// is _index_put_impl_(zeros, ids, grad, true, /*unsafe=*/true),
// FunctionsManual.cpp index_backward) allocates, in order:
//   - a contiguous copy of self when self is not contiguous (self_);
//   - makeLinearIndex: an int64 copy of each int32 index (i.to(kLong)), freed
//     when it returns; computeLinearIndex per index tensor: wrapIndexOnce's
//     range check when not unsafe (1.13: index.max() and index.min(), each
//     result freed after .item(); 2.x: at::aminmax, both results live until
//     wrapIndexOnce returns), index.remainder(size) and that times the stride,
//     the remainder freed at the end of the full expression; from the second
//     index tensor on, `linearIndex += index` frees the product;
//   - the value's expanded contiguous copy (expandedValue) when the value
//     does not have the indexed shape or is not contiguous;
//   - sorted_indices and orig_indices (empty_like), range (arange), and
//     cuda::cub::radix_sort_pairs's CUB temporary storage (CUB_WRAPPER in
//     aten/src/ATen/cuda/cub.cuh: one caching-allocator block, freed when the
//     sort returns), CubRadixSortPairsTempBytes;
//   - after the kernel, in reverse declaration order: range, orig_indices,
//     sorted_indices, then expandedValue, linearIndex, self_.
// The CS336 snapshot's embedding backward (weight[ids], 8,192 int64 ids,
// A100) holds exactly this: 65,536 B (remainder) + 65,536 (linear index),
// the remainder freed, then 3 x 65,536 and 138,751 B of CUB storage, freed
// in that reverse order.
// Not modelled (named in the report): non-adjacent indices (self and the
// indices transposed to the front, transposeToFrontAndInvPerm) and mask
// indices (their count is data: nonzero).
#ifndef GPUSIM_SIM_LOWER_EAGER_DEVICE_MEMORY_SORT_H_
#define GPUSIM_SIM_LOWER_EAGER_DEVICE_MEMORY_SORT_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "sim/base/units.h"
#include "sim/config/spec.h"

namespace gpusim {

// Which CUB a PyTorch build carries, as far as radix-sort storage goes.
struct CubBuild {
  // sizeof(OffsetT): 8 when DeviceRadixSort takes the caller's int64_t
  // num_items (NumItemsT, choose_offset_t: CUB 2.x, CUDA 12 builds), 4 with
  // CUB 1.x's `int num_items` (CUDA 11 builds).
  int offset_bytes = 8;
  bool has_sm90_policy = true;  // DeviceRadixSortPolicy::Policy900 (CUB 2.x)
};

// (major, minor) of "2.15.0+cu132", "1.13.0a0", "12.4"; nullopt when
// unreadable.
std::optional<std::pair<int, int>> MajorMinor(std::string_view version);

// (major, minor) of the CUDA a PyTorch build links: meta torch_cuda ("12.4")
// when it names one, else the torch release's default wheels' (torch >= 2.1:
// 12.1; before: 11.7), an assumption for recordings made on a CPU build.
absl::StatusOr<std::pair<int, int>> CudaOfBuild(const std::string& torch_version, const std::string& torch_cuda);

// The CUB of a build: from meta torch_cuda ("12.4") when it names a CUDA,
// else from the torch release's default CUDA (torch >= 2.1: CUDA 12).
absl::StatusOr<CubBuild> CubBuildFor(const std::string& torch_version, const std::string& torch_cuda);

// cub::DeviceRadixSort::SortPairs temp_storage_bytes (cub/device/dispatch/
// dispatch_radix_sort.cuh DispatchRadixSort::Invoke: a single tile asks for
// 1 byte; InvokeOnesweep: bins, lookback, the extra key and value buffers
// when more than one pass and the input may not be overwritten, counters,
// each rounded up to 256 B plus 255, AliasTemporaries) for `num_items` pairs
// of `key_bytes` keys and `value_bytes` values sorted on `end_bit` bits, on
// `device` (the tuning policy of its compute capability, 7.0 or later).
// InvalidArgument for keys under 4 bytes or a device before sm_70.
absl::StatusOr<Bytes> CubRadixSortPairsTempBytes(int64_t num_items, int key_bytes, int value_bytes, int end_bit,
                                                 const DeviceSpec& device, const CubBuild& cub);

// PyTorch's cuda::cub::get_num_bits(max_key) (aten/src/ATen/cuda/cub.cuh).
int CubNumBits(uint64_t max_key);

// One allocation or free of an op's temporaries; `slot` names the buffer
// within the op.
struct TempStep {
  bool alloc = true;
  int slot = 0;
  Bytes size;        // alloc only
  std::string what;  // alloc only: "sorted_indices", ...
};

struct OpTemporaries {
  std::vector<TempStep> before;  // before the op's kernel
  std::vector<TempStep> after;   // after it
  std::string not_modelled;      // non-empty: sized nothing, and why
};

// Note [Index put sort temporaries] for the 12 recorded facts `dims`
// (python/gpusim_torch/ops.py index_put_facts). `deterministic`: meta
// deterministic_algorithms. Empty (no steps) when CUDA does not sort
// (neither accumulate nor deterministic). InvalidArgument when the facts are
// malformed.
absl::StatusOr<OpTemporaries> IndexPutTemporaries(const std::vector<int64_t>& dims, bool deterministic,
                                                  const std::string& torch_version, const CubBuild& cub,
                                                  const DeviceSpec& device);

// Note [Embedding backward temporaries]
// embedding_dense_backward_cuda (aten/src/ATen/native/cuda/Embedding.cu)
// makes grad and the indices contiguous; up to 3,072 indices without
// scale_grad_by_freq it adds nothing more (embedding_backward_feature_kernel
// into the zeros result). Otherwise: sorted_indices and orig_indices
// (empty_like), range (arange, freed when the dispatch lambda returns) and
// radix_sort_pairs's CUB storage on all the index type's bits (nbits is
// commented out there); then embedding_backward_cuda_kernel
// (EmbeddingBackwardKernel.cu): segment_offsets (numel indices), an int64
// segment count, cub::unique_by_key's storage; with max_segments =
// min(numel, num_weights) and max_partial_segment = numel /
// NROWS_PER_THREAD (10) + max_segments: partials_per_segment and
// partials_per_segment_offset (max_segments indices), cub::exclusive_sum's
// storage, an int64 partial-segment count, partial_segment_offset
// (max_partial_segment indices) and grad_weight_per_segment
// (max_partial_segment x dim in acc_type: float for half and bfloat16); all
// freed as their scopes end. The result (grad_weight) is the op's output in
// the recording, allocated before these (on the GPU after the sort: the
// range and sort storage coexist with it here, a few bytes per index early).
// Sized for CUDA 12 builds (CUB 2.x, the max_segments code); torch 1.13's
// CUDA 11 path sizes its segment buffers by the number of distinct indices
// (thrust unique_by_key and .item()), data the recording lacks: named, not
// sized, as are the unique_by_key and exclusive_sum storage (CUB
// DeviceSelect / DeviceScan tile state) and scale_grad_by_freq's counts.
absl::StatusOr<OpTemporaries> EmbeddingBackwardTemporaries(const std::vector<int64_t>& dims, const CubBuild& cub,
                                                           const DeviceSpec& device);

}  // namespace gpusim

#endif  // GPUSIM_SIM_LOWER_EAGER_DEVICE_MEMORY_SORT_H_
