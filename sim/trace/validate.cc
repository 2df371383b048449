#include "sim/trace/validate.h"

#include <algorithm>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "sim/base/str_cat.h"

namespace gpusim {

using str_internal::Append;
using str_internal::Cat;
using str_internal::Join;
namespace {

struct BufferState {
  int64_t alloc_event = -1;
  int64_t free_event = -1;  // -1 while live
  Bytes size;
};

// a + b, clamped to the int64 range (ComputeTraceStats is best effort).
Bytes SaturatingAdd(Bytes a, Bytes b) {
  int64_t r = 0;
  if (__builtin_add_overflow(a.value(), b.value(), &r)) {
    return Bytes(b.value() > 0 ? INT64_MAX : INT64_MIN);
  }
  return Bytes(r);
}

// "[FILE:LINE: ]event I (TYPE): WHY" (the line when the trace was read
// from a file: issue 27 asked that semantic errors name it).
absl::Status EventError(const Trace& trace, size_t i, const TraceEvent& e, std::string_view why) {
  std::string where;
  if (!trace.source.empty() && i < trace.event_lines.size()) {
    where = Cat(trace.source, ":", trace.event_lines[i], ": ");
  }
  return absl::InvalidArgumentError(Cat(where, "event ", i, " (", EventTypeName(e.type), "): ", why));
}

}  // namespace

absl::Status ValidateTrace(const Trace& trace) {
  if (trace.preexisting < Bytes(0)) {
    return absl::InvalidArgumentError(Cat(
        "trace: negative preexisting bytes ", trace.preexisting.value()));
  }
  absl::flat_hash_set<StreamId> streams;
  std::vector<StreamId> declared;
  for (const StreamInfo& s : trace.streams) {
    if (!IsValidStreamId(s.id)) {
      return absl::InvalidArgumentError(Cat("stream ", s.id, ": not in range 0 to ", kMaxStreamId));
    }
    if (!streams.insert(s.id).second) {
      return absl::InvalidArgumentError(
          Cat("stream ", s.id, ": declared twice"));
    }
    declared.push_back(s.id);
  }
  for (size_t i = 0; i < trace.frames.size(); ++i) {
    if (trace.frames[i].line < 0) {
      return absl::InvalidArgumentError(
          Cat("frame ", i, ": negative line number ", trace.frames[i].line));
    }
  }
  absl::flat_hash_map<BufferId, BufferState> buffers;
  int64_t live_bytes = trace.preexisting.value();
  for (size_t i = 0; i < trace.events.size(); ++i) {
    const TraceEvent& e = trace.events[i];
    const int64_t idx = static_cast<int64_t>(i);
    if (!IsValidStreamId(e.stream)) {
      return EventError(trace, i, e, Cat("stream ", e.stream, " is not in range 0 to ", kMaxStreamId));
    }
    if (!streams.empty() && !streams.contains(e.stream)) {
      return EventError(trace, i, e, Cat("stream ", e.stream,
                                           " is not declared (declared: ",
                                           Join(declared, ", "), ")"));
    }
    if (e.size < Bytes(0)) {
      return EventError(trace, i, e, Cat("negative size ", e.size.value()));
    }
    if (e.bytes_read < Bytes(0) || e.bytes_written < Bytes(0)) {
      return EventError(trace, i, e, Cat("negative bytes read/written (",
                                           e.bytes_read.value(), "/",
                                           e.bytes_written.value(), ")"));
    }
    for (int64_t a : e.after) {
      if (a < 0 || a >= idx) {
        return EventError(trace, i, e, Cat("after= names event ", a,
                                             ", which is not an earlier event"));
      }
      const TraceEvent& dep = trace.events[static_cast<size_t>(a)];
      if (!IsTimed(dep.type)) {
        return EventError(trace, i, e, Cat("after= names event ", a, " (",
                                             EventTypeName(dep.type),
                                             "), which is not a timed event"));
      }
    }
    for (BufferId u : e.uses) {
      auto it = buffers.find(u);
      if (it == buffers.end()) {
        return EventError(trace, i, e, Cat("uses buffer ", u,
                                             ", which is not allocated before this event"));
      }
      if (it->second.free_event >= 0) {
        return EventError(trace, i, e, Cat("uses buffer ", u,
                                             ", which was freed at event ",
                                             it->second.free_event));
      }
    }
    for (int32_t f : e.stack) {
      if (f < 0 || static_cast<size_t>(f) >= trace.frames.size()) {
        return EventError(trace, i, e, Cat("stack names frame index ", f, ", but the trace has ",
                                    trace.frames.size(), " frames"));
      }
    }
    if (e.type == EventType::kAlloc || e.type == EventType::kFree) {
      if (e.buffer < 0) {
        return EventError(trace, i, e, Cat("negative buffer id ", e.buffer));
      }
    }
    if (e.type == EventType::kAlloc) {
      auto [it, inserted] = buffers.try_emplace(e.buffer);
      if (!inserted && it->second.free_event < 0) {
        return EventError(trace, i, e, Cat("buffer ", e.buffer,
                                             " is still live (allocated at event ",
                                             it->second.alloc_event, ")"));
      }
      it->second = BufferState{idx, -1, e.size};
      // Replay sums live bytes in int64 (the engine, allocators, stats).
      if (__builtin_add_overflow(live_bytes, e.size.value(), &live_bytes)) {
        return EventError(trace, i, e, "live bytes exceed 2^63 - 1");
      }
    } else if (e.type == EventType::kFree) {
      auto it = buffers.find(e.buffer);
      if (it == buffers.end()) {
        return EventError(trace, i, e, Cat("free of unknown buffer ", e.buffer));
      }
      if (it->second.free_event >= 0) {
        return EventError(trace, i, e, Cat(
            "double free of buffer ", e.buffer, " (allocated at event ",
            it->second.alloc_event, ", freed at event ", it->second.free_event, ")"));
      }
      it->second.free_event = idx;
      live_bytes -= it->second.size.value();
    }
  }
  return ValidateWarmup(trace);
}

// Note [Warm-up history] (sim/replay/replay.cc): the history's buffers are
// each allocated once and freed at most once; what it leaves live is what
// the start state (marker start_state .. marker step) allocates, size for
// size, so that the window's allocations of those buffers are the blocks the
// history placed.
absl::Status ValidateWarmup(const Trace& trace) {
  if (trace.warmup.empty()) return absl::OkStatus();
  // The file, as ValidateTrace's event errors name it.
  const std::string where = trace.source.empty() ? "" : Cat(trace.source, ": ");
  absl::flat_hash_map<BufferId, Bytes> live;
  absl::flat_hash_set<BufferId> seen;
  int64_t live_bytes = 0;
  for (size_t i = 0; i < trace.warmup.size(); ++i) {
    const WarmupOp& w = trace.warmup[i];
    if (w.kind == WarmupOp::Kind::kCompute) continue;
    if (w.buffer < 0) return absl::InvalidArgumentError(Cat(where, "warm-up op ", i, ": negative buffer id ", w.buffer));
    if (w.kind == WarmupOp::Kind::kAlloc) {
      if (!seen.insert(w.buffer).second) {
        return absl::InvalidArgumentError(Cat(where, "warm-up op ", i, ": buffer ", w.buffer, " allocated again"));
      }
      if (w.size <= Bytes(0)) {
        return absl::InvalidArgumentError(Cat(where, "warm-up op ", i, ": buffer ", w.buffer, ": size ", w.size.value(),
                                              " is not positive"));
      }
      if (__builtin_add_overflow(live_bytes, w.size.value(), &live_bytes)) {
        return absl::InvalidArgumentError(Cat(where, "warm-up op ", i, ": live bytes exceed 2^63 - 1"));
      }
      live[w.buffer] = w.size;
    } else {
      auto it = live.find(w.buffer);
      if (it == live.end()) {
        return absl::InvalidArgumentError(Cat(where, "warm-up op ", i, ": free of buffer ", w.buffer, ", which is not live"));
      }
      live_bytes -= it->second.value();
      live.erase(it);
    }
  }
  absl::flat_hash_map<BufferId, Bytes> start;
  bool in_start = false, have_start = false;
  for (const TraceEvent& e : trace.events) {
    if (e.type == EventType::kMarker && e.name == "start_state") in_start = have_start = true;
    if (e.type == EventType::kMarker && e.name == "step" && in_start) break;
    if (in_start && e.type == EventType::kAlloc) start[e.buffer] = e.size;
  }
  if (!have_start) {
    return absl::InvalidArgumentError(Cat(where,
        "warm-up lines need the window's start state (a 'marker start_state' ... 'marker step' section) for the "
        "buffers they leave live"));
  }
  std::vector<BufferId> ids;
  for (const auto& [id, size] : live) ids.push_back(id);
  std::sort(ids.begin(), ids.end());
  for (BufferId id : ids) {
    auto it = start.find(id);
    if (it == start.end()) {
      return absl::InvalidArgumentError(Cat(where, "warm-up: buffer ", id, " is live at the end of the warm-up, but the "
                                            "start state does not allocate it"));
    }
    if (it->second != live[id]) {
      return absl::InvalidArgumentError(Cat(where, "warm-up: buffer ", id, " is ", live[id].value(),
                                            " bytes at the end of the warm-up and ", it->second.value(),
                                            " in the start state"));
    }
  }
  return absl::OkStatus();
}

TraceStats ComputeTraceStats(const Trace& trace) {
  TraceStats stats;
  absl::flat_hash_map<BufferId, Bytes> live;
  Bytes live_bytes = trace.preexisting;
  stats.peak_live = live_bytes;
  for (size_t i = 0; i < trace.events.size(); ++i) {
    const TraceEvent& e = trace.events[i];
    ++stats.events;
    if (IsTimed(e.type)) ++stats.timed;
    if (e.type == EventType::kAlloc) {
      ++stats.allocs;
      auto [it, inserted] = live.try_emplace(e.buffer, e.size);
      if (!inserted) {
        live_bytes = SaturatingAdd(live_bytes, Bytes(0) - it->second);
        it->second = e.size;
      }
      live_bytes = SaturatingAdd(live_bytes, e.size);
      if (live_bytes > stats.peak_live) {
        stats.peak_live = live_bytes;
        stats.peak_event = static_cast<int64_t>(i);
      }
    } else if (e.type == EventType::kFree) {
      ++stats.frees;
      auto it = live.find(e.buffer);
      if (it != live.end()) {
        live_bytes = SaturatingAdd(live_bytes, Bytes(0) - it->second);
        live.erase(it);
      }
    }
  }
  return stats;
}

}  // namespace gpusim
