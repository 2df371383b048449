// Internal to sim/replay: memory events put back into (ts, Ev Idx) order as
// they are parsed, within a bounded window.
//
// Note [A bounded reorder window]
// The whole-trace import sorts a Kineto trace's memory events by (ts, Ev
// Idx), stably, when the file is not in that order (sim/import/kineto.cc).
// Two shipped traces are not. What a window must hold back is, over the
// events, the largest number of events that come before one in the file
// but after it in that order: 20,380 for the V100 HTA trace (of its 28,010
// memory events: its event 20,380 is older than every event before it)
// and 276 for the MI300X cold-start trace (of 475: its event 276 likewise);
// a window of that many sorts each, one fewer does not (checked on both;
// tests/replay_stream_test.cc pins the MI300X one). The stream holds up
// to ReplayOptions::reorder_window (65,536: three times the V100 trace's
// need) pending events and hands on the oldest — by (ts, Ev Idx, file
// position): the stable sort's order — when one more arrives, and the rest
// at the end of the file. While events
// arrive in order the window is a FIFO; the first one out of order turns
// it into a min-heap. An event that arrives older than one already handed
// on cannot be put in its place: the stream stops, named ("memory event N
// arrives older than the 65,536-event reorder window allows"), and the
// trace is imported whole and sorted as before. Otherwise what comes out is
// exactly the sorted sequence, so the replay is byte-identical to the
// whole-trace path (tests/replay_stream_test.cc: both shipped traces, and a
// synthetic one that overflows a small window). Memory: the window's
// events, ~150 B each (≤ 10 MB at 65,536), not the trace's.
#ifndef GPUSIM_SIM_REPLAY_REORDER_WINDOW_H_
#define GPUSIM_SIM_REPLAY_REORDER_WINDOW_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <vector>

#include "absl/status/status.h"
#include "sim/import/recorded_trace.h"

namespace gpusim {
namespace replay_internal {

class ReorderWindow {
 public:
  using Emit = std::function<absl::Status(const RecordedMemoryEvent&, const RecordedMetadata&)>;
  // REQUIRES: capacity >= 0 (0: events must arrive in order).
  ReorderWindow(int64_t capacity, Emit emit) : capacity_(capacity), emit_(std::move(emit)) {}

  // One event as parsed; hands on the oldest when the window is full. A
  // Cancelled status when `m` is older than an event already handed on.
  absl::Status Add(const RecordedMemoryEvent& m, const RecordedMetadata& meta);
  // At the end of the file: hands on every pending event, oldest first.
  absl::Status Drain(const RecordedMetadata& meta);
  // The most events ever held at once (a heap's).
  int64_t largest_held() const { return largest_held_; }

 private:
  struct Pending {
    RecordedMemoryEvent event;
    int64_t arrival = 0;
  };
  static bool Before(const Pending& a, const Pending& b) {
    if (a.event.time != b.event.time) return a.event.time < b.event.time;
    if (a.event.seq != b.event.seq) return a.event.seq < b.event.seq;
    return a.arrival < b.arrival;
  }
  absl::Status PopOldest(const RecordedMetadata& meta);

  int64_t capacity_;
  Emit emit_;
  int64_t arrivals_ = 0;
  bool heap_ = false;           // fifo_ no longer in order: heap_events_ holds the window
  std::deque<Pending> fifo_;    // in order (while !heap_)
  std::vector<Pending> heap_events_;  // a min-heap by Before (when heap_)
  bool emitted_any_ = false;
  SimTime last_time_{-1};  // of the last event handed on
  int64_t last_seq_ = -1;
  int64_t largest_held_ = 0;
};

}  // namespace replay_internal
}  // namespace gpusim

#endif  // GPUSIM_SIM_REPLAY_REORDER_WINDOW_H_
