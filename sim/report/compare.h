// `gpusim compare`: one run config evaluated at each value of one axis
// (`--vary remat.policy=full,minimal,...`), one table row per value with the
// quantities a remat / offload choice trades: peak and temp device memory,
// pinned-host bytes, recompute and PCIe time, step time, per-layer
// forward / backward time. Rows are in the order given.
#ifndef GPUSIM_SIM_REPORT_COMPARE_H_
#define GPUSIM_SIM_REPORT_COMPARE_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "sim/report/step.h"

namespace gpusim {

struct CompareRow {
  std::string setting;  // "path=value"
  bool ok = false;
  std::string error;    // when !ok (the point failed to load or simulate)
  Bytes peak, temp, host;
  bool fits = false;
  std::string peak_phase;  // phase of the event holding the peak
  double step_s = 0, recompute_s = 0, host_transfer_s = 0, host_exposed_s = 0;
  double layer_forward_ms = 0, layer_backward_ms = 0;  // means over layers; 0 without layers
};

// `vary` is "path=v1,v2,...". A config that does not load (bad path, bad
// value) is an error; a point that fails to simulate (e.g. an unknown remat
// policy) becomes a row with its error.
absl::StatusOr<std::vector<CompareRow>> Compare(const std::string& config, const std::vector<std::string>& sets,
                                                const std::string& vary);
std::string RenderCompareText(const std::vector<CompareRow>& rows);
std::string RenderCompareJson(const std::vector<CompareRow>& rows);

}  // namespace gpusim

#endif  // GPUSIM_SIM_REPORT_COMPARE_H_
