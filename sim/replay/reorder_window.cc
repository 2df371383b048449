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
  if (!heap_) {
    const Pending* back = count_ == 0 ? nullptr : &ring_[(head_ + count_ - 1) % ring_.size()];
    if (back == nullptr || !(m.time < back->event.time || (m.time == back->event.time && m.seq < back->event.seq))) {
      // In order: into the ring.
      if (count_ == ring_.size()) {
        // Grow (up to capacity + 1 slots), keeping the order from slot 0.
        std::vector<Pending> grown;
        grown.reserve(std::max<size_t>(16, ring_.size() * 2));
        for (size_t k = 0; k < count_; ++k) grown.push_back(std::move(ring_[(head_ + k) % ring_.size()]));
        grown.resize(std::max<size_t>(16, ring_.size() * 2));
        ring_ = std::move(grown);
        head_ = 0;
      }
      Pending& slot = ring_[(head_ + count_) % ring_.size()];
      slot.event = m;
      slot.arrival = arrival;
      ++count_;
    } else {
      // The first event out of order: the window becomes a heap.
      heap_events_.reserve(count_ + 1);
      for (size_t k = 0; k < count_; ++k) heap_events_.push_back(std::move(ring_[(head_ + k) % ring_.size()]));
      ring_.clear();
      head_ = count_ = 0;
      std::make_heap(heap_events_.begin(), heap_events_.end(), Later());
      heap_ = true;
    }
  }
  if (heap_) {
    heap_events_.push_back(Pending{m, arrival});
    std::push_heap(heap_events_.begin(), heap_events_.end(), Later());
  }
  const int64_t held = static_cast<int64_t>(heap_ ? heap_events_.size() : count_);
  largest_held_ = std::max(largest_held_, held);
  if (held > capacity_) return PopOldest(meta);
  return absl::OkStatus();
}

absl::Status ReorderWindow::PopOldest(const RecordedMetadata& meta) {
  const RecordedMemoryEvent* e;
  if (heap_) {
    std::pop_heap(heap_events_.begin(), heap_events_.end(), Later());
    popped_ = std::move(heap_events_.back());
    heap_events_.pop_back();
    e = &popped_.event;
  } else {
    // The slot stays valid until the next Add overwrites it.
    e = &ring_[head_].event;
    head_ = (head_ + 1) % ring_.size();
    --count_;
  }
  emitted_any_ = true;
  last_time_ = e->time;
  last_seq_ = e->seq;
  return emit_(*e, meta);
}

absl::Status ReorderWindow::Drain(const RecordedMetadata& meta) {
  while (heap_ ? !heap_events_.empty() : count_ > 0) RETURN_IF_ERROR(PopOldest(meta));
  return absl::OkStatus();
}

}  // namespace replay_internal
}  // namespace gpusim
