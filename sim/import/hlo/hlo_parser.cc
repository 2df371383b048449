#include "sim/import/hlo/hlo_parser.h"

#include <cctype>
#include <functional>
#include <memory>
#include <set>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "sim/base/checked.h"
#include "sim/base/status.h"
#include "sim/import/byte_source.h"

namespace gpusim {

int64_t HloShape::ElementCount() const {
  // Exact for every parsed shape (Cursor::Shape refuses one whose bytes
  // exceed int64); saturates for a hand-built one rather than wrapping.
  int64_t n = 1;
  for (int64_t d : dims) {
    if (!CheckedMul(n, d, &n)) return INT64_MAX;
  }
  return n;
}

namespace {

// Bytes per element of the HLO primitive types (xla/primitive_util.h
// ByteWidth); 0 for token, -1 for the sub-byte and unknown types.
int64_t ElementBytes(const std::string& e) {
  static const std::map<std::string, int64_t>* const kBytes = new std::map<std::string, int64_t>{
      {"pred", 1}, {"s8", 1},  {"u8", 1},  {"s16", 2}, {"u16", 2}, {"f16", 2},  {"bf16", 2},
      {"s32", 4},  {"u32", 4}, {"f32", 4}, {"s64", 8}, {"u64", 8}, {"f64", 8},  {"c64", 8},
      {"c128", 16}, {"f8e4m3fn", 1}, {"f8e5m2", 1}, {"f8e4m3fnuz", 1}, {"f8e5m2fnuz", 1},
      {"f8e4m3b11fnuz", 1}, {"f8e4m3", 1}, {"f8e3m4", 1}, {"token", 0}};
  auto it = kBytes->find(e);
  return it == kBytes->end() ? -1 : it->second;
}

}  // namespace

int64_t HloShape::ArrayBytes() const {
  if (tuple) return 0;
  const int64_t b = ElementBytes(element);
  if (b < 0) return -1;
  int64_t bytes = 0;
  return CheckedMul(b, ElementCount(), &bytes) ? bytes : INT64_MAX;
}

std::string HloShape::ToString() const {
  if (tuple) {
    std::vector<std::string> parts;
    for (const HloShape& e : elements) parts.push_back(e.ToString());
    return absl::StrCat("(", absl::StrJoin(parts, ", "), ")");
  }
  return absl::StrCat(element, "[", absl::StrJoin(dims, ","), "]");
}

const std::string& HloInstruction::attr(const std::string& key) const {
  static const std::string* const kEmpty = new std::string();
  auto it = attributes.find(key);
  return it == attributes.end() ? *kEmpty : it->second;
}

size_t HloModule::InstructionCount() const {
  size_t n = 0;
  for (const HloComputation& c : computations) n += c.instructions.size();
  return n;
}

namespace {

bool IsNameChar(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '-' || c == '%' ||
         c == '$';
}

// A cursor over one line of the text.
class Cursor {
 public:
  Cursor(absl::string_view line, int line_no, const std::string& file)
      : s_(line), line_(line_no), file_(file) {}

  void Skip() {
    while (pos_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[pos_]))) ++pos_;
  }
  bool AtEnd() {
    Skip();
    return pos_ >= s_.size();
  }
  char Peek() {
    Skip();
    return pos_ < s_.size() ? s_[pos_] : '\0';
  }
  bool Consume(absl::string_view tok) {
    Skip();
    if (s_.substr(pos_, tok.size()) != tok) return false;
    pos_ += tok.size();
    return true;
  }
  int column() const { return static_cast<int>(pos_) + 1; }
  HloLocation location() const { return {line_, column()}; }

  absl::Status Error(const std::string& what) const {
    return absl::InvalidArgumentError(absl::StrCat(file_, ":", line_, ":", column(), ": ", what));
  }
  absl::Status Expect(absl::string_view tok) {
    if (Consume(tok)) return absl::OkStatus();
    return Error(absl::StrCat("expected '", tok, "', got ", Describe()));
  }
  std::string Describe() {
    Skip();
    if (pos_ >= s_.size()) return "end of line";
    return absl::StrCat("'", s_.substr(pos_, 12), "'");
  }

  // A name ([A-Za-z0-9_.-$]+, with an optional leading %); "" when none.
  std::string Name() {
    Skip();
    size_t start = pos_;
    while (pos_ < s_.size() && IsNameChar(s_[pos_])) ++pos_;
    std::string n(s_.substr(start, pos_ - start));
    if (!n.empty() && n[0] == '%') n.erase(0, 1);
    return n;
  }

  absl::StatusOr<int64_t> Int() {
    Skip();
    size_t start = pos_;
    if (pos_ < s_.size() && (s_[pos_] == '-' || s_[pos_] == '+')) ++pos_;
    while (pos_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[pos_]))) ++pos_;
    int64_t v = 0;
    if (!absl::SimpleAtoi(s_.substr(start, pos_ - start), &v)) {
      pos_ = start;
      return Error(absl::StrCat("expected an integer, got ", Describe()));
    }
    return v;
  }

  // The text between a bracket at the cursor and its match, exclusive;
  // strings and nested brackets of every kind are skipped over.
  absl::StatusOr<std::string> Balanced(char open, char close) {
    Skip();
    if (pos_ >= s_.size() || s_[pos_] != open) {
      return Error(absl::StrCat("expected '", std::string(1, open), "', got ", Describe()));
    }
    const size_t start = ++pos_;
    std::vector<char> stack = {close};
    while (pos_ < s_.size()) {
      const char c = s_[pos_];
      if (c == '"') {
        RETURN_IF_ERROR(SkipString());
        continue;
      }
      if (c == '(') stack.push_back(')');
      if (c == '{') stack.push_back('}');
      if (c == '[') stack.push_back(']');
      if (c == ')' || c == '}' || c == ']') {
        if (c != stack.back()) return Error(absl::StrCat("unbalanced '", std::string(1, c), "'"));
        stack.pop_back();
        if (stack.empty()) {
          std::string inner(s_.substr(start, pos_ - start));
          ++pos_;
          return inner;
        }
      }
      ++pos_;
    }
    pos_ = start - 1;
    return Error(absl::StrCat("'", std::string(1, open), "' is not closed on this line"));
  }

  // An attribute value: text up to the next top-level ',' or the line's end.
  absl::StatusOr<std::string> Value() {
    Skip();
    const size_t start = pos_;
    int depth = 0;
    while (pos_ < s_.size()) {
      const char c = s_[pos_];
      if (c == '"') {
        RETURN_IF_ERROR(SkipString());
        continue;
      }
      if (c == '(' || c == '{' || c == '[') ++depth;
      if (c == ')' || c == '}' || c == ']') {
        if (--depth < 0) return Error(absl::StrCat("unbalanced '", std::string(1, c), "'"));
      }
      if (c == ',' && depth == 0) break;
      ++pos_;
    }
    if (depth != 0) return Error("unbalanced brackets in attribute value");
    std::string v(absl::StripTrailingAsciiWhitespace(s_.substr(start, pos_ - start)));
    if (v.empty()) return Error("expected an attribute value");
    return v;
  }

  // Note [Shape nesting]: a tuple shape is parsed recursively, so its
  // nesting is bounded (a 20k-deep `((((...` overflowed the stack, issue
  // 27), as calls are (64, hlo_importer.h) and JSON is. XLA prints the
  // tuples a program has (a while loop's state, a fusion's outputs) a few
  // levels deep; 64 is far beyond any.
  static constexpr int kMaxShapeDepth = 64;

  absl::StatusOr<HloShape> Shape(int depth = 0) {
    HloShape sh;
    Skip();
    if (Consume("(")) {
      if (depth >= kMaxShapeDepth) {
        --pos_;
        return Error(absl::StrCat("tuple shape nested more than ", kMaxShapeDepth, " deep"));
      }
      sh.tuple = true;
      if (Consume(")")) return sh;
      while (true) {
        ASSIGN_OR_RETURN(HloShape e, Shape(depth + 1));
        sh.elements.push_back(std::move(e));
        if (Consume(")")) return sh;
        RETURN_IF_ERROR(Expect(","));
      }
    }
    const size_t start = pos_;
    while (pos_ < s_.size() && std::isalnum(static_cast<unsigned char>(s_[pos_]))) ++pos_;
    sh.element = std::string(s_.substr(start, pos_ - start));
    if (sh.element.empty()) {
      pos_ = start;
      return Error(absl::StrCat("expected a shape such as f32[2,3], got ", Describe()));
    }
    if (ElementBytes(sh.element) < 0) {
      pos_ = start;
      return Error(absl::StrCat("unsupported element type '", sh.element,
                                "' (expected pred, s8..s64, u8..u64, f8*, bf16, f16, f32, f64, c64, c128, token)"));
    }
    if (pos_ >= s_.size() || s_[pos_] != '[') return Error(absl::StrCat("expected '[' after '", sh.element, "'"));
    ++pos_;
    if (!Consume("]")) {
      // The array's bytes must fit in int64 (Note [Magnitude checks] in
      // sim/config/spec_parse.cc): refused here, at the shape's line and
      // column, so no element count or byte size downstream wraps.
      int64_t bytes = ElementBytes(sh.element);
      while (true) {
        Consume("<=");  // a dynamic dimension's bound: sized at the bound
        if (Peek() == '?') return Error("unbounded dynamic dimension '?': its size is unknown");
        const size_t dim_at = pos_;
        ASSIGN_OR_RETURN(int64_t d, Int());
        if (d < 0) return Error("negative dimension");
        if (!CheckedMul(bytes, d, &bytes)) {
          pos_ = dim_at;
          Skip();
          return Error(absl::StrCat(sh.element, "[", absl::StrJoin(sh.dims, ","), sh.dims.empty() ? "" : ",", d,
                                    "...]: the array's bytes exceed 2^63 - 1"));
        }
        sh.dims.push_back(d);
        if (Consume("]")) break;
        RETURN_IF_ERROR(Expect(","));
      }
    }
    if (pos_ < s_.size() && s_[pos_] == '{') {
      ASSIGN_OR_RETURN(std::string layout, Balanced('{', '}'));
      sh.layout = layout;
      const size_t s5 = layout.find("S(");
      if (s5 != std::string::npos) {
        int ms = 0;
        const size_t close = layout.find(')', s5);
        if (close != std::string::npos && absl::SimpleAtoi(layout.substr(s5 + 2, close - s5 - 2), &ms)) {
          sh.memory_space = ms;
        }
      }
    }
    return sh;
  }

 private:
  absl::Status SkipString() {
    const size_t start = pos_++;
    while (pos_ < s_.size() && s_[pos_] != '"') {
      if (s_[pos_] == '\\') ++pos_;
      ++pos_;
    }
    if (pos_ >= s_.size()) {
      pos_ = start;
      return Error("unterminated string");
    }
    ++pos_;
    return absl::OkStatus();
  }

  absl::string_view s_;
  size_t pos_ = 0;
  int line_;
  const std::string& file_;
};

// Splits `text` at its top-level commas (outside brackets and strings).
std::vector<std::string> SplitTopLevel(absl::string_view text) {
  std::vector<std::string> out;
  int depth = 0;
  bool in_string = false;
  size_t start = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') ++i;
      else if (c == '"') in_string = false;
      continue;
    }
    if (c == '"') in_string = true;
    if (c == '(' || c == '{' || c == '[') ++depth;
    if (c == ')' || c == '}' || c == ']') --depth;
    if (c == ',' && depth == 0) {
      out.emplace_back(absl::StripAsciiWhitespace(text.substr(start, i - start)));
      start = i + 1;
    }
  }
  std::string last(absl::StripAsciiWhitespace(text.substr(start)));
  if (!last.empty() || !out.empty()) out.push_back(last);
  return out;
}

std::vector<int64_t> IntList(absl::string_view text) {
  std::vector<int64_t> out;
  for (absl::string_view p : absl::StrSplit(text, ',', absl::SkipWhitespace())) {
    int64_t v = 0;
    if (absl::SimpleAtoi(absl::StripAsciiWhitespace(p), &v)) out.push_back(v);
  }
  return out;
}

// Replaces /* ... */ comments by spaces (columns stay where they were).
std::string StripComments(absl::string_view text) {
  std::string s(text);
  for (size_t i = 0; i + 1 < s.size(); ++i) {
    if (s[i] == '"') {
      for (++i; i < s.size() && s[i] != '"'; ++i) {
        if (s[i] == '\\') ++i;
      }
      continue;
    }
    if (s[i] != '/' || s[i + 1] != '*') continue;
    const size_t end = s.find("*/", i + 2);
    const size_t stop = end == std::string::npos ? s.size() : end + 2;
    for (size_t j = i; j < stop; ++j) {
      if (s[j] != '\n') s[j] = ' ';
    }
    i = stop - 1;
  }
  return s;
}

const std::set<std::string>& CalledKeys() {
  static const std::set<std::string>* const k = new std::set<std::string>{
      "to_apply", "body", "condition", "calls", "branch_computations", "true_computation", "false_computation"};
  return *k;
}

// The stack frame index a compiled module prints between its header and its
// computations (the module's StackFrameIndexProto, xla/service/hlo.proto:
// file_names, function_names, file_locations, stack_frames), each section a
// title line and numbered entries that metadata's stack_frame_id refers
// to. Sizes do not depend on it; it is skipped.
bool IsStackFrameSection(absl::string_view line) {
  const absl::string_view t = absl::StripAsciiWhitespace(line);
  return t == "FileNames" || t == "FunctionNames" || t == "FileLocations" || t == "StackFrames";
}

class Parser {
 public:
  Parser(absl::string_view text, const std::string& file) : text_(StripComments(text)), file_(file) {
    m_.file = file;
  }

  absl::StatusOr<HloModule> Parse() {
    std::vector<absl::string_view> lines = absl::StrSplit(text_, '\n');
    HloComputation* cur = nullptr;
    bool header = false;
    std::string section;  // the stack-frame section being skipped
    for (size_t i = 0; i < lines.size(); ++i) {
      const int line_no = static_cast<int>(i) + 1;
      Cursor c(lines[i], line_no, file_);
      if (c.AtEnd()) continue;
      if (!header) {
        if (!c.Consume("HloModule")) return c.Error("expected 'HloModule NAME, ...' as the first line");
        RETURN_IF_ERROR(ModuleHeader(c));
        header = true;
        continue;
      }
      if (cur == nullptr && section.empty() && IsStackFrameSection(lines[i])) {
        section = std::string(absl::StripAsciiWhitespace(lines[i]));
        continue;
      }
      if (cur == nullptr && !section.empty()) {
        // A numbered entry of the section (`1 "file.py"`, `3 {file_name_id=1 ...}`).
        if (std::isdigit(static_cast<unsigned char>(c.Peek()))) continue;
        if (IsStackFrameSection(lines[i])) {
          section = std::string(absl::StripAsciiWhitespace(lines[i]));
          continue;
        }
        section.clear();
      }
      if (cur == nullptr) {
        RETURN_IF_ERROR(ComputationHeader(c));
        cur = &m_.computations.back();
        continue;
      }
      if (c.Consume("}")) {
        if (!c.AtEnd()) return c.Error(absl::StrCat("expected the end of the line after '}', got ", c.Describe()));
        RETURN_IF_ERROR(FinishComputation(*cur));
        cur = nullptr;
        continue;
      }
      RETURN_IF_ERROR(Instruction(c, *cur));
    }
    int last_line = static_cast<int>(lines.size());
    while (last_line > 1 && absl::StripAsciiWhitespace(lines[static_cast<size_t>(last_line) - 1]).empty()) --last_line;
    if (!header) return LineError(1, 1, "empty module: expected 'HloModule NAME, ...'");
    if (cur != nullptr) {
      return LineError(cur->location.line, cur->location.column,
                       absl::StrCat("computation '", cur->name, "' is not closed with '}' (the text ends at line ",
                                    last_line, ")"));
    }
    if (m_.entry < 0) return LineError(last_line, 1, "no ENTRY computation");
    for (const HloComputation& comp : m_.computations) {
      for (const HloInstruction& ins : comp.instructions) {
        for (const auto& [key, names] : ins.called) {
          for (const std::string& n : names) {
            if (!m_.by_name.count(n)) {
              return LineError(ins.location.line, ins.location.column,
                               absl::StrCat(ins.name, ": ", key, "=", n, ": no computation named '", n, "'"));
            }
          }
        }
      }
    }
    return std::move(m_);
  }

 private:
  absl::Status LineError(int line, int col, const std::string& what) const {
    return absl::InvalidArgumentError(absl::StrCat(file_, ":", line, ":", col, ": ", what));
  }

  absl::Status ModuleHeader(Cursor& c) {
    m_.name = c.Name();
    if (m_.name.empty()) return c.Error("expected the module's name after 'HloModule'");
    while (c.Consume(",")) {
      const HloLocation at = c.location();
      const std::string key = c.Name();
      if (key.empty()) return c.Error("expected a module attribute name");
      RETURN_IF_ERROR(c.Expect("="));
      ASSIGN_OR_RETURN(std::string value, c.Value());
      if (key == "input_output_alias") {
        RETURN_IF_ERROR(ParseAliases(value, at));
      } else if (key == "buffer_donor") {
        RETURN_IF_ERROR(ParseDonors(value, at));
      } else if (key == "num_partitions" || key == "replica_count") {
        int64_t v = 0;
        if (!absl::SimpleAtoi(value, &v) || v < 1) {
          return LineError(at.line, at.column, absl::StrCat(key, ": expected a positive integer, got '", value, "'"));
        }
        (key == "num_partitions" ? m_.num_partitions : m_.replica_count) = v;
      } else if (key == "is_scheduled") {
        m_.is_scheduled = value == "true";
      }
    }
    if (!c.AtEnd()) return c.Error(absl::StrCat("expected ',' or the end of the header, got ", c.Describe()));
    // Collectives span num_partitions x replica_count devices
    // (hlo_op_cost.cc): the product must not wrap (2^32 x 2^32 wrapped to
    // 0... or 1, a free all-reduce; issue 27).
    int64_t devices = 0;
    if (!CheckedMul(m_.num_partitions, m_.replica_count, &devices)) {
      return c.Error(absl::StrCat("num_partitions x replica_count = ", m_.num_partitions, " x ", m_.replica_count,
                                  " exceeds 2^63 - 1"));
    }
    return absl::OkStatus();
  }

  // `{ {0}: (0, {}, may-alias), {1, 2}: (3, {0}) }`
  absl::Status ParseAliases(const std::string& value, HloLocation at) {
    Cursor c(value, at.line, file_);
    auto bad = [&](const std::string& what) {
      return LineError(at.line, at.column, absl::StrCat("input_output_alias: ", what, " in '", value, "'"));
    };
    auto inner = c.Balanced('{', '}');
    if (!inner.ok()) return bad("expected { {OUTPUT_INDEX}: (PARAMETER, {INDEX}, KIND), ... }");
    for (const std::string& entry : SplitTopLevel(*inner)) {
      if (entry.empty()) continue;
      Cursor e(entry, at.line, file_);
      HloAlias a;
      auto out = e.Balanced('{', '}');
      if (!out.ok() || !e.Consume(":")) return bad(absl::StrCat("expected {OUTPUT_INDEX}: at '", entry, "'"));
      a.output_index = IntList(*out);
      auto body = e.Balanced('(', ')');
      if (!body.ok()) return bad(absl::StrCat("expected (PARAMETER, {INDEX}) at '", entry, "'"));
      std::vector<std::string> parts = SplitTopLevel(*body);
      if (parts.size() < 2 || !absl::SimpleAtoi(parts[0], &a.parameter)) {
        return bad(absl::StrCat("expected (PARAMETER, {INDEX}) at '", entry, "'"));
      }
      a.parameter_index = IntList(absl::StripSuffix(absl::StripPrefix(parts[1], "{"), "}"));
      a.must_alias = parts.size() > 2 && parts[2] == "must-alias";
      m_.aliases.push_back(std::move(a));
    }
    return absl::OkStatus();
  }

  // `{ (0, {}), (2, {}) }`
  absl::Status ParseDonors(const std::string& value, HloLocation at) {
    Cursor c(value, at.line, file_);
    auto inner = c.Balanced('{', '}');
    if (!inner.ok()) {
      return LineError(at.line, at.column, absl::StrCat("buffer_donor: expected { (PARAMETER, {INDEX}), ... }"));
    }
    for (const std::string& entry : SplitTopLevel(*inner)) {
      if (entry.empty()) continue;
      Cursor e(entry, at.line, file_);
      auto body = e.Balanced('(', ')');
      int64_t p = 0;
      std::vector<std::string> parts = body.ok() ? SplitTopLevel(*body) : std::vector<std::string>{};
      if (parts.empty() || !absl::SimpleAtoi(parts[0], &p)) {
        return LineError(at.line, at.column, absl::StrCat("buffer_donor: expected (PARAMETER, {INDEX}) at '", entry, "'"));
      }
      m_.buffer_donors.push_back(p);
    }
    return absl::OkStatus();
  }

  absl::Status ComputationHeader(Cursor& c) {
    HloComputation comp;
    comp.location = c.location();
    comp.entry = c.Consume("ENTRY");
    comp.name = c.Name();
    if (comp.name.empty()) return c.Error(absl::StrCat("expected a computation name, got ", c.Describe()));
    if (c.Peek() == '(') RETURN_IF_ERROR(c.Balanced('(', ')').status());  // printed signature
    if (c.Consume("->")) RETURN_IF_ERROR(c.Shape().status());
    RETURN_IF_ERROR(c.Expect("{"));
    if (!c.AtEnd()) return c.Error("expected one instruction per line after '{'");
    if (m_.by_name.count(comp.name)) return c.Error(absl::StrCat("computation '", comp.name, "' is defined twice"));
    if (comp.entry) {
      if (m_.entry >= 0) return c.Error("a second ENTRY computation");
      m_.entry = static_cast<int>(m_.computations.size());
    }
    m_.by_name[comp.name] = static_cast<int>(m_.computations.size());
    m_.computations.push_back(std::move(comp));
    names_.clear();
    return absl::OkStatus();
  }

  absl::Status Instruction(Cursor& c, HloComputation& comp) {
    HloInstruction ins;
    ins.location = c.location();
    ins.root = c.Consume("ROOT");
    ins.name = c.Name();
    if (ins.name.empty()) return c.Error(absl::StrCat("expected an instruction name or '}', got ", c.Describe()));
    RETURN_IF_ERROR(c.Expect("="));
    ASSIGN_OR_RETURN(ins.shape, c.Shape());
    ins.opcode = c.Name();
    if (ins.opcode.empty()) return c.Error(absl::StrCat("expected an opcode, got ", c.Describe()));
    const HloLocation operands_at = c.location();
    ASSIGN_OR_RETURN(std::string operands, c.Balanced('(', ')'));
    if (ins.opcode == "constant") {
      ins.literal = std::string(absl::StripAsciiWhitespace(operands));
    } else if (ins.opcode == "parameter") {
      if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(operands), &ins.parameter_number) ||
          ins.parameter_number < 0) {
        return LineError(operands_at.line, operands_at.column,
                         absl::StrCat(ins.name, ": expected parameter(NUMBER), got parameter(", operands, ")"));
      }
    } else {
      for (const std::string& op : SplitTopLevel(operands)) {
        if (op.empty()) return LineError(operands_at.line, operands_at.column, absl::StrCat(ins.name, ": empty operand"));
        // "[SHAPE] [%]name": the name is the last word.
        const size_t sp = op.find_last_of(" \t");
        std::string n = sp == std::string::npos ? op : op.substr(sp + 1);
        if (!n.empty() && n[0] == '%') n.erase(0, 1);
        ins.operand_names.push_back(n);
      }
    }
    while (c.Consume(",")) {
      const std::string key = c.Name();
      if (key.empty()) return c.Error(absl::StrCat("expected an attribute name, got ", c.Describe()));
      RETURN_IF_ERROR(c.Expect("="));
      ASSIGN_OR_RETURN(std::string value, c.Value());
      if (CalledKeys().count(key)) {
        std::string list = value;
        if (!list.empty() && list.front() == '{') list = list.substr(1, list.size() - 2);
        for (const std::string& n : SplitTopLevel(list)) {
          ins.called[key].push_back(std::string(absl::StripPrefix(n, "%")));
        }
      } else {
        ins.attributes[key] = value;
      }
    }
    if (!c.AtEnd()) return c.Error(absl::StrCat("expected ', attribute=value' or the end of the line, got ", c.Describe()));
    if (names_.count(ins.name)) {
      return LineError(ins.location.line, ins.location.column,
                       absl::StrCat("instruction '", ins.name, "' is defined twice in '", comp.name, "'"));
    }
    names_[ins.name] = static_cast<int>(comp.instructions.size());
    comp.instructions.push_back(std::move(ins));
    return absl::OkStatus();
  }

  // Resolves operands, orders the instructions operands-first, finds the
  // root and the parameters.
  absl::Status FinishComputation(HloComputation& comp) {
    auto err = [&](const HloInstruction& ins, const std::string& what) {
      return LineError(ins.location.line, ins.location.column, what);
    };
    if (comp.instructions.empty()) {
      return LineError(comp.location.line, comp.location.column, absl::StrCat("computation '", comp.name, "' is empty"));
    }
    for (HloInstruction& ins : comp.instructions) {
      for (const std::string& n : ins.operand_names) {
        auto it = names_.find(n);
        if (it == names_.end()) {
          return err(ins, absl::StrCat(ins.name, ": operand '", n, "' is not defined in computation '", comp.name, "'"));
        }
        ins.operands.push_back(it->second);
      }
    }
    // Depth-first post-order from every instruction, in text order: the
    // printer's order when it already is one.
    const size_t n = comp.instructions.size();
    std::vector<int> order, state(n, 0);
    order.reserve(n);
    std::function<absl::Status(int)> visit = [&](int i) -> absl::Status {
      std::vector<std::pair<int, size_t>> stack = {{i, 0}};
      while (!stack.empty()) {
        auto& [v, next] = stack.back();
        if (next == 0) {
          if (state[static_cast<size_t>(v)] == 2) {
            stack.pop_back();
            continue;
          }
          state[static_cast<size_t>(v)] = 1;
        }
        const HloInstruction& ins = comp.instructions[static_cast<size_t>(v)];
        if (next < ins.operands.size()) {
          const int u = ins.operands[next++];
          if (state[static_cast<size_t>(u)] == 1) return err(ins, absl::StrCat(ins.name, ": operands form a cycle"));
          if (state[static_cast<size_t>(u)] == 0) stack.push_back({u, 0});
          continue;
        }
        state[static_cast<size_t>(v)] = 2;
        order.push_back(v);
        stack.pop_back();
      }
      return absl::OkStatus();
    };
    for (size_t i = 0; i < n; ++i) {
      if (state[i] == 0) RETURN_IF_ERROR(visit(static_cast<int>(i)));
    }
    std::vector<int> new_index(n);
    for (size_t k = 0; k < n; ++k) new_index[static_cast<size_t>(order[k])] = static_cast<int>(k);
    std::vector<HloInstruction> sorted;
    sorted.reserve(n);
    for (int i : order) sorted.push_back(std::move(comp.instructions[static_cast<size_t>(i)]));
    for (HloInstruction& ins : sorted) {
      for (int& o : ins.operands) o = new_index[static_cast<size_t>(o)];
    }
    comp.instructions = std::move(sorted);
    int beyond = -1;  // an instruction whose parameter number is >= n
    for (size_t i = 0; i < n; ++i) {
      const HloInstruction& ins = comp.instructions[i];
      if (ins.root) {
        if (comp.root >= 0) return err(ins, absl::StrCat("second ROOT in computation '", comp.name, "'"));
        comp.root = static_cast<int>(i);
      }
      if (ins.opcode == "parameter") {
        // Parameters are numbered 0 to k-1 with k <= n, the computation's
        // instructions, so a number >= n leaves one below n missing: the
        // table is sized by n at most, never by the number
        // (parameter(999999999) allocated 4 GB, parameter(2^63-1) reached
        // vector::resize; issue 27).
        if (ins.parameter_number >= static_cast<int64_t>(n)) {
          if (beyond < 0) beyond = static_cast<int>(i);
          continue;
        }
        const size_t p = static_cast<size_t>(ins.parameter_number);
        if (p >= comp.parameters.size()) comp.parameters.resize(p + 1, -1);
        if (comp.parameters[p] >= 0) {
          return err(ins, absl::StrCat("parameter(", p, ") appears twice in computation '", comp.name, "'"));
        }
        comp.parameters[p] = static_cast<int>(i);
      }
    }
    if (beyond >= 0) comp.parameters.push_back(-1);  // a number below n is missing: find it below
    for (size_t p = 0; p < comp.parameters.size(); ++p) {
      if (comp.parameters[p] < 0) {
        std::string why;
        if (beyond >= 0) {
          const HloInstruction& b = comp.instructions[static_cast<size_t>(beyond)];
          why = absl::StrCat(" (", b.name, " at ", b.location.line, ":", b.location.column, " is parameter(",
                             b.parameter_number, "), past the ", n, " instructions it has)");
        }
        return LineError(comp.location.line, comp.location.column,
                         absl::StrCat("computation '", comp.name, "' has no parameter(", p, ")", why));
      }
    }
    // Without a ROOT the last instruction in text order is the root (as
    // XLA's parser does); the sort keeps it last among its dependents.
    if (comp.root < 0) comp.root = new_index[n - 1];
    return absl::OkStatus();
  }

  std::string text_;
  const std::string& file_;
  HloModule m_;
  std::map<std::string, int> names_;  // of the computation being read
};

}  // namespace

absl::StatusOr<HloModule> ParseHloModule(absl::string_view text, const std::string& file) {
  return Parser(text, file).Parse();
}

absl::StatusOr<HloModule> ReadHloModule(const std::string& path) {
  ASSIGN_OR_RETURN(std::unique_ptr<ByteSource> in, OpenByteSource(path));
  ASSIGN_OR_RETURN(std::string text, ReadAll(*in));
  return ParseHloModule(text, path);
}

absl::StatusOr<HloShape> ParseHloShape(absl::string_view text) {
  const std::string file = "shape";
  Cursor c(text, 1, file);
  ASSIGN_OR_RETURN(HloShape s, c.Shape());
  if (!c.AtEnd()) return c.Error(absl::StrCat("unexpected text after the shape: ", c.Describe()));
  return s;
}

}  // namespace gpusim
