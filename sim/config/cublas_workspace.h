// The GEMM libraries' persistent workspaces, by device and setting: PyTorch's
// cuBLAS workspace per (handle, stream) and Transformer Engine's one cuBLAS
// workspace. Read by the recorded-step pass (sim/lower/eager/device_memory.h)
// and the Megatron builder (models/gpt_workspace.cc), so that both size them
// by the same rule.
#ifndef GPUSIM_SIM_CONFIG_CUBLAS_WORKSPACE_H_
#define GPUSIM_SIM_CONFIG_CUBLAS_WORKSPACE_H_

#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "absl/status/statusor.h"
#include "sim/base/units.h"
#include "sim/config/spec.h"

namespace gpusim {

// (major, minor) of a "MAJOR.MINOR..." version string (torch 2.7.0a0, CUDA
// 12.8); nullopt when it does not start so.
std::optional<std::pair<int, int>> VersionMajorMinor(std::string_view version);

// cuBLAS workspace bytes per (handle, stream) for `torch_version` on
// `device`, or `config` (CUBLAS_WORKSPACE_CONFIG) when non-empty and
// parseable (Note [What the device adds to a recorded PyTorch step],
// sim/lower/eager/device_memory.cc). InvalidArgument for a device without a
// compute capability, a malformed version or a workspace above 2^46 B.
absl::StatusOr<Bytes> CublasWorkspaceBytes(const std::string& torch_version, const DeviceSpec& device,
                                           const std::string& config);

// Transformer Engine's cuBLAS workspace, allocated once per process at the
// first TE GEMM and kept (transformer_engine/pytorch/module/base.py
// get_workspace, get_cublas_workspace_size_bytes): 32 MiB on compute
// capability 9 and later, 4 MiB before. REQUIRES: device.cc_major > 0.
Bytes TeCublasWorkspaceBytes(const DeviceSpec& device);

}  // namespace gpusim

#endif  // GPUSIM_SIM_CONFIG_CUBLAS_WORKSPACE_H_
