// What every chart needs from a StepReport, computed once: each buffer's
// live range in simulated time and in op order, the phase / loop / iteration
// spans, the live-bytes curve, the peak to mark, the role palette, and
// human-readable sizes and times.
//
// Op ordinals: the k-th timed event of the trace (compute, copy,
// collective) is op k; lowering emits one per Program op, in order, so op k
// is also program.ops[k] (when the counts differ, program regions are
// ignored and phases come from the trace).
#ifndef GPUSIM_VIZ_STEP_VIEW_H_
#define GPUSIM_VIZ_STEP_VIEW_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "sim/step/step.h"
#include "viz/svg.h"

namespace gpusim {
namespace viz_internal {

struct Span {
  std::string label;
  Phase phase = Phase::kOther;
  int64_t op0 = 0, op1 = 0;  // ops [op0, op1)
  SimTime t0, t1;
};

struct LivePoint {
  SimTime t;
  Bytes live;  // after the event
  int64_t event = -1;
};

// Note [Repeated iterations in the charts]
// A rolled loop built once (Note [Rolled loop built once], sim/lower/
// lower.h) has its steady iteration's events in the trace once; the engine
// starts the events after them (times - 1) periods later
// (SimResult::repeat_periods). Drawn as built, that time was empty: no
// slice on any stream, no memory sample, a flat live curve. The iterations
// it stands for are the steady one again, one period apart, each with its
// live set, so the charts draw them there, in bounded output whatever the
// trip count: per stream one slice over the further iterations' span
// (Perfetto), and the memory curves the steady iteration's maximum over
// that span, settling at its end value, as a curve reduced to per-column
// maxima draws it wherever a pixel column spans a period.
struct RepeatSpan {
  int64_t first = 0, last = -1;  // the steady iteration's events (Trace::repeats)
  int64_t times = 1;             // the iterations it stands for
  SimTime period;
  std::string label;  // its program region's name, or "events first-last"
  // The further iterations, on the charts' clock: from the steady run's
  // start plus one period to its end plus (times - 1) periods.
  SimTime t0, t1;
};

struct StepView {
  const StepReport* r = nullptr;
  bool xla = false;  // framework jax: XLA static accounting
  // Per trace event: when it starts and ends on the charts' clock — the
  // simulated one, or, for a trace with no timed events (a memory
  // snapshot: everything at t = 0), the event clock: event e at "e ns".
  std::vector<SimTime> start, end;
  bool event_clock = false;
  SimTime step_time;  // ≥ 1 ns so scales never divide by zero
  int64_t num_ops = 0;
  std::vector<int64_t> op_event;  // per op: its trace event
  // Per buffer: live over [t0, t1] and ops [op0, op1).
  std::vector<SimTime> t0, t1;
  std::vector<int64_t> op0, op1;
  std::vector<Span> phases;      // maximal runs of ops with one phase
  std::vector<Span> loops;       // program regions of kind "loop"
  std::vector<Span> iterations;  // "layer" regions, else runs of one op.layer
  std::vector<RepeatSpan> repeats;  // in trace order
  // Live bytes after every memory event, and over each repeat's further
  // iterations its maximum then its end value (Note [Repeated iterations in
  // the charts]).
  std::vector<LivePoint> live;
  Bytes live_peak;
  // The peak `explain` describes: XLA the temp peak, eager the live peak.
  int64_t peak_event = -1;
  SimTime peak_time;
  int64_t peak_op = 0;
  std::string peak_op_name;
};

StepView BuildStepView(const StepReport& r);

// "12.5 ms", or "event 1,234" on the event clock.
std::string WhenLabel(const StepView& v, SimTime t);
// The x-axis title and the scale of its tick numbers: simulated time in ms
// or us, or memory events.
struct TimeAxis {
  std::string title;
  double divisor = 1;  // tick value = ns / divisor
};
TimeAxis TimeAxisFor(const StepView& v);
// Draws the time axis under a plot at (left, top) of pw x ph: ticks up to
// `tmax` ns with their values, and the axis title at y = title_y.
void DrawTimeAxis(Svg& svg, const StepView& v, double tmax, double left, double top, double pw, double ph,
                  double title_y);

// Draws the byte axis left of a plot at (left, top) of pw x ph over
// [0, ymax] bytes: about `ticks` ticks in GiB, MiB or KiB with their values,
// faint grid lines across the plot when `grid`, and the rotated title
// "WHAT (UNIT)" at x = 18.
void DrawBytesAxis(Svg& svg, double ymax, double left, double top, double pw, double ph, int ticks, bool grid,
                   std::string_view what);

// Fill colour of a role (a colour-blind-safe palette, Tableau 10).
std::string_view RoleColor(Role role);
// Roles in legend order.
const std::vector<Role>& LegendRoles();
std::string_view PhaseColor(Phase p);  // light background tint

// The call stack buffer `id`'s alloc recorded (native trace 1.1 `stack=`,
// Trace::frames), innermost first, as memory_viz shows it (Note
// [memory_viz's frame filter], sim/trace/frames.h: C++ unwinder and
// interpreter frames dropped, repeats elided): "function (file:line)" for
// up to `max_frames` lines, then "… N more frames" when there are more;
// empty when none was recorded. The peak table's and the memory map's tooltips
// show it.
std::vector<std::string> AllocFrames(const StepReport& r, BufferId id, size_t max_frames);

// "2.69 GiB", "32.0 MiB", "12 B": binary units, 3 significant digits.
std::string HumanBytes(Bytes b);
// "462.3 ms", "3.0 us".
std::string HumanTime(SimTime t);

}  // namespace viz_internal
}  // namespace gpusim

#endif  // GPUSIM_VIZ_STEP_VIEW_H_
