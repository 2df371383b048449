#include "sim/import/json_fast.h"

#include <array>
#include <cstring>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace gpusim::import_internal {

namespace {

// Bytes a fast string may hold: printable ASCII but the quote and the
// backslash (an escape, a control character or a non-ASCII byte sends the
// element to the general path, which unescapes and checks UTF-8).
constexpr std::array<bool, 256> PlainStringBytes() {
  std::array<bool, 256> t{};
  for (int c = 0x20; c < 0x7f; ++c) t[static_cast<size_t>(c)] = c != '"' && c != '\\';
  return t;
}
constexpr std::array<bool, 256> kPlain = PlainStringBytes();

bool IsDigit(char c) { return c >= '0' && c <= '9'; }

// Eight ASCII digits at `p` as their value, when they are all digits (the
// SWAR tests and multiplies of simdjson's is_made_of_eight_digits_fast and
// parse_eight_digits_unrolled, written anew here).
bool EightDigits(const char* p, uint64_t* value) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
  uint64_t x = 0;
  std::memcpy(&x, p, 8);
  if ((((x & 0xF0F0F0F0F0F0F0F0ULL) | (((x + 0x0606060606060606ULL) & 0xF0F0F0F0F0F0F0F0ULL) >> 4))) !=
      0x3333333333333333ULL) {
    return false;
  }
  x -= 0x3030303030303030ULL;
  x = x * 10 + (x >> 8);  // pairs of digits in every other byte
  x = (((x & 0x000000FF000000FFULL) * (100 + (1000000ULL << 32))) +
       (((x >> 16) & 0x000000FF000000FFULL) * (1 + (10000ULL << 32)))) >>
      32;
  *value = x;
  return true;
#else
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) {
    if (!IsDigit(p[i])) return false;
    v = v * 10 + static_cast<uint64_t>(p[i] - '0');
  }
  *value = v;
  return true;
#endif
}

}  // namespace

bool FastJson::String(std::string_view* out) {
  if (!SkipWs() || *p_ != '"') return false;
  const char* b = p_ + 1;
  const char* q = b;
#if defined(__SSE2__)
  // 16 bytes at a time: a quote, a backslash, a control byte (< 0x20), a
  // non-ASCII byte (negative as a signed byte) or DEL ends the plain run.
  const __m128i quote = _mm_set1_epi8('"'), backslash = _mm_set1_epi8('\\'), space = _mm_set1_epi8(0x20),
                del = _mm_set1_epi8(0x7f);
  while (end_ - q >= 16) {
    const __m128i x = _mm_loadu_si128(reinterpret_cast<const __m128i*>(q));
    const __m128i stop = _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(x, quote), _mm_cmpeq_epi8(x, backslash)),
                                      _mm_or_si128(_mm_cmplt_epi8(x, space), _mm_cmpeq_epi8(x, del)));
    const int mask = _mm_movemask_epi8(stop);
    if (mask != 0) {
      q += __builtin_ctz(static_cast<unsigned>(mask));
      break;
    }
    q += 16;
  }
#endif
  while (q < end_ && kPlain[static_cast<unsigned char>(*q)]) ++q;
  if (q == end_ || *q != '"') return false;
  *out = std::string_view(b, static_cast<size_t>(q - b));
  p_ = q + 1;
  return true;
}

KeyTable::KeyTable(std::initializer_list<std::string_view> names) {
  for (std::string_view n : names) {
    Entry e;
    e.name = n;
    if (n.size() + 2 <= e.quoted.size()) {
      e.quoted[0] = '"';
      for (size_t i = 0; i < n.size(); ++i) e.quoted[i + 1] = n[i];
      e.quoted[n.size() + 1] = '"';
      e.mask = (uint32_t{1} << (n.size() + 2)) - 1;
    }
    entries_.push_back(e);
  }
}

int FastJson::Key(const KeyTable& table, int guess, std::string_view* key) {
  if (!SkipWs()) return kNoKey;
  int index = kUnknownKey;
  if (guess >= 0 && guess < table.size()) {
    const KeyTable::Entry& g = table.entries_[static_cast<size_t>(guess)];
    const size_t n = g.name.size();
    bool hit = false;
#if defined(__SSE2__)
    if (g.mask != 0 && end_ - p_ >= 16) {
      const __m128i x = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p_));
      const __m128i want = _mm_loadu_si128(reinterpret_cast<const __m128i*>(g.quoted.data()));
      const uint32_t eq = static_cast<uint32_t>(_mm_movemask_epi8(_mm_cmpeq_epi8(x, want)));
      hit = (eq & g.mask) == g.mask;
    } else
#endif
    {
      hit = static_cast<size_t>(end_ - p_) > n + 2 && p_[0] == '"' && p_[n + 1] == '"' &&
            std::memcmp(p_ + 1, g.name.data(), n) == 0;
    }
    if (hit) {
      *key = std::string_view(p_ + 1, n);
      p_ += n + 2;
      index = guess;
    }
  }
  if (index == kUnknownKey) {
    if (!String(key)) return kNoKey;
    for (int i = 0; i < table.size(); ++i) {
      if (*key == table.name(i)) {
        index = i;
        break;
      }
    }
  }
  return Consume(':') ? index : kNoKey;
}

bool FastJson::Number(std::string_view* out) {
  int64_t value = 0;
  bool is_integer = false;
  return Number(out, &value, &is_integer);
}

[[gnu::noinline]] bool FastJson::NumberSlow(std::string_view* out, int64_t* value, bool* is_integer) {
  if (!SkipWs()) return false;
  const char* b = p_;
  const char* q = p_;
  const bool negative = q < end_ && *q == '-';
  if (negative) ++q;
  if (q == end_ || !IsDigit(*q)) return false;
  const char* digits = q;
  uint64_t v = 0;
  if (*q == '0') {
    ++q;
  } else {
    bool done = false;
#if defined(GPUSIM_JSON_FAST_SWAR)
    // The length of the run of digits in one 16-byte test, then its value
    // in one or two word conversions (runs of 1..16 digits: every integer
    // a trace holds).
    if (end_ - q >= 16) {
      const unsigned stop = json_fast_internal::NonDigits(_mm_loadu_si128(reinterpret_cast<const __m128i*>(q)));
      if (stop != 0) {
        const int n = __builtin_ctz(stop);  // >= 1: *q is a digit
        v = json_fast_internal::DigitsValue16(q, n);
        q += n;
        done = true;
      }
    }
#endif
    if (!done) {
      // (v wraps past 19 digits: it is not used then.)
      uint64_t eight = 0;
      while (end_ - q >= 8 && EightDigits(q, &eight)) {
        v = v * 100000000 + eight;
        q += 8;
      }
      while (q < end_ && IsDigit(*q)) v = v * 10 + static_cast<uint64_t>(*q++ - '0');
    }
  }
  bool integer = q - digits <= 18;
  if (q < end_ && *q == '.') {
    integer = false;
    ++q;
    if (q == end_ || !IsDigit(*q)) return false;
    while (q < end_ && IsDigit(*q)) ++q;
  }
  if (q < end_ && (*q == 'e' || *q == 'E')) {
    integer = false;
    ++q;
    if (q < end_ && (*q == '+' || *q == '-')) ++q;
    if (q == end_ || !IsDigit(*q)) return false;
    while (q < end_ && IsDigit(*q)) ++q;
  }
  // The token must end here (JSON puts a blank or structural byte after a
  // number); anything else is for the general path to name.
  if (q == end_) return false;
  const char c = *q;
  if (c != ',' && c != '}' && c != ']' && c != ' ' && c != '\n' && c != '\r' && c != '\t') return false;
  *out = std::string_view(b, static_cast<size_t>(q - b));
  *is_integer = integer;
  if (integer) *value = negative ? -static_cast<int64_t>(v) : static_cast<int64_t>(v);
  p_ = q;
  return true;
}

bool EventShape::Learn(const char* end) {
  runs_.clear();
  literal_.clear();
  if (overflow_) return false;
  const char* at = begin_;
  for (int i = 0; i <= recorded_; ++i) {
    const char* to = i < recorded_ ? recorded_holes_[static_cast<size_t>(i)].from : end;
    Run r;
    r.at = static_cast<uint32_t>(literal_.size());
    r.size = static_cast<uint32_t>(to - at);
    r.field = i < recorded_ ? recorded_holes_[static_cast<size_t>(i)].field : kNoField;
    literal_.append(at, to);
    runs_.push_back(r);
    if (i < recorded_) at = recorded_holes_[static_cast<size_t>(i)].to;
  }
  literal_.append(16, '\0');
  return true;
}

bool FastJson::Literal(std::string_view word) {
  if (static_cast<size_t>(end_ - p_) <= word.size() || std::string_view(p_, word.size()) != word) return false;
  const char c = p_[word.size()];
  if (c != ',' && c != '}' && c != ']' && c != ' ' && c != '\n' && c != '\r' && c != '\t') return false;
  p_ += word.size();
  return true;
}

bool FastJson::SkipValue(int depth) {
  if (!SkipWs()) return false;
  std::string_view ignored;
  switch (*p_) {
    case '"':
      return String(&ignored);
    case 't':
      return Literal("true");
    case 'f':
      return Literal("false");
    case 'n':
      return Literal("null");
    case '{': {
      if (depth >= kMaxDepth) return false;
      ++p_;
      if (Peek() == '}') {
        ++p_;
        return true;
      }
      while (true) {
        if (!String(&ignored) || !Consume(':') || !SkipValue(depth + 1)) return false;
        const char c = Peek();
        if (c == '\0') return false;
        ++p_;
        if (c == '}') return true;
        if (c != ',') return false;
      }
    }
    case '[': {
      if (depth >= kMaxDepth) return false;
      ++p_;
      if (Peek() == ']') {
        ++p_;
        return true;
      }
      while (true) {
        if (!SkipValue(depth + 1)) return false;
        const char c = Peek();
        if (c == '\0') return false;
        ++p_;
        if (c == ']') return true;
        if (c != ',') return false;
      }
    }
    default:
      return Number(&ignored);
  }
}

bool FastJson::RawScalar(std::string_view* out) {
  if (!SkipWs()) return false;
  const char* b = p_;
  const char c = *p_;
  if (c == '{' || c == '[') return false;
  if (c == '-' || IsDigit(c)) {  // SkipValue's Number, inline
    std::string_view ignored;
    int64_t value = 0;
    bool is_integer = false;
    if (!Number(&ignored, &value, &is_integer)) return false;
  } else if (!SkipValue(0)) {
    return false;
  }
  SkipWs();
  *out = std::string_view(b, static_cast<size_t>(p_ - b));
  return true;
}

}  // namespace gpusim::import_internal
