#include "sim/alloc/impl/best_of.h"

#include "sim/base/status.h"

namespace gpusim {

BestOfAllocator::BestOfAllocator(std::vector<std::unique_ptr<Allocator>> members)
    : members_(std::move(members)), failed_(members_.size(), false), name_("best_of(") {
  GPUSIM_CHECK(!members_.empty());
  for (size_t i = 0; i < members_.size(); ++i) {
    if (i > 0) name_ += ",";
    name_ += members_[i]->name();
  }
  name_ += ")";
}

bool BestOfAllocator::Alloc(BufferId id, Bytes size, StreamId stream) {
  bool any = false;
  for (size_t i = 0; i < members_.size(); ++i) {
    if (failed_[i]) continue;
    if (members_[i]->Alloc(id, size, stream)) {
      any = true;
    } else {
      failed_[i] = true;
    }
  }
  return any;
}

void BestOfAllocator::Free(BufferId id) {
  for (size_t i = 0; i < members_.size(); ++i) {
    if (!failed_[i]) members_[i]->Free(id);
  }
}

absl::Status BestOfAllocator::Finish() {
  for (size_t i = 0; i < members_.size(); ++i) {
    if (absl::Status s = members_[i]->Finish(); !s.ok()) return s;
  }
  return absl::OkStatus();
}

bool BestOfAllocator::PlansOffline() const {
  for (const auto& m : members_) {
    if (m->PlansOffline()) return true;
  }
  return false;
}

const Allocator& BestOfAllocator::chosen() const {
  int best = -1;
  Bytes best_peak;
  for (size_t i = 0; i < members_.size(); ++i) {
    if (failed_[i]) continue;
    const Bytes peak = members_[i]->stats().peak_reserved;
    if (best < 0 || peak < best_peak) {
      best = static_cast<int>(i);
      best_peak = peak;
    }
  }
  return *members_[best < 0 ? 0 : best];
}

}  // namespace gpusim
