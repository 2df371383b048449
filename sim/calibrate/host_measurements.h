// The host side of one training step recorded by the PyTorch profiler
// (Kineto): what the Python thread and autograd's engine did, counted in
// the units the device's recorded host costs price (host.dispatch,
// host.node, host.python_module; Note [Recorded host costs] in
// sim/lower/eager/host_timeline.h), and the CPU spans they took.
// Calibration (calibrate.h) fits those costs to the spans.
//
// Note [Host phase spans from Kineto]
// The same phases as the offline fit (Note [Host phase spans],
// tools/collect/kineto_classes.py), read from one RecordedTrace:
//   main thread    the thread whose first cpu_op starts first (the Python
//                  thread that runs the step);
//   engine threads the other threads that ran an
//                  "autograd::engine::evaluate_function: NODE" range
//                  (torch/csrc/autograd/engine.cpp evaluate_function's
//                  RECORD_FUNCTION; CUDA work runs on the device threads
//                  engine.cpp start_device_threads starts);
//   forward span   the main thread's first op to the engine's first op;
//   backward span  the engine's first op to its last op's end;
//   CPU span       the main thread's first op to the last cpu_op's end.
// Counts:
//   dispatches (D) the main thread's forward-window ops as the recorder
//                  counts them (Note [Dispatches from a Kineto trace]);
//   nodes (N)      the engine threads' evaluate_function ranges;
//   module calls   the main thread's "nn.Module: NAME" python_function
//   (M)            events starting before the backward (with_stack);
//                  unknown when the trace has none.
// The profiler slows the host (a RecordFunction per op, a Python frame per
// call with with_stack): given the step's unprofiled time, each span is
// divided by the case's inflation (CPU span / unprofiled step); without
// it the spans are as profiled and the calibration says so.
// Not read: a trace of several steps (more than one ProfilerStep# range is
// refused), a backward run on the main thread (a CPU-only step: the phases
// cannot be told apart), the optimizer's span (its host work is priced by
// host.dispatch but not fitted from it: its span mixes Python loops the
// counts do not see).
//
// Note [Dispatches from a Kineto trace]
// gpusim_torch's recorder counts one dispatch per op reaching its
// TorchDispatchMode (python/gpusim_torch/recorder.py _count_host_work): the
// Python key sits below Autograd, so a CompositeImplicitAutograd op
// (aten::linear) is not seen, its decomposition's ops (aten::t,
// aten::addmm) are, and the ops a kernel calls inside it are not (the mode
// is off while it runs). Kineto records every dispatcher entry as a cpu_op,
// nested. The dispatcher gives a cpu_op a "Sequence number" when the op
// is entered with an autograd key in its dispatch key set and grad mode on
// (aten/src/ATen/core/dispatch/Dispatcher.cpp
// sequenceNumberForRunningRecordFunction): an op with an autograd kernel
// and a CompositeImplicitAutograd op both have one, the ops a backend
// kernel calls (below autograd: AutoDispatchBelowADInplaceOrView) do not. So
// a top-level op with a sequence number and a sequence-numbered child ran
// its decomposition above autograd: its children are the dispatches,
// counted by the same rule (a factory among them, aten::empty, has no
// tensor input and so no autograd key and no sequence number, and is one
// dispatch: _batch_norm_impl_index's reserve buffer); every other op (no
// sequence number: grad mode off, a factory; or no sequence-numbered child)
// is one dispatch.
// Where the counts differ (docs/validation.md "host-calibration"): a
// CompositeImplicitAutograd op that dispatches nothing (aten::to to its own
// dtype, aten::dropout at p = 0; TensorConversions.cpp to_impl and
// Dropout.cpp return the input) is a cpu_op with no child, one dispatch
// here and none to the recorder; and the aten::detach a TorchDispatchMode
// sees after each in-place aten::relu_ (torch 2.15 on the CPU; reached
// without a dispatcher call() of its own, the one place a RecordFunction is
// made: Dispatcher.cpp's note that `redispatch` has no profiler
// instrumentation) is a dispatch to the recorder and no cpu_op here. Nodes:
// the recorder counts a node when one of its ops reaches the mode
// (recorder.py _count_host_work: _current_autograd_node changes), so a node
// that dispatches no op (one whose formula passes the gradient on as it is:
// CloneBackward0, `self: grad` in tools/autograd/derivatives.yaml) is one
// evaluate_function here and none to the recorder.
#ifndef GPUSIM_SIM_CALIBRATE_HOST_MEASUREMENTS_H_
#define GPUSIM_SIM_CALIBRATE_HOST_MEASUREMENTS_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "sim/base/units.h"
#include "sim/import/recorded_trace.h"

namespace gpusim {

struct HostMeasurements {
  int engine_threads = 0;
  int64_t top_level_ops = 0;  // the main thread's forward-window top-level cpu_ops
  int64_t dispatches = 0;     // D
  int64_t nodes = 0;          // N
  std::optional<int64_t> module_calls;  // M; nullopt: no nn.Module events
  SimTime forward_span, backward_span, cpu_span;  // as profiled
};

// The host phases of `trace` (imported with keep_cpu_ops and
// keep_module_calls). An error (never a guess) says why a trace has none:
// no cpu_op, no autograd engine thread, several ProfilerStep# ranges.
absl::StatusOr<HostMeasurements> ExtractHostMeasurements(const RecordedTrace& trace);

}  // namespace gpusim

#endif  // GPUSIM_SIM_CALIBRATE_HOST_MEASUREMENTS_H_
