// What a PyTorch step's CUDA libraries allocate beside the op results a
// recorder sees on the meta device (python/gpusim_torch): sized for a
// modelled device from the op facts the recorder writes (traces/FORMAT.md
// 1.2 `op=`, `dims=`, `meta` lines) and inserted into the trace as
// workspace allocations, so that replay, the engine and the OOM decision
// all see them.
//
// Note [What the device adds to a recorded PyTorch step]
// - cuBLAS workspace: one per (cuBLAS handle, stream), allocated from the
//   caching allocator on the first cuBLAS call of that pair and never freed
//   (aten/src/ATen/cuda/CublasHandlePool.cpp: getCurrentCUDABlasHandle ->
//   setWorkspaceForHandle, cublas_handle_stream_to_workspace; handles are per
//   thread, DeviceThreadHandlePool). Backward runs on the autograd engine's
//   device thread (torch/csrc/autograd/engine.cpp: one thread per device),
//   so a training step holds two: the main thread's (forward, optimizer) and
//   the autograd thread's. Size: parseChosenWorkspaceSize:
//   CUBLAS_WORKSPACE_CONFIG ":SIZE:COUNT..." sums SIZE KiB x COUNT; by
//   default ":4096:2:16:8" = 8,519,680 B, and 32 MiB (":4096:8") on compute
//   capability 9.0 from torch 2.1, also on 10.x and 12.x from torch 2.7 (the
//   "Hopper and Blackwell" rule; 2.7 is the first release with Blackwell
//   builds, taken as the rule's start, not read from a tag). After a warm-up
//   step the workspaces of every pair the step uses exist already: they join
//   the start state (meta warmup_steps >= 1).
// - Reduction staging: gpu_reduce_kernel (aten/src/ATen/native/cuda/
//   Reduce.cuh) allocates a staging buffer of
//   ReduceConfig::global_memory_size() and semaphore_size() bytes when
//   setReduceConfig splits each output across thread blocks
//   (should_global_reduce), for the kernel's duration. ReduceConfigFor
//   re-derives setReduceConfig from the recorded TensorIterator facts and the
//   device's SM count and threads per SM.
// - The CUDA context and library handles are outside the caching allocator:
//   the device's memory.context_reserve, taken off the capacity (the OOM
//   decision uses cuda_total - context_reserve).
// - Sort temporaries of index_put with accumulate (the backward of
//   weight[ids]) or under deterministic algorithms: Note [Index put sort
//   temporaries] (device_memory_sort.h), inserted around the op's compute
//   event in the order Indexing.cu allocates and frees them.
// - cuDNN convolution workspaces under a named assumption (Note [cuDNN
//   convolution workspaces], device_memory_conv.h): none by default, named
//   in the report as an assumption.
// - The transient workspaces of the fused attention kernels
//   (_scaled_dot_product_{cudnn,flash,efficient}_attention and their
//   backward): Note [Fused attention workspaces] (device_memory_sdpa.h), for
//   the backend the replay device's rules choose (Note [Which backend a
//   replay runs]) or --sdpa-backend forces.
// - NCCL's connection buffers of a distributed step (Note [NCCL buffers],
//   device_memory_nccl.h): outside the caching allocator, taken off the
//   capacity like the context, the channel count named as an assumption.
// Not modelled, and named in the report when the step has such ops: the
// sort and scan temporaries of embedding_dense_backward (CUB radix sort,
// unique_by_key, segment scans; EmbeddingBackwardKernel.cu), index_put with
// mask or non-adjacent indices.
#ifndef GPUSIM_SIM_LOWER_EAGER_DEVICE_MEMORY_H_
#define GPUSIM_SIM_LOWER_EAGER_DEVICE_MEMORY_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "sim/base/units.h"
#include "sim/config/cublas_workspace.h"
#include "sim/config/spec.h"
#include "sim/lower/eager/device_memory_nccl.h"
#include "sim/trace/trace.h"

namespace gpusim {

// One kind of allocation the device model added.
struct DeviceAddition {
  std::string what;    // "cuBLAS workspace", "reduction staging buffer", ...
  std::string source;  // the PyTorch source it follows
  int64_t count = 0;   // allocations inserted
  Bytes largest;       // the largest of them
  bool kept = false;   // never freed (held for the process's life)
};

// The fused SDPA calls of one recorded op that ran one backend for one
// reason (Note [Which backend a replay runs]).
struct SdpaCallClass {
  std::string op;       // the recorded aten op
  int64_t count = 0;    // its compute events
  std::string backend;  // "flash", "efficient", "cudnn"
  std::string why;      // "recorded choice (...)", "re-targeted: ...", "forced (...)"
};

struct EagerDeviceMemory {
  bool applied = false;       // the trace is a PyTorch recording (meta framework=pytorch)
  std::string torch_version;  // meta torch_version
  std::string device;
  Bytes context_reserve;      // outside the allocator: CUDA context + library handles
  NcclMemory nccl;            // outside the allocator too: NCCL's buffers (distributed steps)
  std::vector<DeviceAddition> added;
  std::vector<std::string> not_modelled;  // each with the op count that would need it
  // Choices gpusim cannot know and made by name (the cuDNN workspace
  // assumption), each saying which and that it is one.
  std::vector<std::string> assumptions;
  std::vector<SdpaCallClass> sdpa;  // empty without fused SDPA events
  // Over the trace with the additions, live requests each rounded up to 512 B
  // (the caching allocator's kMinBlockSize): at the `step` marker after the
  // start state, and their highest point after it (the figure a Kineto
  // trace's profiler step shows as its rise). has_step false without one.
  bool has_step = false;
  Bytes step_start_live, step_peak_live;
};

// ceil(a / b) for a ≥ 0, b > 0: the launch arithmetic of the kernels
// below (Reduce.cuh, cub's radix sort) rounds counts up this way.
inline int64_t DivUp(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Reduce.cuh's ReduceConfig, as far as its memory goes.
struct ReduceStaging {
  bool global = false;  // should_global_reduce
  int64_t ctas_per_output = 1;
  Bytes buffer;         // global_memory_size()
  Bytes semaphores;     // semaphore_size()
};

// setReduceConfig for the recorded facts `dims` of a reduction (traces/
// FORMAT.md *Op facts*: num_outputs, inputs_per_output, reduction on the
// fastest-striding dimension, reduced dims, dims, fastest stride is the
// element size, output vector size, sizeof(arg_t), element size) on
// `device`. InvalidArgument when the facts are malformed.
absl::StatusOr<ReduceStaging> ReduceConfigFor(const std::vector<int64_t>& dims, const DeviceSpec& device);

// cuBLAS workspace bytes per (handle, stream): CublasWorkspaceBytes,
// sim/config/cublas_workspace.h.

// What the caller chose where the device's choice cannot be known.
struct EagerDeviceOptions {
  // --cudnn-workspace (device_memory_conv.h ParseCudnnAssumption); empty:
  // not given, the default assumption none. Given, it is refused by name on a
  // trace without convolutions.
  std::string cudnn_workspace;
  // --sdpa-backend (device_memory_sdpa.h ParseSdpaBackend); empty: not given,
  // each call runs the backend the device's rules choose. Given, it is
  // refused by name on a trace without fused SDPA events, and math on one
  // with them.
  std::string sdpa_backend;
};

// `recorded` with the device's allocations inserted (role workspace, named
// after the op that needs them, its stack), or unchanged with
// report->applied false when it is not a PyTorch recording.
// InvalidArgument naming the event when an op's facts are malformed, or
// naming the device file when it lacks compute_capability.
absl::StatusOr<Trace> AddEagerDeviceMemory(const Trace& recorded, const DeviceSpec& device,
                                           EagerDeviceMemory* report, const EagerDeviceOptions& options = {});

}  // namespace gpusim

#endif  // GPUSIM_SIM_LOWER_EAGER_DEVICE_MEMORY_H_
