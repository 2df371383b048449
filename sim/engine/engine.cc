#include "sim/engine/engine.h"

#include <algorithm>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "sim/device/timing.h"

namespace gpusim {

absl::StatusOr<SimResult> Simulate(const Trace& trace, const DeviceSpec& device, Allocator* allocator) {
  SimResult r;
  const size_t n = trace.events.size();
  r.start.assign(n, SimTime(0));
  r.end.assign(n, SimTime(0));
  StreamId max_stream = 0;
  for (const TraceEvent& e : trace.events) max_stream = std::max(max_stream, e.stream);
  std::vector<SimTime> stream_ready(static_cast<size_t>(max_stream) + 1, SimTime(0));
  std::vector<int64_t> stream_last(static_cast<size_t>(max_stream) + 1, -1);
  std::vector<int64_t> via(n, -1);  // the event whose end this one's start waited for

  // Pass 1: time. Events of a stream run in order; memory events take the
  // time their stream reaches them.
  for (size_t i = 0; i < n; ++i) {
    const TraceEvent& e = trace.events[i];
    SimTime& ready = stream_ready[static_cast<size_t>(e.stream)];
    if (!IsTimed(e.type)) {
      r.start[i] = r.end[i] = ready;
      continue;
    }
    SimTime start = ready;
    via[i] = stream_last[static_cast<size_t>(e.stream)];
    for (int64_t dep : e.after) {
      if (dep < 0 || static_cast<size_t>(dep) >= i) {
        return absl::InvalidArgumentError(absl::StrCat("event ", i, ": after=", dep, " is not an earlier event"));
      }
      if (r.end[static_cast<size_t>(dep)] > start) {
        start = r.end[static_cast<size_t>(dep)];
        via[i] = dep;
      }
    }
    stream_last[static_cast<size_t>(e.stream)] = static_cast<int64_t>(i);
    const SimTime dur = EventDuration(e, device);
    r.start[i] = start;
    r.end[i] = start + dur;
    ready = r.end[i];
    r.step_time = Max(r.step_time, r.end[i]);
    if (e.type == EventType::kCollective) r.collective_busy += dur;
    else if (e.type == EventType::kCopy) {
      r.copy_busy += dur;
      if (e.kind == OpKind::kDeviceToHost) {
        r.copy_to_host += dur;
        r.bytes_to_host += e.bytes_read;
      } else if (e.kind == OpKind::kHostToDevice) {
        r.copy_to_device += dur;
        r.bytes_to_device += e.bytes_read;
      }
    } else {
      r.compute_busy += dur;
      r.flops += e.flops;
      if (e.recompute) r.recompute_busy += dur;
      else r.model_flops += e.flops;
    }
  }
  {
    int64_t last = -1;
    for (size_t i = 0; i < n; ++i) {
      if (IsTimed(trace.events[i].type) && (last < 0 || r.end[i] > r.end[static_cast<size_t>(last)])) {
        last = static_cast<int64_t>(i);
      }
    }
    for (int64_t i = last; i >= 0; i = via[static_cast<size_t>(i)]) {
      const TraceEvent& e = trace.events[static_cast<size_t>(i)];
      const SimTime d = r.end[static_cast<size_t>(i)] - r.start[static_cast<size_t>(i)];
      ++r.critical_events;
      if (e.type == EventType::kCollective) r.critical_communication += d;
      else if (e.type == EventType::kCopy) r.critical_copy += d;
      else r.critical_compute += d;
    }
  }
  // Exposed communication (and host copies): time on those streams during
  // which the compute stream is idle (interval overlap with compute's busy
  // set). A copy issued on the compute stream itself overlaps nothing, so it
  // is wholly exposed.
  {
    std::vector<std::pair<SimTime, SimTime>> comp, coll, copy;
    for (size_t i = 0; i < n; ++i) {
      const TraceEvent& e = trace.events[i];
      if (e.type == EventType::kCompute) comp.push_back({r.start[i], r.end[i]});
      else if (e.type == EventType::kCollective) coll.push_back({r.start[i], r.end[i]});
      else if (e.type == EventType::kCopy) copy.push_back({r.start[i], r.end[i]});
    }
    std::sort(comp.begin(), comp.end());
    auto exposed = [&](std::vector<std::pair<SimTime, SimTime>>& busy) {
      std::sort(busy.begin(), busy.end());
      SimTime total(0);
      size_t j = 0;
      for (auto [cs, ce] : busy) {
        // Sum of [cs,ce) minus its overlap with compute intervals.
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
    r.exposed_communication = exposed(coll);
    r.exposed_copy = exposed(copy);
  }

  // Pass 2: memory, in trace order.
  absl::flat_hash_map<BufferId, std::pair<Bytes, Role>> live;
  absl::flat_hash_map<BufferId, std::string> names;
  Bytes cur = trace.preexisting;
  r.peak_live = cur;
  std::array<Bytes, kNumRoles> by_role{};
  if (allocator != nullptr) r.allocator_name = std::string(allocator->name());
  for (size_t i = 0; i < n; ++i) {
    const TraceEvent& e = trace.events[i];
    if (e.type == EventType::kAlloc) {
      if (allocator != nullptr && !r.oom.happened && !allocator->Alloc(e.buffer, e.size, e.stream)) {
        r.oom = {true, static_cast<int64_t>(i), r.start[i], e.size, cur, allocator->stats().reserved,
                 Bytes(0), e.name};
      }
      live[e.buffer] = {e.size, e.role};
      cur += e.size;
      by_role[static_cast<size_t>(e.role)] += e.size;
      if (cur > r.peak_live) {
        r.peak_live = cur;
        r.peak_event = static_cast<int64_t>(i);
        r.live_by_role_at_peak = by_role;
      }
    } else if (e.type == EventType::kFree) {
      auto it = live.find(e.buffer);
      if (it == live.end()) {
        return absl::InvalidArgumentError(absl::StrCat("event ", i, " (free): buffer ", e.buffer, " is not live"));
      }
      if (allocator != nullptr && !r.oom.happened) allocator->Free(e.buffer);
      cur -= it->second.first;
      by_role[static_cast<size_t>(it->second.second)] -= it->second.first;
      live.erase(it);
    } else {
      continue;
    }
    if (allocator != nullptr && !r.oom.happened) {
      const AllocatorUsage u = allocator->usage();
      if (r.allocator_curve.empty() || r.allocator_curve.back().allocated != u.allocated ||
          r.allocator_curve.back().reserved != u.reserved) {
        r.allocator_curve.push_back({static_cast<int64_t>(i), u.allocated, u.reserved});
      }
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
  return r;
}

}  // namespace gpusim
