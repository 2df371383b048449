// `gpusim validate` for every input kind gpusim reads, and the JSON forms of
// `explain`, `validate`, `devices` and `viz` (tools/cli.h).
//
//   validate FILE  a run config (.yaml/.yml, or anything that is not a
//                  trace), a native trace (first line `gpusim-trace`), or a
//                  recorded trace: Kineto JSON(.gz), a memory snapshot
//                  (.pickle or JSON), a memory-timeline raw file — imported,
//                  converted to the native trace and checked as one; or
//                  an HLO module (STEP.hlo, or a file whose first line is
//                  `HloModule ...`), parsed and imported as `run` imports it
//                  (sim/import/hlo), with `--set loop.trip_count=N` the one
//                  setting it takes.
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "sim/alloc/allocator.h"
#include "sim/base/file_util.h"
#include "sim/config/loader.h"
#include "sim/import/hlo/hlo_to_program.h"
#include "sim/import/import.h"
#include "sim/import/recorded_trace.h"
#include "sim/replay/replay.h"
#include "sim/report/explain.h"
#include "sim/base/json_writer.h"
#include "sim/trace/trace_io.h"
#include "sim/trace/validate.h"
#include "tools/cli.h"

namespace gpusim {
namespace {

// What validate found, for both formats.
struct Validated {
  std::string kind;  // "run_config", "native_trace", "kineto", "snapshot", "memory_timeline", "hlo_module"
  std::string summary;
  JsonWriter json;
};

void TraceJson(JsonWriter& j, const TraceStats& s) {
  j.Int("events", s.events).Int("allocs", s.allocs).Int("frees", s.frees).Int("timed", s.timed);
  j.Int("peak_live_bytes", s.peak_live.value());
}

}  // namespace

int CmdValidateAny(const std::string& file, const std::vector<std::string>& sets, const std::string& format) {
  // Note [Every command's inputs] (tools/cli.h): the kind, decided once.
  absl::StatusOr<Input> in = SniffCommandInput("validate", file);
  if (!in.ok()) return FailStatus(in.status());
  Validated v;
  v.json.BeginObject().String("file", file);
  if (in->kind == InputKind::kHloModule) {
    HloImportOptions options;
    for (const std::string& set : sets) {
      const size_t eq = set.find('=');
      int64_t n = 0;
      if (set.substr(0, eq) != "loop.trip_count" || eq == std::string::npos ||
          !absl::SimpleAtoi(set.substr(eq + 1), &n) || n < 1) {
        return FailStatus(absl::InvalidArgumentError(absl::StrCat(
            "validate ", file, ": --set ", set,
            ": an HLO module takes only loop.trip_count=N (N >= 1); the device and the rest are set in a run config "
            "with program_hlo:")));
      }
      options.trip_count = n;
    }
    HloImportStats stats;
    auto program = ImportHloProgram(file, options, &stats);
    if (!program.ok()) return FailStatus(program.status());
    v.kind = "hlo_module";
    v.summary = absl::StrFormat("%s: valid HLO module: %d instructions, %d while loop(s); as a program %d tensors, %d ops",
                                file, stats.instructions, stats.trip_counts.size(), program->tensors.size(),
                                program->ops.size());
    v.json.String("kind", v.kind)
        .Int("instructions", stats.instructions)
        .Int("while_loops", static_cast<int64_t>(stats.trip_counts.size()))
        .Int("tensors", static_cast<int64_t>(program->tensors.size()))
        .Int("ops", static_cast<int64_t>(program->ops.size()));
    v.json.Bool("valid", true).EndObject();
    CliOut() << (format == "json" ? v.json.Finish() : v.summary + "\n");
    return 0;
  }
  if (!sets.empty() && IsTraceKind(in->kind)) {
    return FailStatus(absl::InvalidArgumentError(
        absl::StrCat("validate ", file, ": --set applies to run configs; this is a trace")));
  }
  if (in->kind == InputKind::kNativeTrace) {
    auto loaded = LoadRecording(*in);
    if (!loaded.ok()) return FailStatus(loaded.status());
    std::optional<Trace>& trace = loaded->native;
    absl::Status st = ValidateTrace(*trace);
    if (!st.ok()) return FailStatus(st);  // names FILE:LINE (EventError, sim/trace/validate.cc)
    const TraceStats s = ComputeTraceStats(*trace);
    v.kind = "native_trace";
    v.summary = absl::StrFormat("%s: valid trace: %d events (%d allocs, %d frees, %d timed), peak live %s", file,
                                s.events, s.allocs, s.frees, s.timed, FormatBytes(s.peak_live));
    v.json.String("kind", v.kind);
    TraceJson(v.json, s);
  } else if (IsTraceKind(in->kind)) {
    const std::string recorded_format(InputKindName(in->kind));
    auto recorded = ImportRecordedTrace(*in);
    if (!recorded.ok()) return FailStatus(recorded.status());
    ConversionStats cs;
    auto trace = ToNativeTrace(*recorded, {}, &cs);
    if (!trace.ok()) return FailStatus(trace.status());
    absl::Status st = ValidateTrace(*trace);
    if (!st.ok()) {
      return FailStatus(absl::InvalidArgumentError(absl::StrCat(file, ": converted trace: ", st.message())));
    }
    const TraceStats s = ComputeTraceStats(*trace);
    v.kind = recorded_format;
    v.summary = absl::StrFormat(
        "%s: valid %s trace: %d recorded memory events, %d kernels/ops; as a native trace %d events (%d allocs, "
        "%d frees), %d blocks live before recording (%s), peak live %s",
        file, recorded_format, recorded->memory_events.size(), recorded->ops.size(), s.events, s.allocs, s.frees,
        cs.allocs_before_recording, FormatBytes(cs.bytes_before_recording), FormatBytes(s.peak_live));
    v.json.String("kind", v.kind)
        .Int("recorded_memory_events", static_cast<int64_t>(recorded->memory_events.size()))
        .Int("recorded_ops", static_cast<int64_t>(recorded->ops.size()))
        .Int("allocs_before_recording", cs.allocs_before_recording)
        .Int("bytes_before_recording", cs.bytes_before_recording.value());
    TraceJson(v.json, s);
  } else {
    // A run config (binary data was refused by the sniff).
    auto spec = LoadRunSpec(file, sets);
    if (!spec.ok()) return FailStatus(spec.status());
    // The allocator's name and options are checked where it is made.
    auto allocator = MakeAllocator(spec->allocator, spec->device.usable());
    if (!allocator.ok()) return FailStatus(allocator.status());
    v.kind = "run_config";
    const std::string what = spec->program.present ? "program " + spec->program.name : spec->model.name;
    v.summary = absl::StrCat(file, ": valid run config (", what, " on ", spec->device.name, ")");
    v.json.String("kind", v.kind)
        .String(spec->program.present ? "program" : "model", spec->program.present ? spec->program.name : spec->model.name)
        .String("device", spec->device.name)
        .String("framework", spec->framework)
        .String("allocator", spec->allocator.impl);
  }
  v.json.Bool("valid", true).EndObject();
  CliOut() << (format == "json" ? v.json.Finish() : v.summary + "\n");
  return 0;
}

std::string RenderExplainJson(const StepReport& r, int top) {
  const std::vector<PeakBuffer> bufs = BuffersAtPeak(r);
  JsonWriter j;
  j.BeginObject()
      .String("program", r.program.name)
      .String("device", r.spec.device.name)
      .String("framework", r.spec.framework)
      .String("peak_kind", r.semantics.runtime_check == RuntimeCheck::kJaxArena ? "temp" : "live")
      .Int("peak_bytes", r.peak.value())
      .Int("buffers_at_peak", static_cast<int64_t>(bufs.size()));
  j.BeginArray("buffers");
  Bytes rest(0);
  for (size_t i = 0; i < bufs.size(); ++i) {
    const PeakBuffer& b = bufs[i];
    if (static_cast<int>(i) >= top) {
      rest += b.bytes;
      continue;
    }
    j.BeginObject()
        .String("name", b.name)
        .Int("bytes", b.bytes.value())
        .String("role", RoleName(b.role))
        .String("origin", b.origin)
        .String("from", b.from)
        .String("to", b.to)
        .EndObject();
  }
  j.EndArray().Int("rest_bytes", rest.value()).EndObject();
  return j.Finish();
}

int CmdDevicesJson() {
  JsonWriter j;
  j.BeginObject().BeginArray("devices");
  for (const std::string& n : ListDeviceNames()) {
    auto d = LoadDeviceSpec(n, "");
    if (!d.ok()) return FailStatus(d.status());
    j.BeginObject()
        .String("name", d->name)
        .String("description", d->description)
        .Int("sms", d->sms)
        .Int("cuda_total_bytes", d->cuda_total.value())
        .Int("context_reserve_bytes", d->context_reserve.value())
        .Int("usable_bytes", d->usable().value())
        .Double("hbm_bandwidth_bytes_per_s", d->hbm_bandwidth)
        .Double("bf16_flops_per_s", d->peak_bf16)
        .Double("fp8_flops_per_s", d->peak_fp8)  // 0: no fp8 tensor cores
        .Double("tf32_flops_per_s", d->peak_tf32)
        .Double("fp32_flops_per_s", d->peak_fp32)
        .Double("nvlink_bytes_per_s", d->nvlink_bandwidth)
        .Double("pcie_bytes_per_s", d->pcie_bandwidth)
        .EndObject();
  }
  j.EndArray().EndObject();
  CliOut() << j.Finish();
  return 0;
}

std::string RenderVizJson(const StepReport& r, const std::string& out_dir, const std::string& snapshot) {
  JsonWriter j;
  // The figures the charts and report.html draw, as `gpusim replay` names
  // them (tests/replay_agreement_test.cc compares them).
  j.BeginObject()
      .String("device", r.spec.device.name)
      .Int("capacity_bytes", r.capacity.value())
      .Int("peak_allocated_bytes", r.sim.allocator.peak_allocated.value())
      .Int("peak_reserved_bytes", r.sim.allocator.peak_reserved.value())
      .Int("peak_live_bytes", r.peak.value())
      .String("out", out_dir)
      .BeginArray("files");
  for (const char* f : {"memory_map.svg", "memory_map.png", "lifetimes.svg", "lifetimes.png", "timeline.svg",
                        "timeline.png", "active_memory.svg", "active_memory.png", "dataflow.dot", "dataflow.svg",
                        "dataflow.png", "timeline.json", "report.html"}) {
    j.String("", absl::StrCat(out_dir, "/", f));
  }
  j.EndArray();
  if (snapshot.empty()) {
    j.Null("snapshot");
  } else {
    j.String("snapshot", snapshot);
  }
  j.EndObject();
  return j.Finish();
}

}  // namespace gpusim
