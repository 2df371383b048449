// Text and JSON renderings of one simulated step (sim/step/step.h). JSON
// keys are a contract (DESIGN.md "Outputs users rely on"): add, never rename.
#ifndef GPUSIM_SIM_REPORT_RENDER_H_
#define GPUSIM_SIM_REPORT_RENDER_H_

#include <string>

#include "sim/step/step.h"

namespace gpusim {

std::string RenderText(const StepReport& r);
std::string RenderJson(const StepReport& r);

}  // namespace gpusim

#endif  // GPUSIM_SIM_REPORT_RENDER_H_
