// The post-scheduling copy elision for donated parameters: which values
// live in a donated parameter's allocation under the chosen entry schedule
// (Note [Donated allocation] in sim/lower/xla/entry_schedule.h).
#ifndef GPUSIM_SIM_LOWER_XLA_DONATED_ALLOCATION_H_
#define GPUSIM_SIM_LOWER_XLA_DONATED_ALLOCATION_H_

#include <string>
#include <vector>

#include "sim/ir/program.h"

namespace gpusim {

// For every donated parameter P, walks the tensors aliasing P in the order
// of `p`'s ops. The first one written while an earlier value in P's buffer is
// still read, and all after it, lose the alias (a buffer of their own); a
// live-out one among them is then copied into P by a root copy appended to
// the program. Temps that fit in P's idle window (after its last reader,
// before that copy) are placed there, largest first, without overlapping
// each other. Appends one line per changed allocation to `decisions`.
// REQUIRES: p's ops in a valid order.
void ElideDonatedCopies(Program& p, std::vector<std::string>* decisions);

}  // namespace gpusim

#endif  // GPUSIM_SIM_LOWER_XLA_DONATED_ALLOCATION_H_
