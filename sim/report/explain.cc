// `gpusim explain`: the buffers live at the peak, largest first, each with
// its origin in words and its live range.
#include <algorithm>
#include <map>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "sim/report/explain.h"

namespace gpusim {
namespace {

// The name of the timed event nearest at or before `e` (an op name).
std::string OpAt(const StepReport& r, int64_t e) {
  if (e < 0) return "before the step";
  for (int64_t i = e; i >= 0; --i) {
    const TraceEvent& ev = r.lowered.trace.events[static_cast<size_t>(i)];
    if (IsTimed(ev.type)) return ev.name;
  }
  return "start";
}

// Note [Materialised loop slices] (sim/lower/xla/loop_slices.h): the
// per-iteration slices that are buffers of their own, one line per kind. A
// slice built once in a steady iteration standing for others (Note [Rolled
// loop built once], sim/lower/lower.h) is one per iteration it stands for,
// as in the loop built iteration by iteration.
std::string MaterialisedSlices(const StepReport& r) {
  struct Group {
    int64_t count = 0, in_donated = 0;
    Bytes bytes;
  };
  std::vector<int64_t> times(r.program.ops.size(), 1);
  for (const Region& reg : r.program.regions) {
    if (reg.repeat <= 1) continue;
    for (OpId op = std::max<OpId>(reg.first, 0); op <= reg.last && op < static_cast<OpId>(times.size()); ++op) {
      times[static_cast<size_t>(op)] = reg.repeat;
    }
  }
  std::map<std::string, Group> groups;
  for (const Op& op : r.program.ops) {
    if (op.kind != OpKind::kDynamicSlice || op.outputs.size() != 1) continue;
    const Tensor& t = r.program.tensor(op.outputs[0]);
    // A materialised loop slice's kind: "per-iteration slice of ..., read by
    // ..." (LowerLoopSlices, sim/lower/xla/loop_slices.cc).
    Group& g = groups[op.loop_slice >= 0 && !t.origin_kind.empty() ? t.origin_kind : t.origin];
    const int64_t n = times[static_cast<size_t>(op.id)];
    g.count += n;
    g.bytes = t.bytes();
    if (t.aliases != kNoTensor) g.in_donated += n;
  }
  std::string o;
  for (const auto& [what, g] : groups) {
    absl::StrAppendFormat(&o, "materialised: %d x %s, %s each%s\n", g.count, what, FormatBytes(g.bytes),
                          g.in_donated > 0 ? absl::StrFormat(" (%d in a donated parameter's idle allocation)",
                                                             g.in_donated)
                                           : "");
  }
  return o;
}

}  // namespace

std::vector<PeakBuffer> BuffersAtPeak(const StepReport& r) {
  // XLA: the temp heap's peak moment (arguments and outputs are reported
  // apart); eager: the live peak.
  const bool xla = r.semantics.accounting == Accounting::kXlaMemoryAnalysis;
  const int64_t at = xla ? r.temp_peak_event : r.sim.peak_event;
  std::vector<PeakBuffer> out;
  for (const BufferInfo& b : r.lowered.buffers) {
    if (xla && (b.argument || b.output)) continue;
    const bool born = b.alloc_event <= at;
    const bool alive = b.free_event < 0 || b.free_event > at;
    if (!born || !alive) continue;
    PeakBuffer p;
    p.buffer = b.id;
    p.name = b.name;
    p.origin = b.origin;
    p.origin_kind = b.origin_kind;
    p.role = b.role;
    p.bytes = b.bytes;
    p.from = OpAt(r, b.alloc_event);
    p.to = b.free_event < 0 ? "end of step" : OpAt(r, b.free_event);
    out.push_back(std::move(p));
  }
  std::stable_sort(out.begin(), out.end(), [](const PeakBuffer& a, const PeakBuffer& b) {
    if (a.bytes != b.bytes) return a.bytes > b.bytes;
    return a.buffer < b.buffer;
  });
  return out;
}

// A compiled module: the values of XLA's temp heap where it reaches its
// size (Note [Compiled-module buffer assignment]), largest first.
std::string RenderCompiledExplain(const StepReport& r, int top) {
  const CompiledMemory& c = r.program.compiled;
  std::string o = absl::StrFormat(
      "Temp heap %s (XLA's buffer assignment of the compiled module: heap %s packed %s, tuple tables %s)\n"
      "(arguments %s and outputs %s are not temps)\n%s\nLive where the heap reaches its size: %s\n",
      FormatBytes(r.temp), FormatBytes(c.heap), c.heap_algorithm, FormatBytes(c.tuple_tables), FormatBytes(r.argument),
      FormatBytes(r.output), r.entry_schedule.Describe(), FormatBytes(r.temp_live_peak));
  std::vector<const CompiledMemory::Line*> lines;
  for (const CompiledMemory::Line& l : c.at_peak) lines.push_back(&l);
  std::stable_sort(lines.begin(), lines.end(),
                   [](const CompiledMemory::Line* a, const CompiledMemory::Line* b) { return a->size > b->size; });
  Bytes rest(0);
  int64_t rest_n = 0;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (static_cast<int>(i) >= top) {
      rest += lines[i]->size;
      ++rest_n;
      continue;
    }
    absl::StrAppendFormat(&o, "%3d. %s  %s at offset %s\n     %s\n     live: schedule positions %d -> %d\n", i + 1,
                          FormatBytes(lines[i]->size), lines[i]->name, FormatBytes(lines[i]->offset), lines[i]->what,
                          lines[i]->start, lines[i]->end);
  }
  if (rest_n > 0) absl::StrAppendFormat(&o, "     ... and %d smaller values, %s\n", rest_n, FormatBytes(rest));
  return o;
}

std::string RenderExplain(const StepReport& r, int top) {
  std::vector<PeakBuffer> bufs = BuffersAtPeak(r);
  const bool xla = r.semantics.accounting == Accounting::kXlaMemoryAnalysis;
  // Note [Verdict]: the answer first.
  std::string o = absl::StrCat("verdict: ", r.verdict.Line(), "\n");
  if (r.program.compiled.present) return o + RenderCompiledExplain(r, top);
  const int64_t at = xla ? r.temp_peak_event : r.sim.peak_event;
  absl::StrAppendFormat(&o, "%s at event %d (during %s, %s phase): %s\n",
                        xla ? "Temp peak" : "Live peak", ExecutedEventIndex(r.lowered.trace, at), OpAt(r, at),
                        at >= 0 ? std::string(PhaseName(r.lowered.event_phase[static_cast<size_t>(at)])) : "-",
                        FormatBytes(xla ? r.temp_live_peak : r.sim.peak_live));
  if (xla) {
    absl::StrAppendFormat(&o, "(arguments %s and outputs %s are not temps; temp heap %s packed %s)\n",
                          FormatBytes(r.argument), FormatBytes(r.output), FormatBytes(r.temp), r.heap_algorithm);
    absl::StrAppendFormat(&o, "%s\n", r.entry_schedule.Describe());
    for (const std::string& d : r.entry_schedule.decisions) absl::StrAppendFormat(&o, "  %s\n", d);
    o += MaterialisedSlices(r);
  }
  Bytes rest(0);
  int64_t rest_n = 0;
  for (size_t i = 0; i < bufs.size(); ++i) {
    if (static_cast<int>(i) >= top) {
      rest += bufs[i].bytes;
      ++rest_n;
      continue;
    }
    const PeakBuffer& b = bufs[i];
    absl::StrAppendFormat(&o, "%3d. %s  %-16s %s\n     %s\n     live: %s -> %s\n", i + 1, FormatBytes(b.bytes),
                          RoleName(b.role), b.name, b.origin.empty() ? "(no description)" : b.origin, b.from, b.to);
  }
  if (rest_n > 0) absl::StrAppendFormat(&o, "     ... and %d smaller buffers, %s\n", rest_n, FormatBytes(rest));
  return o;
}

}  // namespace gpusim
