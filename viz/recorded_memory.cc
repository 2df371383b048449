// A recorded trace's memory counters, placed on the native trace made from
// it, so the memory timeline can draw what the recording said beside what
// the simulation replays.
//
// Pairing. ToNativeTrace (sim/import/recorded_trace.cc) emits, in recorded
// order: first one alloc per block live through the whole recording
// (ConversionStats::allocs_live_through) and one per block freed but never
// allocated in it (ConversionStats::allocs_before_recording, hoisted to the head),
// then for each recorded alloc an optional implicit free of the block still
// live at its address followed by the alloc, and for each recorded free one
// free, with timed events interleaved. Walking both in order therefore pairs
// every recorded alloc/free with its native event; any disagreement is an
// error rather than a silently shifted curve.
#include "absl/strings/str_cat.h"
#include "sim/import/recorded_trace.h"
#include "viz/viz.h"

namespace gpusim {

absl::StatusOr<std::vector<RecordedMemorySample>> RecordedMemoryCounters(const RecordedTrace& recorded,
                                                                         const Trace& native,
                                                                         const ConversionStats& stats) {
  std::vector<RecordedMemorySample> out;
  int32_t device = 0;
  bool seen = false;
  for (const RecordedMemoryEvent& m : recorded.memory_events) {
    if (seen && m.device != device) {
      return absl::InvalidArgumentError("recorded memory events on several devices; counters not paired");
    }
    device = m.device;
    seen = true;
  }
  const ToNativeOptions defaults;
  const auto& ev = native.events;
  size_t k = 0;
  int64_t head = stats.allocs_live_through + stats.allocs_before_recording;
  auto skip_timed = [&] {
    while (k < ev.size() && ev[k].type != EventType::kAlloc && ev[k].type != EventType::kFree) ++k;
  };
  for (; head > 0; --head) {
    skip_timed();
    if (k >= ev.size() || ev[k].type != EventType::kAlloc) {
      return absl::InvalidArgumentError("native trace does not start with the allocs of blocks live before recording");
    }
    ++k;
  }
  for (size_t j = 0; j < recorded.memory_events.size(); ++j) {
    const RecordedMemoryEvent& m = recorded.memory_events[j];
    const bool is_alloc = m.kind == MemoryEventKind::kAlloc || m.kind == MemoryEventKind::kPreexisting;
    const bool is_free = m.kind == MemoryEventKind::kFree || m.kind == defaults.snapshot_free;
    if (m.device != device || (!is_alloc && !is_free)) continue;
    skip_timed();
    if (is_alloc && k < ev.size() && ev[k].type == EventType::kFree && m.address.has_value()) {
      ++k;  // the implicit free of the block live at this address
      skip_timed();
    }
    const EventType want = is_alloc ? EventType::kAlloc : EventType::kFree;
    if (k >= ev.size() || ev[k].type != want) {
      return absl::InvalidArgumentError(absl::StrCat("recorded memory event ", j, " (",
                                                     std::string(MemoryEventKindName(m.kind)),
                                                     ") has no matching native event"));
    }
    if (m.total_allocated.has_value() || m.total_reserved.has_value()) {
      out.push_back({static_cast<int64_t>(k), m.total_allocated, m.total_reserved});
    }
    ++k;
  }
  return out;
}

std::vector<SimTime> RecordedEventTimes(const RecordedTrace& recorded, const std::vector<int64_t>& source_index) {
  std::vector<SimTime> out(source_index.size(), SimTime(-1));
  for (size_t e = 0; e < source_index.size(); ++e) {
    const int64_t k = source_index[e];
    if (k >= 0 && static_cast<size_t>(k) < recorded.memory_events.size()) {
      out[e] = recorded.memory_events[static_cast<size_t>(k)].time;
    }
  }
  return out;
}

}  // namespace gpusim
