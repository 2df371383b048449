// NCCL's device memory for a distributed PyTorch step recorded under a fake
// process group (python/gpusim_torch --world-size N --rank R; traces/
// FORMAT.md 1.3 meta world_size, rank, comm.ID).
//
// Note [NCCL buffers]
// NCCL allocates its connection buffers itself (ncclCudaCalloc / cuMem),
// not through PyTorch's caching allocator, so they are not in
// max_memory_allocated but take device memory away from it: like the CUDA
// context they come off the capacity the OOM decision uses. Read from
// NVIDIA/nccl (master, 2.2x):
// - Buffer sizes per protocol (src/init.cc computeBuffSizes; defaults
//   DEFAULT_LL_BUFFSIZE = NCCL_LL_LINES_PER_THREAD 8 x NCCL_LL_MAX_NTHREADS
//   512 x NCCL_STEPS 8 x sizeof(ncclLLFifoLine) 16 = 524,288 B;
//   DEFAULT_LL128_BUFFSIZE = NCCL_LL128_ELEMS_PER_THREAD 120 x
//   NCCL_LL128_MAX_NTHREADS 640 x NCCL_STEPS 8 x 8 = 4,915,200 B;
//   DEFAULT_BUFFSIZE (Simple) = 4 MiB; src/include/device.h), overridden by
//   NCCL_LL_BUFFSIZE, NCCL_LL128_BUFFSIZE, NCCL_BUFFSIZE.
// - Per connection, one channel, one peer (src/transport/p2p.cc
//   p2pRecvSetup / p2pSendSetup): the receiver allocates ncclRecvMem plus
//   the three protocols' buffers, the sender ncclSendMem; with P2P read
//   (NVLink between compute capability 8.0 GPUs, src/graph/paths.cc) the
//   Simple buffer moves to the sender. Each side is rounded up to
//   CUDA_IPC_MIN = 2 MiB (src/include/comm.h). With the defaults both ways
//   give 10 MiB + 2 MiB (or 6 + 6) = 12 MiB per channel for a rank's ring
//   connections (receive from prev, send to next).
// - Channels: NCCL's ring search (src/graph/search.cc ncclTopoCompute)
//   finds them on the machine's topology, then duplicates them
//   (src/graph/connect.cc ncclTopoPostset, at most MAXCHANNELS 64) and
//   bounds them by NCCL_MIN_NCHANNELS / NCCL_MAX_NCHANNELS. A recording has
//   no topology, so gpusim ASSUMES 32 channels (the ring search's cap,
//   src/init.cc ringGraph->maxChannels = MAXCHANNELS / 2), bounded by those
//   variables when the recording process set them. Named in the report.
// - Only the ring algorithm's connections are counted: with runtime connect
//   (NCCL_RUNTIME_CONNECT, default 1 where cuMem is supported) NCCL sets up
//   an algorithm's connections when a collective first uses it; tree,
//   NVLS and CollNet buffers, and the communicator's small device structs,
//   are not modelled (named). Inter-node (net transport) connections are
//   sized as P2P ones.
// - One communicator per process group that ran a collective (PyTorch's
//   ProcessGroupNCCL creates it on the group's first collective); a group
//   of one rank connects nothing.
#ifndef GPUSIM_SIM_LOWER_EAGER_DEVICE_MEMORY_NCCL_H_
#define GPUSIM_SIM_LOWER_EAGER_DEVICE_MEMORY_NCCL_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "sim/base/units.h"
#include "sim/config/spec.h"
#include "sim/trace/trace.h"

namespace gpusim {

struct NcclCommunicator {
  std::string id;      // the comm.ID meta key's ID
  int64_t ranks = 0;   // ranks in the group
  int64_t channels = 0;
  Bytes per_channel;   // receive + send side of the ring connections
  Bytes bytes;         // channels x per_channel (0 for one rank)
};

struct NcclMemory {
  bool distributed = false;  // meta world_size present
  int64_t world_size = 1, rank = 0;
  std::vector<NcclCommunicator> communicators;
  Bytes total;
  std::string assumption;  // the channel count, in words (empty when not distributed)
};

// NCCL's device memory for `trace` on `device`. InvalidArgument naming the
// meta key when world_size, rank or a comm.ID is malformed, or a collective
// event's group is not one of the recorded communicators' sizes.
absl::StatusOr<NcclMemory> NcclDeviceMemory(const Trace& trace, const DeviceSpec& device);

}  // namespace gpusim

#endif  // GPUSIM_SIM_LOWER_EAGER_DEVICE_MEMORY_NCCL_H_
