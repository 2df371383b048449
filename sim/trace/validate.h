// Semantic checks and summary statistics for a Trace. ReadTrace checks
// syntax only; ValidateTrace checks that the trace can be replayed: buffers
// are allocated before use and freed once, dependencies point backwards at
// timed events, streams are declared. ComputeTraceStats summarises it.
#ifndef GPUSIM_SIM_TRACE_VALIDATE_H_
#define GPUSIM_SIM_TRACE_VALIDATE_H_

#include <cstdint>

#include "absl/status/status.h"
#include "sim/base/units.h"
#include "sim/trace/trace.h"

namespace gpusim {

// Returns the first problem found, as InvalidArgument, naming the 0-based
// event index, its type and the reason, e.g.
//   "event 5 (free): double free of buffer 3 (allocated at event 1, freed at
//    event 4)".
// Rejects: negative byte counts (size, read, write, preexisting); negative
// buffer ids on alloc/free; allocating a live id; freeing a freed or unknown
// id; `after` naming an event that is not earlier or not timed; an event on
// an undeclared stream (only when `streams` is non-empty) and a stream
// declared twice; `uses` naming a buffer that is not live at that event; a
// `stack` index outside `frames`, and a frame with a negative line number.
absl::Status ValidateTrace(const Trace& trace);

// The warm-up history's part of ValidateTrace (Note [Warm-up history],
// sim/replay/replay.cc); OK for a trace without one.
absl::Status ValidateWarmup(const Trace& trace);

struct TraceStats {
  int64_t events = 0;
  int64_t allocs = 0;
  int64_t frees = 0;
  int64_t timed = 0;       // compute + copy + collective
  Bytes peak_live;         // max live bytes in trace order, incl. preexisting
  int64_t peak_event = -1; // first event reaching peak_live; -1 = before any
};

// Best effort on invalid traces: frees of non-live ids are ignored, and
// re-allocating a live id replaces its size.
TraceStats ComputeTraceStats(const Trace& trace);

}  // namespace gpusim

#endif  // GPUSIM_SIM_TRACE_VALIDATE_H_
