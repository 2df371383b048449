// The iterations a front-end builds for a layer scan or lax.scan (Note
// [Rolled loop built once], sim/lower/lower.h): unrolled, or rolled up to
// RolledBuiltOnceAbove() trips, every iteration; a deeper rolled loop, its
// first and last kRolledEdgeIterations and one steady iteration between
// them standing for the others (Region::repeat).
#ifndef GPUSIM_MODELS_ROLLED_LOOP_H_
#define GPUSIM_MODELS_ROLLED_LOOP_H_

#include <cstdint>
#include <vector>

namespace gpusim {

// The edges keep what differs from the steady iterations: the prefetch or
// carry set-up that starts the loop's pipeline before the first iteration,
// and its absence after the last; three on each side leave the steady
// iteration with steady neighbours (tests/rolled_loop_test.cc).
inline constexpr int64_t kRolledEdgeIterations = 3;

// 1,024: every rolled depth accepted before loops were built once is still
// built iteration by iteration, so its native trace (--out) stays writable
// (the native format has no repeat line).
//
// Note [What a loop built once does not give]
// Built once at every depth, a loop would give the same results only if
// every output could be had from its steady iteration. Compared output by
// output (tests/rolled_loop_test.cc builds both forms), these do not yet:
//  - The packed temp heap (and with it peak, need and the JAX arena
//    fraction). The best-fit packer (sim/alloc/heap_planner.h) places a
//    small buffer that outlives its iteration (an FSDP-gathered norm weight,
//    `layerN.attn_norm.gathered`, lives into the next iteration) beside its
//    neighbour's copy, so its offset alternates from one iteration to the
//    next: the placements have period two, and those of the last edge
//    iterations depend on the parity of the steady iterations' count. One
//    steady iteration standing for all packs as a loop of
//    2 * kRolledEdgeIterations + 1 would: on configs/llama7b.yaml one
//    8 KiB buffer lower whenever the steady count is even, exact when it
//    is odd (RolledLoopTest.OddSteadyCountIsIdentical). An exact heap
//    needs the packing of the executed loop, or the steady part built as a
//    block of one placement period repeated, with a proof of that period.
//  - The donated allocations' decisions: they name the program's op
//    indices and the values of the iterations as built.
//  - `explain --time`: the critical path crosses the further iterations as
//    one repeated_iterations segment, so its sums by class and by layer
//    are not those of the iterations' own events.
//  - The charts (repeat slices, viz/step_view.h) and the native trace (--out,
//    refused for a trace with repeats).
// What does agree: every time and per-layer time, the live peaks, and,
// numbered as the loop runs (ExecutedEventIndex, sim/trace/trace.h), the
// peak events, and explain's count of materialised slices.
int64_t RolledBuiltOnceAbove();
// For tests comparing the two forms: loops of more than `trips` trips (at
// least 2 * kRolledEdgeIterations + 1) are built once. Not synchronised
// with concurrent builds; tests set it and restore it.
void SetRolledBuiltOnceAboveForTesting(int64_t trips);

struct LoopIteration {
  int64_t index;       // the iteration (layer) built
  int64_t repeat = 1;  // the iterations [index, index + repeat) it stands for
};

// The iterations to build, in loop order (descending: a backward loop).
std::vector<LoopIteration> LoopIterations(int64_t trips, bool rolled, bool descending);

}  // namespace gpusim

#endif  // GPUSIM_MODELS_ROLLED_LOOP_H_
