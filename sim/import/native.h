// A native trace file (traces/FORMAT.md, `gpusim-trace 1...`) as a
// RecordedTrace, so `gpusim replay` and `gpusim compare` run the traces
// gpusim writes and the ones python/gpusim_torch records on the CPU through
// the same allocator replay as recorded GPU runs.
#ifndef GPUSIM_SIM_IMPORT_NATIVE_H_
#define GPUSIM_SIM_IMPORT_NATIVE_H_

#include <string>

#include "absl/status/statusor.h"
#include "sim/import/recorded_trace.h"
#include "sim/trace/trace.h"

namespace gpusim {

// Each alloc and free becomes a memory event in file order, with the buffer
// id as its address (ids are unique among live buffers, so ToNativeTrace
// pairs each free with its alloc); Trace::preexisting becomes one
// kPreexisting event first. No recorded totals, so replay compares none.
// REQUIRES: `trace` passes ValidateTrace.
RecordedTrace NativeToRecorded(const Trace& trace, const std::string& source);

// Reads (ReadTraceFile) and validates (ValidateTrace) `path`, then converts.
absl::StatusOr<RecordedTrace> ImportNativeTrace(const std::string& path);

}  // namespace gpusim

#endif  // GPUSIM_SIM_IMPORT_NATIVE_H_
