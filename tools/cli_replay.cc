// `gpusim replay` and `gpusim compare`: recorded traces through allocator
// models (sim/replay/replay.h).
#include <iostream>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "sim/alloc/allocator.h"
#include "sim/config/loader.h"
#include "sim/import/import.h"
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
  if (c.device_index >= 0) o.device = c.device_index;
  absl::Status st = ApplyAllocatorSets(c.sets, &o.allocator);
  if (st.ok()) st = ResolveReplayCapacity(c.device, &o);
  if (!st.ok()) return FailStatus(st);
  auto r = ReplayFile(c.trace, o);
  if (!r.ok()) return FailStatus(r.status());
  if (!c.snapshot.empty()) {
    st = WriteReplayedSnapshot(c.trace, o.allocator, r->capacity, c.snapshot);
    if (!st.ok()) return FailStatus(st);
  }
  if (c.format == "json") {
    auto json = ReplayJson(c.trace, c.device, o, *r);
    if (!json.ok()) return FailStatus(json.status());
    std::cout << *json;
    return 0;
  }
  if (r->format != "gpusim-trace") {
    std::cout << RenderReplayText(*r);
    return 0;
  }
  auto step = NativeReplayStep(c.trace, c.device, o);
  if (!step.ok()) return FailStatus(step.status());
  std::cout << RenderReplayText(*r) << RenderNativeStepText(*step);
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

int CmdExplainTrace(const std::string& path, int top, const std::string& format) {
  auto trace = LoadTraceForExplain(path);
  if (!trace.ok()) return FailStatus(trace.status());
  const TracePeak p = ExplainTracePeak(*trace, path, top);
  std::cout << (format == "json" ? RenderTracePeakJson(p) : RenderTracePeakText(p));
  return 0;
}

}  // namespace gpusim
