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
#include <string>
#include <string_view>
#include <vector>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace gpusim::import_internal {

#if defined(__SSE2__) && defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define GPUSIM_JSON_FAST_SWAR 1
namespace json_fast_internal {
// The bytes of `x` that are not ASCII digits, as a movemask.
inline unsigned NonDigits(__m128i x) {
  const __m128i digit =
      _mm_and_si128(_mm_cmpgt_epi8(x, _mm_set1_epi8('0' - 1)), _mm_cmplt_epi8(x, _mm_set1_epi8('9' + 1)));
  return static_cast<unsigned>(_mm_movemask_epi8(digit)) ^ 0xFFFFu;
}
// The value of the n (1..8) ASCII digits at `p`, when 8 bytes are readable
// there: the n digits shifted to the top of the word (the bytes after them
// drop out, and a borrow from them only moves up; zeros come in below as
// leading zeros), then the SWAR multiplies of simdjson's
// parse_eight_digits_unrolled, written anew.
inline uint64_t DigitsValue(const char* p, int n) {
  uint64_t x = 0;
  __builtin_memcpy(&x, p, 8);
  x = (x - 0x3030303030303030ULL) << (8 * (8 - n));
  x = x * 10 + (x >> 8);
  x = (((x & 0x000000FF000000FFULL) * (100 + (1000000ULL << 32))) +
       (((x >> 16) & 0x000000FF000000FFULL) * (1 + (10000ULL << 32)))) >>
      32;
  return x;
}
// The value of the n (1..16) ASCII digits at `p`, 16 bytes readable there.
inline uint64_t DigitsValue16(const char* p, int n) {
  return n <= 8 ? DigitsValue(p, n) : DigitsValue(p, n - 8) * 100000000 + DigitsValue(p + n - 8, 8);
}
// The bytes JSON may put right after a number.
constexpr std::array<bool, 256> NumberEnds() {
  std::array<bool, 256> t{};
  for (char c : {',', '}', ']', ' ', '\n', '\r', '\t'}) t[static_cast<unsigned char>(c)] = true;
  return t;
}
inline constexpr std::array<bool, 256> kNumberEnds = NumberEnds();
inline bool EndsNumber(char c) { return kNumberEnds[static_cast<unsigned char>(c)]; }
}  // namespace json_fast_internal
#endif

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
  [[gnu::always_inline]] bool Number(std::string_view* out, int64_t* value, bool* is_integer) {
#if defined(GPUSIM_JSON_FAST_SWAR)
    // Inline, the common case: an integer of 1..15 digits, at the cursor,
    // then a byte that ends it; anything else goes to NumberSlow, which
    // reads it by the grammar.
    if (end_ - p_ >= 17) {
      const char* q = p_ + (*p_ == '-');
      if (*q >= '0' && *q <= '9') {
        const unsigned stop = json_fast_internal::NonDigits(_mm_loadu_si128(reinterpret_cast<const __m128i*>(q)));
        const int n = __builtin_ctz(stop | 0x10000u);
        if (n < 16 && (n == 1 || *q != '0') && json_fast_internal::EndsNumber(q[n])) {
          const uint64_t v = json_fast_internal::DigitsValue16(q, n);
          *value = q != p_ ? -static_cast<int64_t>(v) : static_cast<int64_t>(v);
          *is_integer = true;
          *out = std::string_view(p_, static_cast<size_t>(q + n - p_));
          p_ = q + n;
          return true;
        }
      }
    }
#endif
    return NumberSlow(out, value, is_integer);
  }
  // Exactly the `n` bytes at `s` at the cursor (no blanks skipped):
  // consumes them. `s` must be readable for n + 15 bytes (EventShape pads
  // its runs).
  bool Expect(const char* s, size_t n) {
    if (static_cast<size_t>(end_ - p_) < n) return false;
#if defined(__SSE2__)
    // 16 bytes at a time; a short tail as the last 16 bytes (overlapping),
    // or masked when the run is shorter than 16.
    if (n >= 16) {
      size_t i = 0;
      for (; i + 16 <= n; i += 16) {
        if (!Same16(p_ + i, s + i, 0xFFFFu)) return false;
      }
      if (i < n && !Same16(p_ + n - 16, s + n - 16, 0xFFFFu)) return false;
    } else if (end_ - p_ >= 16) {
      if (!Same16(p_, s, (1u << n) - 1)) return false;
    } else if (__builtin_memcmp(p_, s, n) != 0) {
      return false;
    }
#else
    if (__builtin_memcmp(p_, s, n) != 0) return false;
#endif
    p_ += n;
    return true;
  }
  // Any value at the cursor (after blanks), checked and skipped; `depth`
  // counts the enclosing containers.
  bool SkipValue(int depth);
  // The raw token of a scalar value at the cursor, as simdjson's
  // raw_json_token() gives it: from its first byte up to the next ',', '}'
  // or ']' (blanks after it included). Strings keep their quotes.
  bool RawScalar(std::string_view* out);

 private:
  bool Literal(std::string_view word);
  bool NumberSlow(std::string_view* out, int64_t* value, bool* is_integer);
#if defined(__SSE2__)
  // The bytes of `want` among the 16 at `a` and at `b` are equal.
  static bool Same16(const char* a, const char* b, unsigned want) {
    const __m128i x = _mm_loadu_si128(reinterpret_cast<const __m128i*>(a));
    const __m128i y = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b));
    return (static_cast<unsigned>(_mm_movemask_epi8(_mm_cmpeq_epi8(x, y))) & want) == want;
  }
#endif

  const char* p_;
  const char* end_;
};

// Note [Events of one shape]
// A recorder writes every event of one kind with the same bytes between its
// values: Kineto's [memory] events differ only in ts, pid, tid and the
// numbers in "args" (profiler_kineto.cpp / output_json.cpp print each with
// one format string). Once an event has been walked key by key (FastJson
// Object and Key), its text with those values cut out is its shape: runs
// of literal bytes, each followed by a hole, the value of one field. The
// next event is read against the shape: each run compared in place (16
// bytes at a time), each hole read by the same call the walk made for that
// field. An event that matches every run has exactly the keys, in the same
// order, with the same literal values and blanks, as the walked one, so
// the walk would make the same calls on it at the same places and read the
// same values: the shape reads what the walk reads, without looking a key
// up. Any difference (a run that does not match, a hole whose call fails)
// declines, and the caller walks the event as before.
class EventShape {
 public:
  static constexpr int kMaxHoles = 32;

  bool empty() const { return runs_.empty(); }
  // Recording a walk of the object that starts at `begin`: each hole is
  // field `field`'s value, the bytes [from, to), in text order.
  void Begin(const char* begin) {
    begin_ = begin;
    recorded_ = 0;
    overflow_ = false;
  }
  void Hole(int field, const char* from, const char* to) {
    if (recorded_ == kMaxHoles) {
      overflow_ = true;
      return;
    }
    recorded_holes_[static_cast<size_t>(recorded_++)] = {field, from, to};
  }
  // The shape becomes the recorded walk's, whose object ended at `end`;
  // false (and the shape is cleared) when the walk had too many holes.
  bool Learn(const char* end);
  // Reads the object at the cursor when it has this shape: every run
  // matched and on_hole(field) true for every hole.
  template <typename OnHole>
  bool Match(FastJson& j, OnHole&& on_hole) const {
    for (const Run& r : runs_) {
      if (!j.Expect(literal_.data() + r.at, r.size)) return false;
      if (r.field != kNoField && !on_hole(r.field)) return false;
    }
    return true;
  }

 private:
  static constexpr int kNoField = -1;
  struct Run {
    uint32_t at = 0, size = 0;  // literal_[at, at + size)
    int field = kNoField;       // the hole after it (none after the last)
  };
  struct Recorded {
    int field;
    const char *from, *to;
  };
  std::string literal_;  // every run, then 16 bytes of padding
  std::vector<Run> runs_;
  const char* begin_ = nullptr;
  std::array<Recorded, kMaxHoles> recorded_holes_{};
  int recorded_ = 0;
  bool overflow_ = false;
};

}  // namespace gpusim::import_internal

#endif  // GPUSIM_SIM_IMPORT_JSON_FAST_H_
