#include "sim/import/import.h"

#include "sim/base/status.h"
#include "sim/import/byte_source.h"
#include "sim/import/kineto.h"
#include "sim/import/memory_timeline.h"
#include "sim/import/native.h"
#include "sim/import/snapshot.h"
#include "sim/trace/str_cat.h"

namespace gpusim {

using trace_internal::Cat;

const std::vector<RecordedFormatInfo>& RecordedFormats() {
  static const auto* formats = new std::vector<RecordedFormatInfo>{
      {"kineto", "PyTorch profiler (Kineto) Chrome-trace JSON, .json or .json.gz: [memory] "
                 "events and kernel/op durations"},
      {"snapshot", "PyTorch CUDA memory snapshot (_dump_snapshot .pickle, or its JSON from "
                   "tools/snapshot_to_json.py)"},
      {"memory_timeline", "torch.profiler export_memory_timeline raw rows "
                          "[ts_ns, action, bytes, category], .json or .json.gz"},
      {"native", "gpusim native trace (traces/FORMAT.md), e.g. a step recorded on the CPU by "
                 "python/gpusim_torch: its alloc/free events"},
  };
  return *formats;
}

namespace {

// The first line that is not blank or a comment starts with `gpusim-trace`.
bool LooksNative(std::string_view head) {
  size_t pos = 0;
  while (pos < head.size()) {
    size_t end = head.find('\n', pos);
    if (end == std::string_view::npos) end = head.size();
    std::string_view line = head.substr(pos, end - pos);
    const size_t b = line.find_first_not_of(" \t\r");
    if (b != std::string_view::npos && line[b] != '#') {
      return line.substr(b).rfind("gpusim-trace", 0) == 0;
    }
    pos = end + 1;
  }
  return false;
}

}  // namespace

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
  if (LooksNative(head)) return std::string("native");
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
  if (f == "native") return ImportNativeTrace(path);
  if (f == "snapshot") {
    ASSIGN_OR_RETURN(RecordedSnapshot s, LoadSnapshot(path));
    return std::move(s.trace);
  }
  return absl::InvalidArgumentError(
      Cat("unknown recorded-trace format '", f, "' (known: kineto, snapshot, memory_timeline, native)"));
}

}  // namespace gpusim
