// Allocator strategies: one small, event-shaped interface (in the manner of
// XLA's HeapAlgorithm, xla/service/heap_simulator/heap_simulator.h) that the
// engine consults at every alloc and free; strategies are picked by name
// from a registry that lists itself (`gpusim list allocators`).
#ifndef GPUSIM_SIM_ALLOC_ALLOCATOR_H_
#define GPUSIM_SIM_ALLOC_ALLOCATOR_H_

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "sim/base/units.h"
#include "sim/config/spec.h"
#include "sim/trace/trace.h"

namespace gpusim {

struct AllocatorStats {
  Bytes allocated;        // bytes handed out (block sizes), now
  Bytes reserved;         // bytes obtained from the device, now
  Bytes peak_allocated;
  Bytes peak_reserved;
  int64_t device_mallocs = 0;
  int64_t device_frees = 0;
  Bytes largest_free_block;
};

class Allocator {
 public:
  virtual ~Allocator() = default;
  virtual std::string_view name() const = 0;
  // Places a request. Returns false when the device has no room (an
  // out-of-memory result, not an error).
  // REQUIRES: id is not live.
  virtual bool Alloc(BufferId id, Bytes size, StreamId stream) = 0;
  // REQUIRES: id is live.
  virtual void Free(BufferId id) = 0;
  virtual AllocatorStats stats() const = 0;
};

struct AllocatorInfo {
  std::string name;
  std::string doc;
  std::string parameters;
};

// REQUIRES: capacity > 0. Unknown names or options are errors naming the key.
absl::StatusOr<std::unique_ptr<Allocator>> MakeAllocator(const AllocatorSpec& spec, Bytes capacity);
std::vector<AllocatorInfo> ListAllocators();

}  // namespace gpusim

#endif  // GPUSIM_SIM_ALLOC_ALLOCATOR_H_
