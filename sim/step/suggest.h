// Note [Suggested fix]
// A step that does not fit (Note [Verdict]) is re-simulated with one
// setting changed at a time among those its family models and that keep
// the model and batch as given: each remat policy that needs no names
// (sim/remat's registry), then the other loop mode. The fastest variant
// that fits is named in the verdict with its step-time change; one that
// fits under the runtime's defaults is preferred over one that needs a
// setting (XLA_PYTHON_CLIENT_MEM_FRACTION). None fitting: the verdict says
// so, and `gpusim advise` searches the wider grid (batch, devices). No
// variant is tried when the entry arguments and outputs alone exceed the
// device: neither setting changes them (the suggestion then says so).
#ifndef GPUSIM_SIM_STEP_SUGGEST_H_
#define GPUSIM_SIM_STEP_SUGGEST_H_

#include "absl/status/status.h"
#include "sim/step/step.h"

namespace gpusim {

// Sets r.verdict.suggestion when r does not fit and a variant does.
// REQUIRES: r from SimulateStep.
absl::Status SuggestFit(StepReport& r);

}  // namespace gpusim

#endif  // GPUSIM_SIM_STEP_SUGGEST_H_
