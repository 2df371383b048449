// Exact parsing of sizes and durations; see units_parse.h.
#include "sim/config/units_parse.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace gpusim {
namespace {

using int128 = __int128;
constexpr int128 kInt64Max = std::numeric_limits<int64_t>::max();
// Significant digits we accept (10^36 < 2^120); longer numbers are reported
// as overflowing or not whole, by their magnitude.
constexpr int kMaxDigits = 36;

// A written decimal: value = digits * 10^exp10, then a unit suffix.
struct Decimal {
  bool negative = false;
  std::string digits;  // significant digits, no leading or trailing zeros
  int64_t exp10 = 0;
  absl::string_view unit;  // what follows the number, spaces skipped
  bool is_zero() const { return digits.empty(); }
};

bool IsDigit(char c) { return c >= '0' && c <= '9'; }

// Parses "[+-]D[.D][(e|E)[+-]D] [unit]". False when there is no number.
bool ParseDecimal(absl::string_view s, Decimal* out) {
  s = absl::StripAsciiWhitespace(s);
  size_t i = 0;
  const size_t n = s.size();
  if (i < n && (s[i] == '+' || s[i] == '-')) out->negative = s[i++] == '-';
  std::string digits;
  size_t n_digits = 0;
  int64_t frac_len = 0;
  while (i < n && IsDigit(s[i])) digits += s[i++], ++n_digits;
  if (i < n && s[i] == '.') {
    ++i;
    while (i < n && IsDigit(s[i])) digits += s[i++], ++n_digits, ++frac_len;
  }
  if (n_digits == 0) return false;
  int64_t exp = 0;
  if (i < n && (s[i] == 'e' || s[i] == 'E')) {
    size_t j = i + 1;
    bool exp_negative = false;
    if (j < n && (s[j] == '+' || s[j] == '-')) exp_negative = s[j++] == '-';
    if (j < n && IsDigit(s[j])) {
      while (j < n && IsDigit(s[j])) {
        if (exp < 1000000) exp = exp * 10 + (s[j] - '0');  // saturates
        ++j;
      }
      if (exp_negative) exp = -exp;
      i = j;
    }
  }
  out->unit = absl::StripLeadingAsciiWhitespace(s.substr(i));
  size_t first = digits.find_first_not_of('0');
  if (first == std::string::npos) {
    out->digits.clear();
    out->exp10 = 0;
    return true;
  }
  size_t last = digits.find_last_not_of('0');
  out->exp10 = exp - frac_len + static_cast<int64_t>(digits.size() - 1 - last);
  out->digits = digits.substr(first, last - first + 1);
  return true;
}

enum class Inexact { kError, kRound };
enum class ExactResult { kOk, kOverflow, kNotWhole };

constexpr int128 kInt128Max = ~(static_cast<int128>(1) << 127);

// digits * 10^(exp10 + unit_exp10) * 2^unit_exp2 as an int64, exactly (or
// rounded to nearest). Powers of two common to the unit and the decimal
// denominator cancel first, so "0.0009765625KiB" and 2^-40 TiB work.
ExactResult ToInt64(const Decimal& d, int unit_exp10, int unit_exp2,
                    Inexact inexact, int64_t* out) {
  *out = 0;
  if (d.is_zero()) return ExactResult::kOk;
  const int64_t size = static_cast<int64_t>(d.digits.size());
  const int64_t e = d.exp10 + unit_exp10;
  if (size > kMaxDigits) {
    return size + e > 19 ? ExactResult::kOverflow : ExactResult::kNotWhole;
  }
  int128 v = 0;
  for (char c : d.digits) v = v * 10 + (c - '0');
  if (e >= 0) {
    if (e > 19 || v > kInt64Max) return ExactResult::kOverflow;
    for (int64_t k = 0; k < e; ++k) {
      v *= 10;
      if (v > kInt64Max) return ExactResult::kOverflow;
    }
    for (int k = 0; k < unit_exp2; ++k) {
      v *= 2;
      if (v > kInt64Max) return ExactResult::kOverflow;
    }
  } else {
    // v * 2^unit_exp2 / (2^n * 5^n), n = -e.
    const int64_t n = -e;
    const int64_t twos = std::min<int64_t>(unit_exp2, n);
    const int shift = unit_exp2 - static_cast<int>(twos);
    if (v > (kInt128Max >> shift)) return ExactResult::kOverflow;
    const int128 num = v << shift;
    int128 den = 1;
    bool den_overflow = false;  // then den > num: the quotient rounds to 0
    for (int64_t k = 0; k < n && !den_overflow; ++k) {
      if (den > kInt128Max / 5) den_overflow = true; else den *= 5;
    }
    for (int64_t k = twos; k < n && !den_overflow; ++k) {
      if (den > kInt128Max / 2) den_overflow = true; else den *= 2;
    }
    if (den_overflow) {
      return inexact == Inexact::kError ? ExactResult::kNotWhole
                                        : ExactResult::kOk;
    }
    const int128 rem = num % den;
    if (rem != 0 && inexact == Inexact::kError) return ExactResult::kNotWhole;
    v = num / den + (rem != 0 && rem >= den - rem ? 1 : 0);
  }
  if (v > kInt64Max) return ExactResult::kOverflow;
  *out = static_cast<int64_t>(v);
  return ExactResult::kOk;
}

// The double nearest to digits * 10^(exp10 + extra_exp10), times `factor`
// (a power of two, so the product is exact).
bool ToDouble(const Decimal& d, int extra_exp10, double factor, double* out) {
  if (d.is_zero()) {
    *out = 0;
    return true;
  }
  std::string text = absl::StrCat(d.digits, "e", d.exp10 + extra_exp10);
  double v = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || ptr != text.data() + text.size()) return false;
  *out = v * factor;
  return std::isfinite(*out);
}

struct Unit {
  absl::string_view name;
  int exp10;      // decimal scale
  int exp2;       // binary scale
};

const Unit* FindUnit(absl::string_view name, const Unit* units, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    if (units[i].name == name) return &units[i];
  }
  return nullptr;
}

constexpr Unit kByteUnits[] = {
    {"", 0, 0},    {"B", 0, 0},    {"KB", 3, 0},   {"MB", 6, 0},
    {"GB", 9, 0},  {"TB", 12, 0},  {"KiB", 0, 10}, {"MiB", 0, 20},
    {"GiB", 0, 30}, {"TiB", 0, 40},
};

std::string Quote(absl::string_view s) { return absl::StrCat("'", s, "'"); }

absl::Status RateError(absl::string_view s) {
  return absl::InvalidArgumentError(absl::StrCat(
      "expected a bandwidth such as 3350GB/s, 3.35TB/s, 2000GiB/s or 1e9 "
      "(bytes/s); got ",
      Quote(s)));
}

absl::Status FlopError(absl::string_view s) {
  return absl::InvalidArgumentError(absl::StrCat(
      "expected a FLOP rate such as 989TFLOP/s, 19.5TFLOP/s or 67e12; got ",
      Quote(s)));
}

}  // namespace

absl::StatusOr<Bytes> ParseBytes(std::string_view text) {
  const absl::string_view s(text.data(), text.size());
  Decimal d;
  const Unit* unit = nullptr;
  if (!ParseDecimal(s, &d) ||
      (unit = FindUnit(d.unit, kByteUnits, std::size(kByteUnits))) ==
          nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        "expected a byte size such as 80GiB, 81920MiB, 85e9B or 1024; got ",
        Quote(s)));
  }
  if (d.negative && !d.is_zero()) {
    return absl::InvalidArgumentError(
        absl::StrCat("expected a non-negative byte size; got ", Quote(s)));
  }
  int64_t v = 0;
  switch (ToInt64(d, unit->exp10, unit->exp2, Inexact::kError, &v)) {
    case ExactResult::kOk:
      return Bytes(v);
    case ExactResult::kNotWhole:
      return absl::InvalidArgumentError(
          absl::StrCat("expected a whole number of bytes; got ", Quote(s)));
    case ExactResult::kOverflow:
      break;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "byte size ", Quote(s), " overflows int64 (at most ",
      std::numeric_limits<int64_t>::max(), " bytes)"));
}

absl::StatusOr<double> ParseRate(std::string_view text) {
  const absl::string_view s(text.data(), text.size());
  Decimal d;
  if (!ParseDecimal(s, &d)) return RateError(s);
  absl::string_view u = d.unit;
  const Unit* unit = nullptr;
  if (u.empty()) {
    unit = &kByteUnits[0];
  } else if (u.size() > 2 && u.substr(u.size() - 2) == "/s") {
    unit = FindUnit(u.substr(0, u.size() - 2), kByteUnits + 1,
                    std::size(kByteUnits) - 1);
  }
  if (unit == nullptr) return RateError(s);
  double v = 0;
  if (!ToDouble(d, unit->exp10, std::ldexp(1.0, unit->exp2), &v)) {
    return RateError(s);
  }
  if (d.negative && v != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("expected a non-negative bandwidth; got ", Quote(s)));
  }
  return v;
}

absl::StatusOr<double> ParseFlopRate(std::string_view text) {
  const absl::string_view s(text.data(), text.size());
  static constexpr Unit kPrefixes[] = {{"", 0, 0},  {"K", 3, 0},
                                       {"M", 6, 0}, {"G", 9, 0},
                                       {"T", 12, 0}, {"P", 15, 0}};
  Decimal d;
  if (!ParseDecimal(s, &d)) return FlopError(s);
  absl::string_view u = d.unit;
  const Unit* unit = nullptr;
  if (u.empty()) {
    unit = &kPrefixes[0];
  } else {
    for (absl::string_view suffix : {"FLOP/s", "FLOPS"}) {
      if (u.size() >= suffix.size() &&
          u.substr(u.size() - suffix.size()) == suffix) {
        unit = FindUnit(u.substr(0, u.size() - suffix.size()), kPrefixes,
                        std::size(kPrefixes));
        break;
      }
    }
  }
  if (unit == nullptr) return FlopError(s);
  double v = 0;
  if (!ToDouble(d, unit->exp10, 1.0, &v)) return FlopError(s);
  if (d.negative && v != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("expected a non-negative FLOP rate; got ", Quote(s)));
  }
  return v;
}

absl::StatusOr<SimTime> ParseDuration(std::string_view text) {
  const absl::string_view s(text.data(), text.size());
  static constexpr Unit kTimeUnits[] = {
      {"ns", 0, 0}, {"us", 3, 0}, {"ms", 6, 0}, {"s", 9, 0}};
  Decimal d;
  if (!ParseDecimal(s, &d)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "expected a duration such as 5us, 4.5us, 1ms, 0.5s or 300ns; got ",
        Quote(s)));
  }
  if (d.unit.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "expected a duration with a unit (ns, us, ms or s) such as 5us; got ",
        Quote(s)));
  }
  const Unit* unit = FindUnit(d.unit, kTimeUnits, std::size(kTimeUnits));
  if (unit == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        "expected a duration such as 5us, 4.5us, 1ms, 0.5s or 300ns; got ",
        Quote(s)));
  }
  if (d.negative && !d.is_zero()) {
    return absl::InvalidArgumentError(
        absl::StrCat("expected a non-negative duration; got ", Quote(s)));
  }
  int64_t ns = 0;
  if (ToInt64(d, unit->exp10, 0, Inexact::kRound, &ns) !=
      ExactResult::kOk) {
    return absl::InvalidArgumentError(
        absl::StrCat("duration ", Quote(s), " overflows int64 nanoseconds"));
  }
  return SimTime(ns);
}

}  // namespace gpusim
