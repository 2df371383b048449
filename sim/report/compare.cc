#include "sim/report/compare.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "sim/base/json_writer.h"

namespace gpusim {

std::string RenderCompareText(const std::vector<CompareRow>& rows) {
  std::string o = absl::StrFormat("%-50s %10s %10s %9s %5s %9s %12s %10s %9s %11s %11s\n", "setting",
                                  "peak GiB", "temp GiB", "host GiB", "fits", "peak in", "recompute s",
                                  "PCIe s", "step s", "layer fwd", "layer bwd");
  for (const CompareRow& r : rows) {
    if (!r.ok) {
      absl::StrAppendFormat(&o, "%-50s error: %s\n", r.setting, r.error);
      continue;
    }
    absl::StrAppendFormat(&o, "%-50s %10.2f %10.2f %9.2f %5s %9s %12.4f %10s %9.4f %8.3f ms %8.3f ms\n", r.setting,
                          r.peak.GiB(), r.temp.GiB(), r.host.GiB(),
                          r.fit_word == "yes" ? "yes" : r.fits ? "yes*" : "NO", r.peak_phase,
                          r.recompute_s,
                          absl::StrFormat("%.4f", r.host_transfer_s) +
                              (r.host_transfer_s > 0 ? absl::StrFormat(" (%.3f)", r.host_exposed_s) : ""),
                          r.step_s, r.layer_forward_ms, r.layer_backward_ms);
    if (!r.rank.empty()) absl::StrAppendFormat(&o, "%-50s peak rank: %s; step s is the pipeline's\n", "", r.rank);
    if (r.fits && r.fit_word != "yes") absl::StrAppendFormat(&o, "%-50s * fits %s\n", "", r.fit_word);
  }
  o += "(GiB = 2^30; PCIe s: host copies both ways, exposed in parentheses; layer times: mean over layers)\n";
  return o;
}

std::string RenderCompareJson(const std::vector<CompareRow>& rows) {
  JsonWriter w;
  w.BeginArray();
  for (const CompareRow& r : rows) {
    w.BeginObject().String("setting", r.setting).Bool("ok", r.ok);
    if (!r.ok) {
      w.String("error", r.error).EndObject();
      continue;
    }
    w.Int("peak_bytes", r.peak.value())
        .Int("temp_bytes", r.temp.value())
        .Int("host_bytes", r.host.value())
        .Bool("fits", r.fits)
        .String("fits_as", r.fit_word)
        .String("peak_phase", r.peak_phase)
        .Double("step_time_s", r.step_s)
        .Double("recompute_s", r.recompute_s)
        .Double("host_transfer_s", r.host_transfer_s)
        .Double("host_transfer_exposed_s", r.host_exposed_s)
        .Double("layer_forward_ms", r.layer_forward_ms)
        .Double("layer_backward_ms", r.layer_backward_ms);
    if (!r.rank.empty()) w.String("peak_rank", r.rank);
    w.EndObject();
  }
  w.EndArray();
  return w.Finish();
}

}  // namespace gpusim
