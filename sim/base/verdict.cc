#include "sim/base/verdict.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace gpusim {
namespace {

// The verdict line reads in GiB (2^30); the report's tables give the bytes.
std::string G(Bytes b) { return absl::StrFormat("%.2f GiB", b.GiB()); }

}  // namespace

std::string Verdict::Word() const {
  switch (kind) {
    case Kind::kFits:
      return "yes";
    case Kind::kFitsWithSetting:
      return absl::StrCat("with ", setting);
    case Kind::kDoesNotFit:
      break;
  }
  return "no";
}

const char* Verdict::KindName() const {
  switch (kind) {
    case Kind::kFits:
      return "fits";
    case Kind::kFitsWithSetting:
      return "fits_with_setting";
    case Kind::kDoesNotFit:
      break;
  }
  return "does_not_fit";
}

std::string Verdict::Line() const {
  switch (kind) {
    case Kind::kFits:
      return absl::StrCat("fits under ", runtime, ": needs ", G(need), " of ", limit_name, " ",
                          G(limit), " (margin ", G(limit - need), ")");
    case Kind::kFitsWithSetting:
      return absl::StrCat("OOM under ", runtime, ": needs ", G(need), ", ", limit_name, " is ",
                          G(limit), "; fits with ", setting);
    case Kind::kDoesNotFit:
      break;
  }
  std::string s = absl::StrCat("does NOT fit under ", runtime, ": needs ", G(need));
  if (shortfall.value() > 0) {
    absl::StrAppend(&s, ", short by ", G(shortfall), " of ", limit_name, " ", G(limit));
  } else {
    absl::StrAppend(&s, " of ", limit_name, " ", G(limit));
  }
  if (!why.empty()) absl::StrAppend(&s, "; ", why);
  if (!suggestion.empty()) absl::StrAppend(&s, " — try ", suggestion);
  return s;
}

Verdict EagerVerdict(const std::string& runtime, bool oom, Bytes peak_reserved, Bytes peak_live, Bytes usable,
                     const std::string& device) {
  Verdict v;
  v.runtime = runtime;
  v.need = peak_reserved > peak_live ? peak_reserved : peak_live;
  v.limit = usable;
  v.limit_name = absl::StrCat(device, "'s usable memory");
  if (!oom && v.need <= usable) return v;
  v.kind = Verdict::Kind::kDoesNotFit;
  // After an out-of-memory the replay stops: the peak it saw is a lower
  // bound, and the live bytes alone may already exceed the device.
  v.shortfall = v.need > usable ? v.need - usable : Bytes(0);
  if (oom && v.shortfall.value() == 0) {
    v.why = "an allocation finds no free block and no room for a new segment (fragmentation)";
  } else if (oom) {
    v.why = "the replay stops at the first out-of-memory, so this is at least what is missing";
  }
  return v;
}

void WriteVerdictJson(JsonWriter& w, const Verdict& v) {
  w.BeginObject("verdict")
      .String("kind", v.KindName())
      .Bool("fits", v.fits())
      .String("runtime", v.runtime)
      .Int("need_bytes", v.need.value())
      .Int("limit_bytes", v.limit.value())
      .String("limit", v.limit_name)
      .String("setting", v.setting)
      .Int("shortfall_bytes", v.shortfall.value())
      .String("suggestion", v.suggestion)
      .String("line", v.Line())
      .EndObject();
}

}  // namespace gpusim
