#include "sim/import/simdjson_util.h"

#include <charconv>
#include <cmath>
#include <limits>

namespace gpusim::import_internal {

bool NumberToken(simdjson::ondemand::value& v, std::string_view* token) {
  simdjson::ondemand::json_type type;
  if (v.type().get(type) != simdjson::SUCCESS || type != simdjson::ondemand::json_type::number) {
    return false;
  }
  std::string_view t = v.raw_json_token();
  while (!t.empty() && (t.back() == ' ' || t.back() == '\n' || t.back() == '\r' ||
                        t.back() == '\t')) {
    t.remove_suffix(1);
  }
  *token = t;
  return !t.empty();
}

bool ParseInteger(std::string_view token, int64_t* out) {
  const char* b = token.data();
  const char* e = b + token.size();
  auto [p, ec] = std::from_chars(b, e, *out);
  if (ec == std::errc() && p == e) return true;
  double d = 0;
  auto [p2, ec2] = std::from_chars(b, e, d);
  if (ec2 != std::errc() || p2 != e || !std::isfinite(d) || d != std::floor(d) ||
      std::fabs(d) > 9.007199254740992e15) {
    return false;
  }
  *out = static_cast<int64_t>(d);
  return true;
}

bool ParseMicrosToNanos(std::string_view token, int64_t* ns) {
  if (token.find_first_of("eE") != std::string_view::npos) {
    double d = 0;
    auto [p, ec] = std::from_chars(token.data(), token.data() + token.size(), d);
    if (ec != std::errc() || p != token.data() + token.size() || !std::isfinite(d) ||
        std::fabs(d) > 9e15) {
      return false;
    }
    *ns = std::llround(d * 1000.0);
    return true;
  }
  const size_t dot = token.find('.');
  std::string_view whole = token.substr(0, dot);
  const bool negative = !whole.empty() && whole.front() == '-';
  int64_t us = 0;
  if (whole.empty() || whole == "-") {
    us = 0;
  } else {
    auto [p, ec] = std::from_chars(whole.data(), whole.data() + whole.size(), us);
    if (ec != std::errc() || p != whole.data() + whole.size()) return false;
  }
  if (us > std::numeric_limits<int64_t>::max() / 1000 - 1 ||
      us < std::numeric_limits<int64_t>::min() / 1000 + 1) {
    return false;
  }
  int64_t frac = 0;
  if (dot != std::string_view::npos) {
    std::string_view f = token.substr(dot + 1);
    if (f.empty()) return false;
    for (size_t i = 0; i < f.size(); ++i) {
      if (f[i] < '0' || f[i] > '9') return false;
    }
    for (size_t i = 0; i < 3; ++i) frac = frac * 10 + (i < f.size() ? f[i] - '0' : 0);
    if (f.size() > 3 && f[3] >= '5') ++frac;  // round to nearest ns
  }
  *ns = negative ? us * 1000 - frac : us * 1000 + frac;
  return true;
}

int64_t OffsetIn(const std::string& text, const char* p) {
  if (p < text.data() || p > text.data() + text.size()) return 0;
  return p - text.data();
}

}  // namespace gpusim::import_internal
