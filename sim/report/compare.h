// Text and JSON renderings of `gpusim compare` rows (sim/advise/compare.h).
#ifndef GPUSIM_SIM_REPORT_COMPARE_H_
#define GPUSIM_SIM_REPORT_COMPARE_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "sim/advise/compare.h"

namespace gpusim {

std::string RenderCompareText(const std::vector<CompareRow>& rows);
std::string RenderCompareJson(const std::vector<CompareRow>& rows);

}  // namespace gpusim

#endif  // GPUSIM_SIM_REPORT_COMPARE_H_
