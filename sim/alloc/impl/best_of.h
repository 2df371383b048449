// Runs several strategies on the same stream of calls and reports the one
// with the smallest peak reserved (ChooseBestHeapAlgorithm in
// xla/service/heap_simulator/heap_simulator.h, for runtime allocators).
// A member that runs out of memory leaves the race and gets no further
// calls; Alloc fails only when every member has failed. stats(), AddressOf
// and BlockSizeOf answer for the current choice: the surviving member with
// the smallest peak reserved (ties: the first listed).
//
//   allocator: {impl: best_of, members: "pytorch_caching,bfc{preallocate=false}"}
#ifndef GPUSIM_SIM_ALLOC_IMPL_BEST_OF_H_
#define GPUSIM_SIM_ALLOC_IMPL_BEST_OF_H_

#include <memory>
#include <string>
#include <vector>

#include "sim/alloc/allocator.h"

namespace gpusim {

class BestOfAllocator : public Allocator {
 public:
  // REQUIRES: members non-empty.
  explicit BestOfAllocator(std::vector<std::unique_ptr<Allocator>> members);
  std::string_view name() const override { return name_; }
  bool Alloc(BufferId id, Bytes size, StreamId stream) override;
  void Free(BufferId id) override;
  AllocatorStats stats() const override { return chosen().stats(); }
  AllocatorUsage usage() const override { return chosen().usage(); }
  std::optional<uint64_t> AddressOf(BufferId id) const override { return chosen().AddressOf(id); }
  std::optional<Bytes> BlockSizeOf(BufferId id) const override { return chosen().BlockSizeOf(id); }
  absl::Status Finish() override;
  bool PlansOffline() const override;

  const Allocator& chosen() const;
  bool failed(size_t member) const { return failed_[member]; }

 private:
  std::vector<std::unique_ptr<Allocator>> members_;
  std::vector<bool> failed_;
  std::string name_;
};

}  // namespace gpusim

#endif  // GPUSIM_SIM_ALLOC_IMPL_BEST_OF_H_
