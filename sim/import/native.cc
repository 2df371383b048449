#include "sim/import/native.h"

#include <algorithm>

#include "absl/container/flat_hash_map.h"
#include "sim/base/status.h"
#include "absl/strings/str_cat.h"
#include "sim/trace/trace_io.h"
#include "sim/trace/validate.h"

namespace gpusim {



RecordedTrace NativeToRecorded(const Trace& trace, const std::string& source) {
  RecordedTrace r;
  r.metadata.source_file = source;
  r.metadata.format = "native";
  r.metadata.trace_name = trace.name;
  // Addresses for the pre-existing block: above every buffer id.
  int64_t next_address = 0;
  for (const TraceEvent& e : trace.events) next_address = std::max(next_address, e.buffer + 1);
  if (trace.preexisting > Bytes(0)) {
    RecordedMemoryEvent m;
    m.kind = MemoryEventKind::kPreexisting;
    m.address = next_address;
    m.size = trace.preexisting;
    r.memory_events.push_back(m);
  }
  for (const TraceEvent& e : trace.events) {
    if (e.type != EventType::kAlloc && e.type != EventType::kFree) continue;
    RecordedMemoryEvent m;
    m.kind = e.type == EventType::kAlloc ? MemoryEventKind::kAlloc : MemoryEventKind::kFree;
    m.address = e.buffer;
    m.stream = e.stream;
    r.memory_events.push_back(m);
  }
  // Frees carry their alloc's size (ToNativeTrace checks it).
  absl::flat_hash_map<int64_t, Bytes> live;
  size_t j = trace.preexisting > Bytes(0) ? 1 : 0;
  for (const TraceEvent& e : trace.events) {
    if (e.type == EventType::kAlloc) {
      live[e.buffer] = e.size;
      r.memory_events[j++].size = e.size;
    } else if (e.type == EventType::kFree) {
      r.memory_events[j++].size = live[e.buffer];
      live.erase(e.buffer);
    }
  }
  return r;
}

absl::StatusOr<RecordedTrace> ImportNativeTrace(const std::string& path) {
  ASSIGN_OR_RETURN(Trace trace, ReadTraceFile(path));
  absl::Status st = ValidateTrace(trace);
  if (!st.ok()) return absl::InvalidArgumentError(absl::StrCat(path, ": ", st.message()));
  return NativeToRecorded(trace, path);
}

}  // namespace gpusim
