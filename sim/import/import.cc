#include "sim/import/import.h"

#include "sim/base/status.h"
#include "sim/import/byte_source.h"
#include "sim/import/kineto.h"
#include "sim/import/memory_timeline.h"
#include "sim/import/snapshot.h"
#include "sim/base/str_cat.h"

namespace gpusim {

using str_internal::Cat;

const std::vector<RecordedFormatInfo>& RecordedFormats() {
  static const auto* formats = new std::vector<RecordedFormatInfo>{
      {"kineto", "PyTorch profiler (Kineto) Chrome-trace JSON, .json or .json.gz: [memory] "
                 "events and kernel/op durations"},
      {"snapshot", "PyTorch CUDA memory snapshot (_dump_snapshot .pickle, or its JSON from "
                   "tools/snapshot_to_json.py)"},
      {"memory_timeline", "torch.profiler export_memory_timeline raw rows "
                          "[ts_ns, action, bytes, category], .json or .json.gz"},
  };
  return *formats;
}

absl::StatusOr<std::string> DetectRecordedFormat(const std::string& path) {
  auto ends_with = [&](std::string_view s) {
    return path.size() >= s.size() && path.compare(path.size() - s.size(), s.size(), s) == 0;
  };
  if (ends_with(".pickle") || ends_with(".pkl")) return std::string("snapshot");
  ASSIGN_OR_RETURN(std::unique_ptr<ByteSource> source, OpenByteSource(path));
  std::string head(4096, '\0');
  size_t n = 0;
  while (n < head.size()) {
    ASSIGN_OR_RETURN(size_t got, source->Read(head.data() + n, head.size() - n));
    if (got == 0) break;
    n += got;
  }
  head.resize(n);
  if (!head.empty() && static_cast<unsigned char>(head[0]) == 0x80) return std::string("snapshot");
  const size_t first = head.find_first_not_of(" \t\r\n");
  if (first == std::string::npos) {
    return absl::InvalidArgumentError(Cat(path, ": empty file"));
  }
  if (head[first] == '[') {
    const size_t second = head.find_first_not_of(" \t\r\n", first + 1);
    if (second != std::string::npos && head[second] == '[') return std::string("memory_timeline");
    return std::string("kineto");
  }
  if (head[first] == '{') {
    if (head.find("\"segments\"") != std::string::npos ||
        head.find("\"device_traces\"") != std::string::npos) {
      return std::string("snapshot");
    }
    return std::string("kineto");
  }
  return absl::InvalidArgumentError(
      Cat(path, ": not a recorded trace this version reads (expected JSON or a snapshot "
                "pickle)"));
}

absl::StatusOr<RecordedTrace> ImportRecordedTrace(const std::string& path,
                                                  std::string_view format) {
  std::string f(format);
  if (f.empty()) {
    ASSIGN_OR_RETURN(f, DetectRecordedFormat(path));
  }
  if (f == "kineto") return ImportKinetoTrace(path);
  if (f == "memory_timeline") return ImportMemoryTimelineRaw(path);
  if (f == "snapshot") {
    ASSIGN_OR_RETURN(RecordedSnapshot s, LoadSnapshot(path));
    return std::move(s.trace);
  }
  return absl::InvalidArgumentError(
      Cat("unknown recorded-trace format '", f, "' (known: kineto, snapshot, memory_timeline)"));
}

}  // namespace gpusim
