#include "sim/import/input.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "sim/base/file_util.h"
#include "sim/base/status.h"
#include "sim/config/loader.h"
#include "sim/import/import.h"

namespace gpusim {

const char* InputKindName(InputKind kind) {
  switch (kind) {
    case InputKind::kRunConfig: return "run_config";
    case InputKind::kHloModule: return "hlo_module";
    case InputKind::kNativeTrace: return "native_trace";
    case InputKind::kKineto: return "kineto";
    case InputKind::kSnapshot: return "snapshot";
    case InputKind::kMemoryTimeline: return "memory_timeline";
  }
  return "";
}

const char* RecordingFormatName(InputKind kind) {
  switch (kind) {
    case InputKind::kNativeTrace: return "gpusim-trace";
    case InputKind::kKineto:
    case InputKind::kSnapshot:
    case InputKind::kMemoryTimeline: return InputKindName(kind);
    default: return "";
  }
}

const char* InputKindWords(InputKind kind) {
  switch (kind) {
    case InputKind::kRunConfig: return "a run config (YAML)";
    case InputKind::kHloModule: return "an HLO module";
    case InputKind::kNativeTrace: return "a native trace (gpusim-trace)";
    case InputKind::kKineto: return "a Kineto trace";
    case InputKind::kSnapshot: return "a memory snapshot";
    case InputKind::kMemoryTimeline: return "a memory timeline";
  }
  return "";
}

bool IsTraceKind(InputKind kind) { return *RecordingFormatName(kind) != '\0'; }

absl::StatusOr<Input> SniffInput(const std::string& path) {
  Input in;
  in.path = path;
  // Step 1: by name.
  if (IsRunConfigText(path) || absl::EndsWith(path, ".yaml") || absl::EndsWith(path, ".yml")) {
    in.kind = InputKind::kRunConfig;
    return in;
  }
  if (absl::EndsWith(path, ".hlo") || absl::EndsWith(path, ".hlo.gz")) {
    in.kind = InputKind::kHloModule;
    return in;
  }
  // Step 2: the one open, and a bounded prefix of it.
  RETURN_IF_ERROR(CheckRegularInput(path));
  ASSIGN_OR_RETURN(in.file, InputFd::Open(path));
  std::string prefix(kSniffBytes, '\0');
  size_t n = 0;
  while (n < prefix.size()) {
    const ssize_t got = pread(in.file->fd(), prefix.data() + n, prefix.size() - n, static_cast<off_t>(n));
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) return absl::UnavailableError(absl::StrCat(path, ": read error: ", std::strerror(errno)));
    if (got == 0) break;
    n += static_cast<size_t>(got);
  }
  prefix.resize(n);
  const std::string first = FirstContentLine(prefix);
  if (absl::StartsWith(first, "gpusim-trace")) {
    in.kind = InputKind::kNativeTrace;
    return in;
  }
  if (absl::StartsWith(first, "HloModule ")) {
    in.file = nullptr;  // the HLO reader reads it by path
    in.kind = InputKind::kHloModule;
    return in;
  }
  // The importers' sniffs: a snapshot is known by its name before any byte.
  std::string head;
  if (!Importers().front()->Sniff(path, head)) {
    ASSIGN_OR_RETURN(head, ReadContentHead(in.file, kImporterSniffBytes));
  }
  for (const Importer* i : Importers()) {
    if (!i->Sniff(path, head)) continue;
    const std::string& name = i->info().name;
    in.kind = name == "snapshot" ? InputKind::kSnapshot : name == "memory_timeline" ? InputKind::kMemoryTimeline
                                                                                    : InputKind::kKineto;
    return in;
  }
  // Step 3.
  if (prefix.empty()) return absl::InvalidArgumentError(absl::StrCat(path, ": empty file"));
  if (prefix.size() >= 2 && static_cast<unsigned char>(prefix[0]) == 0x1f &&
      static_cast<unsigned char>(prefix[1]) == 0x8b) {
    // gzip whose content no importer claims (no run config, HLO module or
    // native trace is read gzipped).
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": not a recorded trace this version reads (expected JSON or a snapshot pickle)"));
  }
  if (const size_t nul = prefix.find('\0'); nul != std::string::npos) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": binary data (a NUL byte at offset ", nul,
        "): not a run config, a native trace, an HLO module or a recorded trace gpusim reads"));
  }
  in.file = nullptr;  // the run config loader reads it by path
  in.kind = InputKind::kRunConfig;
  return in;
}

}  // namespace gpusim
