// Internal to sim/config/megatron_args*.cc: typed reads of a launch line's
// arguments (Args) and the mixture-of-experts part of the argument table
// and its parsing (megatron_moe_args.cc). Nothing else includes it.
#ifndef GPUSIM_SIM_CONFIG_MEGATRON_ARGS_INTERNAL_H_
#define GPUSIM_SIM_CONFIG_MEGATRON_ARGS_INTERNAL_H_

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "sim/config/megatron_args.h"
#include "sim/config/spec.h"

namespace gpusim {
namespace megatron_internal {

inline bool ParseInt64(const std::string& s, int64_t* out) {
  const char* b = s.data();
  const char* e = s.data() + s.size();
  if (b == e) return false;
  auto [ptr, ec] = std::from_chars(b, e, *out);
  return ec == std::errc() && ptr == e;
}

// Reads typed values out of the argument list, with errors that name the
// argument and where it was written.
class Args {
 public:
  explicit Args(const std::vector<MegatronArg>& args) {
    for (const MegatronArg& a : args) by_name_[a.name] = &a;
  }
  bool Has(const std::string& n) const { return by_name_.count(n) > 0; }
  const MegatronArg* Get(const std::string& n) const {
    auto it = by_name_.find(n);
    return it == by_name_.end() ? nullptr : it->second;
  }
  absl::Status Error(const std::string& n, const std::string& msg) const {
    const MegatronArg* a = Get(n);
    const std::string where = a != nullptr && !a->where.empty() ? a->where + ": " : "";
    const std::string shown = absl::EndsWith(n, ".py") ? n : "--" + n;  // a training script
    return absl::InvalidArgumentError(absl::StrCat(where, "megatron.args: ", shown, ": ", msg));
  }
  absl::Status Int(const std::string& n, int64_t* out, int64_t min = 1) const {
    const MegatronArg* a = Get(n);
    if (a == nullptr) return absl::OkStatus();
    int64_t v = 0;
    if (!ParseInt64(a->value, &v) || v < min) {
      return Error(n, absl::StrCat("expected an integer >= ", min, ", got '", a->value, "'"));
    }
    *out = v;
    return absl::OkStatus();
  }
  absl::Status Float(const std::string& n, double* out, double min, double max) const {
    const MegatronArg* a = Get(n);
    if (a == nullptr) return absl::OkStatus();
    double v = 0;
    if (!absl::SimpleAtod(a->value, &v) || !std::isfinite(v) || v < min || v > max) {
      return Error(n, absl::StrCat("expected a number in [", min, ", ", max, "], got '", a->value, "'"));
    }
    *out = v;
    return absl::OkStatus();
  }
  // A flag: absent false; "true"/"false" in a mapping.
  absl::Status Flag(const std::string& n, bool* out) const {
    const MegatronArg* a = Get(n);
    if (a == nullptr) return absl::OkStatus();
    const std::string v = absl::AsciiStrToLower(a->value);
    if (v == "true") {
      *out = true;
    } else if (v == "false") {
      *out = false;
    } else {
      return Error(n, absl::StrCat("is a flag (no value, or true/false in a mapping), got '", a->value, "'"));
    }
    return absl::OkStatus();
  }
  absl::Status Choice(const std::string& n, std::string* out, const std::vector<std::string>& choices) const {
    const MegatronArg* a = Get(n);
    if (a == nullptr) return absl::OkStatus();
    if (std::find(choices.begin(), choices.end(), a->value) == choices.end()) {
      return Error(n, absl::StrCat("expected one of ", absl::StrJoin(choices, "|"), ", got '", a->value, "'"));
    }
    *out = a->value;
    return absl::OkStatus();
  }
  absl::Status Require(const std::string& n) const {
    if (Has(n)) return absl::OkStatus();
    return absl::InvalidArgumentError(absl::StrCat("megatron.args: --", n, " is required (Megatron-LM has no default)"));
  }

 private:
  std::map<std::string, const MegatronArg*> by_name_;
};

enum class MoeArgKind { kModelled, kNoEffect, kRefused };
struct MoeArgRule {
  const char* name;
  MoeArgKind kind;
  const char* why;
};
// The mixture-of-experts arguments gpusim knows (megatron_moe_args.cc).
const std::vector<MoeArgRule>& MoeArgRules();
// Fills RunSpec::megatron.moe from the MoE arguments; REQUIRES: the
// parallelism is applied (megatron.data set).
absl::Status ApplyMoeArgs(const Args& g, RunSpec* run);
// Multi-latent attention (sim/config/megatron_mla_args.cc).
absl::Status ApplyMlaArgs(const Args& g, RunSpec* run);

}  // namespace megatron_internal
}  // namespace gpusim

#endif  // GPUSIM_SIM_CONFIG_MEGATRON_ARGS_INTERNAL_H_
