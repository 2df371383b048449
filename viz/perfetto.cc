// Chrome-trace JSON (the "Trace Event Format", read by ui.perfetto.dev and
// chrome://tracing) of one simulated step.
//
//   pid 1, tid 1 + stream   ops as complete ("X") slices, one track per stream
//   tid 100 / 101 / 102     phases / loops / loop iterations as slices
//   counters ("C")          "live bytes" (total) and "live bytes by role"
//   instant ("i")           the peak
//
// Timestamps are µs printed from integer ns ("12.345"), so nothing is
// rounded. Counters are coalesced per timestamp: the maximum reached at that
// instant, then (1 ns later) the value it settles at, so transient peaks of
// alloc-then-free at one instant stay visible. One event per line, in a
// fixed order: deterministic.
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "sim/base/file_util.h"
#include "sim/base/json_writer.h"
#include "viz/step_view.h"
#include "viz/viz.h"

namespace gpusim {
namespace {

constexpr int kPhaseTid = 100, kLoopTid = 101, kIterationTid = 102;

std::string Us(SimTime t) {
  const int64_t ns = t.ns();
  if (ns < 0) return absl::StrFormat("-%d.%03d", -ns / 1000, -ns % 1000);
  return absl::StrFormat("%d.%03d", ns / 1000, ns % 1000);
}

// JsonEscape quotes too.
std::string Str(std::string_view s) { return JsonEscape(s); }

}  // namespace

std::string PerfettoJson(const StepReport& r) {
  const viz_internal::StepView v = viz_internal::BuildStepView(r);
  const Trace& tr = r.lowered.trace;
  std::vector<std::string> ev;
  ev.push_back(absl::StrCat("{\"ph\":\"M\",\"pid\":1,\"name\":\"process_name\",\"args\":{\"name\":",
                            Str(absl::StrCat("gpusim: ", r.program.name, " on ", r.spec.device.name)), "}}"));
  auto thread = [&](int tid, std::string_view name) {
    ev.push_back(absl::StrCat("{\"ph\":\"M\",\"pid\":1,\"tid\":", tid, ",\"name\":\"thread_name\",\"args\":{\"name\":",
                              Str(name), "}}"));
    ev.push_back(absl::StrCat("{\"ph\":\"M\",\"pid\":1,\"tid\":", tid,
                              ",\"name\":\"thread_sort_index\",\"args\":{\"sort_index\":", tid, "}}"));
  };
  thread(kPhaseTid, "phases");
  thread(kLoopTid, "loops");
  thread(kIterationTid, "loop iterations");
  std::vector<StreamId> streams;
  for (const StreamInfo& s : tr.streams) {
    thread(1 + s.id, s.name);
    streams.push_back(s.id);
  }
  for (const TraceEvent& e : tr.events) {
    if (IsTimed(e.type) && std::find(streams.begin(), streams.end(), e.stream) == streams.end()) {
      streams.push_back(e.stream);
      thread(1 + e.stream, absl::StrCat("stream ", e.stream));
    }
  }

  auto slice = [&](int tid, std::string_view name, std::string_view cat, SimTime t0, SimTime t1,
                   const std::string& args) {
    ev.push_back(absl::StrCat("{\"ph\":\"X\",\"pid\":1,\"tid\":", tid, ",\"ts\":", Us(t0), ",\"dur\":", Us(t1 - t0),
                              ",\"name\":", Str(name), ",\"cat\":", Str(cat),
                              args.empty() ? "" : ",\"args\":{", args, args.empty() ? "" : "}", "}"));
  };
  for (const auto& s : v.phases) slice(kPhaseTid, s.label, "phase", s.t0, s.t1, "");
  for (const auto& s : v.loops) slice(kLoopTid, s.label, "loop", s.t0, s.t1, "");
  for (const auto& s : v.iterations) {
    slice(kIterationTid, s.label, "iteration", s.t0, s.t1,
          absl::StrCat("\"first_op\":", s.op0, ",\"last_op\":", s.op1 - 1));
  }
  for (size_t i = 0; i < tr.events.size(); ++i) {
    const TraceEvent& e = tr.events[i];
    if (!IsTimed(e.type)) continue;
    std::string args = absl::StrCat("\"event\":", i, ",\"kind\":", Str(OpKindName(e.kind)),
                                    ",\"phase\":", Str(PhaseName(e.phase)), ",\"flops\":",
                                    absl::StrFormat("%.17g", e.flops), ",\"bytes_read\":", e.bytes_read.value(),
                                    ",\"bytes_written\":", e.bytes_written.value());
    if (e.recompute) absl::StrAppend(&args, ",\"recompute\":true");
    slice(1 + e.stream, e.name, EventTypeName(e.type), r.sim.start[i], r.sim.end[i], args);
  }

  // Counters, coalesced per timestamp.
  std::array<int64_t, kNumRoles> by_role{}, by_role_at_max{};
  int64_t cur = tr.preexisting.value();
  auto counters = [&](SimTime t, int64_t total, const std::array<int64_t, kNumRoles>& roles) {
    ev.push_back(absl::StrCat("{\"ph\":\"C\",\"pid\":1,\"ts\":", Us(t), ",\"name\":\"live bytes\",\"args\":{\"live\":",
                              total, "}}"));
    std::string a;
    for (Role role : viz_internal::LegendRoles()) {
      absl::StrAppend(&a, a.empty() ? "" : ",", Str(RoleName(role)), ":", roles[static_cast<size_t>(role)]);
    }
    ev.push_back(absl::StrCat("{\"ph\":\"C\",\"pid\":1,\"ts\":", Us(t), ",\"name\":\"live bytes by role\",\"args\":{",
                              a, "}}"));
  };
  counters(SimTime(0), cur, by_role);
  size_t i = 0;
  const size_t n = tr.events.size();
  while (i < n) {
    if (tr.events[i].type != EventType::kAlloc && tr.events[i].type != EventType::kFree) {
      ++i;
      continue;
    }
    const SimTime t = r.sim.start[i];
    int64_t mx = -1;
    bool changed = false;
    for (; i < n && (IsTimed(tr.events[i].type) || r.sim.start[i] == t); ++i) {
      const TraceEvent& e = tr.events[i];
      if (e.type != EventType::kAlloc && e.type != EventType::kFree) continue;
      const BufferInfo& b = r.lowered.buffers[static_cast<size_t>(e.buffer)];
      const int64_t d = e.type == EventType::kAlloc ? b.bytes.value() : -b.bytes.value();
      cur += d;
      by_role[static_cast<size_t>(b.role)] += d;
      changed = true;
      if (cur > mx) {
        mx = cur;
        by_role_at_max = by_role;
      }
    }
    if (!changed) continue;
    counters(t, mx, by_role_at_max);
    if (cur != mx) counters(t + SimTime(1), cur, by_role);
  }
  if (v.peak_event >= 0) {
    ev.push_back(absl::StrCat("{\"ph\":\"i\",\"s\":\"g\",\"pid\":1,\"tid\":", kPhaseTid, ",\"ts\":", Us(v.peak_time),
                              ",\"name\":", Str(absl::StrCat("peak ", viz_internal::HumanBytes(r.peak))),
                              ",\"args\":{\"peak_bytes\":", r.peak.value(), ",\"op\":", Str(v.peak_op_name), "}}"));
  }

  std::string out = "{\"displayTimeUnit\":\"ns\",\n\"otherData\":{";
  absl::StrAppend(&out, "\"program\":", Str(r.program.name), ",\"device\":", Str(r.spec.device.name),
                  ",\"framework\":", Str(r.spec.framework), ",\"peak_bytes\":", r.peak.value(),
                  ",\"capacity_bytes\":", r.capacity.value(), ",\"step_time_ns\":", r.sim.step_time.ns(), "},\n");
  out += "\"traceEvents\":[\n";
  for (size_t k = 0; k < ev.size(); ++k) absl::StrAppend(&out, ev[k], k + 1 < ev.size() ? ",\n" : "\n");
  out += "]}\n";
  return out;
}

absl::Status WritePerfettoTimeline(const StepReport& r, const std::string& path) {
  return WriteFileAtomically(path, PerfettoJson(r));
}

}  // namespace gpusim
