#include "viz/xml_check.h"

#include <cctype>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"

namespace gpusim {
namespace {

bool NameChar(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.' || c == ':' ||
         static_cast<unsigned char>(c) >= 0x80;
}

absl::Status Error(size_t at, std::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("XML not well-formed at byte ", at, ": ", std::string(what)));
}

// Checks "&...;" at `i`; returns the index after it or npos.
size_t Entity(std::string_view s, size_t i) {
  const size_t semi = s.find(';', i);
  if (semi == std::string_view::npos || semi - i > 10) return std::string_view::npos;
  const std::string_view name = s.substr(i + 1, semi - i - 1);
  if (name == "amp" || name == "lt" || name == "gt" || name == "quot" || name == "apos") return semi + 1;
  if (name.size() >= 2 && name[0] == '#') {
    for (size_t k = 1; k < name.size(); ++k) {
      if (!std::isxdigit(static_cast<unsigned char>(name[k])) && !(k == 1 && name[k] == 'x')) {
        return std::string_view::npos;
      }
    }
    return semi + 1;
  }
  return std::string_view::npos;
}

}  // namespace

absl::Status CheckXmlWellFormed(std::string_view s) {
  std::vector<std::string> open;
  bool root_seen = false;
  size_t i = 0;
  while (i < s.size()) {
    if (s[i] == '&') {
      const size_t next = Entity(s, i);
      if (next == std::string_view::npos) return Error(i, "bad entity");
      i = next;
      continue;
    }
    if (s[i] != '<') {
      if (open.empty() && !std::isspace(static_cast<unsigned char>(s[i]))) return Error(i, "text outside the root");
      ++i;
      continue;
    }
    if (s.substr(i, 4) == "<!--") {
      const size_t end = s.find("-->", i + 4);
      if (end == std::string_view::npos) return Error(i, "unterminated comment");
      i = end + 3;
      continue;
    }
    if (s.substr(i, 9) == "<![CDATA[") {
      const size_t end = s.find("]]>", i);
      if (end == std::string_view::npos) return Error(i, "unterminated CDATA");
      i = end + 3;
      continue;
    }
    if (s.substr(i, 2) == "<?" || s.substr(i, 2) == "<!") {
      const size_t end = s.find('>', i);
      if (end == std::string_view::npos) return Error(i, "unterminated declaration");
      i = end + 1;
      continue;
    }
    const bool closing = i + 1 < s.size() && s[i + 1] == '/';
    size_t j = i + (closing ? 2 : 1);
    const size_t name_start = j;
    while (j < s.size() && NameChar(s[j])) ++j;
    if (j == name_start) return Error(i, "tag without a name");
    const std::string name(s.substr(name_start, j - name_start));
    if (closing) {
      while (j < s.size() && std::isspace(static_cast<unsigned char>(s[j]))) ++j;
      if (j >= s.size() || s[j] != '>') return Error(j, "bad closing tag");
      if (open.empty() || open.back() != name) {
        return Error(i, absl::StrCat("</", name, "> does not close <", open.empty() ? "" : open.back(), ">"));
      }
      open.pop_back();
      i = j + 1;
      continue;
    }
    // Attributes.
    bool self_closing = false;
    while (true) {
      while (j < s.size() && std::isspace(static_cast<unsigned char>(s[j]))) ++j;
      if (j >= s.size()) return Error(i, "unterminated tag");
      if (s[j] == '>') break;
      if (s[j] == '/' && j + 1 < s.size() && s[j + 1] == '>') {
        self_closing = true;
        ++j;
        break;
      }
      const size_t a = j;
      while (j < s.size() && NameChar(s[j])) ++j;
      if (j == a) return Error(j, "bad attribute name");
      if (j >= s.size() || s[j] != '=') return Error(j, "attribute without '='");
      ++j;
      if (j >= s.size() || (s[j] != '"' && s[j] != '\'')) return Error(j, "unquoted attribute value");
      const char q = s[j];
      const size_t end = s.find(q, j + 1);
      if (end == std::string_view::npos) return Error(j, "unterminated attribute value");
      for (size_t k = j + 1; k < end; ++k) {
        if (s[k] == '<') return Error(k, "'<' in an attribute value");
        if (s[k] == '&' && Entity(s, k) == std::string_view::npos) return Error(k, "bad entity in an attribute");
      }
      j = end + 1;
    }
    if (open.empty()) {
      if (root_seen) return Error(i, "a second root element");
      root_seen = true;
    }
    if (!self_closing) open.push_back(name);
    i = j + 1;
  }
  if (!open.empty()) return Error(s.size(), absl::StrCat("<", open.back(), "> never closed"));
  if (!root_seen) return Error(0, "no root element");
  return absl::OkStatus();
}

}  // namespace gpusim
