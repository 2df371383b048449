// What an input file is, decided once (Note [One sniffer, one open]): every
// command that takes an input (run, replay, viz, explain, validate, compare,
// diff, advise) classifies it here, from its name and a bounded prefix of
// its bytes, and its readers then read the file through the one open the
// sniff made.
#ifndef GPUSIM_SIM_IMPORT_INPUT_H_
#define GPUSIM_SIM_IMPORT_INPUT_H_

#include <memory>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "sim/import/byte_source.h"

namespace gpusim {

enum class InputKind {
  kRunConfig,       // YAML (sim/config/loader.h), or run config text
  kHloModule,       // STEP.hlo (sim/import/hlo)
  kNativeTrace,     // gpusim-trace (sim/trace/trace_io.h)
  kKineto,          // the recorded-trace importers (sim/import/import.h)
  kSnapshot,
  kMemoryTimeline,
};

// validate's `kind`: "run_config", "hlo_module", "native_trace", "kineto",
// "snapshot", "memory_timeline".
const char* InputKindName(InputKind kind);
// LoadedRecording::format and ReplayResult::format: "gpusim-trace" for a
// native trace, the importer's name for a recording, "" for the rest.
const char* RecordingFormatName(InputKind kind);
// In words, for messages: "a run config (YAML)", "a Kineto trace", ...
const char* InputKindWords(InputKind kind);
// A native trace or a recording: what replay reads.
bool IsTraceKind(InputKind kind);

// An input classified, and opened when it is a trace.
struct Input {
  std::string path;
  InputKind kind = InputKind::kRunConfig;
  // The one open of a trace (null for a run config or an HLO module, which
  // their loaders read by path): every pass reads through it.
  std::shared_ptr<const InputFd> file;
};

// Note [One sniffer, one open]
// A command used to decide what its input was two or three times (the CLI,
// then the replay, then the importer), each by opening the file again, and
// a streamed Kineto replay opened its trace 14 times for 3 passes (issue
// 28). SniffInput decides once, in this order:
//  1. run config text (Note [Run configs given as text]) or a .yaml/.yml
//     name: a run config; a .hlo/.hlo.gz name: an HLO module. Nothing is
//     opened (their loaders read them).
//  2. Otherwise the file is opened once (a non-regular file refused before
//     that, Note [Sniffing inputs]) and its first kSniffBytes bytes read:
//     a first content line `gpusim-trace` is a native trace, `HloModule `
//     an HLO module; else the importers' sniffs (sim/import/import.h, in
//     registry order) see the first 4 KiB of the content (decompressed when
//     it is gzip): a snapshot, a memory timeline, a Kineto trace.
//  3. Otherwise gzip content no importer claims is refused by name (no
//     run config, HLO module or native trace is read gzipped); a NUL byte
//     in the prefix is binary data, refused by name;
//     other text is read as a run config, whose loader names its errors;
//     an empty file is refused by name.
// The open of step 2 is the one every reader of the trace uses (InputFd:
// each pass is a pread(2) source over it), so a replay opens its trace once
// whatever number of passes it takes (tests/input_opens_test.cc).
absl::StatusOr<Input> SniffInput(const std::string& path);

}  // namespace gpusim

#endif  // GPUSIM_SIM_IMPORT_INPUT_H_
