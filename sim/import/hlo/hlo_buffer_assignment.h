// XLA's buffer assignment of a compiled module: what `compiled.memory_analysis()`
// reports for the module `compiled.as_text()` prints (is_scheduled=true: XLA's
// own fusions, copies, loops and schedule), computed as XLA computes it
// rather than emulated from an unoptimised module.
//
// Note [Compiled-module buffer assignment]
// Sources at openxla/xla, the commit each file is cited at:
//  * Values (xla/hlo/analysis/hlo_dataflow_analysis.cc): every instruction
//    defines a value at each index of its shape, except bitcast (defines
//    none), get-tuple-element (forwards an element), tuple (defines only its
//    pointer table {}), while (its state is its init's), the parameters of a
//    while body and condition (the while's operand), and the async pairs:
//    X-start's {0, k} are its operands, X-done forwards the start's {1}
//    (all-reduce-done its {}, copy-done its {0}).
//  * Buffers (hlo_alias_analysis.cc): the values that must share an address
//    are one HloBuffer: a while's init, body parameter, body root and result
//    at each index; an in-place operation's output and operand
//    (GetInPlaceInputOutputPairs: dynamic-update-slice and scatter, a
//    fusion whose root is one of them on a fusion parameter,
//    output_to_operand_aliasing); an entry output and the parameter
//    input_output_alias names.
//  * Live ranges (xla/hlo/utils/hlo_live_range.cc, c38f1678): the module's
//    schedule flattened, each while's condition and body before the while
//    itself (FlattenSchedule); a value lives from its definition (a
//    parameter from its computation's start) to its last position (a root's
//    is the computation's end) and its last use (a while's use is the start
//    of its body); a read-only entry parameter to the end. The values of one
//    buffer then follow each other (NormalizeAliasedBuffers).
//  * Allocations (xla/service/buffer_assignment.cc, bfbc776e,
//    AssignBuffersForComputations, AssignSingleHloBuffer, MaybeAssignBuffer):
//    buffers largest first (then live-out, then position); a constant gets a
//    constant allocation, an entry parameter its own (reusable when it is
//    aliased with an output), a tuple-shaped buffer its own; an array buffer
//    is tried in its operands' allocations, then in the reusable ones
//    (smallest first): one it fits, with no live range overlapping (a range
//    may end where the next begins if the later value may be written over
//    the earlier, CanShareOperandBufferWithUser), a live-out buffer only in
//    one of its exact size; else a temp buffer waits for the heap, a live-out
//    one gets an output allocation of its own.
//  * The temp heap (heap_simulator.cc, 0e06ac82, HeapSimulator::
//    RunComputation over the whole module): in schedule order each value is
//    allocated where it starts and freed where it ends; a value of a buffer
//    already placed shares its address; a value whose operand's single-value
//    buffer dies at that instruction may be written over it when XLA-GPU
//    allows it (xla/service/gpu/buffer_sharing.cc 088587f3
//    FusionCanShareBufferHint: the same element count and width, the operand
//    reaches the fusion output only through elementwise ops, bitcasts and
//    the in-place dynamic-update-slice; CanShareBufferHint: a cuBLASLt
//    gemm's bias with beta != 0). The intervals are packed by
//    sim/alloc/colocated_heap.h with XLA-GPU's 128-byte alignment
//    (xla/service/gpu/gpu_constants.h kXlaAllocatedBufferAlignBytes).
//  * memory_analysis() (xla/pjrt/pjrt_executable.cc CompiledMemoryStats):
//    argument = entry parameter allocations, alias = those aliased with an
//    output, output = maybe-live-out allocations, temp = the rest that are
//    neither constants nor thread-local (the heap and the tuple tables).
// Refused by name: call, conditional, send/recv and async ops other than
// the X-start/X-done pairs above.
#ifndef GPUSIM_SIM_IMPORT_HLO_HLO_BUFFER_ASSIGNMENT_H_
#define GPUSIM_SIM_IMPORT_HLO_HLO_BUFFER_ASSIGNMENT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "sim/base/units.h"
#include "sim/import/hlo/hlo_module.h"

namespace gpusim {

// One value of the temp heap.
struct CompiledHeapValue {
  std::string instruction;  // defining instruction
  std::string computation;
  std::string index;        // "" for the whole result, "{1}" for a tuple element
  std::string shape;        // e.g. f32[32,2048,2048]
  std::string op_name;      // metadata op_name, "" when none
  Bytes size;
  Bytes offset;             // in the temp heap
  int64_t start = 0, end = 0;  // flattened schedule positions
};

struct CompiledBufferAssignment {
  Bytes argument, output, alias, temp;
  Bytes heap;          // the preallocated temp heap
  Bytes tuple_tables;  // tuple-shaped temp allocations (pointer tables)
  std::string heap_algorithm;  // "spatial" or "temporal"
  int64_t schedule_length = 0;  // flattened instructions
  int64_t heap_values = 0;
  // The heap's values live where the value reaching the heap's top starts,
  // by offset.
  std::vector<CompiledHeapValue> at_peak;
};

// REQUIRES: m.is_scheduled (each computation's instructions in schedule order).
absl::StatusOr<CompiledBufferAssignment> AssignCompiledBuffers(const HloModule& m);

}  // namespace gpusim

#endif  // GPUSIM_SIM_IMPORT_HLO_HLO_BUFFER_ASSIGNMENT_H_
