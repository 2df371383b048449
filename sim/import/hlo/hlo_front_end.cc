#include "sim/import/hlo/hlo_front_end.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "sim/base/status.h"
#include "sim/import/hlo/hlo_to_program.h"

namespace gpusim {

absl::StatusOr<Program> BuildHloProgram(const RunSpec& spec) {
  const RunSpec defaults;
  std::vector<std::string> refused;
  if (spec.framework != "jax") refused.push_back("framework=" + spec.framework + " (an XLA module runs under XLA semantics)");
  if (spec.loop.mode != defaults.loop.mode) refused.push_back("loop.mode (the module fixes it: lower with unroll=True for unrolled)");
  if (spec.loop.unroll != defaults.loop.unroll) refused.push_back("loop.unroll");
  if (spec.remat.policy != defaults.remat.policy) refused.push_back("remat.policy (the module fixes it: jax.checkpoint in the program)");
  if (spec.optimizer.kind != defaults.optimizer.kind || spec.optimizer.moment_dtype != defaults.optimizer.moment_dtype ||
      spec.optimizer.clip_grad_norm != defaults.optimizer.clip_grad_norm) {
    refused.push_back("optimizer (the module contains it)");
  }
  if (spec.parallelism.fsdp != 1 || spec.parallelism.tensor != 1 || spec.parallelism.sequence_parallel ||
      spec.parallelism.gather_dtype != defaults.parallelism.gather_dtype) {
    refused.push_back("parallelism (the module's shapes and collectives are one device's)");
  }
  if (spec.batch.per_device != defaults.batch.per_device || spec.batch.seq_len != defaults.batch.seq_len) {
    refused.push_back("batch (the module's argument shapes fix it)");
  }
  if (!refused.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(spec.program_hlo, ": settings that do not apply to an imported HLO module: ",
                                                   absl::StrJoin(refused, "; ")));
  }
  HloImportOptions o;
  o.trip_count = spec.loop.trip_count;
  return ImportHloProgram(spec.program_hlo, o);
}

}  // namespace gpusim
