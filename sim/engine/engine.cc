#include "sim/engine/engine.h"

#include <algorithm>
#include <limits>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "sim/base/checked.h"
#include "sim/base/status.h"
#include "sim/device/timing.h"

namespace gpusim {

namespace {

// The charge of one alloc's device calls on `stream` (Note [Allocator time]).
struct AllocCharge {
  SimTime begin;        // when the calls start (after any drain they wait for)
  SimTime end;          // when the stream is free again
  int64_t waited_for = -1;  // the event whose end a drain waited for, or -1
};

AllocCharge ChargeAllocatorActions(const std::vector<AllocatorEvent>& actions, StreamId stream,
                                   const std::vector<SimTime>& stream_ready,
                                   const std::vector<int64_t>& stream_last, const DeviceSpec& d,
                                   SimResult& r) {
  AllocCharge c;
  SimTime t = stream_ready[static_cast<size_t>(stream)];
  SimTime cost(0);
  auto wait_for = [&](size_t s) {
    if (stream_ready[s] > t) {
      t = stream_ready[s];
      c.waited_for = stream_last[s];
    }
  };
  for (const AllocatorEvent& a : actions) {
    switch (a.action) {
      case AllocatorAction::kSegmentAlloc:
        ++r.segment_allocs;
        cost += d.malloc_cost;
        t += d.malloc_cost;
        break;
      case AllocatorAction::kSegmentMap:
        r.pages_mapped += a.pages;
        cost += d.map_page_cost * a.pages;
        t += d.map_page_cost * a.pages;
        break;
      case AllocatorAction::kSegmentFree:
        ++r.segment_frees;
        for (size_t s = 0; s < stream_ready.size(); ++s) wait_for(s);
        cost += d.free_cost;
        t += d.free_cost;
        break;
      case AllocatorAction::kSegmentUnmap:
        r.pages_unmapped += a.pages;
        if (a.stream >= 0 && static_cast<size_t>(a.stream) < stream_ready.size()) {
          wait_for(static_cast<size_t>(a.stream));
        }
        cost += d.unmap_page_cost * a.pages;
        t += d.unmap_page_cost * a.pages;
        break;
      default:
        break;
    }
  }
  c.end = t;
  c.begin = t - cost;
  r.allocator_time += cost;
  r.allocator_sync_wait += c.begin - stream_ready[static_cast<size_t>(stream)];
  return c;
}

// Repeated ranges are in event order, disjoint, within the trace, and
// each stands for at least one iteration.
absl::Status CheckRepeats(const std::vector<TraceRepeat>& reps, size_t n) {
  int64_t prev_last = -1;
  for (const TraceRepeat& rp : reps) {
    if (rp.first <= prev_last || rp.last < rp.first || rp.last >= static_cast<int64_t>(n) || rp.times < 1) {
      return absl::InvalidArgumentError(absl::StrCat("repeated events ", rp.first, "-", rp.last, " x", rp.times,
                                                     ": not a range of the trace's ", n,
                                                     " events after the previous one"));
    }
    prev_last = rp.last;
  }
  return absl::OkStatus();
}

// Note [Checked time] (sim/base/units.h): every time the step reports is
// in range, or the step is refused naming the first event or total that is
// not (sums of in-range durations, an allocator's charges, repeated
// iterations' periods: each checked where it is made, and out-of-range
// results stay so). A step never reports a wrapped time.
absl::Status CheckTimes(const Trace& trace, const SimResult& r) {
  constexpr absl::string_view kWhy =
      " is beyond the 2^62 ns (146 years) a simulated time may be (Note [Checked time] in sim/base/units.h)";
  for (size_t i = 0; i < r.end.size(); ++i) {
    if (!r.start[i].ok() || !r.end[i].ok()) {
      return absl::InvalidArgumentError(absl::StrCat(EventWhere(trace, i), ": its ",
                                                     r.start[i].ok() ? "finish" : "start", kWhy));
    }
  }
  const std::pair<const char*, SimTime> totals[] = {
      {"the step time", r.step_time},
      {"the compute stream's busy time", r.compute_busy},
      {"the collective stream's busy time", r.collective_busy},
      {"the host copies' time", r.copy_busy},
      {"the recompute time", r.recompute_busy},
      {"the host's issue time", r.host_busy},
      {"the host wait", r.host_wait},
      {"the exposed communication", r.exposed_communication},
      {"the exposed host copies", r.exposed_copy},
      {"the allocator time", r.allocator_time},
      {"the allocator's drain waits", r.allocator_sync_wait},
      {"the critical path's compute", r.critical_compute},
      {"the critical path's communication", r.critical_communication},
      {"the critical path's copies", r.critical_copy},
      {"the critical path's allocator calls", r.critical_allocator}};
  for (const auto& [what, t] : totals) {
    if (!t.ok()) return absl::InvalidArgumentError(absl::StrCat(what, " of the step", kWhy));
  }
  for (size_t k = 0; k < r.repeat_periods.size(); ++k) {
    if (!r.repeat_periods[k].ok()) {
      return absl::InvalidArgumentError(absl::StrCat("the period of repeated events ", trace.repeats[k].first, "-",
                                                     trace.repeats[k].last, kWhy));
    }
  }
  return absl::OkStatus();
}

}  // namespace

Bytes FragmentationBytes(const SimResult& r) {
  if (r.allocator_name.empty()) return Bytes(0);  // no allocator: ideal tracking only
  const Bytes outside = r.preexisting_in_allocator ? Bytes(0) : r.preexisting;
  return r.oom.happened ? r.oom.reserved - (r.oom.live - outside)
                        : r.allocator.peak_reserved - (r.peak_live - outside);
}

absl::StatusOr<SimResult> Simulate(const Trace& trace, const DeviceSpec& device, Allocator* allocator,
                                   const AllocatorStartState* start, bool time_by_op) {
  SimResult r;
  const size_t n = trace.events.size();
  r.start.assign(n, SimTime(0));
  r.end.assign(n, SimTime(0));
  // Per-stream arrays are indexed by stream id: refuse an id outside
  // [0, kMaxStreamId] before sizing them (a negative id cast to size_t would
  // index far out of bounds; 2^31-1 would allocate gigabytes).
  StreamId max_stream = 0;
  for (size_t i = 0; i < n; ++i) {
    const StreamId s = trace.events[i].stream;
    if (!IsValidStreamId(s)) {
      return absl::InvalidArgumentError(absl::StrCat("event ", i, " (", std::string(EventTypeName(trace.events[i].type)),
                                                     "): stream ", s, " is not in range 0 to ", kMaxStreamId));
    }
    max_stream = std::max(max_stream, s);
  }
  std::vector<SimTime> stream_ready(static_cast<size_t>(max_stream) + 1, SimTime(0));
  std::vector<int64_t> stream_last(static_cast<size_t>(max_stream) + 1, -1);
  std::vector<int64_t> via(n, -1);  // the event whose end this one's start waited for
  std::vector<bool> on_path(n, false);  // timed, or an alloc charged for device calls

  // Memory state (ideal tracker beside the allocator).
  absl::flat_hash_map<BufferId, std::pair<Bytes, Role>> live;
  Bytes cur = trace.preexisting;
  r.preexisting = cur;
  r.preexisting_in_allocator = allocator != nullptr && start != nullptr && !start->empty();
  r.peak_live = cur;
  std::array<Bytes, kNumRoles> by_role{};
  std::vector<AllocatorEvent> actions;
  // The device's kernel model, looked up (by name) once rather than per
  // event as EventDuration(e, device) does.
  const KernelModel& kernel_model = KernelModelOf(device);
  if (allocator != nullptr) {
    r.allocator_name = std::string(allocator->name());
    allocator->RecordEventsTo(&actions);
  }

  // The allocator's allocated / reserved after each memory event that
  // changed them (for the memory timeline).
  auto record_usage = [&](size_t i) {
    if (allocator == nullptr || r.oom.happened) return;
    const AllocatorUsage u = allocator->usage();
    if (r.allocator_curve.empty() || r.allocator_curve.back().allocated != u.allocated ||
        r.allocator_curve.back().reserved != u.reserved) {
      r.allocator_curve.push_back({static_cast<int64_t>(i), u.allocated, u.reserved});
    }
  };

  // Note [Rolled loop built once] (sim/lower/lower.h): the repeated ranges,
  // each stream's clock before and after each, and the weight of an event
  // (the iterations it stands for).
  const std::vector<TraceRepeat>& reps = trace.repeats;
  RETURN_IF_ERROR(CheckRepeats(reps, n));
  std::vector<std::vector<SimTime>> ready_before(reps.size()), ready_after(reps.size());
  std::vector<std::vector<bool>> active(reps.size(), std::vector<bool>(stream_ready.size(), false));
  size_t rep = 0;  // the first repeat not yet passed
  SimTime host_extra(0), host_wait_extra(0);  // repeated iterations' host time and waits
  auto weight_of = [&](size_t i) -> int64_t {
    return rep < reps.size() && static_cast<int64_t>(i) >= reps[rep].first ? reps[rep].times : 1;
  };

  // One pass in trace order. Events of a stream run in order; memory events
  // take the time their stream reaches them, plus any allocator charge.
  for (size_t i = 0; i < n; ++i) {
    if (rep < reps.size() && static_cast<int64_t>(i) == reps[rep].last + 1) ready_after[rep++] = stream_ready;
    if (rep < reps.size() && static_cast<int64_t>(i) == reps[rep].first) ready_before[rep] = stream_ready;
    const int64_t w = weight_of(i);
    const TraceEvent& e = trace.events[i];
    const size_t stream = static_cast<size_t>(e.stream);
    SimTime& ready = stream_ready[stream];
    if (e.type == EventType::kAlloc) {
      r.start[i] = r.end[i] = ready;
      if (allocator != nullptr && !r.oom.happened && (start == nullptr || !start->Holds(e.buffer))) {
        actions.clear();
        if (!allocator->Alloc(e.buffer, e.size, e.stream)) {
          r.oom = {true, static_cast<int64_t>(i), ready, e.size, cur, allocator->stats().reserved, Bytes(0), e.name};
        }
        const AllocCharge c = ChargeAllocatorActions(actions, e.stream, stream_ready, stream_last, device, r);
        if (c.end > ready) {
          r.start[i] = c.begin;
          r.end[i] = c.end;
          via[i] = c.waited_for >= 0 && c.begin > ready ? c.waited_for : stream_last[stream];
          on_path[i] = true;
          stream_last[stream] = static_cast<int64_t>(i);
          ready = c.end;
          r.step_time = Max(r.step_time, c.end);
        }
      }
      int64_t next_live = 0;
      if (e.size < Bytes(0) || !CheckedAdd(cur.value(), e.size.value(), &next_live)) {
        if (allocator != nullptr) allocator->RecordEventsTo(nullptr);
        return absl::InvalidArgumentError(absl::StrCat("event ", i, " (alloc ", e.name, "): ", e.size.value(),
                                                       " bytes: live bytes would be negative or exceed 2^63 - 1"));
      }
      live[e.buffer] = {e.size, e.role};
      cur = Bytes(next_live);
      by_role[static_cast<size_t>(e.role)] += e.size;
      if (cur > r.peak_live) {
        r.peak_live = cur;
        r.peak_event = static_cast<int64_t>(i);
        r.live_by_role_at_peak = by_role;
      }
      record_usage(i);
      continue;
    }
    if (e.type == EventType::kFree) {
      r.start[i] = r.end[i] = ready;
      auto it = live.find(e.buffer);
      if (it == live.end()) {
        if (allocator != nullptr) allocator->RecordEventsTo(nullptr);
        return absl::InvalidArgumentError(absl::StrCat("event ", i, " (free): buffer ", e.buffer, " is not live"));
      }
      if (allocator != nullptr && !r.oom.happened) allocator->Free(e.buffer);
      cur -= it->second.first;
      by_role[static_cast<size_t>(it->second.second)] -= it->second.first;
      live.erase(it);
      record_usage(i);
      continue;
    }
    if (!IsTimed(e.type)) {
      r.start[i] = r.end[i] = ready;
      continue;
    }
    SimTime start = ready;
    via[i] = stream_last[stream];
    // Note [Host timeline]. A repeated event's further iterations issue
    // while the streams run them: the clock here advances one iteration
    // (as the streams do, both shifted by the periods below), the totals
    // count every iteration.
    const SimTime host_cost = HostIssueTime(e, device);
    r.host_busy += host_cost;
    if (w > 1) host_extra += host_cost * (w - 1);
    for (int64_t dep : e.after) {
      if (dep < 0 || static_cast<size_t>(dep) >= i) {
        if (allocator != nullptr) allocator->RecordEventsTo(nullptr);
        return absl::InvalidArgumentError(absl::StrCat("event ", i, ": after=", dep, " is not an earlier event"));
      }
      if (r.end[static_cast<size_t>(dep)] > start) {
        start = r.end[static_cast<size_t>(dep)];
        via[i] = dep;
      }
    }
    if (host_cost > SimTime(0) && r.host_busy > start) {
      r.host_wait += r.host_busy - start;
      if (w > 1) host_wait_extra += (r.host_busy - start) * (w - 1);
      start = r.host_busy;
    }
    stream_last[stream] = static_cast<int64_t>(i);
    on_path[i] = true;
    if (w > 1) active[rep][stream] = true;
    const SimTime dur = EventDuration(e, device, kernel_model);
    r.start[i] = start;
    r.end[i] = start + dur;
    if (const std::string why = UnrunnableReason(e, device); !why.empty()) {
      if (allocator != nullptr) allocator->RecordEventsTo(nullptr);
      return absl::InvalidArgumentError(absl::StrCat(EventWhere(trace, i), ": cannot run: ", why));
    }
    if (!dur.ok() || !r.end[i].ok() || !(dur * w).ok()) {  // Note [Checked time]
      if (allocator != nullptr) allocator->RecordEventsTo(nullptr);
      return absl::InvalidArgumentError(absl::StrCat(
          EventWhere(trace, i), ": ",
          !dur.ok() ? "its duration"
                    : !r.end[i].ok() ? absl::StrCat("its finish (start ", start.ns(), " ns + ", dur.ns(), " ns)")
                                     : absl::StrCat("its time over ", w, " iterations"),
          " is beyond the 2^62 ns (146 years) a simulated time may be (Note [Checked time] in sim/base/units.h): ",
          DescribeDuration(e, device)));
    }
    ready = r.end[i];
    r.step_time = Max(r.step_time, r.end[i]);
    // Busy times and FLOPs count every iteration an event stands for.
    const SimTime busy = dur * w;
    const double flops = e.flops * static_cast<double>(w);
    if (time_by_op) {
      SimResult::OpTime& t = r.time_by_op[{e.kind, EventOpName(e)}];
      t.events += w;
      t.busy += busy;
      t.flops += flops;
      t.bytes += static_cast<double>((e.bytes_read + e.bytes_written).value()) * static_cast<double>(w);
    }
    if (e.type == EventType::kCollective) r.collective_busy += busy;
    else if (e.type == EventType::kCopy) {
      r.copy_busy += busy;
      if (e.kind == OpKind::kDeviceToHost) {
        r.copy_to_host += busy;
        r.bytes_to_host += e.bytes_read * w;
      } else if (e.kind == OpKind::kHostToDevice) {
        r.copy_to_device += busy;
        r.bytes_to_device += e.bytes_read * w;
      }
    } else {
      r.compute_busy += busy;
      r.flops += flops;
      if (e.recompute) r.recompute_busy += busy;
      else r.model_flops += flops;
    }
  }
  if (rep < reps.size()) ready_after[rep++] = stream_ready;  // a range ending the trace
  r.host_busy += host_extra;
  r.host_wait += host_wait_extra;
  // Each repeated range advanced every stream it ran on by one period (the
  // steady iteration's): the iterations it stands for beyond the one run
  // take (times - 1) more periods.
  // A range whose streams advanced by different amounts is not a steady
  // iteration (a stream still catching up): charging it would be a guess,
  // so it is refused as the builder's error.
  std::vector<SimTime> period(reps.size(), SimTime(-1));
  for (size_t k = 0; k < reps.size(); ++k) {
    for (size_t s = 0; s < stream_ready.size(); ++s) {
      if (!active[k][s]) continue;
      const SimTime d = ready_after[k][s] - ready_before[k][s];
      if (period[k].ns() >= 0 && d != period[k]) {
        if (allocator != nullptr) allocator->RecordEventsTo(nullptr);
        return absl::InternalError(absl::StrCat("repeated events ", reps[k].first, "-", reps[k].last,
                                                " are not a steady iteration: stream ", s, " advanced ", d.ns(),
                                                " ns, another ", period[k].ns(), " ns"));
      }
      period[k] = d;
    }
    period[k] = Max(period[k], SimTime(0));
  }
  r.repeat_periods = period;
  if (allocator != nullptr) allocator->RecordEventsTo(nullptr);
  // Exposed communication (and host copies): time on those streams during
  // which the compute stream is idle (interval overlap with compute's busy
  // set), within [lo, hi). A copy issued on the compute stream itself
  // overlaps nothing, so it is wholly exposed. Measured on the timeline as
  // run, each repeated range once; a repeated range's further iterations
  // each add one period's worth, measured over one period from its start.
  {
    std::vector<std::pair<SimTime, SimTime>> comp, coll, copy;
    for (size_t i = 0; i < n; ++i) {
      const TraceEvent& e = trace.events[i];
      if (e.type == EventType::kCompute) comp.push_back({r.start[i], r.end[i]});
      else if (e.type == EventType::kCollective) coll.push_back({r.start[i], r.end[i]});
      else if (e.type == EventType::kCopy) copy.push_back({r.start[i], r.end[i]});
    }
    // (Each stream runs its events in order, so these come mostly sorted
    // already; equal pairs are alike, so skipping the sort then changes
    // nothing.)
    for (auto* v : {&comp, &coll, &copy}) {
      if (!std::is_sorted(v->begin(), v->end())) std::sort(v->begin(), v->end());
    }
    auto exposed = [&](const std::vector<std::pair<SimTime, SimTime>>& busy, SimTime lo, SimTime hi) {
      SimTime total(0);
      size_t j = 0;
      for (auto [s0, e0] : busy) {
        // Sum of [cs,ce) minus its overlap with compute intervals.
        const SimTime cs = Max(s0, lo), ce = e0 < hi ? e0 : hi;
        if (!(cs < ce)) continue;
        SimTime covered(0);
        while (j < comp.size() && comp[j].second <= cs) ++j;
        for (size_t k = j; k < comp.size() && comp[k].first < ce; ++k) {
          SimTime a = Max(cs, comp[k].first);
          SimTime b = comp[k].second < ce ? comp[k].second : ce;
          if (a < b) covered += b - a;
        }
        total += (ce - cs) - covered;
      }
      return total;
    };
    const SimTime all_lo(0), all_hi(std::numeric_limits<int64_t>::max());
    r.exposed_communication = exposed(coll, all_lo, all_hi);
    r.exposed_copy = exposed(copy, all_lo, all_hi);
    for (size_t k = 0; k < reps.size(); ++k) {
      SimTime lo = all_hi;
      for (size_t s = 0; s < stream_ready.size(); ++s) {
        if (active[k][s] && ready_before[k][s] < lo) lo = ready_before[k][s];
      }
      if (lo == all_hi) continue;
      const int64_t more = reps[k].times - 1;
      r.exposed_communication += exposed(coll, lo, lo + period[k]) * more;
      r.exposed_copy += exposed(copy, lo, lo + period[k]) * more;
    }
  }
  // The events after a repeated range start its further iterations' time
  // later.
  if (!reps.empty()) {
    SimTime shift(0);
    size_t k = 0;
    r.step_time = SimTime(0);
    for (size_t i = 0; i < n; ++i) {
      while (k < reps.size() && static_cast<int64_t>(i) > reps[k].last) {
        shift += period[k] * (reps[k].times - 1);
        ++k;
      }
      r.start[i] += shift;
      r.end[i] += shift;
      if (on_path[i]) r.step_time = Max(r.step_time, r.end[i]);
    }
    if (r.oom.happened) r.oom.time = r.start[static_cast<size_t>(r.oom.event)];
  }
  {
    int64_t last = -1;
    for (size_t i = 0; i < n; ++i) {
      if (on_path[i] && (last < 0 || r.end[i] > r.end[static_cast<size_t>(last)])) {
        last = static_cast<int64_t>(i);
      }
    }
    // A repeated range's events on the path are on it in every iteration.
    size_t k = reps.size();
    for (int64_t i = last; i >= 0; i = via[static_cast<size_t>(i)]) {
      const TraceEvent& e = trace.events[static_cast<size_t>(i)];
      while (k > 0 && reps[k - 1].first > i) --k;
      const int64_t w = k > 0 && reps[k - 1].last >= i ? reps[k - 1].times : 1;
      const SimTime d = (r.end[static_cast<size_t>(i)] - r.start[static_cast<size_t>(i)]) * w;
      r.critical_events += w;
      if (e.type == EventType::kAlloc) r.critical_allocator += d;
      else if (e.type == EventType::kCollective) r.critical_communication += d;
      else if (e.type == EventType::kCopy) r.critical_copy += d;
      else r.critical_compute += d;
    }
  }

  // Buffers live at the peak: replay up to the peak event.
  if (r.peak_event >= 0) {
    absl::flat_hash_map<BufferId, bool> at;
    for (int64_t i = 0; i <= r.peak_event; ++i) {
      const TraceEvent& e = trace.events[static_cast<size_t>(i)];
      if (e.type == EventType::kAlloc) at[e.buffer] = true;
      else if (e.type == EventType::kFree) at.erase(e.buffer);
    }
    for (const auto& [id, unused] : at) r.live_at_peak.push_back(id);
    std::sort(r.live_at_peak.begin(), r.live_at_peak.end());
  }
  if (allocator != nullptr) r.allocator = allocator->stats();
  RETURN_IF_ERROR(CheckTimes(trace, r));
  return r;
}

}  // namespace gpusim
