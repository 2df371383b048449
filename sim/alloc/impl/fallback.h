// Runs `primary`; when it runs out of memory, replays every call it has
// seen into `secondary` (fresh), retries the failing request there and
// sends all later calls to it (composition in the manner of XLA's heap
// simulator: the recorded call sequence is the interface between
// strategies). Alloc fails only when the secondary fails too, during the
// replay or after. stats() and addresses are the active member's.
//
//   allocator: {impl: fallback, members: "pytorch_caching,pytorch_caching{expandable_segments=true}"}
#ifndef GPUSIM_SIM_ALLOC_IMPL_FALLBACK_H_
#define GPUSIM_SIM_ALLOC_IMPL_FALLBACK_H_

#include <memory>
#include <string>
#include <vector>

#include "sim/alloc/allocator.h"

namespace gpusim {

class FallbackAllocator : public Allocator {
 public:
  // REQUIRES: both non-null; secondary has seen no calls.
  FallbackAllocator(std::unique_ptr<Allocator> primary, std::unique_ptr<Allocator> secondary);
  std::string_view name() const override { return name_; }
  bool Alloc(BufferId id, Bytes size, StreamId stream) override;
  void Free(BufferId id) override;
  AllocatorStats stats() const override { return active().stats(); }
  AllocatorUsage usage() const override { return active().usage(); }
  std::optional<uint64_t> AddressOf(BufferId id) const override { return active().AddressOf(id); }
  std::optional<Bytes> BlockSizeOf(BufferId id) const override { return active().BlockSizeOf(id); }
  absl::Status Finish() override { return active().Finish(); }
  bool PlansOffline() const override { return active().PlansOffline(); }

  bool switched() const { return switched_; }
  const Allocator& active() const { return switched_ ? *secondary_ : *primary_; }
  Allocator& active() { return switched_ ? *secondary_ : *primary_; }

 private:
  struct Call {
    BufferId id;
    int64_t size;  // < 0: a free
    StreamId stream;
  };
  std::unique_ptr<Allocator> primary_, secondary_;
  std::vector<Call> calls_;
  bool switched_ = false;
  bool dead_ = false;  // the secondary failed during the replay: no more calls
  std::string name_;
};

}  // namespace gpusim

#endif  // GPUSIM_SIM_ALLOC_IMPL_FALLBACK_H_
