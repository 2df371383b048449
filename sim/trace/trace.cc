#include "sim/trace/trace.h"

namespace gpusim {

bool IsTimed(EventType t) {
  return t == EventType::kCompute || t == EventType::kCopy || t == EventType::kCollective;
}

std::string_view EventTypeName(EventType t) {
  switch (t) {
    case EventType::kAlloc: return "alloc";
    case EventType::kFree: return "free";
    case EventType::kCompute: return "compute";
    case EventType::kCopy: return "copy";
    case EventType::kCollective: return "collective";
    case EventType::kMarker: return "marker";
  }
  return "?";
}

std::string EventWhere(const Trace& trace, size_t i) {
  std::string out;
  if (!trace.source.empty() && i < trace.event_lines.size()) {
    out = trace.source + ":" + std::to_string(trace.event_lines[i]) + ": ";
  }
  const TraceEvent& e = trace.events[i];
  out += "event " + std::to_string(i) + " (" + std::string(EventTypeName(e.type));
  if (!e.name.empty()) out += " " + e.name;
  return out + ")";
}

const std::string* FindMeta(const Trace& trace, std::string_view key) {
  for (const auto& [k, v] : trace.meta) {
    if (k == key) return &v;
  }
  return nullptr;
}

int64_t ExecutedEventIndex(const Trace& trace, int64_t e) {
  if (e < 0) return e;
  int64_t out = e;
  for (const TraceRepeat& r : trace.repeats) {
    if (r.last >= e || r.last < r.first) continue;
    out += (r.times - 1) * (r.last - r.first + 1);
  }
  return out;
}

}  // namespace gpusim
