// The engine: a discrete-event replay of one Trace on one device.
//
// Memory events are replayed in trace order through the configured
// allocator, with an ideal (no-fragmentation) tracker beside it, so
// fragmentation = the allocator's peak − the ideal peak. Running out of
// device memory is a result (where, what was requested, what was live).
//
// Timed events run on streams: each starts when its stream is free and every
// event in its `after` list has finished, and lasts EventDuration(). The
// step time is the last finish; busy and exposed times are kept per stream.
#ifndef GPUSIM_SIM_ENGINE_ENGINE_H_
#define GPUSIM_SIM_ENGINE_ENGINE_H_

#include <array>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "sim/alloc/allocator.h"
#include "sim/config/spec.h"
#include "sim/trace/trace.h"

namespace gpusim {

struct OomInfo {
  bool happened = false;
  int64_t event = -1;    // trace index of the failing alloc
  SimTime time;          // simulated time it was issued
  Bytes requested;
  Bytes live;            // ideal live bytes just before it
  Bytes reserved;        // allocator reserved bytes then
  Bytes capacity;
  std::string buffer;    // name of the requested buffer
};

// The allocator's counters after one memory event.
struct AllocatorSample {
  int64_t event = -1;  // trace index
  Bytes allocated;
  Bytes reserved;
};

struct SimResult {
  // Memory (ideal tracker).
  Bytes peak_live;
  int64_t peak_event = -1;
  std::array<Bytes, kNumRoles> live_by_role_at_peak{};
  std::vector<BufferId> live_at_peak;  // buffers live at the ideal peak
  // Allocator.
  std::string allocator_name;
  AllocatorStats allocator;
  // Allocated and reserved after each memory event where either changed
  // (and after the first), until an out-of-memory; empty without an
  // allocator. The memory timeline draws it.
  std::vector<AllocatorSample> allocator_curve;
  OomInfo oom;
  // Time.
  std::vector<SimTime> start, end;     // per event (memory events: issue time)
  SimTime step_time;
  SimTime compute_busy;                // compute stream busy
  SimTime collective_busy;             // collective stream busy
  SimTime copy_busy;                   // host copies (PCIe), whatever stream they ran on
  SimTime copy_to_host;                // of which device→host
  SimTime copy_to_device;              // of which host→device
  Bytes bytes_to_host, bytes_to_device;  // PCIe bytes each way
  SimTime recompute_busy;              // compute spent on rematerialisation
  SimTime exposed_communication;       // collective time not hidden by compute
  SimTime exposed_copy;                // host-copy time not hidden by compute
  // The critical path: the chain of timed events, each starting when the
  // one before it ended (on its stream or as a dependency), that ends last.
  int64_t critical_events = 0;
  SimTime critical_compute;            // compute time on the critical path
  SimTime critical_communication;      // collective time on it
  SimTime critical_copy;               // host-copy time on it
  double flops = 0;                    // all compute flops
  double model_flops = 0;              // flops excluding recompute
};

// REQUIRES: trace passed ValidateTrace. `allocator` is consulted for every
// memory event; it may be null (ideal tracking only).
absl::StatusOr<SimResult> Simulate(const Trace& trace, const DeviceSpec& device, Allocator* allocator);

}  // namespace gpusim

#endif  // GPUSIM_SIM_ENGINE_ENGINE_H_
