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
// events, ~150 B each (≤ 10 MB at 65,536), not the trace's. Holding every
// event back costs a trace in order a fifth of its rate (BM_EndToEnd's
// synthetic trace at 1 M events, measured once: 2.14 M events/s with no
// window, 1.72 M/s through 65,536, the held events missing the cache
// twice each), so ReplayKinetoStreaming reads a trace as it comes and
// takes the window only when that pass meets an event out of order (at
// the V100 trace's event 19,760 of 28,010, the MI300X one's 276 of 475):
// a trace in order pays nothing, one out of order a partial pass more.
#ifndef GPUSIM_SIM_REPLAY_REORDER_WINDOW_H_
#define GPUSIM_SIM_REPLAY_REORDER_WINDOW_H_

#include <cstdint>
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
  absl::Status PopOldest(const RecordedMetadata& meta);

  int64_t capacity_;
  Emit emit_;
  int64_t arrivals_ = 0;
  bool heap_ = false;  // the ring no longer in order: heap_events_ holds the window
  // While !heap_: the window in order, a ring of slots reused (no
  // allocation per event): ring_[(head_ + k) % ring_.size()], k < count_.
  std::vector<Pending> ring_;
  size_t head_ = 0, count_ = 0;
  // When heap_: a min-heap by (ts, Ev Idx, arrival).
  std::vector<Pending> heap_events_;
  Pending popped_;                    // the event being handed on from the heap
  bool emitted_any_ = false;
  SimTime last_time_{-1};  // of the last event handed on
  int64_t last_seq_ = -1;
  int64_t largest_held_ = 0;
};

}  // namespace replay_internal
}  // namespace gpusim

#endif  // GPUSIM_SIM_REPLAY_REORDER_WINDOW_H_
