#include "sim/replay/native_step.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace gpusim {
namespace {

std::string Where(const TracePeak& p, const TracePeakBlock& b) {
  if (b.stack.empty()) return "";
  const StackFrame& f = p.frames[static_cast<size_t>(b.stack[0])];
  return absl::StrCat(f.function, " ", f.file, ":", f.line);
}

}  // namespace

absl::StatusOr<NativeStepReport> SimulateNativeStep(const Trace& trace, const std::string& source,
                                                    const DeviceSpec& device, Allocator* allocator, int top) {
  absl::StatusOr<SimResult> sim = Simulate(trace, device, allocator);
  if (!sim.ok()) return sim.status();
  NativeStepReport r;
  r.device = device.name;
  for (const TraceEvent& e : trace.events) r.timed_events += IsTimed(e.type) ? 1 : 0;
  r.step_time = sim->step_time;
  r.compute_busy = sim->compute_busy;
  r.flops = sim->flops;
  r.oom = sim->oom;
  r.peak = ExplainTracePeak(trace, source, top);
  for (const TracePeakBlock& b : r.peak.largest) {
    r.largest_roles.push_back(b.alloc_event >= 0 ? trace.events[static_cast<size_t>(b.alloc_event)].role
                                                 : Role::kTemporary);
  }
  return r;
}

std::string RenderNativeStepText(const NativeStepReport& r) {
  std::string out = absl::StrFormat(
      "step on %s (engine: recorded ops' shapes through the device model)\n"
      "  step time %.4f s (%d timed events; compute busy %.4f s; %.3g FLOP)\n"
      "  peak live %s\n",
      r.device, r.step_time.seconds(), r.timed_events, r.compute_busy.seconds(), r.flops,
      FormatBytes(r.peak.peak_live));
  if (r.oom.happened) {
    absl::StrAppend(&out, absl::StrFormat("  OOM at event %d: %s requested for %s, %s live\n", r.oom.event,
                                          FormatBytes(r.oom.requested), r.oom.buffer, FormatBytes(r.oom.live)));
  }
  absl::StrAppend(&out, "  largest buffers live at the peak (gpusim explain TRACE: whole stacks):\n");
  for (size_t i = 0; i < r.peak.largest.size(); ++i) {
    const TracePeakBlock& b = r.peak.largest[i];
    const std::string where = Where(r.peak, b);
    absl::StrAppend(&out, absl::StrFormat("    %14s  %-15s %s%s\n", FormatBytes(b.size), RoleName(r.largest_roles[i]),
                                          b.name.empty() ? "-" : b.name,
                                          where.empty() ? "" : absl::StrCat("  (", where, ")")));
  }
  return out;
}

void NativeStepJson(JsonWriter& w, const NativeStepReport& r) {
  w.BeginObject("step");
  w.String("device", r.device);
  w.Double("step_time_s", r.step_time.seconds());
  w.Double("compute_s", r.compute_busy.seconds());
  w.Int("timed_events", r.timed_events);
  w.Double("flops", r.flops);
  w.Int("peak_live_bytes", r.peak.peak_live.value());
  w.BeginArray("largest");
  for (size_t i = 0; i < r.peak.largest.size(); ++i) {
    const TracePeakBlock& b = r.peak.largest[i];
    w.BeginObject();
    w.String("name", b.name);
    w.String("role", RoleName(r.largest_roles[i]));
    w.Int("bytes", b.size.value());
    w.String("where", Where(r.peak, b));
    w.EndObject();
  }
  w.EndArray();
  if (r.oom.happened) {
    w.BeginObject("oom");
    w.Int("event", r.oom.event);
    w.Int("requested_bytes", r.oom.requested.value());
    w.Int("live_bytes", r.oom.live.value());
    w.String("buffer", r.oom.buffer);
    w.EndObject();
  } else {
    w.Null("oom");
  }
  w.EndObject();
}

}  // namespace gpusim
