#include "sim/alloc/impl/fallback.h"

#include "sim/base/status.h"

namespace gpusim {

FallbackAllocator::FallbackAllocator(std::unique_ptr<Allocator> primary, std::unique_ptr<Allocator> secondary)
    : primary_(std::move(primary)), secondary_(std::move(secondary)) {
  GPUSIM_CHECK(primary_ != nullptr && secondary_ != nullptr);
  name_ = "fallback(" + std::string(primary_->name()) + "," + std::string(secondary_->name()) + ")";
}

bool FallbackAllocator::Alloc(BufferId id, Bytes size, StreamId stream) {
  if (dead_) return false;
  if (switched_) return secondary_->Alloc(id, size, stream);
  if (primary_->Alloc(id, size, stream)) {
    calls_.push_back({id, size.value(), stream});
    return true;
  }
  switched_ = true;
  for (const Call& c : calls_) {
    if (c.size < 0) {
      secondary_->Free(c.id);
    } else if (!secondary_->Alloc(c.id, Bytes(c.size), c.stream)) {
      dead_ = true;  // the secondary cannot hold the history either
      return false;
    }
  }
  calls_.clear();
  calls_.shrink_to_fit();
  return secondary_->Alloc(id, size, stream);
}

void FallbackAllocator::Free(BufferId id) {
  if (dead_) return;
  if (switched_) {
    secondary_->Free(id);
    return;
  }
  primary_->Free(id);
  calls_.push_back({id, -1, 0});
}

}  // namespace gpusim
