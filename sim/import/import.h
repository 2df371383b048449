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
#include "sim/base/registry.h"
#include "sim/import/byte_source.h"
#include "sim/import/input.h"
#include "sim/import/recorded_trace.h"

namespace gpusim {

// One recorded-trace importer: its registry entry (sim/base/registry.h),
// a sniff of a file's name and first bytes, and the import itself.
class Importer {
 public:
  virtual ~Importer() = default;
  virtual const RegistryEntry& info() const = 0;
  // Whether `path` is in this format, from its name and `head`, the first
  // (up to kImporterSniffBytes, decompressed) bytes of its content.
  // Importers are sniffed in registry order (SniffInput, sim/import/
  // input.h); the first that claims a file imports it.
  virtual bool Sniff(std::string_view path, std::string_view head) const = 0;
  // Reads `file` (one source over it). REQUIRES: nothing about the file;
  // bad input is a Status naming it.
  virtual absl::StatusOr<RecordedTrace> Import(std::shared_ptr<const InputFd> file) const = 0;
};
inline constexpr size_t kImporterSniffBytes = 4096;

// The registered importers, in sniff order.
const std::vector<const Importer*>& Importers();
// Their entries, for `gpusim list importers`.
std::vector<RegistryEntry> ListImporters();

// "kineto", "snapshot" or "memory_timeline", as SniffInput decides (a
// .pickle/.pkl name or a pickle protocol byte means snapshot; otherwise the
// first bytes of the (decompressed) content: `[[` or `[ [` is a memory
// timeline, an object with "segments" or "device_traces" near its start a
// snapshot, any other object or array a Chrome trace); any other input is
// an error naming what it is.
absl::StatusOr<std::string> DetectRecordedFormat(const std::string& path);

// A recording SniffInput classified (kKineto, kSnapshot, kMemoryTimeline),
// imported through its one open with the importer's default options.
absl::StatusOr<RecordedTrace> ImportRecordedTrace(const Input& in);
// Imports `path`: `format` forces an importer ("" = SniffInput's); an
// unknown one is an error with a did-you-mean.
absl::StatusOr<RecordedTrace> ImportRecordedTrace(const std::string& path,
                                                  std::string_view format = "");

}  // namespace gpusim

#endif  // GPUSIM_SIM_IMPORT_IMPORT_H_
