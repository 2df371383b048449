#include "sim/import/import.h"

#include "sim/base/status.h"
#include "sim/import/byte_source.h"
#include "sim/import/kineto.h"
#include "sim/import/memory_timeline.h"
#include "sim/import/snapshot.h"
#include "sim/base/str_cat.h"

namespace gpusim {

using str_internal::Cat;

namespace {

bool EndsWith(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// The first non-blank byte of `head` at or after `from`, or npos.
size_t FirstNonBlank(std::string_view head, size_t from = 0) { return head.find_first_not_of(" \t\r\n", from); }

// sim/import/snapshot.h: a .pickle/.pkl name or a pickle protocol byte, or
// a JSON object with "segments" or "device_traces" near its start.
class SnapshotImporter : public Importer {
 public:
  const RegistryEntry& info() const override {
    static const auto* e = new RegistryEntry{
        "snapshot",
        "PyTorch CUDA memory snapshot (_dump_snapshot .pickle, read in process, or that pickle as JSON)", {}, {}};
    return *e;
  }
  bool Sniff(std::string_view path, std::string_view head) const override {
    if (EndsWith(path, ".pickle") || EndsWith(path, ".pkl")) return true;
    if (!head.empty() && static_cast<unsigned char>(head[0]) == 0x80) return true;
    const size_t first = FirstNonBlank(head);
    return first != std::string_view::npos && head[first] == '{' &&
           (head.find("\"segments\"") != std::string_view::npos ||
            head.find("\"device_traces\"") != std::string_view::npos);
  }
  absl::StatusOr<RecordedTrace> Import(const std::string& path) const override {
    ASSIGN_OR_RETURN(RecordedSnapshot s, LoadSnapshot(path));
    return std::move(s.trace);
  }
};

// sim/import/memory_timeline.h: an array of arrays (`[[` or `[ [`).
class MemoryTimelineImporter : public Importer {
 public:
  const RegistryEntry& info() const override {
    static const auto* e = new RegistryEntry{
        "memory_timeline",
        "torch.profiler export_memory_timeline raw rows [ts_ns, action, bytes, category], .json or .json.gz", {}, {}};
    return *e;
  }
  bool Sniff(std::string_view, std::string_view head) const override {
    const size_t first = FirstNonBlank(head);
    if (first == std::string_view::npos || head[first] != '[') return false;
    const size_t second = FirstNonBlank(head, first + 1);
    return second != std::string_view::npos && head[second] == '[';
  }
  absl::StatusOr<RecordedTrace> Import(const std::string& path) const override {
    return ImportMemoryTimelineRaw(path);
  }
};

// sim/import/kineto.h: any other JSON object or array (a Chrome trace).
class KinetoImporter : public Importer {
 public:
  const RegistryEntry& info() const override {
    static const auto* e = new RegistryEntry{
        "kineto",
        "PyTorch profiler (Kineto) Chrome-trace JSON, .json or .json.gz: [memory] events and kernel/op durations",
        {},
        {}};
    return *e;
  }
  bool Sniff(std::string_view, std::string_view head) const override {
    const size_t first = FirstNonBlank(head);
    return first != std::string_view::npos && (head[first] == '{' || head[first] == '[');
  }
  absl::StatusOr<RecordedTrace> Import(const std::string& path) const override { return ImportKinetoTrace(path); }
};

}  // namespace

const std::vector<const Importer*>& Importers() {
  static const auto* importers = new std::vector<const Importer*>{
      new SnapshotImporter(), new MemoryTimelineImporter(), new KinetoImporter()};
  return *importers;
}

std::vector<RegistryEntry> ListImporters() {
  std::vector<RegistryEntry> out;
  for (const Importer* i : Importers()) out.push_back(i->info());
  return out;
}

absl::StatusOr<std::string> DetectRecordedFormat(const std::string& path) {
  // A snapshot pickle is known by its name before any byte is read.
  std::string head;
  if (!Importers().front()->Sniff(path, head)) {
    ASSIGN_OR_RETURN(std::unique_ptr<ByteSource> source, OpenByteSource(path));
    head.assign(4096, '\0');
    size_t n = 0;
    while (n < head.size()) {
      ASSIGN_OR_RETURN(size_t got, source->Read(head.data() + n, head.size() - n));
      if (got == 0) break;
      n += got;
    }
    head.resize(n);
    if (FirstNonBlank(head) == std::string::npos && (head.empty() || static_cast<unsigned char>(head[0]) != 0x80)) {
      return absl::InvalidArgumentError(Cat(path, ": empty file"));
    }
  }
  for (const Importer* i : Importers()) {
    if (i->Sniff(path, head)) return i->info().name;
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
  for (const Importer* i : Importers()) {
    if (i->info().name == f) return i->Import(path);
  }
  return absl::InvalidArgumentError(UnknownEntryMessage("", "recorded-trace format", f, ListImporters()));
}

}  // namespace gpusim
