// Chrome-trace JSON (the "Trace Event Format", read by ui.perfetto.dev and
// chrome://tracing) of one simulated step.
//
//   pid 1 = the device          process_name "<device>: <program>"
//   tid 1 + stream              ops as complete ("X") slices, one named thread per stream
//   tid 100 / 101 / 102         phases / loops / loop iterations as slices
//   counters ("C")              one track each, in time order: "live bytes",
//                               "live bytes by role", "allocated bytes" and
//                               "reserved bytes" (the replayed allocator), and a
//                               recorded trace's "recorded allocated bytes" /
//                               "recorded reserved bytes"
//   async ("b"/"e", cat buffer) one slice per buffer over its lifetime, args
//                               bytes, role, origin, alloc/free event
//   instants ("i")              the peak (global), the out-of-memory point (process)
//
// Timestamps are µs in steps of 1/1024 µs (Note [Exact microseconds]). One
// event per line, in a fixed order: deterministic.
//
// Note [Exact microseconds]
// A reader ends a slice at ts + dur in double arithmetic. Printed as decimal
// µs of the integer ns ("11902.092" + "757.165" = 12659.257000000001), one
// op's end rounded past the next op's start ("12659.257") on 322 of
// llama7b's 3,799 slices: they overlapped, and Chrome DevTools' trace engine
// (tests/trace_reader) dropped them from their threads' trees. So every
// time is written as k/1024 µs, k the nearest integer to ns × 1024 / 1000
// (within 0.49 ns), which a double holds exactly (for |k| < 2^53, about 100
// days) and which prints as an exact decimal of at most 10 fraction digits;
// a slice's dur is the difference of its two ends' k, so ts + dur is its
// end exactly and slices that touch in ns touch in the file.
//
// Note [Memory counters in time order]
// Memory events are issued on their streams, so their simulated issue times
// are not monotonic in trace order (944 of llama7b's 4,585 went back in
// time), while the allocator and the live-bytes tracker see them in trace
// order, which is the order the reported peak and the PNG timeline use. A
// viewer sorts each counter track by time, and re-sorting trace-order values
// made a 61 GiB spike that never happened. So each memory sample is stamped
// with the running maximum of the issue times up to its event: values stay
// the ones the allocator saw, in its order, and every track is
// non-decreasing in time. Several samples at one timestamp are coalesced:
// the maximum reached there, then (1 ns later) the value it settles at, so
// an alloc-then-free at one instant stays visible.
#include <algorithm>
#include <array>
#include <climits>
#include <cstdint>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "sim/base/file_util.h"
#include "sim/base/json_writer.h"
#include "sim/trace/frames.h"
#include "viz/alloc_source.h"
#include "viz/step_view.h"
#include "viz/viz.h"

namespace gpusim {
namespace {

constexpr int kPhaseTid = 100, kLoopTid = 101, kIterationTid = 102;

// t in units of 1/1024 µs, rounded to nearest (ties away from zero).
int64_t Ticks(SimTime t) {
  const __int128 x = static_cast<__int128>(t.ns()) * 128;  // ns × 1024 / 1000 = ns × 128 / 125
  __int128 k = x / 125;
  const __int128 r = x % 125;
  if (2 * r >= 125) ++k;
  if (2 * r <= -125) --k;
  return static_cast<int64_t>(std::clamp<__int128>(k, INT64_MIN, INT64_MAX));
}

// k/1024 µs as an exact decimal.
std::string UsOfTicks(int64_t k) {
  const uint64_t a = k < 0 ? 0 - static_cast<uint64_t>(k) : static_cast<uint64_t>(k);
  std::string s = absl::StrCat(k < 0 ? "-" : "", a >> 10);
  if (const uint64_t frac = (a & 1023) * 9765625; frac != 0) {  // 1/1024 = 0.0009765625
    std::string digits = absl::StrFormat("%010d", frac);
    digits.erase(digits.find_last_not_of('0') + 1);
    absl::StrAppend(&s, ".", digits);
  }
  return s;
}

std::string Us(SimTime t) { return UsOfTicks(Ticks(t)); }

// JsonEscape quotes too.
std::string Str(std::string_view s) { return JsonEscape(s); }

// One counter track: samples (time, values) appended in non-decreasing time,
// coalesced per timestamp as Note [Memory counters in time order] says.
class CounterTrack {
 public:
  // `series` names values[1...] when `keyed` (values[0] then only decides
  // the maximum and is not written), else values[0...].
  // `base`: added to every time written (Note [A snapshot's clock]).
  CounterTrack(std::string name, std::vector<std::string> series, SimTime base, bool keyed = false)
      : name_(std::move(name)), series_(std::move(series)), base_(base), skip_(keyed ? 1 : 0) {}

  // REQUIRES: t ≥ the previous call's t; values.size() == series.size() (+1
  // when keyed). values[0] decides which sample of one instant is its maximum.
  void Add(SimTime t, const std::vector<int64_t>& values) {
    if (have_ && t == t_) {
      if (values[0] > max_[0]) max_ = values;
      last_ = values;
      return;
    }
    Flush();
    have_ = true;
    t_ = t;
    max_ = last_ = values;
  }

  void Flush() {
    if (!have_) return;
    Emit(t_, max_);
    if (last_ != max_) Emit(t_ + SimTime(1), last_);
    have_ = false;
  }

  std::vector<std::string> TakeEvents() {
    Flush();
    return std::move(events_);
  }

 private:
  void Emit(SimTime t, const std::vector<int64_t>& values) {
    if (t < emitted_) t = emitted_;  // a settle point 1 ns later may meet the next instant
    emitted_ = t;
    std::string a;
    for (size_t k = 0; k < series_.size(); ++k) {
      absl::StrAppend(&a, k ? "," : "", Str(series_[k]), ":", values[k + skip_]);
    }
    events_.push_back(absl::StrCat("{\"ph\":\"C\",\"pid\":1,\"ts\":", Us(t + base_), ",\"name\":", Str(name_), ",\"args\":{",
                                   a, "}}"));
  }

  std::string name_;
  std::vector<std::string> series_;
  SimTime base_;
  size_t skip_;
  bool have_ = false;
  SimTime t_, emitted_{0};
  std::vector<int64_t> max_, last_;
  std::vector<std::string> events_;
};

// Note [A snapshot's clock]
// A trace with no timed events (a memory snapshot, a memory timeline) is
// drawn on the event clock: event k at k ns, which Perfetto shows as a few
// microseconds with nothing to scale them. When the recording stamped its
// events (a snapshot's trace entries carry time_us, recorded under
// _record_memory_history; VizOptions::recorded_times), timeline.json runs
// on that clock instead: every memory event at its recorded time (µs on the
// recorder's clock, as the snapshot's time_us and a Kineto trace's ts are,
// so the file lines up with the run's own profiler traces; the first one's
// is the origin, otherData recorded_time_origin_us, and time_bounds_us
// runs from it), and an event with no time (a block live before the
// window, allocated at the head) at the time of the event before it (the
// origin at the head), kept in event order as the allocator saw it;
// otherData says how many had none (events_without_recorded_time). A
// recording with no times at all stays on the event clock, and otherData's
// clock says so. Times are absolute, not from 0, also because Chrome
// DevTools' trace engine leaves events at ts 0 out of the trace's bounds
// (MetaHandler.handleEvent, @paulirish/trace_engine): a window starting at
// 0 had no bounds there.
struct RecordedClock {
  bool use = false;
  std::vector<SimTime> at;  // per event; with use
  SimTime origin;           // the first recorded time, ns
  int64_t untimed = 0;      // memory events without a recorded time
  std::string name;
};

RecordedClock RecordedClockOf(const viz_internal::StepView& v, const Trace& tr, const VizOptions& o) {
  RecordedClock c;
  const size_t n = tr.events.size();
  c.name = v.event_clock ? "memory events (1 ns each; the recording has no timestamps)" : "simulated";
  if (!v.event_clock || o.recorded_times == nullptr || o.recorded_times->size() != n) return c;
  const std::vector<SimTime>& t = *o.recorded_times;
  bool any = false;
  for (size_t i = 0; i < n; ++i) {
    if (t[i] < SimTime(0)) continue;
    c.origin = any ? std::min(c.origin, t[i]) : t[i];
    any = true;
  }
  if (!any) return c;
  c.use = true;
  c.at.assign(n, SimTime(0));
  SimTime last(0);
  for (size_t i = 0; i < n; ++i) {
    const bool memory = tr.events[i].type == EventType::kAlloc || tr.events[i].type == EventType::kFree;
    if (t[i] >= SimTime(0)) {
      last = t[i] - c.origin;
    } else if (memory) {
      ++c.untimed;
    }
    c.at[i] = last;
  }
  c.name = c.untimed == 0 ? "recorded (the trace's own timestamps)"
                          : absl::StrCat("recorded (the trace's own timestamps; ", c.untimed,
                                         " events without one placed in event order)");
  return c;
}

// One PerfettoJson call: the trace events being written (`ev`), the clock
// they are written on, and the memory clock, shared by its steps in the
// order the file lists them (threads, slices, repeats, buffers, counters,
// instants).
struct PerfettoWriter {
  PerfettoWriter(const StepReport& report, const VizOptions& options)
      : r(report), o(options), v(viz_internal::BuildStepView(report)), tr(report.lowered.trace),
        n(tr.events.size()), rc(RecordedClockOf(v, tr, options)), base(rc.use ? rc.origin : SimTime(0)) {}

  std::string Write();
  void WriteThreads();
  void WriteSlices();
  void WriteRepeatSlices();
  void MemoryClock();
  std::string FramesOf(const BufferInfo& b) const;
  void WriteBuffers();
  void WriteCounters();
  void WriteInstants();
  std::string Finish() const;

  std::string At(SimTime t) const { return Us(t + base); }
  void Thread(int tid, std::string_view name) {
    ev.push_back(absl::StrCat("{\"ph\":\"M\",\"pid\":1,\"tid\":", tid, ",\"name\":\"thread_name\",\"args\":{\"name\":",
                              Str(name), "}}"));
    ev.push_back(absl::StrCat("{\"ph\":\"M\",\"pid\":1,\"tid\":", tid,
                              ",\"name\":\"thread_sort_index\",\"args\":{\"sort_index\":", tid, "}}"));
  }
  void Slice(int tid, std::string_view name, std::string_view cat, SimTime t0, SimTime t1, const std::string& args) {
    ev.push_back(absl::StrCat("{\"ph\":\"X\",\"pid\":1,\"tid\":", tid, ",\"ts\":", At(t0),
                              ",\"dur\":", UsOfTicks(Ticks(t1) - Ticks(t0)),
                              ",\"name\":", Str(name), ",\"cat\":", Str(cat),
                              args.empty() ? "" : ",\"args\":{", args, args.empty() ? "" : "}", "}"));
  }

  const StepReport& r;
  const VizOptions& o;
  const viz_internal::StepView v;
  const Trace& tr;
  const size_t n;
  // Times are written on the trace's own clock when it has one (Note [A
  // snapshot's clock]): `base` is its origin, 0 on the simulated clock.
  const RecordedClock rc;
  const SimTime base;
  std::vector<std::string> ev;
  std::vector<StreamId> streams;
  // The memory clock: per event, the running maximum of issue times, or of
  // the recorded times (Note [A snapshot's clock]); `end` bounds the file.
  std::vector<SimTime> mt;
  SimTime end;
  std::vector<viz_internal::AllocSource> sources;
};

void PerfettoWriter::WriteThreads() {
  ev.push_back(absl::StrCat("{\"ph\":\"M\",\"pid\":1,\"name\":\"process_name\",\"args\":{\"name\":",
                            Str(absl::StrCat(r.spec.device.name, ": ", r.program.name)), "}}"));
  ev.push_back("{\"ph\":\"M\",\"pid\":1,\"name\":\"process_sort_index\",\"args\":{\"sort_index\":1}}");
  Thread(kPhaseTid, "phases");
  Thread(kLoopTid, "loops");
  Thread(kIterationTid, "loop iterations");
  for (const StreamInfo& s : tr.streams) {
    Thread(1 + s.id, absl::StrCat("stream ", s.id, ": ", s.name));
    streams.push_back(s.id);
  }
  for (const TraceEvent& e : tr.events) {
    if (std::find(streams.begin(), streams.end(), e.stream) == streams.end()) {
      streams.push_back(e.stream);
      Thread(1 + e.stream, absl::StrCat("stream ", e.stream));
    }
  }
}

void PerfettoWriter::WriteSlices() {
  for (const auto& s : v.phases) Slice(kPhaseTid, s.label, "phase", s.t0, s.t1, "");
  for (const auto& s : v.loops) Slice(kLoopTid, s.label, "loop", s.t0, s.t1, "");
  for (const auto& s : v.iterations) {
    Slice(kIterationTid, s.label, "iteration", s.t0, s.t1,
          absl::StrCat("\"first_op\":", s.op0, ",\"last_op\":", s.op1 - 1));
  }
  for (size_t i = 0; i < n; ++i) {
    const TraceEvent& e = tr.events[i];
    if (!IsTimed(e.type)) continue;
    std::string args = absl::StrCat("\"event\":", i, ",\"kind\":", Str(OpKindName(e.kind)),
                                    ",\"phase\":", Str(PhaseName(e.phase)), ",\"flops\":",
                                    absl::StrFormat("%.17g", e.flops), ",\"bytes_read\":", e.bytes_read.value(),
                                    ",\"bytes_written\":", e.bytes_written.value());
    if (e.recompute) absl::StrAppend(&args, ",\"recompute\":true");
    Slice(1 + e.stream, e.name, EventTypeName(e.type), v.start[i], v.end[i], args);
  }
}

// Note [Repeated iterations in the charts] (viz/step_view.h): per stream
// a repeat ran on, one slice over its further iterations (the first one's
// start on that stream plus a period to its end there plus times - 1
// periods: after its run as built, before the events after it), and one
// on the iterations track.
void PerfettoWriter::WriteRepeatSlices() {
  for (const viz_internal::RepeatSpan& rs : v.repeats) {
    const std::string name = absl::StrCat(rs.label, " ×", rs.times - 1, " more (built once)");
    const std::string args =
        absl::StrCat("\"first_event\":", rs.first, ",\"last_event\":", rs.last, ",\"iterations\":", rs.times - 1,
                     ",\"period_ns\":", rs.period.ns());
    for (StreamId s : streams) {
      SimTime a = v.step_time, b(0);
      for (int64_t i = rs.first; i <= rs.last; ++i) {
        const TraceEvent& e = tr.events[static_cast<size_t>(i)];
        if (!IsTimed(e.type) || e.stream != s) continue;
        a = std::min(a, v.start[static_cast<size_t>(i)]);
        b = Max(b, v.end[static_cast<size_t>(i)]);
      }
      if (b < a) continue;
      Slice(1 + s, name, "repeat", a + rs.period, b + rs.period * (rs.times - 1), args);
    }
    SimTime t1 = rs.t1;
    for (const auto& it : v.iterations) {
      if (it.t0 >= rs.t0 && it.t0 < t1) t1 = it.t0;  // siblings on one track do not overlap
    }
    Slice(kIterationTid, name, "iteration", rs.t0, t1, args);
  }
}

void PerfettoWriter::MemoryClock() {
  mt.resize(n);
  SimTime clock(0);
  for (size_t i = 0; i < n; ++i) {
    if (tr.events[i].type == EventType::kAlloc || tr.events[i].type == EventType::kFree) {
      clock = std::max(clock, rc.use ? rc.at[i] : v.start[i]);
    }
    mt[i] = clock;
  }
  end = rc.use ? std::max(clock, SimTime(1)) : v.step_time;
  if (v.phases.empty() && n > 0) {
    // A trace without ops has no phase slices: one slice over the whole
    // recording bounds the trace (Perfetto's time range) and names its clock.
    Slice(kPhaseTid, rc.use ? "recorded window" : "memory events", "recording", SimTime(0), end,
          absl::StrCat("\"events\":", n, ",\"clock\":", Str(rc.name)));
  }
}

// ",\"frames\":[...]" of the call stack `b`'s alloc recorded (innermost
// first, "function (file:line)"), or "" when none was.
// Shown as memory_viz shows them (Note [memory_viz's frame filter],
// sim/trace/frames.h), with the source the charts label the block by.
std::string PerfettoWriter::FramesOf(const BufferInfo& b) const {
  const viz_internal::AllocSource& src = sources[static_cast<size_t>(b.id)];
  std::string out;
  if (!src.label.empty()) absl::StrAppend(&out, ",\"source\":", Str(src.label));
  if (!src.module.empty()) absl::StrAppend(&out, ",\"module\":", Str(src.module));
  if (!src.op.empty()) absl::StrAppend(&out, ",\"op\":", Str(src.op));
  if (b.alloc_event < 0 || static_cast<size_t>(b.alloc_event) >= n) return out;
  const std::vector<int32_t>& stack = tr.events[static_cast<size_t>(b.alloc_event)].stack;
  if (stack.empty()) return out;
  const std::vector<std::string> lines = ShownFrameLines(tr.frames, stack, SIZE_MAX);
  absl::StrAppend(&out, ",\"frames\":[");
  for (size_t k = 0; k < lines.size(); ++k) absl::StrAppend(&out, k ? "," : "", Str(lines[k]));
  absl::StrAppend(&out, "]");
  const size_t hidden = stack.size() - ShownStack(tr.frames, stack).size();
  if (hidden > 0) absl::StrAppend(&out, ",\"frames_hidden\":", hidden);
  return out;
}

// Buffer lifetimes as async slices (matched by cat, id and name).
void PerfettoWriter::WriteBuffers() {
  sources = viz_internal::AllocSources(r);
  for (const BufferInfo& b : r.lowered.buffers) {
    if (b.bytes.value() <= 0) continue;
    const SimTime t0 = b.alloc_event >= 0 ? mt[static_cast<size_t>(b.alloc_event)] : SimTime(0);
    const SimTime t1 = b.free_event >= 0 ? std::max(t0, mt[static_cast<size_t>(b.free_event)])
                                         : std::max(t0, end);
    const int tid = b.alloc_event >= 0 ? 1 + tr.events[static_cast<size_t>(b.alloc_event)].stream : 1;
    // Named by its source where the trace knows it, as the charts label it.
    const std::string& label = sources[static_cast<size_t>(b.id)].label;
    const std::string head = absl::StrCat("\"cat\":\"buffer\",\"id\":\"0x", absl::Hex(b.id), "\",\"name\":",
                                          Str(label.empty() ? b.name : label), ",\"pid\":1,\"tid\":", tid);
    ev.push_back(absl::StrCat("{\"ph\":\"b\",", head, ",\"ts\":", At(t0), ",\"args\":{\"buffer\":", Str(b.name),
                              ",\"bytes\":", b.bytes.value(),
                              ",\"role\":", Str(RoleName(b.role)), ",\"origin\":", Str(b.origin),
                              ",\"alloc_event\":", b.alloc_event, ",\"free_event\":", b.free_event, FramesOf(b),
                              "}}"));
    ev.push_back(absl::StrCat("{\"ph\":\"e\",", head, ",\"ts\":", At(t1), "}"));
  }
}

// Counter tracks.
void PerfettoWriter::WriteCounters() {
  std::vector<std::string> role_names;
  for (Role role : viz_internal::LegendRoles()) role_names.emplace_back(RoleName(role));
  CounterTrack live("live bytes", {"live"}, base);
  CounterTrack by_role("live bytes by role", role_names, base, /*keyed=*/true);
  std::array<int64_t, kNumRoles> roles{};
  int64_t cur = tr.preexisting.value();
  auto role_values = [&] {
    std::vector<int64_t> out{cur};  // the key: the instant's maximum is the total's
    for (Role role : viz_internal::LegendRoles()) out.push_back(roles[static_cast<size_t>(role)]);
    return out;
  };
  live.Add(SimTime(0), {cur});
  by_role.Add(SimTime(0), role_values());
  // A repeat's further iterations: its run's maximum (with the roles then)
  // a period after its first memory event, its end value (times - 1)
  // periods after its last (Note [Repeated iterations in the charts]).
  size_t rep = 0;
  std::vector<int64_t> rep_max;
  SimTime rep_t0, rep_t1;
  for (size_t i = 0; i < n; ++i) {
    const TraceEvent& e = tr.events[i];
    const bool memory = e.type == EventType::kAlloc || e.type == EventType::kFree;
    if (memory) {
      const BufferInfo& b = r.lowered.buffers[static_cast<size_t>(e.buffer)];
      const int64_t d = e.type == EventType::kAlloc ? b.bytes.value() : -b.bytes.value();
      cur += d;
      roles[static_cast<size_t>(b.role)] += d;
      live.Add(mt[i], {cur});
      by_role.Add(mt[i], role_values());
    }
    if (rep >= v.repeats.size() || static_cast<int64_t>(i) < v.repeats[rep].first) continue;
    const viz_internal::RepeatSpan& rs = v.repeats[rep];
    if (memory) {
      if (rep_max.empty()) rep_t0 = mt[i];
      if (rep_max.empty() || cur > rep_max[0]) rep_max = role_values();
      rep_t1 = mt[i];
    }
    if (static_cast<int64_t>(i) < rs.last) continue;
    if (!rep_max.empty()) {
      const SimTime ta = std::max(mt[i], rep_t0 + rs.period);
      const SimTime tb = std::max(ta, rep_t1 + rs.period * (rs.times - 1));
      live.Add(ta, {rep_max[0]});
      by_role.Add(ta, rep_max);
      live.Add(tb, {cur});
      by_role.Add(tb, role_values());
    }
    ++rep;
    rep_max.clear();
  }
  std::vector<std::vector<std::string>> tracks;
  tracks.push_back(live.TakeEvents());
  tracks.push_back(by_role.TakeEvents());
  const bool ideal = r.sim.allocator_name.empty() || r.sim.allocator_name == "ideal";
  if (!ideal && !r.sim.allocator_curve.empty()) {
    // Bytes live before the trace never passed through the allocator; they
    // count as allocated and reserved (as the PNG timeline draws them).
    const int64_t pre = r.sim.preexisting_in_allocator ? 0 : tr.preexisting.value();  // a start state holds them
    CounterTrack alloc("allocated bytes", {"allocated"}, base), resv("reserved bytes", {"reserved"}, base);
    alloc.Add(SimTime(0), {pre});
    resv.Add(SimTime(0), {pre});
    for (const AllocatorSample& s : r.sim.allocator_curve) {
      if (s.event < 0 || s.event >= static_cast<int64_t>(n)) continue;
      alloc.Add(mt[static_cast<size_t>(s.event)], {pre + s.allocated.value()});
      resv.Add(mt[static_cast<size_t>(s.event)], {pre + s.reserved.value()});
    }
    tracks.push_back(alloc.TakeEvents());
    tracks.push_back(resv.TakeEvents());
  }
  if (o.recorded_memory != nullptr && !o.recorded_memory->empty()) {
    CounterTrack alloc("recorded allocated bytes", {"allocated"}, base),
        resv("recorded reserved bytes", {"reserved"}, base);
    for (const RecordedMemorySample& s : *o.recorded_memory) {
      if (s.event < 0 || s.event >= static_cast<int64_t>(n)) continue;
      if (s.allocated.has_value()) alloc.Add(mt[static_cast<size_t>(s.event)], {s.allocated->value()});
      if (s.reserved.has_value()) resv.Add(mt[static_cast<size_t>(s.event)], {s.reserved->value()});
    }
    tracks.push_back(alloc.TakeEvents());
    tracks.push_back(resv.TakeEvents());
  }
  for (auto& t : tracks) {
    for (std::string& e : t) ev.push_back(std::move(e));
  }
}

// The peak and the out-of-memory instants.
void PerfettoWriter::WriteInstants() {
  if (v.peak_event >= 0) {
    ev.push_back(absl::StrCat("{\"ph\":\"i\",\"s\":\"g\",\"pid\":1,\"tid\":", kPhaseTid, ",\"ts\":",
                              At(mt[static_cast<size_t>(v.peak_event)]), ",\"name\":",
                              Str(absl::StrCat("peak ", viz_internal::HumanBytes(r.peak))),
                              ",\"args\":{\"peak_bytes\":", r.peak.value(), ",\"op\":", Str(v.peak_op_name), "}}"));
  }
  if (r.sim.oom.happened) {
    const SimTime t = r.sim.oom.event >= 0 && r.sim.oom.event < static_cast<int64_t>(n)
                          ? mt[static_cast<size_t>(r.sim.oom.event)]
                          : r.sim.oom.time;
    ev.push_back(absl::StrCat(
        "{\"ph\":\"i\",\"s\":\"p\",\"pid\":1,\"tid\":", kPhaseTid, ",\"ts\":", At(t), ",\"name\":",
        Str(absl::StrCat("out of memory: ", r.sim.oom.buffer, " (", viz_internal::HumanBytes(r.sim.oom.requested),
                         ")")),
        ",\"args\":{\"event\":", r.sim.oom.event, ",\"requested_bytes\":", r.sim.oom.requested.value(),
        ",\"live_bytes\":", r.sim.oom.live.value(), ",\"reserved_bytes\":", r.sim.oom.reserved.value(),
        ",\"capacity_bytes\":", r.sim.oom.capacity.value(), ",\"buffer\":", Str(r.sim.oom.buffer), "}}"));
  }
}

// otherData, then the events.
std::string PerfettoWriter::Finish() const {
  std::string out = "{\"displayTimeUnit\":\"ns\",\n\"otherData\":{";
  absl::StrAppend(&out, "\"program\":", Str(r.program.name), ",\"device\":", Str(r.spec.device.name),
                  ",\"framework\":", Str(r.spec.framework), ",\"allocator\":", Str(r.sim.allocator_name),
                  ",\"peak_bytes\":", r.peak.value(), ",\"capacity_bytes\":", r.capacity.value(),
                  ",\"step_time_ns\":", r.sim.step_time.ns(), ",\"clock\":", Str(rc.name),
                  ",\"time_bounds_us\":[", At(SimTime(0)), ",", At(end), "]");
  if (rc.use) {
    absl::StrAppend(&out, ",\"recorded_time_origin_us\":", Us(rc.origin),
                    ",\"events_without_recorded_time\":", rc.untimed);
  }
  out += "},\n";
  out += "\"traceEvents\":[\n";
  for (size_t k = 0; k < ev.size(); ++k) absl::StrAppend(&out, ev[k], k + 1 < ev.size() ? ",\n" : "\n");
  out += "]}\n";
  return out;
}

std::string PerfettoWriter::Write() {
  WriteThreads();
  WriteSlices();
  WriteRepeatSlices();
  MemoryClock();
  WriteBuffers();
  WriteCounters();
  WriteInstants();
  return Finish();
}

}  // namespace

std::string PerfettoJson(const StepReport& r, const VizOptions& o) { return PerfettoWriter(r, o).Write(); }

absl::Status WritePerfettoTimeline(const StepReport& r, const std::string& path, const VizOptions& o) {
  return WriteFileAtomically(path, PerfettoJson(r, o));
}

}  // namespace gpusim
