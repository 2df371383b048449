// `gpusim replay` and `gpusim compare`: recorded traces through allocator
// models (sim/replay/replay.h).
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "sim/alloc/allocator.h"
#include "sim/config/loader.h"
#include "sim/import/import.h"
#include "sim/lower/eager/device_memory.h"
#include "sim/lower/eager/host_timeline.h"
#include "sim/lower/semantics.h"
#include "sim/report/explain_time.h"
#include "sim/replay/explain_trace.h"
#include "sim/step/native_step.h"
#include "sim/replay/replay.h"
#include "sim/base/status.h"
#include "sim/step/step.h"
#include "sim/trace/trace_io.h"
#include "tools/cli.h"
#include "tools/replay_options.h"
#include "viz/viz.h"

namespace gpusim {
namespace {

// The trace replayed forward through the engine from replay's start state,
// as a memory snapshot (viz/memory_snapshot.cc).
absl::Status WriteReplayedSnapshot(const Input& in, const std::string& device, const ReplayOptions& o,
                                   const std::string& out) {
  ASSIGN_OR_RETURN(StepReport report, ReportFromRecording(in, device, o, nullptr));
  return WriteMemorySnapshot(report, out);
}

}  // namespace

// Note [One start state for every command] (sim/alloc/start_state.cc): the
// import and start state of `gpusim replay`, then the engine from there.
absl::StatusOr<StepReport> ReportFromRecording(const Input& in, const std::string& device,
                                               const ReplayOptions& options,
                                               std::optional<std::vector<RecordedMemorySample>>* counters,
                                               std::vector<SimTime>* times, bool critical_path) {
  const std::string& path = in.path;
  ASSIGN_OR_RETURN(LoadedRecording loaded, LoadRecording(in));
  if (loaded.native.has_value()) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": a native trace (gpusim-trace), not a recording (Kineto, memory timeline, snapshot); its memory "
              "snapshot is written by `gpusim viz TRACE --out DIR --snapshot FILE`"));
  }
  ReplayOptions o = options;
  o.keep_start_state = true;
  ASSIGN_OR_RETURN(ReplayResult replay, ReplayLoaded(loaded, o));
  return ReportFromReplayed(loaded, replay, device, o, counters, times, critical_path);
}

absl::StatusOr<StepReport> ReportFromReplayed(const LoadedRecording& loaded, const ReplayResult& replay,
                                              const std::string& device, const ReplayOptions& o,
                                              std::optional<std::vector<RecordedMemorySample>>* counters,
                                              std::vector<SimTime>* times, bool critical_path) {
  const std::string& path = loaded.path;
  // Note [CUDA graph private pools]: replay.start names the buffers its
  // private pools served; the engine's allocator routes them the same way.
  const RecordedTrace& recorded = loaded.snapshot.has_value() ? loaded.snapshot->trace : loaded.recorded;
  ToNativeOptions to_native;
  to_native.device = o.device;
  ConversionStats stats;
  std::vector<int64_t> source_index;
  to_native.source_index = &source_index;
  ASSIGN_OR_RETURN(Trace trace, ToNativeTrace(recorded, to_native, &stats));
  if (times != nullptr) *times = RecordedEventTimes(recorded, source_index);
  if (counters != nullptr) {
    auto c = RecordedMemoryCounters(recorded, trace, stats);
    if (c.ok()) {
      *counters = *std::move(c);  // drawn, even when empty
    } else {
      CliErr() << "gpusim: warning: " << path << ": recorded memory counters not drawn: " << c.status().message()
                << "\n";
    }
  }
  RunSpec spec;
  ASSIGN_OR_RETURN(spec.device, ReplayDevice(device));
  if (device.empty()) {
    // The recorded device (the one whose memory replay's capacity is), with
    // h100-sxm-80gb's rates where the trace records no duration.
    for (const RecordedDevice& d : recorded.metadata.devices) {
      if (d.total_global_mem <= Bytes(0) || (o.device.has_value() && *o.device != d.id)) continue;
      spec.device.name = d.name.empty() ? "recorded device" : d.name;
      spec.device.cuda_total = d.total_global_mem;
      spec.device.context_reserve = Bytes(0);
      spec.device.description = absl::StrCat(spec.device.name, " (recorded; memory from its totalGlobalMem; rates "
                                             "of h100-sxm-80gb where the trace records no duration)");
      break;
    }
  }
  if (spec.device.usable() != replay.capacity) {
    return absl::InternalError(absl::StrCat(path, ": the device drawn (", spec.device.name, ", ",
                                            spec.device.usable().value(), " B) is not the replay's capacity (",
                                            replay.capacity.value(), " B, ", replay.capacity_source, ")"));
  }
  spec.allocator = o.allocator;
  // A snapshot through pytorch_caching starts from its rebuilt window start,
  // under the snapshot's own ids: not carried yet (cold then).
  return ReportFromTrace(trace, spec, replay.start.has_value() ? &*replay.start : nullptr, critical_path);
}

absl::StatusOr<StepReport> ReportFromNativeTrace(const Trace& trace, const std::string& path, const RunSpec& spec,
                                                 bool critical_path) {
  ReplayOptions o;
  o.allocator = spec.allocator;
  o.capacity = spec.device.usable();
  o.capacity_source = spec.device.name;
  o.keep_start_state = true;
  ASSIGN_OR_RETURN(ReplayResult replay, ReplayNativeTrace(trace, path, o));
  return ReportFromTrace(trace, spec, replay.start.has_value() ? &*replay.start : nullptr, critical_path);
}

int CmdReplay(const ReplayCli& c) {
  auto in = SniffCommandInput("replay", c.trace);
  if (!in.ok()) return FailStatus(in.status());
  return CmdReplayInput(c, *in);
}

int CmdReplayInput(const ReplayCli& c, const Input& in) {
  ReplayOptions o;
  o.allocator.impl = FoldAllocatorName(c.allocator);
  o.check_addresses = c.check_addresses;
  o.infer_warm_start = !c.cold_start;
  o.cudnn_workspace = c.cudnn_workspace;
  o.sdpa_backend = c.sdpa_backend;
  if (c.device_index >= 0) o.device = c.device_index;
  absl::Status st = ApplyAllocatorSets(c.sets, &o.allocator);
  if (st.ok()) st = ResolveReplayCapacity(c.device, &o);
  if (!st.ok()) return FailStatus(st);
  // Note [One memory event log]: a recording imported whole is replayed
  // once for the report and the snapshot.
  auto r = ReplayForReport(in, c.device, o, /*keep_loaded=*/!c.snapshot.empty());
  if (!r.ok()) return FailStatus(r.status());
  if (!c.snapshot.empty() && r->loaded.has_value()) {
    auto report = ReportFromReplayed(*r->loaded, r->replay, c.device, o, nullptr);
    st = report.ok() ? WriteMemorySnapshot(*report, c.snapshot) : report.status();
    if (!st.ok()) return FailStatus(st);
  } else if (!c.snapshot.empty()) {
    st = WriteReplayedSnapshot(in, c.device, o, c.snapshot);
    if (!st.ok()) return FailStatus(st);
  }
  if (c.format == "json") {
    CliOut() << ReplayReportJson(*r);
  } else {
    CliOut() << RenderReplayText(r->replay);
    if (r->step.has_value()) CliOut() << RenderNativeStepText(*r->step);
  }
  return 0;
}

int CmdCompare(const CompareCli& c, const Input& in) {
  std::vector<std::string> names = absl::StrSplit(c.allocators, ',', absl::SkipEmpty());
  if (names.empty()) return FailStatus(absl::InvalidArgumentError("--allocators: give at least one name"));
  ReplayOptions o;
  if (c.device_index >= 0) o.device = c.device_index;
  const EagerDeviceOptions device_options{c.cudnn_workspace, c.sdpa_backend};
  absl::Status st = CheckDeviceOptionsApply(in, device_options);
  if (st.ok()) st = ResolveReplayCapacity(c.device, &o);
  if (!st.ok()) return FailStatus(st);
  // Import once (the same import and start state as `replay`), replay per
  // allocator.
  auto loaded = LoadRecording(in);
  if (!loaded.ok()) return FailStatus(loaded.status());
  if (loaded->native.has_value()) {
    auto device = ReplayDevice(c.device);
    if (!device.ok()) return FailStatus(device.status());
    EagerDeviceMemory added;
    st = AddDeviceMemory(*loaded, *device, &added, device_options);
    if (!st.ok()) return FailStatus(st);
    auto less = CapacityLessNccl(o, added);
    if (!less.ok()) return FailStatus(absl::Status(less.status().code(), absl::StrCat(c.trace, ": ",
                                                                                     less.status().message())));
    o = *std::move(less);
  }
  std::vector<ReplayResult> rows;
  for (const std::string& n : names) {
    ReplayOptions one = o;
    one.allocator.impl = FoldAllocatorName(n);
    auto r = ReplayLoaded(*loaded, one);
    if (!r.ok()) return FailStatus(absl::Status(r.status().code(), absl::StrCat(n, ": ", r.status().message())));
    rows.push_back(std::move(*r));
  }
  CliOut() << (c.format == "json" ? RenderAllocatorCompareJson(rows) : RenderAllocatorCompareText(rows));
  return 0;
}

absl::Status RefuseTraceGrid(const std::string& command, const Input& in) {
  if (in.kind != InputKind::kNativeTrace) return absl::OkStatus();
  const std::string& path = in.path;
  std::string how = "re-record it at each batch size: python3 -m gpusim_torch sweep STEP.py --batch-sizes N,N,... "
                    "--device NAME (STEP.py's setup(device, batch_size=N) names the batch dimension)";
  auto loaded = LoadRecording(in);
  if (loaded.ok() && loaded->native.has_value()) {
    const std::string* step = FindMeta(*loaded->native, "step_file");
    const std::string* batch = FindMeta(*loaded->native, "batch_size");
    if (step != nullptr) {
      absl::StrAppend(&how, "; this trace was recorded from ", *step,
                      batch != nullptr ? absl::StrCat(" at batch_size ", *batch) : std::string(" at its own batch"));
    }
  }
  return absl::InvalidArgumentError(absl::StrCat(
      command, " ", path, ": a recorded step has the shapes it was recorded with, so its batch size (or any "
      "other setting) cannot be varied here; ", how));
}

int CmdExplainTrace(const Input& in, int top, const std::string& format, const std::string& device,
                    const EagerDeviceOptions& device_options) {
  if (absl::Status st = CheckDeviceOptionsApply(in, device_options); !st.ok()) return FailStatus(st);
  auto trace = LoadTraceForExplain(in);
  if (!trace.ok()) return FailStatus(trace.status());
  if (in.kind == InputKind::kNativeTrace) {
    // As replay does: the device's CUDA libraries' allocations join a
    // PyTorch recording (any other native trace refuses --cudnn-workspace and --sdpa-backend).
    auto d = ReplayDevice(device);
    if (!d.ok()) return FailStatus(d.status());
    EagerDeviceMemory added;
    if (absl::Status st = AddDeviceMemoryToTrace(*trace, in.path, *d, &added, device_options); !st.ok()) {
      return FailStatus(st);
    }
  }
  const TracePeak p = ExplainTracePeak(*trace, in.path, top);
  CliOut() << (format == "json" ? RenderTracePeakJson(p) : RenderTracePeakText(p));
  return 0;
}

int PrintExplainTime(const StepReport& r, int top, const std::string& format, const std::string& note) {
  auto path = StepCriticalPath(r);
  if (!path.ok()) return FailStatus(path.status());
  const TimeExplanation t = ExplainTime(r, *path, top);
  CliOut() << (format == "json" ? RenderExplainTimeJson(t) : note + RenderExplainTime(t));
  return 0;
}

int CmdExplainTraceTime(const Input& in, int top, const std::string& format, const std::string& device,
                        const EagerDeviceOptions& device_options) {
  if (absl::Status st = CheckDeviceOptionsApply(in, device_options); !st.ok()) return FailStatus(st);
  const AllocatorSpec allocator{"pytorch_caching", {}};
  absl::StatusOr<StepReport> report;
  if (in.kind != InputKind::kNativeTrace) {
    // A recording: as `gpusim viz` replays it (the import, start state and
    // device of `gpusim replay`).
    ReplayOptions o;
    o.allocator = allocator;
    if (absl::Status st = ResolveReplayCapacity(device, &o); !st.ok()) return FailStatus(st);
    report = ReportFromRecording(in, device, o, nullptr, nullptr, /*critical_path=*/true);
  } else {
    auto trace = LoadTraceForExplain(in);
    if (!trace.ok()) return FailStatus(trace.status());
    auto d = ReplayDevice(device);
    if (!d.ok()) return FailStatus(d.status());
    // As replay (PrepareRecordedStep).
    EagerDeviceMemory added;
    absl::StatusOr<RunSpec> spec = PrepareRecordedStep(*trace, in.path, *d, allocator, device_options, &added);
    if (!spec.ok()) return FailStatus(spec.status());
    report = ReportFromNativeTrace(*trace, in.path, *spec, /*critical_path=*/true);
  }
  if (!report.ok()) return FailStatus(report.status());
  return PrintExplainTime(*report, top, format, "");
}

}  // namespace gpusim
