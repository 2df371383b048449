// A strict one-pass reader over JSON text in a contiguous buffer, for the
// streamed importers' fast path (Note [One pass per trace event] in
// kineto.cc): it finds a value's end and its tokens together, where the
// general path first finds the element's end (json_stream.cc) and then walks
// it again with simdjson. It accepts only a subset of JSON it can read
// exactly — ASCII strings without escapes or control characters, numbers of
// the JSON grammar, the literals, nesting up to kMaxDepth — and fails
// (returns false, consuming nothing the caller keeps) on anything else,
// including text that runs past the buffer; the caller then takes the
// general path, whose results and error messages are the reference.
//
// Internal to the importers.
#ifndef GPUSIM_SIM_IMPORT_JSON_FAST_H_
#define GPUSIM_SIM_IMPORT_JSON_FAST_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string_view>
#include <vector>

namespace gpusim::import_internal {

// The object keys FastJson::Key recognises, each with its quoted form kept
// for a comparison in one 16-byte load.
class KeyTable {
 public:
  explicit KeyTable(std::initializer_list<std::string_view> names);
  int size() const { return static_cast<int>(entries_.size()); }
  std::string_view name(int i) const { return entries_[static_cast<size_t>(i)].name; }

 private:
  friend class FastJson;
  struct Entry {
    std::string_view name;
    std::array<char, 16> quoted{};  // '"' name '"', zero-padded
    uint32_t mask = 0;              // its bytes, as a movemask
  };
  std::vector<Entry> entries_;
};

class FastJson {
 public:
  static constexpr int kMaxDepth = 32;

  explicit FastJson(std::string_view text) : p_(text.data()), end_(text.data() + text.size()) {}

  const char* pos() const { return p_; }

  // Skips blanks; false at the end of the text.
  bool SkipWs() {
    while (p_ < end_ && (*p_ == ' ' || *p_ == '\n' || *p_ == '\r' || *p_ == '\t')) ++p_;
    return p_ < end_;
  }
  // After blanks, the next byte is `c`: consumes it.
  bool Consume(char c) {
    if (!SkipWs() || *p_ != c) return false;
    ++p_;
    return true;
  }
  // After blanks, the next byte, without consuming it (0 at the end).
  char Peek() { return SkipWs() ? *p_ : '\0'; }

  // A string at the cursor (after blanks): its contents, without quotes.
  bool String(std::string_view* out);
  // An object key at the cursor (after blanks) and the ':' after it: its
  // index in `table`, kUnknownKey for another key, kNoKey when there is no
  // plain key. table.name(guess) (when in range) is tried first, by one
  // comparison in place: writers put the keys of one kind of event in one
  // order, so the guess is usually the key after the previous one.
  static constexpr int kUnknownKey = -1;
  static constexpr int kNoKey = -2;
  int Key(const KeyTable& table, int guess, std::string_view* key);
  // An object at the cursor (after blanks), its keys looked up in `table`
  // (Key, guessing each time the key after the previous one):
  // on_field(index, key, &guess) reads each value (and may change the next
  // guess) and returns false to fail.
  template <typename OnField>
  bool Object(const KeyTable& table, OnField&& on_field) {
    if (!Consume('{')) return false;
    if (Peek() == '}') return Consume('}');
    int guess = 0;
    while (true) {
      std::string_view key;
      const int k = Key(table, guess, &key);
      if (k == kNoKey) return false;
      guess = k + 1;
      if (!on_field(k, key, &guess)) return false;
      const char c = Peek();
      if (c != '}' && c != ',') return false;
      ++p_;
      if (c == '}') return true;
    }
  }
  // A number at the cursor (after blanks), by the JSON grammar: its token.
  bool Number(std::string_view* out);
  // As Number; when the token is an integer of at most 18 digits (no
  // fraction, no exponent), also its value in *value and *is_integer true.
  bool Number(std::string_view* out, int64_t* value, bool* is_integer);
  // Any value at the cursor (after blanks), checked and skipped; `depth`
  // counts the enclosing containers.
  bool SkipValue(int depth);
  // The raw token of a scalar value at the cursor, as simdjson's
  // raw_json_token() gives it: from its first byte up to the next ',', '}'
  // or ']' (blanks after it included). Strings keep their quotes.
  bool RawScalar(std::string_view* out);

 private:
  bool Literal(std::string_view word);

  const char* p_;
  const char* end_;
};

}  // namespace gpusim::import_internal

#endif  // GPUSIM_SIM_IMPORT_JSON_FAST_H_
