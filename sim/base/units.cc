#include "sim/base/units.h"

#include <cmath>

#include "absl/strings/str_format.h"

namespace gpusim {

std::string WithCommas(int64_t v) {
  uint64_t mag = v < 0 ? 0 - static_cast<uint64_t>(v) : static_cast<uint64_t>(v);
  std::string digits = std::to_string(mag);
  std::string out;
  const int n = static_cast<int>(digits.size());
  for (int i = 0; i < n; ++i) {
    out.push_back(digits[i]);
    if ((n - 1 - i) % 3 == 0 && i != n - 1) out.push_back(',');
  }
  return v < 0 ? "-" + out : out;
}

std::string FormatBytes(Bytes b) {
  return absl::StrFormat("%s B (%.2f GiB)", WithCommas(b.value()), b.GiB());
}

SimTime SimTime::FromNanos(double ns) {
  const double r = std::round(ns);
  // Note [Checked time]: NaN fails both comparisons.
  if (!(r >= -static_cast<double>(kMaxNs) && r <= static_cast<double>(kMaxNs))) return OutOfRange();
  return SimTime(static_cast<int64_t>(r));
}

SimTime SimTime::FromSeconds(double s) { return FromNanos(s * 1e9); }

}  // namespace gpusim
