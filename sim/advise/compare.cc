// See compare.h.
#include "sim/advise/compare.h"

#include "absl/strings/str_cat.h"
#include "sim/advise/advise.h"
#include "sim/base/status.h"
#include "sim/step/step.h"

namespace gpusim {

absl::StatusOr<std::vector<CompareRow>> Compare(const std::string& config, const std::vector<std::string>& sets,
                                                const std::string& vary) {
  ASSIGN_OR_RETURN(GridAxis axis, ParseAxis(vary));
  std::vector<CompareRow> rows(axis.values.size());
  for (size_t i = 0; i < rows.size(); ++i) rows[i].setting = absl::StrCat(axis.path, "=", axis.values[i]);
  AdviseOptions o;
  o.config = config;
  o.base_sets = sets;
  o.axes = {axis};
  o.on_report = [&rows](int64_t i, const StepReport& r) {
    CompareRow& row = rows[static_cast<size_t>(i)];
    row.ok = true;
    row.peak = r.peak;
    row.temp = r.temp;
    row.host = r.lowered.host_bytes;
    row.fits = r.fits;
    row.fit_word = r.verdict.Word();
    const int64_t e = r.semantics.accounting == Accounting::kXlaMemoryAnalysis ? r.temp_peak_event : r.sim.peak_event;
    row.peak_phase = e < 0 ? "start" : std::string(PhaseName(r.lowered.event_phase[static_cast<size_t>(e)]));
    row.step_s = r.sim.step_time.seconds();
    row.recompute_s = r.sim.recompute_busy.seconds();
    row.host_transfer_s = r.sim.copy_busy.seconds();
    row.host_exposed_s = r.sim.exposed_copy.seconds();
    if (!r.layer_times.empty()) {
      for (const LayerTime& t : r.layer_times) {
        row.layer_forward_ms += t.forward.seconds() * 1e3;
        row.layer_backward_ms += t.backward.seconds() * 1e3;
      }
      row.layer_forward_ms /= static_cast<double>(r.layer_times.size());
      row.layer_backward_ms /= static_cast<double>(r.layer_times.size());
    }
  };
  ASSIGN_OR_RETURN(AdviceResult result, Advise(o));
  for (const AdvicePoint& p : result.points) {
    if (!p.ok) rows[static_cast<size_t>(p.index)].error = p.error;
    rows[static_cast<size_t>(p.index)].rank = p.rank;
  }
  return rows;
}

}  // namespace gpusim
