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
#include "sim/import/recorded_trace.h"

namespace gpusim {

// One recorded-trace importer: its registry entry (sim/base/registry.h),
// a sniff of a file's name and first bytes, and the import itself.
class Importer {
 public:
  virtual ~Importer() = default;
  virtual const RegistryEntry& info() const = 0;
  // Whether `path` is in this format, from its name and `head`, the first
  // (up to 4 KiB, decompressed) bytes of its content. Importers are sniffed
  // in registry order; the first that claims a file imports it.
  virtual bool Sniff(std::string_view path, std::string_view head) const = 0;
  // REQUIRES: nothing about the file; bad input is a Status naming it.
  virtual absl::StatusOr<RecordedTrace> Import(const std::string& path) const = 0;
};

// The registered importers, in sniff order.
const std::vector<const Importer*>& Importers();
// Their entries, for `gpusim list importers`.
std::vector<RegistryEntry> ListImporters();

// "kineto", "snapshot" or "memory_timeline": a .pickle/.pkl name or a pickle
// protocol byte means snapshot; otherwise the first bytes of the
// (decompressed) content decide: `[[` or `[ [` is a memory timeline, an
// object with "segments" or "device_traces" near its start a snapshot, any
// other object or array a Chrome trace.
absl::StatusOr<std::string> DetectRecordedFormat(const std::string& path);

// Imports `path` with the detected importer's default options. `format`
// forces one ("" = detect); an unknown one is an error with a did-you-mean.
absl::StatusOr<RecordedTrace> ImportRecordedTrace(const std::string& path,
                                                  std::string_view format = "");

}  // namespace gpusim

#endif  // GPUSIM_SIM_IMPORT_IMPORT_H_
