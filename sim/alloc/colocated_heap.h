// XLA's GlobalDecreasingSizeBestFitHeap as buffer assignment runs it over a
// scheduled module: buffers that must share an address (the values of one
// HloBuffer, a value written over its operand) are colocated, each keeping
// its own live interval, and every offset is aligned.
//
// Source: openxla/xla 0e06ac82 xla/service/heap_simulator/heap_simulator.cc:
// Alloc / ShareWith / Free give each buffer the interval [event of its
// alloc, event of its free] (one event counter, advanced by every call);
// Finish places the intervals that need an allocation (not the colocated
// ones) in the order of GetSpatialBufferIntervalCompare (size descending,
// own duration descending, id) or GetTemporalBufferIntervalCompare
// (colocation group's span descending, size descending, id); each takes
// FindUnslicedChunkCandidates' chunk: of the gaps between the chunks placed
// over its own and its colocations' intervals (a chunk's end rounded up to
// the alignment before the next gap begins, MakeFreeChunksList), the
// smallest (size, offset) one whose aligned start fits the group's largest
// size, else the top; the colocations take the same offset
// (CommitChunkAndInterval). buffer_assignment.cc
// AssignBuffersWithSequentialOrdering keeps the smaller of the spatial and
// the temporal heap (ChooseBestHeapAlgorithm, spatial first on a tie).
//
// Cost: O(n^2) in the intervals (every placed chunk is tested against each
// interval of the group being placed); a compiled module's buffer
// assignment has a few thousand values.
#ifndef GPUSIM_SIM_ALLOC_COLOCATED_HEAP_H_
#define GPUSIM_SIM_ALLOC_COLOCATED_HEAP_H_

#include <cstdint>
#include <string>
#include <vector>

#include "sim/base/units.h"

namespace gpusim {

struct ColocatedInterval {
  Bytes size;
  int64_t start = 0;  // inclusive event times
  int64_t end = 0;
  // Index of the interval whose address this one takes, or -1 when it
  // needs an allocation of its own (it may itself be the target of others).
  int64_t colocated_with = -1;
};

struct ColocatedPlan {
  Bytes heap_size;
  std::vector<Bytes> offsets;  // per interval, in input order
  std::string algorithm;       // "spatial" or "temporal"
};

enum class ColocatedOrder { kSpatial, kTemporal };

// REQUIRES: alignment > 0; colocated_with is -1 or less than the
// interval's own index (a chain a -> b -> c is followed to its root c, as
// GetTransitiveColocations does).
ColocatedPlan PackColocated(const std::vector<ColocatedInterval>& intervals, ColocatedOrder order,
                            int64_t alignment);
// Both orders; the smaller heap (spatial on a tie).
ColocatedPlan PackColocatedBestOf(const std::vector<ColocatedInterval>& intervals, int64_t alignment);

}  // namespace gpusim

#endif  // GPUSIM_SIM_ALLOC_COLOCATED_HEAP_H_
