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
