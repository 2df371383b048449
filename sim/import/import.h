// One entry point for recorded traces: picks the importer from the file's
// name and first bytes. Formats (sim/import/*.h):
//   kineto           PyTorch profiler Chrome-trace JSON (.json / .json.gz)
//   snapshot         CUDA caching-allocator snapshot (.pickle, or its JSON)
//   memory_timeline  torch.profiler memory timeline raw rows (.json / .gz)
#ifndef GPUSIM_SIM_IMPORT_IMPORT_H_
#define GPUSIM_SIM_IMPORT_IMPORT_H_

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "sim/import/recorded_trace.h"

namespace gpusim {

struct RecordedFormatInfo {
  std::string_view name;
  std::string_view doc;
};
// The formats ImportRecordedTrace knows, for `gpusim list importers`.
const std::vector<RecordedFormatInfo>& RecordedFormats();

// "kineto", "snapshot" or "memory_timeline": a .pickle/.pkl name or a pickle
// protocol byte means snapshot; otherwise the first bytes of the
// (decompressed) content decide: `[[` or `[ [` is a memory timeline, an
// object with "segments" or "device_traces" near its start a snapshot, any
// other object or array a Chrome trace.
absl::StatusOr<std::string> DetectRecordedFormat(const std::string& path);

// Imports `path` with the detected importer's default options. `format`
// forces one ("" = detect).
absl::StatusOr<RecordedTrace> ImportRecordedTrace(const std::string& path,
                                                  std::string_view format = "");

}  // namespace gpusim

#endif  // GPUSIM_SIM_IMPORT_IMPORT_H_
