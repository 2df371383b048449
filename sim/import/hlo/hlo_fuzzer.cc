// libFuzzer target: the HLO text parser (sim/import/hlo/hlo_parser.h), then
// the importer (hlo_to_program.h) and the XLA lowering of what it emits. A
// rejection must be InvalidArgument/Unimplemented naming the file; an
// accepted module must lower.
#include <cstddef>
#include <cstdint>
#include <string>

#include "sim/import/hlo/hlo_parser.h"
#include "sim/import/hlo/hlo_to_program.h"
#include "sim/lower/lower.h"
#include "tests/fuzz/fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace gpusim;
  const std::string text(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<HloModule> m = ParseHloModule(text, "fuzz.hlo");
  if (!m.ok()) {
    fuzz::CheckRejection(m.status(), {absl::StatusCode::kInvalidArgument}, {"fuzz.hlo:"});
    return 0;
  }
  absl::StatusOr<Program> p = HloToProgram(*m, {.trip_count = 3});
  if (!p.ok()) {
    fuzz::CheckRejection(p.status(), {absl::StatusCode::kInvalidArgument, absl::StatusCode::kUnimplemented},
                         {"fuzz.hlo", "input_output_alias"});
    return 0;
  }
  absl::StatusOr<LoweredStep> l = LowerEager(*p, {.reuse_operand_buffers = true});
  if (!l.ok()) fuzz::Fail("an imported module does not lower", l.status());
  return 0;
}
