// libFuzzer target: the config loader (sim/config/loader.h) on a run config
// held in memory, including inline device/model mappings, `from:` chains to
// the shipped configs and `program:` sections; a program that parses is then
// built (models/jax_program.h). Errors must be InvalidArgument with a
// location (FILE:LINE:COL) or NotFound for a referenced file.
#include <cstddef>
#include <cstdint>
#include <string>

#include "models/jax_program.h"
#include "sim/config/loader.h"
#include "tests/fuzz/fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace gpusim;
  const std::string yaml(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<RunSpec> spec = ParseRunSpec(yaml, "fuzz/run.yaml");
  if (!spec.ok()) {
    fuzz::CheckRejection(spec.status(),
                         {absl::StatusCode::kInvalidArgument, absl::StatusCode::kNotFound},
                         {"fuzz/run.yaml", ".yaml"});
    return 0;
  }
  // Building a program costs ~1 ms and ~55 KB per loop iteration under ASan;
  // past 4096 iterations a legitimate input would only trip the timeout.
  // (BuildJaxProgram itself refuses more than 65536.)
  if (spec->program.present && spec->loop.trip_count <= 4096) {
    absl::StatusOr<Program> program = BuildJaxProgram(*spec);
    if (!program.ok()) {
      fuzz::CheckRejection(program.status(), {absl::StatusCode::kInvalidArgument}, {"program", "loop."});
    }
  }
  return 0;
}
