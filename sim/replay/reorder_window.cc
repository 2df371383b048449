#include "sim/replay/reorder_window.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "sim/base/status.h"

namespace gpusim {
namespace replay_internal {

namespace {
// std::*_heap keep the largest first: "later" gives a min-heap.
struct Later {
  template <typename P>
  bool operator()(const P& a, const P& b) const {
    if (a.event.time != b.event.time) return a.event.time > b.event.time;
    if (a.event.seq != b.event.seq) return a.event.seq > b.event.seq;
    return a.arrival > b.arrival;
  }
};
}  // namespace

absl::Status ReorderWindow::Add(const RecordedMemoryEvent& m, const RecordedMetadata& meta) {
  const int64_t arrival = arrivals_++;
  if (emitted_any_ && (m.time < last_time_ || (m.time == last_time_ && m.seq < last_seq_))) {
    return absl::CancelledError(absl::StrCat("memory event ", arrival, " arrives older than the ", capacity_,
                                             "-event reorder window allows"));
  }
  Pending p{m, arrival};
  if (!heap_ && !fifo_.empty() && Before(p, fifo_.back())) {
    heap_events_.assign(std::make_move_iterator(fifo_.begin()), std::make_move_iterator(fifo_.end()));
    fifo_.clear();
    std::make_heap(heap_events_.begin(), heap_events_.end(), Later());
    heap_ = true;
  }
  if (heap_) {
    heap_events_.push_back(std::move(p));
    std::push_heap(heap_events_.begin(), heap_events_.end(), Later());
  } else {
    fifo_.push_back(std::move(p));
  }
  const int64_t held = static_cast<int64_t>(heap_ ? heap_events_.size() : fifo_.size());
  largest_held_ = std::max(largest_held_, held);
  if (held > capacity_) return PopOldest(meta);
  return absl::OkStatus();
}

absl::Status ReorderWindow::PopOldest(const RecordedMetadata& meta) {
  Pending p;
  if (heap_) {
    std::pop_heap(heap_events_.begin(), heap_events_.end(), Later());
    p = std::move(heap_events_.back());
    heap_events_.pop_back();
  } else {
    p = std::move(fifo_.front());
    fifo_.pop_front();
  }
  emitted_any_ = true;
  last_time_ = p.event.time;
  last_seq_ = p.event.seq;
  return emit_(p.event, meta);
}

absl::Status ReorderWindow::Drain(const RecordedMetadata& meta) {
  while (!(heap_ ? heap_events_.empty() : fifo_.empty())) RETURN_IF_ERROR(PopOldest(meta));
  return absl::OkStatus();
}

}  // namespace replay_internal
}  // namespace gpusim
