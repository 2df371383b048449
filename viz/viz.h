// viz: pictures of one simulated step (issue 7, "See the memory").
//
//   memory_map.svg/.png  buffers as rectangles over time × address, coloured
//                        by role, source or allocation (VizColorBy)
//   lifetimes.svg/.png   one bar per buffer over the op timeline, by role
//   dataflow.svg/.png/.dot  one loop iteration's ops and buffers (Graphviz),
//                        rolled beside unrolled when both lowerings are given
//   timeline.svg/.png    live, allocated and reserved bytes over simulated
//                        time (and a replayed trace's recorded counters),
//                        capacity, peak
//   active_memory.svg/.png  live bytes stacked by role, or by allocation
//                        (memory_viz's Active Memory Timeline), coloured
//                        as the memory map
//   timeline.json        Chrome-trace / Perfetto timeline (ui.perfetto.dev)
//   report.html          one self-contained page: summary, charts, top buffers
//
// Rendering: the dataflow graph is DOT laid out by Graphviz in-process
// (libgvc, behind viz/graphviz.h). The plots are SVG written directly; their
// PNGs are drawn by Graphviz too, through its rsvg image loader, so the PNG
// is the SVG pixel for pixel and no other rasteriser is needed.
//
// Scale (Note [Scale] in memory_map.cc): every chart has a fixed pixel size
// and caps what it draws — max_rects rectangles (smaller buffers merged into a
// coverage grid), max_labels labels, max_bars bars (the rest merged per
// role), max_dataflow_ops ops — so output size and render time stay bounded
// (seconds at 100,000 buffers; tests/viz_scale_test.cc).
//
// All output is deterministic: same report, same bytes.
#ifndef GPUSIM_VIZ_VIZ_H_
#define GPUSIM_VIZ_VIZ_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "sim/import/recorded_trace.h"
#include "sim/step/step.h"

namespace gpusim {

// A memory counter a recorded trace carried (PyTorch profiler "[memory]"
// events: "Total Allocated" / "Total Reserved" after the event), placed on
// the event of the report's trace that the recorded event became.
struct RecordedMemorySample {
  int64_t event = -1;  // index into StepReport::lowered.trace.events
  std::optional<Bytes> allocated;
  std::optional<Bytes> reserved;
};

// How blocks are coloured (viz/alloc_source.h): by role, by source (the
// user's innermost Python frame, or a recorder's op label; hash of the
// label), or one colour per allocation. kAuto: role where the step's roles
// say something, else source where any block has one, else allocation.
enum class VizColorBy { kAuto, kRole, kSource, kAllocation };

struct VizOptions {
  int max_rects = 4000;         // memory map: rectangles drawn one by one
  int max_labels = 14;          // memory map: labelled buffers
  int max_bars = 48;            // lifetimes: bars; the rest merged per role
  int max_dataflow_ops = 250;   // dataflow: ops shown, in program order
  int iteration = -1;           // dataflow: loop iteration (Op::layer); -1 = the middle one
  bool png = true;              // WriteCharts: also write PNGs
  VizColorBy color_by = VizColorBy::kAuto;  // memory map, lifetimes, active memory
  // Active memory timeline stacked by allocation: allocations drawn as
  // their own band, the largest first; the rest share one band.
  int max_active_allocations = 200;
  // Not owned; each must outlive the calls it is passed to.
  // The same step lowered with the other loop mode (rolled ↔ unrolled): the
  // dataflow graph then shows both lowerings side by side.
  const StepReport* other_loop_mode = nullptr;
  // A replayed trace's recorded counters, drawn on the timeline beside the
  // simulated ones.
  const std::vector<RecordedMemorySample>* recorded_memory = nullptr;
  // A recording's own clock: per event of StepReport::lowered.trace, the
  // time the recorder stamped on it (ns; SimTime(-1) where none). A trace
  // without timed events (a memory snapshot) then puts timeline.json on it
  // (viz/perfetto.cc, Note [A snapshot's clock]).
  const std::vector<SimTime>* recorded_times = nullptr;
};

// Writes memory_map, lifetimes, timeline, active_memory (.svg, and .png when options.png)
// and dataflow (.dot, .svg, .png) into `dir`, created if missing; each file
// atomically.
absl::Status WriteCharts(const StepReport& r, const std::string& dir, const VizOptions& options = {});

// Chrome-trace JSON (Perfetto, chrome://tracing), viz/perfetto.cc: the
// device as one process, one named thread per stream with its ops as
// complete slices, phases, loops and iterations on their own threads,
// counter tracks in time order (live bytes, by role, the allocator's
// allocated and reserved, options.recorded_memory's recorded ones), buffer
// lifetimes as async slices (bytes, role, origin), the peak and the
// out-of-memory point as instants. Timestamps in µs with ns precision.
// Written atomically.
absl::Status WritePerfettoTimeline(const StepReport& r, const std::string& path, const VizOptions& options = {});

// `dir`/report.html: one self-contained page (no network, SVGs inline).
absl::Status WriteHtmlReport(const StepReport& r, const std::string& dir, const VizOptions& options = {});

// The step as a PyTorch memory snapshot (the dict torch.cuda.memory.
// _snapshot() returns: segments with blocks, device_traces, allocator_settings)
// pickled with plain types, for pytorch.org/memory_viz and
// torch.cuda._memory_viz (viz/memory_snapshot.cc, Note [Snapshot from a
// simulation]). InvalidArgument when the step's allocator places no blocks
// (ideal, an XLA step) or logs no segments.
absl::StatusOr<std::string> MemorySnapshotPickle(const StepReport& r);
absl::Status WriteMemorySnapshot(const StepReport& r, const std::string& path);

// The counters `recorded` carried, placed on the events of `native`, the
// trace ToNativeTrace(recorded) (default options) made, which reported
// `stats`. Empty when nothing was recorded; an error when the two streams do
// not pair (viz/recorded_memory.cc).
absl::StatusOr<std::vector<RecordedMemorySample>> RecordedMemoryCounters(const RecordedTrace& recorded,
                                                                         const Trace& native,
                                                                         const ConversionStats& stats);

// Per event of the native trace ToNativeTrace made from `recorded`, the
// time its recorded event carried (RecordedMemoryEvent::time; SimTime(-1)
// for none, a GPU op, or a block live before recording), from the
// ToNativeOptions::source_index that conversion filled.
std::vector<SimTime> RecordedEventTimes(const RecordedTrace& recorded, const std::vector<int64_t>& source_index);

// The documents themselves, for tests and other writers.
std::string MemoryMapSvg(const StepReport& r, const VizOptions& options = {});
std::string LifetimesSvg(const StepReport& r, const VizOptions& options = {});
std::string TimelineSvg(const StepReport& r, const VizOptions& options = {});
// The active memory timeline (viz/active_memory.cc): live bytes stacked by
// role, or by allocation as memory_viz's Active Memory Timeline.
std::string ActiveMemorySvg(const StepReport& r, const VizOptions& options = {});
std::string DataflowDot(const StepReport& r, const VizOptions& options = {});
std::string PerfettoJson(const StepReport& r, const VizOptions& options = {});
absl::StatusOr<std::string> HtmlReport(const StepReport& r, const VizOptions& options = {});

}  // namespace gpusim

#endif  // GPUSIM_VIZ_VIZ_H_
