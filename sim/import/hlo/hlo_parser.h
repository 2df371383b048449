// Parser of the HLO text format (xla/hlo/parser/hlo_parser.cc is the
// reference grammar; this reads the subset XLA's printer writes:
// HloPrintOptions defaults and the `as_hlo_text()` of JAX): the module
// header with `input_output_alias`, `buffer_donor`, `num_partitions` and
// `replica_count`; computations with or without a printed signature; one
// instruction per line, `[ROOT] name = SHAPE opcode(operands), attr=value...`,
// operands with or without their shapes and `%` sigils, `/*index=5*/`
// comments. Every error names FILE:LINE:COL and what was expected.
#ifndef GPUSIM_SIM_IMPORT_HLO_HLO_PARSER_H_
#define GPUSIM_SIM_IMPORT_HLO_HLO_PARSER_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "sim/import/hlo/hlo_module.h"

namespace gpusim {

// `file` names the text in errors. The result's instructions are in an
// order where every operand comes before its user.
absl::StatusOr<HloModule> ParseHloModule(absl::string_view text, const std::string& file);

// Reads and parses the file at `path`, plain or gzip-compressed (NotFound
// when it cannot be read).
absl::StatusOr<HloModule> ReadHloModule(const std::string& path);

// Parses one shape such as "(s32[], bf16[4,8]{1,0})"; for tests and for
// the importer's attribute readers.
absl::StatusOr<HloShape> ParseHloShape(absl::string_view text);

}  // namespace gpusim

#endif  // GPUSIM_SIM_IMPORT_HLO_HLO_PARSER_H_
