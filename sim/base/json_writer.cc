#include "sim/base/json_writer.h"

#include <cmath>

#include "absl/strings/str_format.h"

namespace gpusim {

std::string JsonEscape(std::string_view s) {
  std::string o = "\"";
  for (unsigned char c : s) {
    switch (c) {
      case '"': o += "\\\""; break;
      case '\\': o += "\\\\"; break;
      case '\n': o += "\\n"; break;
      case '\t': o += "\\t"; break;
      case '\r': o += "\\r"; break;
      default:
        if (c < 0x20) o += absl::StrFormat("\\u%04x", c);
        else o.push_back(static_cast<char>(c));
    }
  }
  return o + "\"";
}

void JsonWriter::Indent() { out_.append(2 * first_.size(), ' '); }

void JsonWriter::Key(std::string_view key) {
  if (!first_.empty()) {
    if (!first_.back()) out_ += ",";
    out_ += "\n";
    first_.back() = false;
    Indent();
    if (!is_array_.back()) out_ += JsonEscape(key) + ": ";
  }
}

void JsonWriter::Open(std::string_view key, char bracket) {
  Key(key);
  out_.push_back(bracket);
  first_.push_back(true);
  is_array_.push_back(bracket == '[');
}

void JsonWriter::Close(char bracket) {
  const bool empty = first_.back();
  first_.pop_back();
  is_array_.pop_back();
  if (!empty) {
    out_ += "\n";
    Indent();
  }
  out_.push_back(bracket);
}

JsonWriter& JsonWriter::BeginObject(std::string_view key) {
  Open(key, '{');
  return *this;
}

JsonWriter& JsonWriter::EndObject() {
  Close('}');
  return *this;
}

JsonWriter& JsonWriter::BeginArray(std::string_view key) {
  Open(key, '[');
  return *this;
}

JsonWriter& JsonWriter::EndArray() {
  Close(']');
  return *this;
}

JsonWriter& JsonWriter::Int(std::string_view key, int64_t v) {
  Key(key);
  out_ += std::to_string(v);
  return *this;
}

JsonWriter& JsonWriter::Double(std::string_view key, double v) {
  Key(key);
  if (!std::isfinite(v)) out_ += "null";
  else out_ += absl::StrFormat("%.17g", v);
  return *this;
}

JsonWriter& JsonWriter::Bool(std::string_view key, bool v) {
  Key(key);
  out_ += v ? "true" : "false";
  return *this;
}

JsonWriter& JsonWriter::String(std::string_view key, std::string_view v) {
  Key(key);
  out_ += JsonEscape(v);
  return *this;
}

JsonWriter& JsonWriter::Null(std::string_view key) {
  Key(key);
  out_ += "null";
  return *this;
}

std::string JsonWriter::Finish() { return out_ + "\n"; }

}  // namespace gpusim
