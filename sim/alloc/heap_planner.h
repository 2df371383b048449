// Offline heap planners: place buffers whose whole lifetimes are known in
// one linear heap, as XLA's buffer assignment packs an executable's temps.
//
// Source: openxla/xla xla/service/heap_simulator/heap_simulator.{h,cc}
// (GlobalDecreasingSizeBestFitHeap with its spatial and temporal orderings;
// ChooseBestHeapAlgorithm keeps the smaller result; NoFragmentationStatsHeap
// gives the lower bound).
//
//   offset ▲  ┌──────────┐
//          │  │    b2    │        ┌────┐
//          │  ├────┬─────┘  ┌─────┤ b4 │   each buffer: [offset, offset+size)
//          │  │ b1 │        │ b3  │    │   over [start, end] in event time;
//          │  └────┘        └─────┴────┘   no two overlap in both.
//          └──────────────────────────────▶ time
#ifndef GPUSIM_SIM_ALLOC_HEAP_PLANNER_H_
#define GPUSIM_SIM_ALLOC_HEAP_PLANNER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "sim/base/units.h"

namespace gpusim {

struct HeapBuffer {
  int64_t id = 0;
  Bytes size;
  int64_t start = 0;  // first event it is live at (inclusive)
  int64_t end = 0;    // last event it is live at (inclusive)
};

enum class HeapOrder {
  kSpatial,   // decreasing size, then decreasing lifetime
  kTemporal,  // decreasing lifetime, then decreasing size
};

struct HeapPlan {
  Bytes heap_size;             // the packed heap: max(offset + size)
  std::vector<Bytes> offsets;  // per input buffer, in input order
  std::string algorithm;       // "spatial", "temporal"
};

// Global decreasing-size (or -lifetime) best fit: each buffer, in order,
// takes the smallest free gap over its lifetime that fits, else the top.
// Cost O(n log n) plus, per buffer, the intervals of the busy covers that
// reach into the free windows still open when they are read, and a step per
// window and cover (Note [Overlap index], Note [Free windows] in the .cc).
// Not O(n log n) in the worst case: a buffer among many fitting gaps reads
// them all; on an unrolled Llama it grows about 2.5-3x per doubling of the
// depth (docs/benchmarks.md).
HeapPlan PackBestFit(const std::vector<HeapBuffer>& buffers, HeapOrder order);
// Both orders; keeps the smaller heap (ties: spatial).
HeapPlan PackBestOf(const std::vector<HeapBuffer>& buffers);
// The peak of the live sum: no placement can do better.
Bytes NoFragmentationPeak(const std::vector<HeapBuffer>& buffers);

namespace internal {
// The first, O(n^2) implementation of PackBestFit (every placed buffer is
// tested for overlap in time): the oracle of the property test and the
// baseline of bench/alloc_benchmark. Same results as PackBestFit.
HeapPlan PackBestFitQuadratic(const std::vector<HeapBuffer>& buffers, HeapOrder order);
}  // namespace internal

}  // namespace gpusim

#endif  // GPUSIM_SIM_ALLOC_HEAP_PLANNER_H_
