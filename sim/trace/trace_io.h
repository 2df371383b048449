// Reading and writing Traces in the native text format, "gpusim trace 1.1",
// documented in traces/FORMAT.md: one line per stream declaration or event,
// `key=value` fields, defaults omitted. Reading streams line by line; every
// parse error names FILE:LINE, what was expected and the offending token.
// Writing is byte-for-byte deterministic, and WriteTrace followed by
// ReadTrace reproduces an equal Trace.
#ifndef GPUSIM_SIM_TRACE_TRACE_IO_H_
#define GPUSIM_SIM_TRACE_TRACE_IO_H_

#include <istream>
#include <ostream>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "sim/trace/trace.h"

namespace gpusim {

// The format version this code writes; readers accept any minor version of
// this major (see traces/FORMAT.md, "Versioning").
constexpr int kTraceFormatMajor = 1;
// 1.1: `frame` lines, `stack=` keys; 1.2: `meta` lines, `op=`, `dims=`;
// 1.3: `kind=broadcast`, a distributed step's meta keys; 1.4: `nodes=`.
constexpr int kTraceFormatMinor = 8;

// Parses a trace from `in`. `source_name` prefixes error messages
// ("t.trace:7: ..."). Syntax only: semantic checks (double frees, undeclared
// streams, ...) are ValidateTrace's (sim/trace/validate.h).
absl::StatusOr<Trace> ReadTrace(std::istream& in, std::string_view source_name);
absl::StatusOr<Trace> ReadTraceFile(const std::string& path);

// Writes `trace` to `out`. Fails (writing nothing) when a value cannot be
// represented: a negative byte count, or flops that are negative or not
// finite.
absl::Status WriteTrace(const Trace& trace, std::ostream& out);
// Atomic: writes `path.tmp-XXXXXX` in the same directory, then renames it
// over `path`. On failure nothing is left behind and `path` is untouched.
absl::Status WriteTraceFile(const Trace& trace, const std::string& path);

// Name escaping used for every name token (exposed for tests and importers):
// "" <-> "-", "-" <-> "%2D", and bytes that are whitespace, control
// characters, '%', '=', ',' or '#' <-> "%XX" (uppercase hex).
std::string EscapeTraceName(std::string_view name);
// Returns false on a malformed escape ('%' not followed by two hex digits).
bool UnescapeTraceName(std::string_view token, std::string* out);

}  // namespace gpusim

#endif  // GPUSIM_SIM_TRACE_TRACE_IO_H_
