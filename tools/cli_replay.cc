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

// The trace replayed forward (ToNativeTrace, default options) through
// `allocator` at `capacity`, as a memory snapshot (viz/memory_snapshot.cc).
absl::Status WriteReplayedSnapshot(const std::string& path, const AllocatorSpec& allocator, Bytes capacity,
                                   const std::string& out) {
  ASSIGN_OR_RETURN(RecordedTrace recorded, ImportRecordedTrace(path));
  ASSIGN_OR_RETURN(Trace trace, ToNativeTrace(recorded, {}));
  RunSpec spec;
  ASSIGN_OR_RETURN(spec.device, LoadDeviceSpec("h100-sxm-80gb", ""));
  spec.device.cuda_total = capacity;  // usable() = the replay's capacity
  spec.device.context_reserve = Bytes(0);
  spec.allocator = allocator;
  ASSIGN_OR_RETURN(StepReport report, ReportFromTrace(trace, spec));
  return WriteMemorySnapshot(report, out);
}

}  // namespace

int CmdReplay(const ReplayCli& c) {
  ReplayOptions o;
  o.allocator.impl = c.allocator;
  o.check_addresses = c.check_addresses;
  o.infer_warm_start = !c.cold_start;
  o.cudnn_workspace = c.cudnn_workspace;
  if (c.device_index >= 0) o.device = c.device_index;
  absl::Status st = ApplyAllocatorSets(c.sets, &o.allocator);
  if (st.ok()) st = ResolveReplayCapacity(c.device, &o);
  if (!st.ok()) return FailStatus(st);
  auto r = ReplayForReport(c.trace, c.device, o);
  if (!r.ok()) return FailStatus(r.status());
  if (!c.snapshot.empty()) {
    st = WriteReplayedSnapshot(c.trace, o.allocator, r->replay.capacity, c.snapshot);
    if (!st.ok()) return FailStatus(st);
  }
  if (c.format == "json") {
    std::cout << ReplayReportJson(*r);
  } else {
    std::cout << RenderReplayText(r->replay);
    if (r->step.has_value()) std::cout << RenderNativeStepText(*r->step);
  }
  return 0;
}

int CmdCompare(const CompareCli& c) {
  std::vector<std::string> names = absl::StrSplit(c.allocators, ',', absl::SkipEmpty());
  if (names.empty()) return FailStatus(absl::InvalidArgumentError("--allocators: give at least one name"));
  ReplayOptions o;
  if (c.device_index >= 0) o.device = c.device_index;
  absl::Status st = ResolveReplayCapacity(c.device, &o);
  if (!st.ok()) return FailStatus(st);
  // Import once (the same import and start state as `replay`), replay per
  // allocator.
  auto loaded = LoadRecording(c.trace);
  if (!loaded.ok()) return FailStatus(loaded.status());
  if (loaded->native.has_value()) {
    auto device = ReplayDevice(c.device);
    if (!device.ok()) return FailStatus(device.status());
    EagerDeviceMemory added;
    st = AddDeviceMemory(*loaded, *device, &added);
    if (!st.ok()) return FailStatus(st);
  }
  std::vector<ReplayResult> rows;
  for (const std::string& n : names) {
    ReplayOptions one = o;
    one.allocator.impl = n;
    auto r = ReplayLoaded(*loaded, one);
    if (!r.ok()) return FailStatus(absl::Status(r.status().code(), absl::StrCat(n, ": ", r.status().message())));
    rows.push_back(std::move(*r));
  }
  std::cout << (c.format == "json" ? RenderAllocatorCompareJson(rows) : RenderAllocatorCompareText(rows));
  return 0;
}

absl::Status RefuseTraceGrid(const std::string& command, const std::string& path) {
  std::ifstream in(path);
  std::string first;
  while (in && std::getline(in, first)) {
    const size_t b = first.find_first_not_of(" \t\r");
    if (b != std::string::npos && first[b] != '#') break;
  }
  if (first.rfind("gpusim-trace", 0) != 0) return absl::OkStatus();
  std::string how = "re-record it at each batch size: python3 -m gpusim_torch sweep STEP.py --batch-sizes N,N,... "
                    "--device NAME (STEP.py's setup(device, batch_size=N) names the batch dimension)";
  auto trace = ReadTraceFile(path);
  if (trace.ok()) {
    const std::string* step = FindMeta(*trace, "step_file");
    const std::string* batch = FindMeta(*trace, "batch_size");
    if (step != nullptr) {
      absl::StrAppend(&how, "; this trace was recorded from ", *step,
                      batch != nullptr ? absl::StrCat(" at batch_size ", *batch) : std::string(" at its own batch"));
    }
  }
  return absl::InvalidArgumentError(absl::StrCat(
      command, " ", path, ": a recorded step has the shapes it was recorded with, so its batch size (or any "
      "other setting) cannot be varied here; ", how));
}

int CmdExplainTrace(const std::string& path, int top, const std::string& format, const std::string& device) {
  auto trace = LoadTraceForExplain(path);
  if (!trace.ok()) return FailStatus(trace.status());
  if (const std::string* fw = FindMeta(*trace, "framework"); fw != nullptr && *fw == "pytorch") {
    // As replay does: the device's CUDA libraries' allocations join the trace.
    auto d = ReplayDevice(device);
    if (!d.ok()) return FailStatus(d.status());
    EagerDeviceMemory added;
    auto t = AddEagerDeviceMemory(*trace, *d, &added);
    if (!t.ok()) return FailStatus(absl::Status(t.status().code(), absl::StrCat(path, ": ", t.status().message())));
    trace = std::move(*t);
  }
  const TracePeak p = ExplainTracePeak(*trace, path, top);
  std::cout << (format == "json" ? RenderTracePeakJson(p) : RenderTracePeakText(p));
  return 0;
}

}  // namespace gpusim
