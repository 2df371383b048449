// HLO module → Program IR: what one device allocates and computes when XLA's
// GPU compiler runs the module. The importer applies XLA-GPU's buffer
// semantics while it walks the module (Note [Imported buffers] in
// hlo_to_program.cc): fusion decides which values materialise
// (sim/lower/xla/fusion.h); while loops keep one buffer per state element for
// the whole loop, shared with the init and the result as copy insertion makes
// it, with each iteration's body temporaries its own; donation and
// input_output_alias write outputs into parameter buffers. The Program then
// goes through the same lowering, temp-heap packing and engine as the
// built-in families (sim/report/step.cc).
#ifndef GPUSIM_SIM_IMPORT_HLO_HLO_TO_PROGRAM_H_
#define GPUSIM_SIM_IMPORT_HLO_HLO_TO_PROGRAM_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "sim/import/hlo/hlo_module.h"
#include "sim/ir/program.h"

namespace gpusim {

struct HloImportOptions {
  // loop.trip_count: the trip count of while loops whose count the module
  // does not give (no known_trip_count, no `i < N` induction variable);
  // 0 = none given. Refused when no loop needs it.
  int64_t trip_count = 0;
};

struct HloImportStats {
  int64_t instructions = 0;         // in the module
  std::vector<int64_t> trip_counts;  // of every while loop, in the order they run
};

absl::StatusOr<Program> HloToProgram(const HloModule& m, const HloImportOptions& options,
                                     HloImportStats* stats = nullptr);

// ReadHloModule + HloToProgram.
absl::StatusOr<Program> ImportHloProgram(const std::string& path, const HloImportOptions& options,
                                         HloImportStats* stats = nullptr);

}  // namespace gpusim

#endif  // GPUSIM_SIM_IMPORT_HLO_HLO_TO_PROGRAM_H_
