// The entry result tuple of an XLA program (Note [Entry result tuple]).
#ifndef GPUSIM_SIM_LOWER_XLA_ENTRY_TUPLE_H_
#define GPUSIM_SIM_LOWER_XLA_ENTRY_TUPLE_H_

#include "sim/ir/program.h"

namespace gpusim {

// Note [Entry result tuple]
// A jitted function's outputs are the leaves of its result pytree; JAX
// lowers them to one flat tuple, the entry computation's ROOT. XLA's buffer
// assignment gives that tuple a buffer of its own holding one 8-byte
// pointer per element (the tuple shape's ByteSizeOf with pointer size 8,
// xla/service/gpu/gpu_executable.cc; the root tuple is a maybe-live-out
// value in buffer_assignment.cc), and compiled.memory_analysis() counts it
// in output_size_in_bytes (16 B for the seed scan program's two gradients,
// 368 B for MaxText's 46-leaf train state). A single output is returned as
// the array itself, with no tuple. The HLO importer adds the same table
// (sim/import/hlo/hlo_loops.cc Outputs).
//
// A front-end marks a program whose outputs are a jitted function's result
// (Program::entry_result_tuple); the step pipeline then calls this
// (sim/step/model_program.h). When `p` is marked and has two or more
// live-out tensors it adds the table: a live-out u8[8 x outputs] buffer
// written by one op at the end, in the last op's phase.
void AddEntryTupleTable(Program* p);

}  // namespace gpusim

#endif  // GPUSIM_SIM_LOWER_XLA_ENTRY_TUPLE_H_
