#include "sim/alloc/options.h"

#include <cerrno>
#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace gpusim {

absl::Status CheckOptionKeys(std::string_view impl, const AllocatorOptions& options,
                             const std::vector<std::string>& valid) {
  for (const auto& [key, value] : options) {
    bool ok = false;
    for (const std::string& v : valid) ok = ok || v == key;
    if (ok) continue;
    if (valid.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("allocator.", key, ": allocator '", std::string(impl), "' takes no options"));
    }
    return absl::InvalidArgumentError(absl::StrCat("allocator.", key, ": unknown option for allocator '",
                                                   std::string(impl), "'; valid keys: ", absl::StrJoin(valid, ", ")));
  }
  return absl::OkStatus();
}

absl::Status ReadIntOption(const AllocatorOptions& options, const std::string& key, int64_t* out) {
  auto it = options.find(key);
  if (it == options.end()) return absl::OkStatus();
  const std::string& s = it->second;
  char* end = nullptr;
  errno = 0;
  const long long v = std::strtoll(s.c_str(), &end, 10);
  if (s.empty() || end != s.c_str() + s.size() || errno != 0) {
    return absl::InvalidArgumentError(absl::StrCat("allocator.", key, ": expected an integer, got '", s, "'"));
  }
  *out = v;
  return absl::OkStatus();
}

absl::Status ReadDoubleOption(const AllocatorOptions& options, const std::string& key, double* out) {
  auto it = options.find(key);
  if (it == options.end()) return absl::OkStatus();
  const std::string& s = it->second;
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(s.c_str(), &end);
  if (s.empty() || end != s.c_str() + s.size() || errno != 0) {
    return absl::InvalidArgumentError(absl::StrCat("allocator.", key, ": expected a number, got '", s, "'"));
  }
  *out = v;
  return absl::OkStatus();
}

absl::Status ReadBoolOption(const AllocatorOptions& options, const std::string& key, bool* out) {
  auto it = options.find(key);
  if (it == options.end()) return absl::OkStatus();
  const std::string& s = it->second;
  if (s == "true" || s == "True" || s == "1") {
    *out = true;
  } else if (s == "false" || s == "False" || s == "0") {
    *out = false;
  } else {
    return absl::InvalidArgumentError(absl::StrCat("allocator.", key, ": expected true or false, got '", s, "'"));
  }
  return absl::OkStatus();
}

std::vector<std::string> SplitTopLevel(std::string_view s, char sep) {
  std::vector<std::string> out;
  int depth = 0;
  std::string cur;
  for (char c : s) {
    if (c == '[' || c == '{') ++depth;
    if (c == ']' || c == '}') --depth;
    if (c == sep && depth == 0) {
      out.push_back(cur);
      cur.clear();
    } else {
      cur.push_back(c);
    }
  }
  out.push_back(cur);
  return out;
}

namespace {
std::string Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return std::string(s);
}
}  // namespace

absl::StatusOr<std::vector<AllocatorSpec>> ParseMembers(std::string_view value, const std::string& key) {
  std::vector<AllocatorSpec> out;
  for (const std::string& raw : SplitTopLevel(value, ',')) {
    const std::string item = Trim(raw);
    if (item.empty()) {
      return absl::InvalidArgumentError(absl::StrCat("allocator.", key, ": empty member in '", std::string(value), "'"));
    }
    AllocatorSpec spec;
    const size_t brace = item.find('{');
    spec.impl = Trim(item.substr(0, brace));
    if (brace != std::string::npos) {
      if (item.back() != '}') {
        return absl::InvalidArgumentError(
            absl::StrCat("allocator.", key, ": member '", item, "' has no closing '}'"));
      }
      const std::string body = item.substr(brace + 1, item.size() - brace - 2);
      for (const std::string& kv : SplitTopLevel(body, ';')) {
        if (Trim(kv).empty()) continue;
        const size_t eq = kv.find('=');
        if (eq == std::string::npos) {
          return absl::InvalidArgumentError(
              absl::StrCat("allocator.", key, ": member option '", Trim(kv), "' is not key=value"));
        }
        spec.options[Trim(kv.substr(0, eq))] = Trim(kv.substr(eq + 1));
      }
    }
    out.push_back(std::move(spec));
  }
  return out;
}

}  // namespace gpusim
