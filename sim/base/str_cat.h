// Cat(): string concatenation for the trace and import code. Debian's Abseil is built
// with its own absl::string_view, so absl::StrCat rejects std::string_view
// arguments; this helper takes std::string_view, strings, chars and integers.
#ifndef GPUSIM_SIM_BASE_STR_CAT_H_
#define GPUSIM_SIM_BASE_STR_CAT_H_

#include <string>
#include <string_view>
#include <type_traits>

namespace gpusim::str_internal {

inline void AppendPiece(std::string& out, std::string_view s) { out += s; }
inline void AppendPiece(std::string& out, char c) { out += c; }
template <typename T>
  requires std::is_integral_v<T> && (!std::is_same_v<T, char>) &&
           (!std::is_same_v<T, bool>)
void AppendPiece(std::string& out, T v) {
  out += std::to_string(v);
}

template <typename... Args>
std::string Cat(const Args&... args) {
  std::string out;
  (AppendPiece(out, args), ...);
  return out;
}

template <typename... Args>
void Append(std::string& out, const Args&... args) {
  (AppendPiece(out, args), ...);
}

// Joins integers or strings with `sep`.
template <typename Container>
std::string Join(const Container& items, std::string_view sep) {
  std::string out;
  bool first = true;
  for (const auto& item : items) {
    if (!first) out += sep;
    first = false;
    AppendPiece(out, item);
  }
  return out;
}

}  // namespace gpusim::str_internal

#endif  // GPUSIM_SIM_BASE_STR_CAT_H_
