// Program files: a small JAX program — inputs, one lax.scan with carry and
// xs, jax.grad of a final carry, donate_argnums — lowered to Program IR the
// way JAX traces it and XLA assigns its buffers, rolled or unrolled.
//
// Sources: jax/_src/lax/control_flow/loops.py (_scan_impl: rolled while
// loop with preallocated ys, unrolled straight-line code; _scan_partial_eval:
// residual classes — xs slices forwarded, loop-invariant values hoisted,
// everything else (carries included) stacked [T, ...]; _scan_transpose:
// reverse loop with carry cotangents instantiated as zeros); xla
// copy_insertion.cc and buffer_assignment.cc (loop state shares one buffer
// with its init and result; a donated parameter's buffer holds the output
// aliased to it); while_loop_simplifier.cc (trip count 1 inlined, 0
// deleted). See ../shared/reference/xla_semantics.md §3-§4.
#ifndef GPUSIM_MODELS_JAX_PROGRAM_H_
#define GPUSIM_MODELS_JAX_PROGRAM_H_

#include "absl/status/statusor.h"
#include "sim/config/spec.h"
#include "sim/ir/program.h"

namespace gpusim {

// REQUIRES: spec.program.present. Uses spec.loop (mode, trip_count).
absl::StatusOr<Program> BuildJaxProgram(const RunSpec& spec);

}  // namespace gpusim

#endif  // GPUSIM_MODELS_JAX_PROGRAM_H_
