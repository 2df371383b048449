// Explaining a peak: which buffers are live at it, why they exist (origin in
// words) and when they live.
#ifndef GPUSIM_SIM_REPORT_EXPLAIN_H_
#define GPUSIM_SIM_REPORT_EXPLAIN_H_

#include <string>
#include <vector>

#include "sim/step/step.h"

namespace gpusim {

struct PeakBuffer {
  BufferId buffer = -1;
  std::string name;
  std::string origin;
  std::string origin_kind;  // BufferInfo::origin_kind
  Role role = Role::kTemporary;
  Bytes bytes;
  std::string from;  // op at allocation
  std::string to;    // op at free, or "end of step"
};

// Buffers live at the peak, largest first. XLA semantics: the temps at the
// temp peak; eager: everything at the live peak.
std::vector<PeakBuffer> BuffersAtPeak(const StepReport& r);
std::string RenderExplain(const StepReport& r, int top);

}  // namespace gpusim

#endif  // GPUSIM_SIM_REPORT_EXPLAIN_H_
