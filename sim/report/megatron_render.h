// Text and JSON of a Megatron-LM launch line (sim/step/megatron_step.h).
// The JSON is the peak rank's step (render.h keys, time.step_time_s the
// whole pipeline's step) plus `megatron` (the parallel layout, schedule and
// every argument with how it was treated) and `ranks` (one entry per
// pipeline stage).
#ifndef GPUSIM_SIM_REPORT_MEGATRON_RENDER_H_
#define GPUSIM_SIM_REPORT_MEGATRON_RENDER_H_

#include <string>

#include "sim/step/megatron_step.h"

namespace gpusim {

std::string RenderMegatronText(const MegatronReport& r);
std::string RenderMegatronJson(const MegatronReport& r);

}  // namespace gpusim

#endif  // GPUSIM_SIM_REPORT_MEGATRON_RENDER_H_
