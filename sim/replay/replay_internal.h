// Internal to sim/replay: what the replay of a recorded stream (replay.cc)
// and the snapshot's address replay (snapshot_replay.cc) share.
#ifndef GPUSIM_SIM_REPLAY_REPLAY_INTERNAL_H_
#define GPUSIM_SIM_REPLAY_REPLAY_INTERNAL_H_

#include "absl/status/status.h"
#include "sim/base/units.h"
#include "sim/import/recorded_trace.h"
#include "sim/replay/replay.h"

namespace gpusim {
namespace replay_internal {

// Fragmentation at the reserved peak: reserved - allocated at the moment
// reserved is at its peak and, among such moments (a warm cache holds its
// peak for long), allocated is highest — the "reserved but unallocated"
// bytes when the cache was used most fully.
struct PeakTracker {
  Bytes peak_reserved{-1};
  Bytes allocated_then{-1};
  Bytes fragmentation;
  template <typename Usage>  // AllocatorStats or AllocatorUsage
  void Observe(const Usage& s) {
    if (s.reserved > peak_reserved || (s.reserved == peak_reserved && s.allocated > allocated_then)) {
      peak_reserved = s.reserved;
      allocated_then = s.allocated;
      fragmentation = s.reserved - s.allocated;
    }
  }
};

// Fills options->capacity when it is 0 (see ReplayOptions::capacity).
absl::Status ResolveCapacity(const RecordedMetadata& meta, ReplayOptions* o);

}  // namespace replay_internal
}  // namespace gpusim

#endif  // GPUSIM_SIM_REPLAY_REPLAY_INTERNAL_H_
