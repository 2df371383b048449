// Invariants every simulated step keeps, whatever the (valid) input: used by
// the pipeline and replay fuzzers and by tests/step_property_test.cc.
// Returns the first violation, or "" when all hold.
#ifndef GPUSIM_TESTS_FUZZ_STEP_INVARIANTS_H_
#define GPUSIM_TESTS_FUZZ_STEP_INVARIANTS_H_

#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "sim/engine/engine.h"
#include "sim/trace/trace.h"

namespace gpusim::fuzz {

// The engine's result against the trace it ran: every byte figure is
// non-negative, the peak is at least every live set (recomputed here from
// the trace), reserved >= allocated now, at the peaks and at every sample of
// the allocator curve, and fragmentation is non-negative.
inline std::string SimInvariantViolation(const Trace& trace, const SimResult& r) {
  const AllocatorStats& a = r.allocator;
  for (const auto& [name, v] :
       {std::pair<const char*, Bytes>{"peak_live", r.peak_live}, {"allocated", a.allocated},
        {"reserved", a.reserved}, {"peak_allocated", a.peak_allocated}, {"peak_reserved", a.peak_reserved},
        {"requested", a.requested}, {"fragmentation", FragmentationBytes(r)}, {"bytes_to_host", r.bytes_to_host},
        {"bytes_to_device", r.bytes_to_device}}) {
    if (v < Bytes(0)) return absl::StrCat(name, " is negative: ", v.value());
  }
  for (size_t k = 0; k < r.live_by_role_at_peak.size(); ++k) {
    if (r.live_by_role_at_peak[k] < Bytes(0)) return absl::StrCat("live bytes of role ", k, " at the peak < 0");
  }
  if (a.reserved < a.allocated) return "reserved < allocated";
  if (a.peak_reserved < a.peak_allocated) return "peak reserved < peak allocated";
  for (const AllocatorSample& s : r.allocator_curve) {
    if (s.reserved < s.allocated) return absl::StrCat("reserved < allocated after event ", s.event);
    if (s.allocated < Bytes(0)) return absl::StrCat("allocated < 0 after event ", s.event);
  }
  absl::flat_hash_map<BufferId, Bytes> live;
  Bytes cur = trace.preexisting;
  for (size_t i = 0; i < trace.events.size(); ++i) {
    const TraceEvent& e = trace.events[i];
    if (e.type == EventType::kAlloc) {
      live[e.buffer] = e.size;
      cur += e.size;
    } else if (e.type == EventType::kFree) {
      auto it = live.find(e.buffer);
      if (it != live.end()) {
        cur -= it->second;
        live.erase(it);
      }
    }
    if (cur > r.peak_live) return absl::StrCat("live set after event ", i, " exceeds the peak");
  }
  if (r.step_time < SimTime(0)) return "negative step time";
  return "";
}

}  // namespace gpusim::fuzz

#endif  // GPUSIM_TESTS_FUZZ_STEP_INVARIANTS_H_
