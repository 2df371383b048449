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
  absl::StatusOr<RecordedTrace> Import(std::shared_ptr<const InputFd> file) const override {
    ASSIGN_OR_RETURN(RecordedSnapshot s, LoadSnapshot(std::move(file)));
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
  absl::StatusOr<RecordedTrace> Import(std::shared_ptr<const InputFd> file) const override {
    ASSIGN_OR_RETURN(std::unique_ptr<ByteSource> source, OpenByteSource(file));
    return ImportMemoryTimelineRaw(*source, file->path());
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
  absl::StatusOr<RecordedTrace> Import(std::shared_ptr<const InputFd> file) const override {
    ASSIGN_OR_RETURN(std::unique_ptr<ByteSource> source, OpenByteSource(file));
    return ImportKinetoTrace(*source, file->path());
  }
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

namespace {

// The importer named `format`, or an error with a did-you-mean.
absl::StatusOr<const Importer*> ImporterNamed(std::string_view format) {
  for (const Importer* i : Importers()) {
    if (i->info().name == format) return i;
  }
  return absl::InvalidArgumentError(UnknownEntryMessage("", "recorded-trace format", std::string(format), ListImporters()));
}

// `in` unless it is no recording: then an error naming what it is.
absl::Status CheckRecording(const Input& in) {
  if (IsTraceKind(in.kind) && in.kind != InputKind::kNativeTrace) return absl::OkStatus();
  return absl::InvalidArgumentError(Cat(in.path, ": not a recorded trace this version reads (expected JSON or a "
                                                 "snapshot pickle; this is ",
                                        InputKindWords(in.kind), ")"));
}

}  // namespace

absl::StatusOr<std::string> DetectRecordedFormat(const std::string& path) {
  ASSIGN_OR_RETURN(Input in, SniffInput(path));
  RETURN_IF_ERROR(CheckRecording(in));
  return std::string(InputKindName(in.kind));
}

absl::StatusOr<RecordedTrace> ImportRecordedTrace(const Input& in) {
  RETURN_IF_ERROR(CheckRecording(in));
  ASSIGN_OR_RETURN(const Importer* i, ImporterNamed(InputKindName(in.kind)));
  return i->Import(in.file);
}

absl::StatusOr<RecordedTrace> ImportRecordedTrace(const std::string& path, std::string_view format) {
  if (format.empty()) {
    ASSIGN_OR_RETURN(Input in, SniffInput(path));
    return ImportRecordedTrace(in);
  }
  ASSIGN_OR_RETURN(const Importer* i, ImporterNamed(format));
  ASSIGN_OR_RETURN(std::shared_ptr<const InputFd> file, InputFd::Open(path));
  return i->Import(std::move(file));
}

}  // namespace gpusim
