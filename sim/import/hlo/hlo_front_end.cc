#include "sim/import/hlo/hlo_front_end.h"

#include "sim/import/hlo/hlo_to_program.h"

namespace gpusim {

absl::StatusOr<Program> BuildHloProgram(const RunSpec& spec) {
  HloImportOptions o;
  o.trip_count = spec.loop.trip_count;
  return ImportHloProgram(spec.program_hlo, o);
}

}  // namespace gpusim
