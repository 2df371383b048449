// One simulated training step, end to end: build the Program from the
// model, lower it, replay it on the device, and account its memory the way
// the framework reports it. sim/report/render.h renders a StepReport.
#ifndef GPUSIM_SIM_STEP_STEP_H_
#define GPUSIM_SIM_STEP_STEP_H_

#include <array>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "sim/alloc/start_state.h"
#include "sim/base/verdict.h"
#include "sim/config/spec.h"
#include "sim/engine/engine.h"
#include "sim/ir/program.h"
#include "sim/lower/eager/host_timeline.h"
#include "sim/lower/lower.h"
#include "sim/lower/semantics.h"
#include "sim/lower/xla/entry_schedule.h"

namespace gpusim {

// Wall time of one decoder layer's forward and backward regions on the
// compute stream: from its first compute kernel's start to its last one's
// end, so waits on collectives and copies inside the layer are included.
struct LayerTime {
  int layer = -1;
  SimTime forward, backward;
  SimTime backward_recompute;  // compute spent rematerialising in the backward
};

struct StepReport {
  RunSpec spec;  // as simulated (sim/step/capabilities.h ApplyCapabilities)
  // The facts of spec's framework (Note [Framework semantics],
  // sim/lower/semantics.h): what the step, reports and viz ask instead of
  // the framework's name.
  LoweringSemantics semantics;
  // Setting paths the run's family models under its framework: what the
  // header may print.
  std::vector<std::string> modelled;
  int64_t param_count = 0;
  Program program;
  LoweredStep lowered;
  // The host side of an eager step (Note [Eager host costs]); all zero
  // under jax (one executable launch, not modelled).
  HostTimelineSummary host;
  SimResult sim;
  // XLA memory_analysis() accounting (../shared/reference/xla_semantics.md §1).
  Bytes argument, output, alias, temp;
  Bytes temp_live_peak;        // the no-fragmentation lower bound of temp
  int64_t temp_peak_event = -1;
  std::string heap_algorithm;  // XLA heap packing that gave `temp`
  // jax: XLA's entry schedule and its copy elision (sim/lower/xla/entry_schedule.h).
  EntrySchedule entry_schedule;
  std::vector<Bytes> temp_offsets;  // per buffer: heap offset, -1 if not a temp
  // Peak device footprint: argument + output − alias + temp under XLA;
  // the replayed live peak under eager semantics.
  Bytes peak;
  Bytes capacity;
  // verdict.fits(): the step fits as the framework will run it (Note
  // [Verdict] in sim/base/verdict.h), with verdict.setting when it names one.
  bool fits = true;
  Verdict verdict;
  // XLA programs: does the step fit JAX's runtime arena? Note [JAX arena]
  // in step.cc.
  struct JaxArena {
    bool checked = false;
    std::string allocator;     // "bfc" with its options
    double mem_fraction = 0;
    bool preallocate = true;
    Bytes arena;               // mem_fraction x the device's cudaMemGetInfo total
    bool fits = true;
    double needed_fraction = 0;  // (argument + output - alias + temp) / total
    // The lowest two-decimal XLA_PYTHON_CLIENT_MEM_FRACTION whose arena
    // holds the step and that the device can give (0: none).
    double fitting_fraction = 0;
  } jax_arena;
  double tokens_per_step = 0;
  std::vector<LayerTime> layer_times;  // by layer; empty without layer regions
  // Why the peak is where it is: the largest buffers live at the temp peak
  // (XLA) or at the live peak (eager), largest first.
  std::vector<BufferId> peak_holders;
  // The allocator state the memory replay started from, under the report's
  // buffer ids (ReportFromTrace with a start state; empty: cold). What
  // replays r.lowered.trace again (explain --time's StepCriticalPath)
  // starts from it: StartedAllocator; the memory map and the memory snapshot
  // read the engine's log (sim.memory_log) instead.
  AllocatorStartState start;
  // sim is the engine run StepCriticalPath makes, its critical path walked
  // (SimulateStep, ReportFromTrace asked for it).
  bool sim_has_critical_path = false;
};

// r.spec.allocator at r.capacity, restored to r.start.
absl::StatusOr<std::unique_ptr<Allocator>> StartedAllocator(const StepReport& r);

// Per-layer times from the regions named "layerN.forward" / "layerN.backward".
std::vector<LayerTime> LayerTimes(const StepReport& r);

// `critical_path`: the engine walks the step's critical path as it runs
// (StepReport::sim_has_critical_path), so that explain --time replays once.
absl::StatusOr<StepReport> SimulateStep(const RunSpec& spec, bool critical_path = false);

// The engine run of r's step again, as ReplayStep or ReportFromTrace ran it
// (the same allocator, start state and device), with its critical path
// (Note [Critical path segments], sim/engine/engine.h): `gpusim explain
// --time`. Its step time is r.sim.step_time unless a caller replaced that
// (a Megatron launch line's rank view holds the pipeline schedule's).
// A report whose engine run walked it already (sim_has_critical_path) is
// not replayed: its sim is returned.
absl::StatusOr<SimResult> StepCriticalPath(const StepReport& r);

// What PrepareStep refuses before it builds anything, for callers that must
// refuse it up front (advise and compare check it before any grid point, so
// a refused input is exit 1, never "0 simulated"): a Megatron-LM launch line
// with no rank selected (it runs through sim/step/megatron_step.h).
absl::Status CheckStepInput(const RunSpec& spec);

// SimulateStep in two stages, for callers that replay one step on several
// devices (the advisor). PrepareStep does what does not depend on
// spec.device: build, lower, XLA memory accounting and heap packing.
// ReplayStep runs the engine on r.spec.device through r.spec.allocator and
// fills capacity, sim, fits (and peak under eager semantics); it may be
// called again after changing r.spec.device or r.spec.allocator.
// REQUIRES (ReplayStep): r from PrepareStep.
absl::StatusOr<StepReport> PrepareStep(const RunSpec& spec);
// `keep_memory_log`: the engine keeps its event log (Note [One memory event
// log], sim/engine/engine.h) for the charts and the memory snapshot;
// SimulateStep and ReportFromTrace keep it, a grid point need not.
absl::Status ReplayStep(StepReport& r, bool keep_memory_log = false, bool critical_path = false);

// A report for a trace that was recorded or written rather than lowered from
// a model: its buffers come from the alloc/free events, memory is replayed
// in trace order through `spec.allocator` on `spec.device` (eager
// semantics: the peak is the live peak). `start`, when set, is the state
// the replay of the same import started from (ReplayResult::start, under
// the trace's buffer ids): the allocator is restored to it first (Note [One
// start state for every command], sim/alloc/start_state.cc).
// `critical_path` as for SimulateStep.
absl::StatusOr<StepReport> ReportFromTrace(const Trace& trace, const RunSpec& spec,
                                           const AllocatorStartState* start = nullptr, bool critical_path = false);


}  // namespace gpusim

#endif  // GPUSIM_SIM_STEP_STEP_H_
