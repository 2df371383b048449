// Explaining a step time: `gpusim explain --time`. The engine's critical
// path (Note [Critical path segments], sim/engine/engine.h) summed by op
// class, by layer and by what gated each start, its largest segments, the
// spans where the GPU waited for the host, and communication exposed
// against overlapped.
//
// Note [Time classes]
// An event on the path is classed as tools/collect/kineto_classes.py
// (Note [Kernel classes], predicted_class) classes a predicted event when it
// sets the step's kernel time against a Kineto trace: by its kind and
// framework op (EventOpName, sim/device/timing.h) into gemm, attention,
// conv, elementwise, norm_reduce, optimizer, copy, other; collectives are
// `collective` (the Kineto side's nccl kernels). What is not a kernel has a
// class of its own: `host_issue` (the host issuing ops while the GPU
// waited), `allocator` (device-allocation calls, Note [Allocator time]),
// `repeated_iterations` (a rolled loop's further iterations, Note [Rolled
// loop built once]) and `idle` (a wait no recorded cause explains).
//
// Note [Time layers]
// The layer an event belongs to: for a model's step, the Program region
// holding its op ("layer N" for a decoder layer's forward, backward or
// recompute, "layers N-M" for a rolled region standing for several; else
// a rolled iteration, a loop (a scan, an HLO module's while: the body's
// events where nothing finer names them) or a phase region: the head's
// phases, the optimizer); for a
// recorded PyTorch step, the module path of its name (`MODULE:op`, python/
// gpusim_torch/recorder.py) up to its first numeric component: a
// ModuleList's or Sequential's child is named by its index
// (torch/nn/modules/container.py ModuleList.__init__ / add_module(str(i))),
// so `transformer.h.8.mlp.c_fc` is in `transformer.h.8`; otherwise the
// event's phase (forward, backward, optimizer).
#ifndef GPUSIM_SIM_REPORT_EXPLAIN_TIME_H_
#define GPUSIM_SIM_REPORT_EXPLAIN_TIME_H_

#include <string>
#include <vector>

#include "sim/engine/engine.h"
#include "sim/step/step.h"

namespace gpusim {

struct TimeRow {
  std::string name;
  SimTime time;       // on the critical path
  SimTime host;       // of which the host issuing ops (host-bound)
  int64_t segments = 0;
};

struct TimeContributor {
  std::string kind;   // "event", "host_issue", "repeated_iterations", "gap"
  int64_t event = -1;
  std::string name;   // the event's name
  std::string op_class, layer;
  std::string gate;   // PathGateName
  SimTime start, time;
};

// A run of consecutive host-issue segments: the GPU waited while the host
// issued events first..last.
struct HostBoundSpan {
  SimTime start, end;
  int64_t first_event = -1, last_event = -1;
  std::string first, last;       // their names
  std::string first_layer, last_layer;
};

struct TimeExplanation {
  std::string program, device, framework;
  SimTime step_time;        // the report's
  SimTime path_time;        // the engine's, the segments' sum
  std::string note;         // why the two differ, when they do
  int64_t segments = 0;
  std::vector<TimeRow> by_class, by_layer, by_gate;  // largest first
  std::vector<TimeContributor> top;
  int64_t rest_segments = 0;
  SimTime rest_time;
  SimTime host_bound;       // path time the GPU waited for the host
  std::vector<HostBoundSpan> host_spans;
  SimTime host_busy, host_wait;  // SimResult's (Note [Host timeline])
  SimTime communication, exposed_communication, overlapped_communication, communication_on_path;
};

// Note [Time classes] for the event a path segment names.
std::string TimeClassOf(const TraceEvent& e);

// Note [Time layers], per event of r.lowered.trace.
std::vector<std::string> EventLayers(const StepReport& r);

// REQUIRES: path from StepCriticalPath(r).
TimeExplanation ExplainTime(const StepReport& r, const SimResult& path, int top);
std::string RenderExplainTime(const TimeExplanation& t);
std::string RenderExplainTimeJson(const TimeExplanation& t);

}  // namespace gpusim

#endif  // GPUSIM_SIM_REPORT_EXPLAIN_TIME_H_
