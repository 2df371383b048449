// Importer for torch.profiler's memory timeline, raw form
// (profile.export_memory_timeline("x.raw.json.gz", device) or
// MemoryProfileTimeline.export_memory_timeline_raw): a JSON array of
// [timestamp_ns, action, bytes, category] rows for one device, plain or .gz.
// PyTorch torch/profiler/_memory_profiler.py:
//   action   1 PREEXISTING (ts -1), 2 CREATE, 3 INCREMENT_VERSION (two rows:
//            -bytes in the old version's category, +bytes in the new one),
//            4 DESTROY (-bytes);
//   category index into _CATEGORY_TO_COLORS: 0 parameter, 1 optimizer state,
//            2 input, 3 temporary, 4 activation, 5 gradient, 6 autograd
//            detail, 7 unknown.
// Rows carry no address, so ToNativeTrace matches destroys to creates by
// size (Note [Matching frees] in recorded_trace.cc).
#ifndef GPUSIM_SIM_IMPORT_MEMORY_TIMELINE_H_
#define GPUSIM_SIM_IMPORT_MEMORY_TIMELINE_H_

#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "sim/import/byte_source.h"
#include "sim/import/recorded_trace.h"

namespace gpusim {

// The Role for a timeline category index; nullopt for 7 (unknown) and out of
// range. Autograd detail (6) maps to Role::kTemporary.
std::optional<Role> MemoryTimelineCategoryRole(int64_t category);

// Each row becomes one RecordedMemoryEvent (device 0) except that an
// increment-version pair becomes one kIncrementVersion event (category = the
// new one, previous_category = the old one): kPreexisting, kAlloc (create),
// kFree (destroy; size = bytes freed).
absl::StatusOr<RecordedTrace> ImportMemoryTimelineRaw(const std::string& path);
absl::StatusOr<RecordedTrace> ImportMemoryTimelineRaw(ByteSource& source,
                                                      const std::string& label);

}  // namespace gpusim

#endif  // GPUSIM_SIM_IMPORT_MEMORY_TIMELINE_H_
