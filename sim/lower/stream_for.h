// The stream an op of the program IR runs on, as lowering assigns it
// (sim/lower/lower.cc): collectives on the collective stream, host copies on
// the host-copy stream, the rest — and any op a builder marks
// `on_compute_stream` — on the compute stream. Passes over the IR that
// reason about stream order (sim/lower/xla/loop_slices.cc) ask it here.
#ifndef GPUSIM_SIM_LOWER_STREAM_FOR_H_
#define GPUSIM_SIM_LOWER_STREAM_FOR_H_

#include "sim/ir/program.h"
#include "sim/trace/trace.h"

namespace gpusim {

StreamId StreamFor(const Op& op);

}  // namespace gpusim

#endif  // GPUSIM_SIM_LOWER_STREAM_FOR_H_
