// `gpusim compare CONFIG --vary path=v1,v2,...`: a one-axis grid of the
// advisor (sim/advise/advise.h), one row per value with the quantities a
// remat / offload choice trades: peak and temp device memory, pinned-host
// bytes, recompute and PCIe time, step time, per-layer forward / backward
// time. Rows are in the order given; sim/report/compare.h renders them.
#ifndef GPUSIM_SIM_ADVISE_COMPARE_H_
#define GPUSIM_SIM_ADVISE_COMPARE_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "sim/base/units.h"

namespace gpusim {

struct CompareRow {
  std::string setting;  // "path=value"
  bool ok = false;
  std::string error;    // when !ok (the point failed to simulate)
  Bytes peak, temp, host;
  bool fits = false;
  std::string fit_word;  // Verdict::Word(): "yes", "with XLA_PYTHON_CLIENT_MEM_FRACTION=0.97", "no"
  std::string peak_phase;  // phase of the event holding the peak
  double step_s = 0, recompute_s = 0, host_transfer_s = 0, host_exposed_s = 0;
  double layer_forward_ms = 0, layer_backward_ms = 0;  // means over layers; 0 without layers
  std::string rank;  // a launch line: the rank the figures are of (AdvicePoint::rank); else empty
};

// `vary` is "path=v1,v2,...". A misspelt path, a bad value or a value the
// run's family does not model is an error; a point that fails to simulate
// becomes a row with its error.
absl::StatusOr<std::vector<CompareRow>> Compare(const std::string& config, const std::vector<std::string>& sets,
                                                const std::string& vary);

}  // namespace gpusim

#endif  // GPUSIM_SIM_ADVISE_COMPARE_H_
