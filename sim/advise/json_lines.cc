#include "sim/advise/json_lines.h"

#include <cstdlib>

#include "absl/strings/str_cat.h"

namespace gpusim {
namespace {

class Parser {
 public:
  explicit Parser(const std::string& s) : s_(s) {}

  absl::StatusOr<std::map<std::string, JsonLineValue>> Object() {
    std::map<std::string, JsonLineValue> out;
    if (!Eat('{')) return Error("expected '{'");
    if (Eat('}')) return End(out);
    while (true) {
      std::string key;
      if (!String(&key)) return Error("expected a string key");
      if (!Eat(':')) return Error("expected ':'");
      JsonLineValue v;
      if (!Value(&v)) return Error("expected a value");
      out[key] = std::move(v);
      if (Eat(',')) continue;
      if (Eat('}')) return End(out);
      return Error("expected ',' or '}'");
    }
  }

 private:
  absl::StatusOr<std::map<std::string, JsonLineValue>> End(std::map<std::string, JsonLineValue>& out) {
    Skip();
    if (i_ != s_.size()) return Error("unexpected text after the object");
    return std::move(out);
  }
  absl::Status Error(const std::string& what) { return absl::InvalidArgumentError(absl::StrCat("offset ", i_, ": ", what)); }
  void Skip() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\t' || s_[i_] == '\r')) ++i_;
  }
  bool Eat(char c) {
    Skip();
    if (i_ < s_.size() && s_[i_] == c) {
      ++i_;
      return true;
    }
    return false;
  }
  bool Literal(const char* word) {
    Skip();
    const std::string w(word);
    if (s_.compare(i_, w.size(), w) != 0) return false;
    i_ += w.size();
    return true;
  }
  bool String(std::string* out) {
    if (!Eat('"')) return false;
    while (i_ < s_.size() && s_[i_] != '"') {
      char c = s_[i_++];
      if (c == '\\') {
        if (i_ >= s_.size()) return false;
        const char e = s_[i_++];
        switch (e) {
          case 'n': c = '\n'; break;
          case 't': c = '\t'; break;
          case 'r': c = '\r'; break;
          case 'u': {
            if (i_ + 4 > s_.size()) return false;
            c = static_cast<char>(std::strtol(s_.substr(i_, 4).c_str(), nullptr, 16));
            i_ += 4;
            break;
          }
          default: c = e;
        }
      }
      out->push_back(c);
    }
    return Eat('"');
  }
  bool Value(JsonLineValue* v) {
    Skip();
    if (i_ >= s_.size()) return false;
    if (s_[i_] == '"') return String(&v->text);
    if (Literal("true")) return v->boolean = true;
    if (Literal("false")) return !(v->boolean = false);
    if (Literal("null")) return true;
    if (Eat('[')) {
      if (Eat(']')) return true;
      while (true) {
        std::string item;
        if (!String(&item)) return false;
        v->strings.push_back(std::move(item));
        if (Eat(',')) continue;
        return Eat(']');
      }
    }
    char* end = nullptr;
    v->number = std::strtod(s_.c_str() + i_, &end);
    if (end == s_.c_str() + i_) return false;
    i_ = static_cast<size_t>(end - s_.c_str());
    return true;
  }

  const std::string& s_;
  size_t i_ = 0;
};

}  // namespace

absl::StatusOr<std::map<std::string, JsonLineValue>> ParseFlatJsonObject(const std::string& line) {
  Parser p(line);
  return p.Object();
}

}  // namespace gpusim
