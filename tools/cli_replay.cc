// `gpusim replay` and `gpusim compare`: recorded traces through allocator
// models (sim/replay/replay.h).
#include <iostream>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "sim/config/loader.h"
#include "sim/import/import.h"
#include "sim/replay/explain_trace.h"
#include "sim/replay/replay.h"
#include "tools/cli.h"

namespace gpusim {
namespace {

// The capacity cudaMalloc may reserve: --device's usable memory; else the
// device the trace recorded (Kineto deviceProperties totalGlobalMem); else
// the default device's usable memory (sim/replay/replay.h ReplayOptions).
absl::Status ResolveCapacity(const std::string& device, ReplayOptions* o) {
  auto d = LoadDeviceSpec(device.empty() ? "h100-sxm-80gb" : device, "");
  if (!d.ok()) return d.status();
  if (!device.empty()) {
    o->capacity = d->usable();
    o->capacity_source = absl::StrCat(d->name, " usable memory");
  }
  o->default_capacity = d->usable();
  o->default_capacity_source =
      absl::StrCat(d->name, " usable memory (default: the trace records no device memory; use --device)");
  return absl::OkStatus();
}

absl::Status ApplySets(const std::vector<std::string>& sets, AllocatorSpec* spec) {
  for (const std::string& s : sets) {
    const size_t eq = s.find('=');
    if (eq == std::string::npos || s.rfind("allocator.", 0) != 0 || eq <= 10) {
      return absl::InvalidArgumentError(
          absl::StrCat("--set ", s, ": expected allocator.OPTION=VALUE (see `gpusim list allocators`)"));
    }
    const std::string key = s.substr(10, eq - 10);
    if (key == "impl") {
      spec->impl = s.substr(eq + 1);
    } else {
      spec->options[key] = s.substr(eq + 1);
    }
  }
  return absl::OkStatus();
}

}  // namespace

int CmdReplay(const ReplayCli& c) {
  ReplayOptions o;
  o.allocator.impl = c.allocator;
  o.check_addresses = c.check_addresses;
  o.infer_warm_start = !c.cold_start;
  if (c.device_index >= 0) o.device = c.device_index;
  absl::Status st = ApplySets(c.sets, &o.allocator);
  if (st.ok()) st = ResolveCapacity(c.device, &o);
  if (!st.ok()) return FailStatus(st);
  auto r = ReplayFile(c.trace, o);
  if (!r.ok()) return FailStatus(r.status());
  std::cout << (c.format == "json" ? RenderReplayJson(*r) : RenderReplayText(*r));
  return 0;
}

int CmdCompare(const CompareCli& c) {
  std::vector<std::string> names = absl::StrSplit(c.allocators, ',', absl::SkipEmpty());
  if (names.empty()) return FailStatus(absl::InvalidArgumentError("--allocators: give at least one name"));
  ReplayOptions o;
  if (c.device_index >= 0) o.device = c.device_index;
  absl::Status st = ResolveCapacity(c.device, &o);
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
