// `gpusim diff`: two simulated steps side by side, their memory difference
// attributed to buffers (live at each one's peak, matched by name) and their
// step-time difference attributed to ops (matched by name with the layer or
// iteration index folded, e.g. "layer*.wq.all_gather").
#ifndef GPUSIM_SIM_REPORT_DIFF_H_
#define GPUSIM_SIM_REPORT_DIFF_H_

#include <string>
#include <vector>

#include "sim/step/step.h"

namespace gpusim {

struct DiffLine {
  std::string name;
  std::string origin;
  std::string kind;  // the buffer's Tensor::origin_kind, where its builder set one
  int64_t a = 0, b = 0;  // bytes, or nanoseconds for ops
  int64_t delta() const { return b - a; }
};

struct StepDiff {
  Bytes temp_a, temp_b, peak_a, peak_b;
  Bytes live_peak_a, live_peak_b;
  std::vector<DiffLine> buffers;  // |delta| descending
  std::vector<DiffLine> groups;   // buffers summed by kind (Tensor::origin_kind, else the origin)
  SimTime time_a, time_b;
  std::vector<DiffLine> ops;      // |delta| descending
};

StepDiff DiffSteps(const StepReport& a, const StepReport& b);
std::string RenderDiffText(const StepDiff& d, const std::string& label_a, const std::string& label_b, int top);
std::string RenderDiffJson(const StepDiff& d, const std::string& label_a, const std::string& label_b);

}  // namespace gpusim

#endif  // GPUSIM_SIM_REPORT_DIFF_H_
