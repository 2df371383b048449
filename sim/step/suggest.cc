#include "sim/step/suggest.h"

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "sim/remat/remat_policy.h"

namespace gpusim {
namespace {

struct Variant {
  std::string setting;  // "remat.policy=full"
  RunSpec spec;
};

std::vector<Variant> Variants(const StepReport& r) {
  std::vector<Variant> out;
  auto models = [&](const char* path) {
    return std::find(r.modelled.begin(), r.modelled.end(), path) != r.modelled.end();
  };
  if (r.spec.megatron.present || !r.spec.program_hlo.empty() || r.spec.program.present) return out;
  if (models("remat.policy")) {
    for (const RematPolicyInfo& p : ListRematPolicies()) {
      if (!p.params.empty() || p.name == r.spec.remat.policy) continue;
      Variant v{absl::StrCat("remat.policy=", p.name), r.spec};
      v.spec.remat.policy = p.name;
      v.spec.remat.policy_at.clear();
      out.push_back(std::move(v));
    }
  }
  if (models("loop.mode")) {
    const std::string other = r.spec.loop.mode == "rolled" ? "unrolled" : "rolled";
    Variant v{absl::StrCat("loop.mode=", other), r.spec};
    v.spec.loop.mode = other;
    out.push_back(std::move(v));
  }
  return out;
}

}  // namespace

absl::Status SuggestFit(StepReport& r) {
  if (r.verdict.fits()) return absl::OkStatus();
  // Remat and the loop mode change what the step keeps between its passes,
  // never its entry arguments and outputs (parameters, optimizer state,
  // gradients): when those alone exceed the device, no variant is tried.
  const Bytes fixed = r.argument + r.output - r.alias;
  if (fixed > r.capacity) {
    r.verdict.suggestion = absl::StrFormat(
        "a sharding or a larger device: the step's arguments and outputs (parameters, optimizer state, gradients) "
        "alone need %.2f GiB, which no remat policy or loop mode changes",
        fixed.GiB());
    return absl::OkStatus();
  }
  const double base = r.sim.step_time.seconds();
  const Variant* best = nullptr;
  Verdict best_verdict;
  double best_time = 0;
  std::vector<Variant> variants = Variants(r);
  for (const Variant& v : variants) {
    // A variant the pipeline refuses (a policy this family does not
    // support) is not a suggestion.
    absl::StatusOr<StepReport> s = PrepareStep(v.spec);
    if (!s.ok() || !ReplayStep(*s).ok() || !s->verdict.fits()) continue;
    const double t = s->sim.step_time.seconds();
    const bool defaults = s->verdict.kind == Verdict::Kind::kFits;
    const bool best_defaults = best != nullptr && best_verdict.kind == Verdict::Kind::kFits;
    if (best == nullptr || (defaults && !best_defaults) || (defaults == best_defaults && t < best_time)) {
      best = &v;
      best_verdict = s->verdict;
      best_time = t;
    }
  }
  if (best == nullptr) return absl::OkStatus();
  std::string how = best_verdict.kind == Verdict::Kind::kFits ? "fits" : absl::StrCat("fits ", best_verdict.Word());
  r.verdict.suggestion =
      base > 0 ? absl::StrFormat("%s (%s, step %+.0f%%)", best->setting, how, 100.0 * (best_time - base) / base)
               : absl::StrCat(best->setting, " (", how, ")");
  return absl::OkStatus();
}

}  // namespace gpusim
