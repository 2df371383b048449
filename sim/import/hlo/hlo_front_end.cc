#include "sim/import/hlo/hlo_front_end.h"

#include "absl/strings/str_cat.h"
#include "sim/base/status.h"
#include "sim/import/hlo/hlo_buffer_assignment.h"
#include "sim/import/hlo/hlo_parser.h"
#include "sim/import/hlo/hlo_to_program.h"

namespace gpusim {

absl::StatusOr<Program> BuildHloProgram(const RunSpec& spec) {
  HloImportOptions o;
  o.trip_count = spec.loop.trip_count;
  ASSIGN_OR_RETURN(HloModule m, ReadHloModule(spec.program_hlo));
  ASSIGN_OR_RETURN(Program p, HloToProgram(m, o));
  if (!m.is_scheduled) return p;
  // Note [Compiled-module buffer assignment] (hlo_buffer_assignment.h).
  ASSIGN_OR_RETURN(CompiledBufferAssignment a, AssignCompiledBuffers(m));
  p.compiled = CompiledMemory{true, a.argument, a.output, a.alias, a.temp, a.heap, a.tuple_tables, a.heap_algorithm, {}};
  for (const CompiledHeapValue& v : a.at_peak) {
    p.compiled.at_peak.push_back(CompiledMemory::Line{
        absl::StrCat(v.instruction, v.index),
        absl::StrCat(v.shape, " in ", v.computation, v.op_name.empty() ? "" : absl::StrCat(" (", v.op_name, ")")),
        v.size, v.offset, v.start, v.end});
  }
  return p;
}

}  // namespace gpusim
