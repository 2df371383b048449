// Importer for PyTorch profiler (Kineto) Chrome-trace JSON, plain or .gz
// (torch.profiler.profile(profile_memory=True) + export_chrome_trace):
//   - "[memory]" instant events -> RecordedMemoryEvent alloc/free, keeping
//     Addr, Bytes (negative = free), Total Allocated, Total Reserved, Ev Idx;
//     sorted by (ts, Ev Idx), file order breaking ties;
//   - complete ("ph":"X") events of the kept categories -> RecordedOp with
//     durations (kernel, gpu_memcpy, gpu_memset, cpu_op, user annotations,
//     runtime; the legacy names Kernel, Memcpy, Memset, Operator, Runtime);
//   - deviceProperties -> metadata.devices.
// Streams the file: memory use is a read buffer plus the largest single event
// plus what is kept, never the whole document.
#ifndef GPUSIM_SIM_IMPORT_KINETO_H_
#define GPUSIM_SIM_IMPORT_KINETO_H_

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "sim/import/byte_source.h"
#include "sim/import/recorded_trace.h"

namespace gpusim {

// Kineto's "Device Type" values (c10/core/DeviceType.h: CPU 0, CUDA 1,
// HIP 6). ROCm builds record GPU memory as HIP (6).
inline constexpr int kKinetoDeviceTypeCpu = 0;
inline constexpr int kKinetoDeviceTypeCuda = 1;
inline constexpr int kKinetoDeviceTypeHip = 6;

struct KinetoImportOptions {
  // "[memory]" events kept: those whose "Device Type" is in this list (GPU
  // by default) and, when set, whose "Device Id" equals device_id.
  std::vector<int> device_types = {kKinetoDeviceTypeCuda, kKinetoDeviceTypeHip};
  std::optional<int> device_id;
  // Op events kept. The device filter does not apply to them: ROCm traces
  // record a kernel's device as the HSA agent index (MI300X trace: 2) while
  // its memory events say "Device Id" 0.
  bool keep_gpu_ops = true;    // kernel, memcpy, memset
  bool keep_cpu_ops = true;    // cpu_op, user_annotation, gpu_user_annotation
  bool keep_runtime = false;   // cuda_runtime / cuda_driver (launch calls)
  // with_stack=True / with_modules=True: each "python_function" event named
  // "nn.Module: NAME" (torch/csrc/profiler/python/init.cpp, the module
  // call's frame) as a RecordedOp of kind kModuleCall.
  bool keep_module_calls = false;
  // cpu_op "Input Dims" / "Input type" / "Concrete Inputs" (record_shapes=True).
  bool keep_shapes = false;
  // with_stack=True: "python_function" events give each [memory] event the
  // Python call stack open on its thread (Note [Kineto call stacks] in
  // kineto.cc), as RecordedMemoryEvent::stack into RecordedTrace::frames.
  bool keep_stacks = true;
  // Note [One pass per trace event] (kineto.cc): plain events are read in
  // one pass in place; false reads every event through the general path
  // (simdjson), which the tests compare it with.
  bool fast_path = true;
  // When set, each kept [memory] event goes to it, in file order, with the
  // metadata read so far, instead of into RecordedTrace::memory_events:
  // nothing is sorted and no stacks are attached (the caller checks the
  // order; sim/replay/replay_stream.cc). A non-OK status stops the import
  // and is returned as it is.
  std::function<absl::Status(const RecordedMemoryEvent&, const RecordedMetadata&)> on_memory_event;
};

absl::StatusOr<RecordedTrace> ImportKinetoTrace(const std::string& path,
                                                const KinetoImportOptions& options = {});

// As above, from any byte source; `label` names it in errors and metadata.
absl::StatusOr<RecordedTrace> ImportKinetoTrace(ByteSource& source, const std::string& label,
                                                const KinetoImportOptions& options = {});

}  // namespace gpusim

#endif  // GPUSIM_SIM_IMPORT_KINETO_H_
