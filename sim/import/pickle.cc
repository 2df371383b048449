#include "sim/import/pickle.h"

#include <algorithm>
#include <bit>
#include <charconv>
#include <cmath>
#include <cstring>
#include <limits>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "sim/base/status.h"
#include "sim/base/str_cat.h"
#include "sim/import/json_stream.h"

namespace gpusim::import_internal {

using str_internal::Cat;

// Note [Pickle subset]
// A memory snapshot is what torch/cuda/memory.py _snapshot returns, pickled
// by _dump_snapshot with pickle.dump at the default protocol (4; protocol
// 2 in older PyTorch, as traces/recorded/cs336_gpt_training_snapshot.pickle
// shows): dicts, lists, tuples, str, int, float, bool and None. This reader
// runs the opcodes CPython's pickle writes for those at protocols 2 to 5
// (Lib/pickle.py _Pickler.save_*), on a stack with marks and a memo as
// CPython's C unpickler does (Modules/_pickle.c load_*), and refuses every
// opcode that names a class or calls one (GLOBAL, STACK_GLOBAL, REDUCE,
// BUILD, INST, OBJ, NEWOBJ, NEWOBJ_EX, PERSID, BINPERSID, EXT1/2/4), so no
// pickle can run code here, by naming the opcode and its byte offset.
//
// Read as _pickle.c does, corner cases included (a hostile pickle may
// use any opcode anywhere): PROTO up to 5 (HIGHEST_PROTOCOL), FRAME
// transparent once its length is checked against the bytes left (load_frame),
// MARK/POP/POP_MARK/DUP on the split object and mark stacks (load_pop pops a
// mark when one sits at the top), memo entries by index with MEMOIZE taking
// the count of entries as its index (_Unpickler_MemoPut), dict keys hashed
// and compared as Python does (1 == 1.0 == True; the first key stays, the
// last value wins; an unhashable key is an error), APPEND(S) on a list or
// bytearray (its `extend`), SETITEM(S) on a dict or a list (`__setitem__`),
// ADDITEMS on a set, READONLY_BUFFER (a bytearray becomes a memoryview),
// bytes and sets loaded (then refused when written, below), str decoded as
// UTF-8 with surrogates allowed ("surrogatepass"), BINSTRING as ASCII (the
// Unpickler's default encoding). What is left on the stack under the value
// STOP takes is ignored; so are the bytes after STOP.
//
// Not read, though CPython would: the protocol 0 text opcodes (INT, LONG,
// FLOAT, STRING, UNICODE, PUT, GET), which no protocol 2+ pickler writes
// (a snapshot pickle is protocol 2 or later), and NEXT_BUFFER, which needs
// out-of-band buffers pickle.load is not given either. Each is refused by
// name and offset.

// Note [Snapshot JSON from a pickle]
// WriteJson writes what tools/snapshot_to_json.py --keep-frames wrote (the
// converter gpusim ran under python3 until this reader replaced it), byte for
// byte, so the snapshot reader and every output after it are unchanged: its
// _plain walk (tuples become lists; dict keys become strings as json.dumps
// writes a key: None -> "null", True -> "true", 1 -> "1", 1.5 -> "1.5",
// NaN -> "NaN", two keys naming the same string keep the first's place and the
// last's value; a key of another type is an error; NaN and infinities become
// null; an int outside int64 is an error; bytes, bytearray, set, frozenset,
// memoryview are errors), then json.dumps(allow_nan=False,
// separators=(",", ":")) with ensure_ascii: floats as repr() writes them
// (shortest round-trip digits, exponent past 1e16 or under 1e-4), strings
// with \" \\ \n \r \t \b \f escaped, other bytes under 0x20 and every
// character from 0x7f as \u00XX / \uXXXX (lowercase hex), past U+FFFF as a
// surrogate pair.

// Note [Pickle bounds]
// A pickle is bounded as the JSON readers are, in proportion to its size:
// - Memory while reading: every value made costs one opcode of at least one
//   byte, so at most one value (about 60 bytes with its container) per byte;
//   a length field (string, bytes, FRAME, LONG4) is checked against the bytes
//   left before anything is allocated, and a memo index past the entries
//   made so far goes to a hash map, not a vector that size.
// - Expansion: the memo lets a few hundred bytes reference one list from
//   many places, nested to expand exponentially when written out. As
//   snapshot_to_json.py did (gpusim issue 17), each value written costs one
//   from a budget of 4 per pickle byte (up to the STOP that ends it) plus
//   100,000; past it the pickle is refused ("expands to far more values than
//   its size allows"). A value can be a long string, so the JSON text is
//   also held to 128 bytes per pickle byte plus 64 MiB (the repo's 33
//   snapshot pickles need at most 10.6: qwen2_test_ckpt, 129 KB -> 1.37 MB;
//   shared stack frames are what expand).
// - Nesting: 1,000 levels, under the 1,024 the JSON reader (simdjson's
//   DEFAULT_MAX_DEPTH) takes; the walk recurses once per level. (Under
//   Python 3.11 snapshot_to_json.py stopped at 498 nested lists, its
//   recursion limit; the level is the interpreter's, not the format's.)
// - Integers: LONG1/LONG4 of any length load (as Python's int); written,
//   one past int64 is an error, and a dict key of more than 4,300 digits
//   is one too (Python 3.11's sys.get_int_max_str_digits()).

namespace {

// Opcodes, name and byte (Lib/pickletools.py, Modules/_pickle.c enum opcode).
#define GPUSIM_PICKLE_OPCODES(X) \
  X(MARK, '(') X(STOP, '.') X(POP, '0') X(POP_MARK, '1') X(DUP, '2') X(FLOAT, 'F') X(INT, 'I') X(BININT, 'J') \
  X(BININT1, 'K') X(LONG, 'L') X(BININT2, 'M') X(NONE, 'N') X(PERSID, 'P') X(BINPERSID, 'Q') X(REDUCE, 'R') \
  X(STRING, 'S') X(BINSTRING, 'T') X(SHORT_BINSTRING, 'U') X(UNICODE, 'V') X(BINUNICODE, 'X') X(APPEND, 'a') \
  X(BUILD, 'b') X(GLOBAL, 'c') X(DICT, 'd') X(EMPTY_DICT, '}') X(APPENDS, 'e') X(GET, 'g') X(BINGET, 'h') \
  X(INST, 'i') X(LONG_BINGET, 'j') X(LIST, 'l') X(EMPTY_LIST, ']') X(OBJ, 'o') X(PUT, 'p') X(BINPUT, 'q') \
  X(LONG_BINPUT, 'r') X(SETITEM, 's') X(TUPLE, 't') X(EMPTY_TUPLE, ')') X(SETITEMS, 'u') X(BINFLOAT, 'G') \
  X(PROTO, 0x80) X(NEWOBJ, 0x81) X(EXT1, 0x82) X(EXT2, 0x83) X(EXT4, 0x84) X(TUPLE1, 0x85) X(TUPLE2, 0x86) \
  X(TUPLE3, 0x87) X(NEWTRUE, 0x88) X(NEWFALSE, 0x89) X(LONG1, 0x8a) X(LONG4, 0x8b) X(BINBYTES, 'B') \
  X(SHORT_BINBYTES, 'C') X(SHORT_BINUNICODE, 0x8c) X(BINUNICODE8, 0x8d) X(BINBYTES8, 0x8e) X(EMPTY_SET, 0x8f) \
  X(ADDITEMS, 0x90) X(FROZENSET, 0x91) X(NEWOBJ_EX, 0x92) X(STACK_GLOBAL, 0x93) X(MEMOIZE, 0x94) X(FRAME, 0x95) \
  X(BYTEARRAY8, 0x96) X(NEXT_BUFFER, 0x97) X(READONLY_BUFFER, 0x98)

enum Op : uint8_t {
#define GPUSIM_PICKLE_OP_ENUM(name, byte) name = byte,
  GPUSIM_PICKLE_OPCODES(GPUSIM_PICKLE_OP_ENUM)
#undef GPUSIM_PICKLE_OP_ENUM
};

// The pickletools name of opcode `c`, or nullptr.
const char* OpName(uint8_t c) {
  switch (c) {
#define GPUSIM_PICKLE_OP_NAME(name, byte) \
  case name:                              \
    return #name;
    GPUSIM_PICKLE_OPCODES(GPUSIM_PICKLE_OP_NAME)
#undef GPUSIM_PICKLE_OP_NAME
    default: return nullptr;
  }
}

enum class Kind : uint8_t {
  kNone,
  kBool,
  kInt,     // fits int64: `a`
  kBigInt,  // LONG1/LONG4 bytes past int64: bytes [a, a + b), little-endian two's complement
  kFloat,   // `a` holds the double's bits
  kStr,     // UTF-8 bytes [a, a + b) of the input
  kBytes,
  kByteArray,
  kMemoryView,
  kList,  // `a`: index into seqs
  kTuple,
  kDict,  // `a`: index into dicts
  kSet,
  kFrozenSet,
};

// Python's type(x).__name__ for each kind.
const char* TypeName(Kind k) {
  switch (k) {
    case Kind::kNone: return "NoneType";
    case Kind::kBool: return "bool";
    case Kind::kInt:
    case Kind::kBigInt: return "int";
    case Kind::kFloat: return "float";
    case Kind::kStr: return "str";
    case Kind::kBytes: return "bytes";
    case Kind::kByteArray: return "bytearray";
    case Kind::kMemoryView: return "memoryview";
    case Kind::kList: return "list";
    case Kind::kTuple: return "tuple";
    case Kind::kDict: return "dict";
    case Kind::kSet: return "set";
    case Kind::kFrozenSet: return "frozenset";
  }
  return "?";
}

struct Value {
  Kind kind;
  bool hashable;  // hash(x) works: not list/dict/set/bytearray, nor a tuple holding one
  bool shared = false;  // pushed again from the memo or by DUP (Note [Writing shared values once])
  uint64_t pos;   // offset of the opcode that made it
  uint64_t a = 0;
  uint64_t b = 0;
};

constexpr uint32_t kNoValue = std::numeric_limits<uint32_t>::max();

struct Dict {
  std::vector<std::pair<uint32_t, uint32_t>> items;  // key, value; insertion order
  bool str_keys = true;  // every key a str: JSON keys as they are, no two alike
  // Canonical key -> index into items, built once the dict outgrows a scan.
  std::unique_ptr<absl::flat_hash_map<std::string, uint32_t>> index;
};

int64_t SignExtend(const uint8_t* p, size_t n) {  // n <= 8, little-endian
  uint64_t x = 0;
  for (size_t i = 0; i < n; ++i) x |= uint64_t{p[i]} << (8 * i);
  if (n > 0 && n < 8 && (p[n - 1] & 0x80) != 0) x |= ~uint64_t{0} << (8 * n);
  return static_cast<int64_t>(x);
}

// The shortest little-endian two's complement of the integer in [p, p + n).
std::string_view MinimalTwosComplement(const uint8_t* p, size_t n) {
  while (n > 1) {
    const uint8_t top = p[n - 1], next = p[n - 2];
    if ((top == 0x00 && (next & 0x80) == 0) || (top == 0xff && (next & 0x80) != 0)) {
      --n;
    } else {
      break;
    }
  }
  return {reinterpret_cast<const char*>(p), n};
}

// |x| of a two's complement integer, little-endian bytes; and its sign.
std::vector<uint8_t> Magnitude(std::string_view twos, bool* negative) {
  std::vector<uint8_t> m(twos.begin(), twos.end());
  *negative = !m.empty() && (m.back() & 0x80) != 0;
  if (*negative) {
    unsigned carry = 1;
    for (uint8_t& byte : m) {
      const unsigned v = static_cast<uint8_t>(~byte) + carry;
      byte = static_cast<uint8_t>(v);
      carry = v >> 8;
    }
  }
  while (!m.empty() && m.back() == 0) m.pop_back();
  return m;
}

int64_t BitLength(const std::vector<uint8_t>& magnitude) {
  if (magnitude.empty()) return 0;
  return static_cast<int64_t>(magnitude.size() - 1) * 8 + (8 - std::countl_zero(magnitude.back()));
}

// Decimal digits of a magnitude (little-endian bytes); at most ~14,300 bits.
std::string Decimal(std::vector<uint8_t> m) {
  if (m.empty()) return "0";
  std::vector<uint32_t> limbs((m.size() + 3) / 4, 0);
  for (size_t i = 0; i < m.size(); ++i) limbs[i / 4] |= uint32_t{m[i]} << (8 * (i % 4));
  std::string out;
  while (!limbs.empty()) {
    uint64_t rem = 0;
    for (size_t i = limbs.size(); i-- > 0;) {
      const uint64_t cur = (rem << 32) | limbs[i];
      limbs[i] = static_cast<uint32_t>(cur / 1000000000);
      rem = cur % 1000000000;
    }
    while (!limbs.empty() && limbs.back() == 0) limbs.pop_back();
    for (int k = 0; k < 9; ++k) {
      out.push_back(static_cast<char>('0' + rem % 10));
      rem /= 10;
      if (limbs.empty() && rem == 0) break;
    }
  }
  std::reverse(out.begin(), out.end());
  return out;
}

// The exact integer value of an integral double with |d| >= 2^63, as minimal
// two's complement bytes (for comparing dict keys: 2.0**70 == 2**70).
std::string IntegralDoubleBytes(double d) {
  int exp = 0;
  const double frac = std::frexp(std::fabs(d), &exp);  // |d| = frac * 2^exp, frac in [0.5, 1)
  const auto mant = static_cast<uint64_t>(std::ldexp(frac, 53));  // |d| = mant * 2^(exp - 53)
  const int shift = exp - 53;  // >= 10 here
  std::vector<uint8_t> mag(static_cast<size_t>(shift / 8) + 10, 0);
  for (int bit = 0; bit < 53; ++bit) {
    if ((mant >> bit) & 1) {
      const int at = bit + shift;
      mag[static_cast<size_t>(at / 8)] |= static_cast<uint8_t>(1u << (at % 8));
    }
  }
  mag.push_back(0);  // room for the sign bit
  if (d < 0) {
    unsigned carry = 1;
    for (uint8_t& byte : mag) {
      const unsigned v = static_cast<uint8_t>(~byte) + carry;
      byte = static_cast<uint8_t>(v);
      carry = v >> 8;
    }
  }
  return std::string(MinimalTwosComplement(mag.data(), mag.size()));
}

// Strict UTF-8 with encoded surrogates allowed (Python's "surrogatepass").
// Returns the offset of the first bad byte, or n.
size_t Utf8SurrogatePassEnd(const uint8_t* p, size_t n) {
  size_t i = 0;
  while (i < n) {
    const uint8_t c = p[i];
    if (c < 0x80) {
      ++i;
      continue;
    }
    size_t len = 0;
    uint32_t cp = 0, min = 0;
    if ((c & 0xe0) == 0xc0) {
      len = 2, cp = c & 0x1f, min = 0x80;
    } else if ((c & 0xf0) == 0xe0) {
      len = 3, cp = c & 0x0f, min = 0x800;
    } else if ((c & 0xf8) == 0xf0) {
      len = 4, cp = c & 0x07, min = 0x10000;
    } else {
      return i;
    }
    if (i + len > n) return i;
    for (size_t k = 1; k < len; ++k) {
      if ((p[i + k] & 0xc0) != 0x80) return i;
      cp = (cp << 6) | (p[i + k] & 0x3f);
    }
    if (cp < min || cp > 0x10ffff) return i;
    i += len;
  }
  return n;
}

// Stands in for the JSON text where only its size matters
// (PlainPickle::Check): the appends std::string has, counted.
class CountingOut {
 public:
  size_t size() const { return n_; }
  CountingOut& operator+=(char) { return Add(1); }
  CountingOut& operator+=(std::string_view s) { return Add(s.size()); }
  CountingOut& operator+=(const CountingOut& o) { return Add(o.n_); }
  CountingOut& append(const char*, size_t n) { return Add(n); }
  CountingOut& append(size_t n, char) { return Add(n); }
  CountingOut& append(const std::string& s, size_t pos, size_t n) { return Add(std::min(n, s.size() - pos)); }
  CountingOut& append(const CountingOut&, size_t, size_t n) { return Add(n); }

 private:
  CountingOut& Add(size_t n) {
    n_ += n;
    return *this;
  }
  size_t n_ = 0;
};

// Python's repr(float) for a finite double (Objects/floatobject.c
// float_repr -> PyOS_double_to_string(x, 'r', 0, Py_DTSF_ADD_DOT_0)).
template <typename Out>
void AppendFloatRepr(Out& out, double d) {
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, d, std::chars_format::scientific);
  // buf: [-]D[.DDD]e(+|-)XX
  std::string_view s(buf, static_cast<size_t>(end - buf));
  const bool neg = s[0] == '-';
  if (neg) s.remove_prefix(1);
  const size_t e = s.find('e');
  std::string digits;
  for (char ch : s.substr(0, e)) {
    if (ch != '.') digits += ch;
  }
  int exp10 = 0;
  std::from_chars(s.data() + e + 1 + (s[e + 1] == '+' ? 1 : 0), s.data() + s.size(), exp10);
  while (digits.size() > 1 && digits.back() == '0') digits.pop_back();
  const int decpt = exp10 + 1;  // digits[0] is at 10^(decpt - 1)
  if (neg) out += '-';
  const int nd = static_cast<int>(digits.size());
  if (decpt <= -4 || decpt > 16) {
    out += digits[0];
    if (nd > 1) {
      out += '.';
      out.append(digits, 1, std::string::npos);
    }
    const int x = decpt - 1;
    out += x < 0 ? "e-" : "e+";
    const int ax = x < 0 ? -x : x;
    if (ax < 10) out += '0';
    out += std::to_string(ax);
  } else if (decpt <= 0) {
    out += "0.";
    out.append(static_cast<size_t>(-decpt), '0');
    out += digits;
  } else if (decpt >= nd) {
    out += digits;
    out.append(static_cast<size_t>(decpt - nd), '0');
    out += ".0";
  } else {
    out.append(digits, 0, static_cast<size_t>(decpt));
    out += '.';
    out.append(digits, static_cast<size_t>(decpt), std::string::npos);
  }
}

constexpr char kHex[] = "0123456789abcdef";

template <typename Out>
void AppendU(Out& out, uint32_t unit) {
  char u[6] = {'\\', 'u', kHex[(unit >> 12) & 15], kHex[(unit >> 8) & 15], kHex[(unit >> 4) & 15],
               kHex[unit & 15]};
  out.append(u, 6);
}

// json.dumps(s) with ensure_ascii (Modules/_json.c ascii_escape_unicode) of
// UTF-8 (surrogates allowed) already checked by Utf8SurrogatePassEnd.
template <typename Out>
void AppendJsonString(Out& out, std::string_view s) {
  out += '"';
  const auto* p = reinterpret_cast<const uint8_t*>(s.data());
  const size_t n = s.size();
  size_t i = 0;
  while (i < n) {
    size_t run = i;
    while (run < n && p[run] >= 0x20 && p[run] < 0x7f && p[run] != '"' && p[run] != '\\') ++run;
    out.append(s.data() + i, run - i);
    i = run;
    if (i >= n) break;
    const uint8_t c = p[i];
    if (c < 0x80) {
      switch (c) {
        case '"': out += "\\\""; break;
        case '\\': out += "\\\\"; break;
        case '\n': out += "\\n"; break;
        case '\r': out += "\\r"; break;
        case '\t': out += "\\t"; break;
        case '\b': out += "\\b"; break;
        case '\f': out += "\\f"; break;
        default: AppendU(out, c);
      }
      ++i;
      continue;
    }
    uint32_t cp = 0;
    size_t len = 0;
    if ((c & 0xe0) == 0xc0) {
      len = 2, cp = c & 0x1f;
    } else if ((c & 0xf0) == 0xe0) {
      len = 3, cp = c & 0x0f;
    } else {
      len = 4, cp = c & 0x07;
    }
    for (size_t k = 1; k < len; ++k) cp = (cp << 6) | (p[i + k] & 0x3f);
    i += len;
    if (cp >= 0x10000) {
      const uint32_t v = cp - 0x10000;
      AppendU(out, 0xd800 | (v >> 10));
      AppendU(out, 0xdc00 | (v & 0x3ff));
    } else {
      AppendU(out, cp);
    }
  }
  out += '"';
}

// Whether UTF-8 (surrogates allowed) holds an encoded surrogate (ED A0..BF).
bool Utf8HasSurrogates(std::string_view s) {
  for (size_t i = 0; i + 1 < s.size(); ++i) {
    if (static_cast<uint8_t>(s[i]) == 0xed && static_cast<uint8_t>(s[i + 1]) >= 0xa0) return true;
  }
  return false;
}

// A string's JSON text (\uD83D\uDE00 for each surrogate) as simdjson reads it
// back: a high surrogate followed by a low one joined into one character, any
// other surrogate an error (false).
bool JoinSurrogatePairs(std::string_view s, std::string* out) {
  out->clear();
  const auto* p = reinterpret_cast<const uint8_t*>(s.data());
  auto surrogate_at = [&](size_t i) -> uint32_t {  // the code point of an encoded surrogate at i, or 0
    if (i + 3 <= s.size() && p[i] == 0xed && p[i + 1] >= 0xa0) {
      return 0xd000u | ((p[i + 1] & 0x3fu) << 6) | (p[i + 2] & 0x3fu);
    }
    return 0;
  };
  size_t i = 0;
  while (i < s.size()) {
    const uint32_t hi = surrogate_at(i);
    if (hi == 0) {
      out->push_back(s[i]);
      ++i;
      continue;
    }
    const uint32_t lo = surrogate_at(i + 3);
    if (hi >= 0xdc00 || lo < 0xdc00) return false;
    const uint32_t cp = 0x10000 + ((hi - 0xd800) << 10) + (lo - 0xdc00);
    out->push_back(static_cast<char>(0xf0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3f)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3f)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3f)));
    i += 6;
  }
  return true;
}

}  // namespace

struct PlainPickle::Impl {
  std::string_view in;
  std::string label;
  std::vector<Value> values;
  std::vector<std::vector<uint32_t>> seqs;  // lists and tuples
  std::vector<Dict> dicts;
  uint32_t root = kNoValue;
  uint64_t read_end = 0;  // how far pickle.load read: Python's stream.tell()

  const uint8_t* bytes(uint64_t off) const { return reinterpret_cast<const uint8_t*>(in.data()) + off; }
  std::string_view Slice(const Value& v) const { return in.substr(v.a, v.b); }

  absl::Status ErrorAt(uint64_t pos, std::string_view what) const {
    return absl::InvalidArgumentError(Cat(label, ": byte ", pos, ": ", what));
  }

  // json.dumps(k) for a key that is not a str (snapshot_to_json.py: bool,
  // None, int, float; any other type is an error).
  absl::StatusOr<std::string> KeyText(uint32_t id) const {
    const auto& v = values[id];
    switch (v.kind) {
      case Kind::kStr: return std::string(Slice(v));
      case Kind::kNone: return std::string("null");
      case Kind::kBool: return std::string(v.a != 0 ? "true" : "false");
      case Kind::kInt: return std::to_string(static_cast<int64_t>(v.a));
      case Kind::kBigInt: {
        bool negative = false;
        std::vector<uint8_t> m = Magnitude(Slice(v), &negative);
        // Python 3.11 refuses str() of an int over 4,300 digits: 14,288
        // bits are past 10^4300 already.
        std::string digits = BitLength(m) >= 14288 ? std::string(4301, '9') : Decimal(std::move(m));
        if (digits.size() > 4300) {
          return NotPlain(v, "a dict key integer of more than 4300 digits (the limit of Python's "
                          "int-to-str conversion, sys.get_int_max_str_digits())");
        }
        return Cat(negative ? "-" : "", digits);
      }
      case Kind::kFloat: {
        const double f = std::bit_cast<double>(v.a);
        if (std::isnan(f)) return std::string("NaN");
        if (std::isinf(f)) return std::string(f > 0 ? "Infinity" : "-Infinity");
        std::string s;
        AppendFloatRepr(s, f);
        return s;
      }
      default: return NotPlain(v, Cat("unsupported dict key type ", TypeName(v.kind)));
    }
  }

  absl::Status NotPlain(const Value& v, std::string_view what) const {
    return ErrorAt(v.pos, Cat("not a plain-data memory snapshot: ", what));
  }

  // The key of v as a Python dict compares it: equal keys, equal strings.
  std::string CanonicalKey(uint32_t id) const {
    const Value& v = values[id];
    auto int_key = [](int64_t x) {
      std::string k(9, 'I');
      std::memcpy(&k[1], &x, 8);
      return k;
    };
    switch (v.kind) {
      case Kind::kStr: return Cat("S", Slice(v));
      case Kind::kNone: return "N";
      case Kind::kBool:
      case Kind::kInt: return int_key(static_cast<int64_t>(v.a));
      case Kind::kBigInt: return Cat("J", MinimalTwosComplement(bytes(v.a), v.b));
      case Kind::kFloat: {
        const double d = std::bit_cast<double>(v.a);
        if (std::isnan(d)) break;  // equal to itself only
        if (d == std::floor(d) && !std::isinf(d)) {
          if (d >= -9223372036854775808.0 && d < 9223372036854775808.0) {
            return int_key(static_cast<int64_t>(d));
          }
          return Cat("J", IntegralDoubleBytes(d));
        }
        std::string k(9, 'F');
        std::memcpy(&k[1], &v.a, 8);
        return k;
      }
      default: break;
    }
    // Compared by identity: NaN, and keys the JSON refuses anyway (tuple,
    // frozenset, bytes, memoryview), whose equal copies need not merge.
    std::string k(5, 'O');
    std::memcpy(&k[1], &id, 4);
    return k;
  }

  bool SameKey(uint32_t x, uint32_t y) const {
    if (x == y) return true;
    const Value& a = values[x];
    const Value& b = values[y];
    if (a.kind == Kind::kStr && b.kind == Kind::kStr) return Slice(a) == Slice(b);
    if (a.kind == Kind::kStr || b.kind == Kind::kStr) return false;
    return CanonicalKey(x) == CanonicalKey(y);
  }

  // d[key] = value, as PyDict_SetItem.
  void DictSet(Dict& d, uint32_t key, uint32_t value) {
    constexpr size_t kScan = 16;
    if (values[key].kind != Kind::kStr) d.str_keys = false;
    if (d.index == nullptr) {
      for (auto& item : d.items) {
        if (SameKey(item.first, key)) {
          item.second = value;
          return;
        }
      }
      d.items.emplace_back(key, value);
      if (d.items.size() > kScan) {
        d.index = std::make_unique<absl::flat_hash_map<std::string, uint32_t>>();
        for (uint32_t i = 0; i < d.items.size(); ++i) d.index->emplace(CanonicalKey(d.items[i].first), i);
      }
      return;
    }
    auto [it, inserted] = d.index->try_emplace(CanonicalKey(key), static_cast<uint32_t>(d.items.size()));
    if (inserted) {
      d.items.emplace_back(key, value);
    } else {
      d.items[it->second].second = value;
    }
  }
};

namespace {

// The stack machine of Note [Pickle subset].
class Reader {
 public:
  explicit Reader(PlainPickle::Impl& doc) : d_(doc) {}

  absl::Status Run() {
    const std::string_view in = d_.in;
    if (in.empty()) return d_.ErrorAt(0, "empty file, expected a pickle");
    stack_.reserve(64);
    while (true) {
      uint64_t at = 0;
      if (!Take(1, &at)) {
        return d_.ErrorAt(in.size(), "the file ends before the pickle's STOP opcode (truncated file?)");
      }
      op_at_ = at;
      op_ = static_cast<uint8_t>(in[at]);
      if (op_ == STOP) {
        RETURN_IF_ERROR(Underflow(1));
        d_.root = stack_.back();
        d_.read_end = buf_end_;
        return absl::OkStatus();
      }
      RETURN_IF_ERROR(Op());
    }
  }

 private:
  // One opcode other than STOP, by its group.
  absl::Status Op() {
    switch (op_) {
      case PROTO:
      case FRAME: return Framing();
      case NONE:
      case NEWTRUE:
      case NEWFALSE:
      case BININT:
      case BININT1:
      case BININT2:
      case LONG1:
      case LONG4:
      case BINFLOAT: return Scalar();
      case SHORT_BINUNICODE:
      case BINUNICODE:
      case BINUNICODE8:
      case SHORT_BINSTRING:
      case BINSTRING:
      case SHORT_BINBYTES:
      case BINBYTES:
      case BINBYTES8:
      case BYTEARRAY8:
      case READONLY_BUFFER: return StringOrBytes();
      case EMPTY_LIST:
      case EMPTY_TUPLE:
      case EMPTY_DICT:
      case EMPTY_SET:
      case TUPLE1:
      case TUPLE2:
      case TUPLE3:
      case TUPLE:
      case LIST:
      case DICT:
      case FROZENSET:
      case APPEND:
      case APPENDS:
      case SETITEM:
      case SETITEMS:
      case ADDITEMS: return Container();
      case MARK:
      case POP:
      case POP_MARK:
      case DUP:
      case BINPUT:
      case LONG_BINPUT:
      case MEMOIZE:
      case BINGET:
      case LONG_BINGET: return StackOrMemo();
      default: return Refuse();
    }
  }

  // PROTO and FRAME.
  absl::Status Framing() {
    const std::string_view in = d_.in;
    uint64_t at = 0;
    switch (op_) {
      case PROTO: {
        RETURN_IF_ERROR(Arg(1, &at));
        const unsigned v = Byte(at);
        if (v > 5) return Fail(Cat("unsupported pickle protocol ", v, " (CPython reads 0 to 5)"));
        break;
      }
      case FRAME: {
        RETURN_IF_ERROR(Arg(8, &at));
        const uint64_t len = Le(at, 8);
        if (len <= buf_end_ - p_) break;  // inside the frame being read: nothing to do
        // Read from the file where the buffer ends (load_frame's
        // _Unpickler_Read), then from the frame's start.
        if (len > in.size() - buf_end_) {
          return Fail(Cat("a frame of ", len, " bytes runs past the end of the file (", in.size() - buf_end_,
                          " bytes left; truncated file?)"));
        }
        p_ = buf_end_;
        buf_end_ += len;
        break;
      }
      default: break;
    }
    return absl::OkStatus();
  }

  // None, booleans, integers and floats.
  absl::Status Scalar() {
    uint64_t at = 0;
    switch (op_) {
      case NONE: Push(Make(Kind::kNone, 0, 0, true)); break;
      case NEWTRUE: Push(Make(Kind::kBool, 1, 0, true)); break;
      case NEWFALSE: Push(Make(Kind::kBool, 0, 0, true)); break;
      case BININT:
        RETURN_IF_ERROR(Arg(4, &at));
        Push(Make(Kind::kInt, static_cast<uint64_t>(int64_t{static_cast<int32_t>(Le(at, 4))}), 0, true));
        break;
      case BININT1:
        RETURN_IF_ERROR(Arg(1, &at));
        Push(Make(Kind::kInt, Byte(at), 0, true));
        break;
      case BININT2:
        RETURN_IF_ERROR(Arg(2, &at));
        Push(Make(Kind::kInt, Le(at, 2), 0, true));
        break;
      case LONG1:
      case LONG4: {
        const size_t w = op_ == LONG1 ? 1 : 4;
        RETURN_IF_ERROR(Arg(w, &at));
        const int64_t n = op_ == LONG1 ? static_cast<int64_t>(Byte(at))
                                       : static_cast<int64_t>(static_cast<int32_t>(Le(at, 4)));
        if (n < 0) return Fail("LONG pickle has negative byte count");
        if (n == 0) {
          Push(Make(Kind::kInt, 0, 0, true));
          break;
        }
        RETURN_IF_ERROR(Payload(static_cast<uint64_t>(n), "an integer", &at));
        const std::string_view m = MinimalTwosComplement(d_.bytes(at), static_cast<size_t>(n));
        if (m.size() <= 8) {
          Push(Make(Kind::kInt, static_cast<uint64_t>(
                                    SignExtend(reinterpret_cast<const uint8_t*>(m.data()), m.size())),
                    0, true));
        } else {
          Push(Make(Kind::kBigInt, at, static_cast<uint64_t>(n), true));
        }
        break;
      }
      case BINFLOAT: {
        RETURN_IF_ERROR(Arg(8, &at));
        uint64_t bits = 0;
        for (uint64_t i = 0; i < 8; ++i) bits = (bits << 8) | Byte(at + i);  // big-endian
        Push(Make(Kind::kFloat, bits, 0, true));
        break;
      }
      default: break;
    }
    return absl::OkStatus();
  }

  // Strings, bytes and buffers.
  absl::Status StringOrBytes() {
    switch (op_) {
      case SHORT_BINUNICODE: RETURN_IF_ERROR(Counted(1, Kind::kStr)); break;
      case BINUNICODE: RETURN_IF_ERROR(Counted(4, Kind::kStr)); break;
      case BINUNICODE8: RETURN_IF_ERROR(Counted(8, Kind::kStr)); break;
      case SHORT_BINSTRING: RETURN_IF_ERROR(Counted(1, Kind::kStr)); break;
      case BINSTRING: RETURN_IF_ERROR(Counted(4, Kind::kStr)); break;
      case SHORT_BINBYTES: RETURN_IF_ERROR(Counted(1, Kind::kBytes)); break;
      case BINBYTES: RETURN_IF_ERROR(Counted(4, Kind::kBytes)); break;
      case BINBYTES8: RETURN_IF_ERROR(Counted(8, Kind::kBytes)); break;
      case BYTEARRAY8: RETURN_IF_ERROR(Counted(8, Kind::kByteArray)); break;
      case READONLY_BUFFER: {
        RETURN_IF_ERROR(Underflow(1));
        Value& v = d_.values[stack_.back()];
        if (v.kind == Kind::kByteArray) {
          // A writable buffer becomes a read-only memoryview (load_readonly_buffer).
          stack_.back() = Make(Kind::kMemoryView, 0, 0, true);
        } else if (v.kind != Kind::kBytes && v.kind != Kind::kMemoryView) {
          return Fail(Cat("memoryview: a bytes-like object is required, not '", TypeName(v.kind), "'"));
        }
        break;
      }
      default: break;
    }
    return absl::OkStatus();
  }

  // Lists, tuples, dicts and sets, and the opcodes that fill them.
  absl::Status Container() {
    switch (op_) {
      case EMPTY_LIST: Push(NewSeq(Kind::kList)); break;
      case EMPTY_TUPLE: Push(NewSeq(Kind::kTuple)); break;
      case EMPTY_DICT: Push(NewDict()); break;
      case EMPTY_SET: Push(Make(Kind::kSet, 0, 0, false)); break;
      case TUPLE1:
      case TUPLE2:
      case TUPLE3: {
        const size_t n = op_ - TUPLE1 + 1;
        if (stack_.size() < n || stack_.size() - n < fence_) return Underflow();
        RETURN_IF_ERROR(TupleFrom(stack_.size() - n));
        break;
      }
      case TUPLE: {
        ASSIGN_OR_RETURN(size_t m, Marker());
        RETURN_IF_ERROR(TupleFrom(m));
        break;
      }
      case LIST: {
        ASSIGN_OR_RETURN(size_t m, Marker());
        const uint32_t list = NewSeq(Kind::kList);
        d_.seqs[d_.values[list].a].assign(stack_.begin() + static_cast<std::ptrdiff_t>(m), stack_.end());
        stack_.resize(m);
        Push(list);
        break;
      }
      case DICT: {
        ASSIGN_OR_RETURN(size_t m, Marker());
        if ((stack_.size() - m) % 2 != 0) return Fail("odd number of items for DICT");
        const uint32_t dict = NewDict();
        for (size_t k = m; k + 1 < stack_.size(); k += 2) {
          RETURN_IF_ERROR(Hashable(stack_[k]));
          d_.DictSet(d_.dicts[d_.values[dict].a], stack_[k], stack_[k + 1]);
        }
        stack_.resize(m);
        Push(dict);
        break;
      }
      case FROZENSET: {
        ASSIGN_OR_RETURN(size_t m, Marker());
        for (size_t k = m; k < stack_.size(); ++k) RETURN_IF_ERROR(Hashable(stack_[k]));
        stack_.resize(m);
        Push(Make(Kind::kFrozenSet, 0, 0, true));
        break;
      }
      case APPEND:
        if (stack_.size() < 1 || stack_.size() - 1 <= fence_) return Underflow();
        RETURN_IF_ERROR(Append(stack_.size() - 1));
        break;
      case APPENDS: {
        ASSIGN_OR_RETURN(size_t m, Marker());
        RETURN_IF_ERROR(Append(m));
        break;
      }
      case SETITEM:
        if (stack_.size() < 2) return Underflow();
        RETURN_IF_ERROR(SetItems(stack_.size() - 2));
        break;
      case SETITEMS: {
        ASSIGN_OR_RETURN(size_t m, Marker());
        RETURN_IF_ERROR(SetItems(m));
        break;
      }
      case ADDITEMS: {
        ASSIGN_OR_RETURN(size_t m, Marker());
        RETURN_IF_ERROR(AddItems(m));
        break;
      }
      default: break;
    }
    return absl::OkStatus();
  }

  // The mark stack, DUP and the memo.
  absl::Status StackOrMemo() {
    uint64_t at = 0;
    switch (op_) {
      case MARK:
        marks_.push_back(stack_.size());
        fence_ = stack_.size();
        break;
      case POP:
        if (!marks_.empty() && marks_.back() == stack_.size()) {
          marks_.pop_back();
          fence_ = marks_.empty() ? 0 : marks_.back();
        } else if (stack_.size() <= fence_) {
          return Underflow();
        } else {
          stack_.pop_back();
        }
        break;
      case POP_MARK: {
        ASSIGN_OR_RETURN(size_t m, Marker());
        stack_.resize(m);
        break;
      }
      case DUP:
        RETURN_IF_ERROR(Underflow(1));
        d_.values[stack_.back()].shared = true;
        Push(stack_.back());
        break;
      case BINPUT:
        RETURN_IF_ERROR(Arg(1, &at));
        RETURN_IF_ERROR(Underflow(1));
        MemoPut(Byte(at), stack_.back());
        break;
      case LONG_BINPUT:
        RETURN_IF_ERROR(Arg(4, &at));
        RETURN_IF_ERROR(Underflow(1));
        MemoPut(Le(at, 4), stack_.back());
        break;
      case MEMOIZE:
        RETURN_IF_ERROR(Underflow(1));
        MemoPut(memo_len_, stack_.back());
        break;
      case BINGET:
      case LONG_BINGET: {
        const size_t w = op_ == BINGET ? 1 : 4;
        RETURN_IF_ERROR(Arg(w, &at));
        const uint64_t idx = Le(at, w);
        const uint32_t v = MemoGet(idx);
        if (v == kNoValue) return Fail(Cat("memo value not found at index ", idx));
        d_.values[v].shared = true;
        Push(v);
        break;
      }
      default: break;
    }
    return absl::OkStatus();
  }

  // The opcodes gpusim refuses: classes (by name where the pickle gives
  // one), protocol 0 text, out-of-band buffers and bytes that are no opcode.
  absl::Status Refuse() {
    const std::string_view in = d_.in;
    switch (op_) {
      case GLOBAL: {
        // Its argument names the class: "module\nname\n" (shown, not read as
        // _pickle.c's readline would).
        const size_t nl1 = in.find('\n', op_at_ + 1);
        const size_t nl2 = nl1 == std::string_view::npos ? nl1 : in.find('\n', nl1 + 1);
        if (nl2 == std::string_view::npos || nl2 - op_at_ > 200) return RefuseClass("");
        return RefuseClass(Cat(in.substr(op_at_ + 1, nl1 - op_at_ - 1), ".", in.substr(nl1 + 1, nl2 - nl1 - 1)));
      }
      case STACK_GLOBAL: {
        std::string name;
        if (stack_.size() >= 2 && d_.values[stack_[stack_.size() - 1]].kind == Kind::kStr &&
            d_.values[stack_[stack_.size() - 2]].kind == Kind::kStr) {
          name = Cat(d_.Slice(d_.values[stack_[stack_.size() - 2]]), ".",
                     d_.Slice(d_.values[stack_[stack_.size() - 1]]));
        }
        return RefuseClass(name);
      }
      case INST:
      case OBJ:
      case REDUCE:
      case BUILD:
      case NEWOBJ:
      case NEWOBJ_EX:
      case EXT1:
      case EXT2:
      case EXT4:
      case PERSID:
      case BINPERSID: return RefuseClass("");
      case INT:
      case LONG:
      case FLOAT:
      case STRING:
      case UNICODE:
      case PUT:
      case GET:
        return Fail(
            "a protocol 0 text opcode: gpusim reads the binary opcodes of protocols 2 to 5, "
            "as torch.cuda.memory._dump_snapshot writes them");
      case NEXT_BUFFER:
        return Fail("pickle stream refers to out-of-band data, which a snapshot file cannot carry");
      default: {
        const auto c = static_cast<unsigned>(op_);
        return d_.ErrorAt(op_at_, Cat("0x", kHex[c >> 4], kHex[c & 15],
                                      " is not a pickle opcode (invalid load key; not a pickle, or a "
                                      "corrupt one?)"));
      }
    }
  }

  unsigned Byte(uint64_t at) const { return static_cast<uint8_t>(d_.in[at]); }
  uint64_t Le(uint64_t at, size_t n) const {
    uint64_t x = 0;
    for (size_t i = 0; i < n; ++i) x |= uint64_t{Byte(at + i)} << (8 * i);
    return x;
  }

  absl::Status Fail(std::string_view what) const {
    return d_.ErrorAt(op_at_, Cat(OpName(op_), ": ", what));
  }

  // Note [Pickle reads]
  // pickle.load(f) on a file (snapshot_to_json.py read the snapshot through
  // io.BytesIO, which has no peek()) reads with _Unpickler_Read: from its
  // buffer when the bytes are there, else exactly n bytes from the file,
  // where the last read ended, replacing the buffer. Outside a FRAME the
  // buffer is just what the last read took, so reads are contiguous; a FRAME
  // reads its whole length into the buffer. So a read that runs past a
  // frame's end skips the frame's last bytes and continues after it
  // (pickle.Unpickler(io.BytesIO(b'\x80\x04\x95\x02' + bytes(7) +
  // b'M\x01\x02\x03.')).load() is 770). CPython's pickler never splits an
  // opcode across frames; this keeps hostile pickles read as Python read
  // them. `buf_end_` is where the buffer ends, which is also how far the
  // file was read (Python's stream.tell(), the base of the budget).
  bool Take(uint64_t n, uint64_t* at) {
    if (n <= buf_end_ - p_) {
      *at = p_;
      p_ += n;
      return true;
    }
    if (n > d_.in.size() - buf_end_) return false;
    *at = buf_end_;
    p_ = buf_end_ = buf_end_ + n;
    return true;
  }

  // An opcode's fixed-width argument.
  absl::Status Arg(size_t n, uint64_t* at) {
    if (Take(n, at)) return absl::OkStatus();
    return Fail(Cat("the file ends inside its ", n, "-byte argument (truncated file?)"));
  }

  // A counted payload: a string's, an integer's bytes.
  absl::Status Payload(uint64_t n, std::string_view what, uint64_t* at) {
    if (Take(n, at)) return absl::OkStatus();
    return Fail(Cat(what, " of ", n, " bytes runs past the end of the file (", d_.in.size() - buf_end_,
                    " bytes left; truncated file?)"));
  }

  // CPython's Pdata_stack_underflow.
  absl::Status Underflow() const {
    return Fail(marks_.empty() ? "unpickling stack underflow" : "unexpected MARK found");
  }
  // Fails unless `n` values sit above the current mark.
  absl::Status Underflow(size_t n) const {
    if (stack_.size() >= n && stack_.size() - n >= fence_ && stack_.size() > fence_) return absl::OkStatus();
    return Underflow();
  }

  absl::Status RefuseClass(std::string_view name) const {
    return Fail(Cat(name.empty() ? "" : Cat("names ", name, ": "),
                    "refused: it loads or calls a class, which can run code, and a memory snapshot holds "
                    "only plain values (dict, list, tuple, str, int, float, bool, None)"));
  }

  // The marker() of _pickle.c: pops the top mark, returns where it was.
  absl::StatusOr<size_t> Marker() {
    if (marks_.empty()) return Fail("could not find MARK");
    const size_t m = marks_.back();
    marks_.pop_back();
    fence_ = marks_.empty() ? 0 : marks_.back();
    return m;
  }

  uint32_t Make(Kind kind, uint64_t a, uint64_t b, bool hashable) {
    d_.values.push_back(Value{kind, hashable, false, op_at_, a, b});
    return static_cast<uint32_t>(d_.values.size() - 1);
  }
  uint32_t NewSeq(Kind kind) {
    d_.seqs.emplace_back();
    return Make(kind, d_.seqs.size() - 1, 0, kind == Kind::kTuple);
  }
  uint32_t NewDict() {
    d_.dicts.emplace_back();
    return Make(Kind::kDict, d_.dicts.size() - 1, 0, false);
  }
  void Push(uint32_t v) { stack_.push_back(v); }

  absl::Status Hashable(uint32_t v) const {
    const Value& x = d_.values[v];
    if (x.hashable) return absl::OkStatus();
    return Fail(Cat("unhashable type: '", TypeName(x.kind), "'"));
  }

  absl::Status Counted(size_t width, Kind kind) {
    uint64_t at = 0;
    RETURN_IF_ERROR(Arg(width, &at));
    const uint64_t n = Le(at, width);
    RETURN_IF_ERROR(Payload(n, kind == Kind::kStr ? "a string" : "a bytes value", &at));
    if (kind == Kind::kStr) {
      const uint8_t* b = d_.bytes(at);
      if (op_ == BINSTRING || op_ == SHORT_BINSTRING) {
        // Python 2 str, decoded as the Unpickler's default encoding, ASCII.
        for (uint64_t i = 0; i < n; ++i) {
          if (b[i] >= 0x80) {
            return Fail(Cat("'ascii' codec can't decode byte 0x", kHex[b[i] >> 4], kHex[b[i] & 15], " in position ",
                            i, ": ordinal not in range(128)"));
          }
        }
      } else {
        const size_t bad = Utf8SurrogatePassEnd(b, n);
        if (bad != n) {
          return Fail(Cat("'utf-8' codec can't decode byte 0x", kHex[b[bad] >> 4], kHex[b[bad] & 15],
                          " in position ", bad, " of the string"));
        }
      }
    }
    // A bytearray keeps its length in `b` as APPENDS extends it.
    Push(Make(kind, at, n, kind != Kind::kByteArray));
    return absl::OkStatus();
  }

  absl::Status TupleFrom(size_t start) {
    const uint32_t t = NewSeq(Kind::kTuple);
    bool hashable = true;
    for (size_t k = start; k < stack_.size(); ++k) hashable &= d_.values[stack_[k]].hashable;
    d_.values[t].hashable = hashable;
    d_.seqs[d_.values[t].a].assign(stack_.begin() + static_cast<std::ptrdiff_t>(start), stack_.end());
    stack_.resize(start);
    Push(t);
    return absl::OkStatus();
  }

  // do_append: stack[x-1].extend(stack[x:]).
  absl::Status Append(size_t x) {
    if (x > stack_.size() || x <= fence_) return Underflow();
    if (x == stack_.size()) return absl::OkStatus();
    const Value& target = d_.values[stack_[x - 1]];
    if (target.kind == Kind::kList) {
      std::vector<uint32_t>& items = d_.seqs[target.a];
      items.insert(items.end(), stack_.begin() + static_cast<std::ptrdiff_t>(x), stack_.end());
    } else if (target.kind == Kind::kByteArray) {
      // bytearray.extend: each item an int from 0 to 255.
      for (size_t k = x; k < stack_.size(); ++k) RETURN_IF_ERROR(ByteValue(stack_[k]));
      d_.values[stack_[x - 1]].b += stack_.size() - x;
    } else {
      return Fail(Cat("'", TypeName(target.kind), "' object has no attribute 'append'"));
    }
    stack_.resize(x);
    return absl::OkStatus();
  }

  // do_setitems: stack[x-1][k] = v for each pair above x.
  absl::Status SetItems(size_t x) {
    if (x > stack_.size() || x <= fence_) return Underflow();
    if (x == stack_.size()) return absl::OkStatus();
    if ((stack_.size() - x) % 2 != 0) return Fail(Cat("odd number of items for ", OpName(op_)));
    const Value& target = d_.values[stack_[x - 1]];
    if (target.kind == Kind::kDict) {
      Dict& dict = d_.dicts[target.a];
      for (size_t k = x; k + 1 < stack_.size(); k += 2) {
        RETURN_IF_ERROR(Hashable(stack_[k]));
        d_.DictSet(dict, stack_[k], stack_[k + 1]);
      }
    } else if (target.kind == Kind::kList) {
      // list.__setitem__(index, value).
      std::vector<uint32_t>& items = d_.seqs[target.a];
      for (size_t k = x; k + 1 < stack_.size(); k += 2) {
        ASSIGN_OR_RETURN(size_t i, Index(stack_[k], items.size(), "list"));
        items[i] = stack_[k + 1];
      }
    } else if (target.kind == Kind::kByteArray) {
      // bytearray.__setitem__(index, byte).
      for (size_t k = x; k + 1 < stack_.size(); k += 2) {
        RETURN_IF_ERROR(Index(stack_[k], target.b, "bytearray").status());
        RETURN_IF_ERROR(ByteValue(stack_[k + 1]));
      }
    } else {
      return Fail(Cat("'", TypeName(target.kind), "' object does not support item assignment"));
    }
    stack_.resize(x);
    return absl::OkStatus();
  }

  // seq[key] = ... for a list or bytearray of `size` items: the index key
  // names (negative from the end).
  absl::StatusOr<size_t> Index(uint32_t key_id, uint64_t size, std::string_view type) const {
    const Value& key = d_.values[key_id];
    if (key.kind == Kind::kBigInt) return Fail("cannot fit 'int' into an index-sized integer");
    if (key.kind != Kind::kInt && key.kind != Kind::kBool) {
      return Fail(Cat(type, " indices must be integers or slices, not ", TypeName(key.kind)));
    }
    int64_t i = static_cast<int64_t>(key.a);
    const auto n = static_cast<int64_t>(size);
    if (i < 0) i += n;
    if (i < 0 || i >= n) return Fail(Cat(type, " assignment index out of range"));
    return static_cast<size_t>(i);
  }

  // An item a bytearray takes: an int from 0 to 255.
  absl::Status ByteValue(uint32_t id) const {
    const Value& v = d_.values[id];
    if (v.kind != Kind::kInt && v.kind != Kind::kBool && v.kind != Kind::kBigInt) {
      return Fail(Cat("'", TypeName(v.kind), "' object cannot be interpreted as an integer"));
    }
    if (v.kind == Kind::kBigInt || v.a > 255) return Fail("byte must be in range(0, 256)");
    return absl::OkStatus();
  }

  // load_additems: stack[m-1].update(stack[m:]) for a set.
  absl::Status AddItems(size_t m) {
    if (m > stack_.size() || m <= fence_) return Underflow();
    if (m == stack_.size()) return absl::OkStatus();
    const Value& target = d_.values[stack_[m - 1]];
    if (target.kind != Kind::kSet) {
      return Fail(Cat("'", TypeName(target.kind), "' object has no attribute 'add'"));
    }
    for (size_t k = m; k < stack_.size(); ++k) RETURN_IF_ERROR(Hashable(stack_[k]));
    stack_.resize(m);
    return absl::OkStatus();
  }

  // _Unpickler_MemoPut / _Unpickler_MemoGet. Indices near the entries so
  // far (as a pickler writes them) go in a vector; others in a hash map,
  // so a 4-byte index allocates nothing in proportion to it.
  void MemoPut(uint64_t idx, uint32_t v) {
    bool fresh = false;
    if (idx < dense_.size() || idx <= dense_.size() + 1024) {
      if (idx >= dense_.size()) dense_.resize(static_cast<size_t>(idx) + 1, kNoValue);
      fresh = dense_[idx] == kNoValue;
      dense_[idx] = v;
    } else {
      auto [it, inserted] = sparse_.insert_or_assign(idx, v);
      fresh = inserted;
    }
    if (fresh) ++memo_len_;
  }
  uint32_t MemoGet(uint64_t idx) const {
    if (idx < dense_.size()) return dense_[idx];
    auto it = sparse_.find(idx);
    return it == sparse_.end() ? kNoValue : it->second;
  }

  PlainPickle::Impl& d_;
  uint64_t p_ = 0;        // the next byte to read
  uint64_t buf_end_ = 0;  // Note [Pickle reads]
  uint64_t op_at_ = 0;
  uint8_t op_ = 0;
  std::vector<uint32_t> stack_;
  std::vector<size_t> marks_;
  size_t fence_ = 0;
  std::vector<uint32_t> dense_;
  absl::flat_hash_map<uint64_t, uint32_t> sparse_;
  uint64_t memo_len_ = 0;
};

// snapshot_to_json.py's _plain + json.dumps (Note [Snapshot JSON from a pickle]),
// into a std::string or a CountingOut.
template <typename Out>
class PlainJsonWriter {
 public:
  explicit PlainJsonWriter(const PlainPickle::Impl& doc)
      : d_(doc),
        budget_(kPickleValuesPerByte * static_cast<int64_t>(doc.read_end) + kPickleValuesExtra),
        text_cap_(kPickleJsonPerByte * static_cast<int64_t>(doc.read_end) + kPickleJsonExtra) {}

  // One value's text, at no depth (after Check: no bound is met).
  absl::Status WriteValue(uint32_t id, Out& out) {
    main_ = &out;
    return Emit(id, 0, out);
  }

  absl::Status Write(Out& out) {
    main_ = &out;
    RETURN_IF_ERROR(Emit(d_.root, 0, out));
    const auto& root = d_.values[d_.root];
    if (root.kind != Kind::kDict) {
      return d_.ErrorAt(root.pos, Cat("expected a dict at the top level, got ", TypeName(root.kind)));
    }
    return absl::OkStatus();
  }

 private:
  absl::Status Error(const gpusim::import_internal::Value& v, std::string_view what) const {
    return d_.NotPlain(v, what);
  }

  // Note [Writing shared values once]
  // A value the memo shares (a stack frame dict, its filename) is written
  // the same wherever it appears, so the text written the first time is
  // copied for the others, with what that subtree took of the budget and
  // how deep it nests. Where the copy could break a bound (the budget, the
  // nesting, the text size) the value is walked again instead, so each error
  // names the value it did before. On the largest snapshot pickle
  // (llama_gpu_ckpt, 225,000 shared references) this halves the time to
  // write its 14.9 MB of JSON (to 7 ms; Check, counting it, 4 ms;
  // bench/import_benchmark.cc BM_PickleDecode).
  struct Written {
    uint64_t start, size;  // in the whole text
    int64_t values;        // budget the subtree took
    int height;            // its deepest container, levels below it
  };

  // Writes value `id` at the end of `out`.
  absl::Status Emit(uint32_t id, int depth, Out& out) {
    const auto& v = d_.values[id];
    const bool cacheable = v.shared && &out == main_ &&
                           (v.kind == Kind::kList || v.kind == Kind::kTuple || v.kind == Kind::kDict ||
                            (v.kind == Kind::kStr && v.b >= 32));
    if (cacheable) {
      auto it = written_.find(id);
      if (it != written_.end()) {
        const Written& w = it->second;
        if (w.values <= budget_ && depth + w.height < kPickleMaxNesting &&
            static_cast<int64_t>(held_ + out.size() + w.size) <= text_cap_) {
          budget_ -= w.values;
          deepest_ = std::max(deepest_, depth + w.height);
          out.append(out, w.start, w.size);
          return absl::OkStatus();
        }
      }
      const int64_t budget_before = budget_;
      const int deepest_before = deepest_;
      deepest_ = depth;
      const uint64_t start = out.size();
      RETURN_IF_ERROR(EmitOnce(id, depth, out));
      written_.insert_or_assign(id, Written{start, out.size() - start, budget_before - budget_, deepest_ - depth});
      deepest_ = std::max(deepest_, deepest_before);
      return absl::OkStatus();
    }
    return EmitOnce(id, depth, out);
  }

  absl::Status EmitOnce(uint32_t id, int depth, Out& out) {
    const auto& v = d_.values[id];
    if (v.kind == Kind::kList || v.kind == Kind::kTuple || v.kind == Kind::kDict) {
      deepest_ = std::max(deepest_, depth);
    }
    if (--budget_ < 0) {
      return Error(v, "it expands to far more values than its size allows (shared references nested to blow up?)");
    }
    switch (v.kind) {
      case Kind::kNone: out += "null"; break;
      case Kind::kBool: out += v.a != 0 ? "true" : "false"; break;
      case Kind::kInt: {
        char buf[24];
        auto [e, ec] = std::to_chars(buf, buf + sizeof buf, static_cast<int64_t>(v.a));
        out.append(buf, static_cast<size_t>(e - buf));
        break;
      }
      case Kind::kBigInt: {
        bool negative = false;
        const int64_t bits = BitLength(Magnitude(d_.Slice(v), &negative));
        return Error(v, Cat("an integer of ", bits, " bits does not fit in 64 bits"));
      }
      case Kind::kFloat: {
        const double f = std::bit_cast<double>(v.a);
        if (std::isfinite(f)) {
          AppendFloatRepr(out, f);
        } else {
          out += "null";
        }
        break;
      }
      case Kind::kStr: AppendJsonString(out, d_.Slice(v)); break;
      case Kind::kList:
      case Kind::kTuple: {
        if (depth >= kPickleMaxNesting) return Nesting(v);
        out += '[';
        bool first = true;
        for (uint32_t item : d_.seqs[v.a]) {
          if (!first) out += ',';
          first = false;
          RETURN_IF_ERROR(Emit(item, depth + 1, out));
        }
        out += ']';
        break;
      }
      case Kind::kDict: {
        if (depth >= kPickleMaxNesting) return Nesting(v);
        const Dict& dict = d_.dicts[v.a];
        if (dict.str_keys) {
          out += '{';
          bool first = true;
          for (auto [k, val] : dict.items) {
            if (!first) out += ',';
            first = false;
            AppendJsonString(out, d_.Slice(d_.values[k]));
            out += ':';
            RETURN_IF_ERROR(Emit(val, depth + 1, out));
          }
          out += '}';
        } else {
          RETURN_IF_ERROR(MixedKeyDict(dict, depth, out));
        }
        break;
      }
      default: return Error(v, Cat("unsupported value type ", TypeName(v.kind)));
    }
    if (static_cast<int64_t>(held_ + out.size()) > text_cap_) {
      return Error(v, Cat("it expands to more than ", text_cap_,
                          " bytes of JSON, more than its size allows (a long string shared from many places?)"));
    }
    return absl::OkStatus();
  }

  absl::Status Nesting(const gpusim::import_internal::Value& v) const {
    return Error(v, Cat("values nested deeper than ", kPickleMaxNesting, " levels"));
  }

  // A dict with a key that is not a str: keys as json.dumps(key) writes
  // them, into a dict keyed by that text (the first place, the last value).
  absl::Status MixedKeyDict(const Dict& dict, int depth, Out& out) {
    std::vector<std::pair<std::string, Out>> items;  // key text (JSON), value text
    absl::flat_hash_map<std::string, size_t> where;
    for (auto [k, val] : dict.items) {
      ASSIGN_OR_RETURN(std::string key, d_.KeyText(k));
      auto [it, inserted] = where.try_emplace(key, items.size());
      if (inserted) {
        items.emplace_back(std::move(key), Out());
      }
      Out text;
      const int64_t held = held_;
      held_ += static_cast<int64_t>(out.size());
      for (const auto& item : items) held_ += static_cast<int64_t>(item.first.size() + item.second.size());
      absl::Status st = Emit(val, depth + 1, text);
      held_ = held;
      RETURN_IF_ERROR(st);
      items[it->second].second = std::move(text);
    }
    out += '{';
    for (size_t i = 0; i < items.size(); ++i) {
      if (i > 0) out += ',';
      AppendJsonString(out, items[i].first);
      out += ':';
      out += items[i].second;
    }
    out += '}';
    return absl::OkStatus();
  }

  const PlainPickle::Impl& d_;
  int64_t budget_;
  int64_t text_cap_;
  int64_t held_ = 0;  // JSON bytes held outside the buffer being written (MixedKeyDict)
  const Out* main_ = nullptr;  // the whole text (shared values are copied within it)
  absl::flat_hash_map<uint32_t, Written> written_;  // shared values written so far
  int deepest_ = 0;  // the deepest container written in the current subtree
};

}  // namespace

PlainPickle::PlainPickle(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
PlainPickle::~PlainPickle() = default;

absl::StatusOr<std::unique_ptr<PlainPickle>> PlainPickle::Read(std::string_view bytes, std::string label) {
  auto impl = std::make_unique<Impl>();
  impl->in = bytes;
  impl->label = std::move(label);
  impl->values.reserve(bytes.size() / 4 + 16);
  RETURN_IF_ERROR(Reader(*impl).Run());
  return std::unique_ptr<PlainPickle>(new PlainPickle(std::move(impl)));
}

absl::Status PlainPickle::WriteJson(std::string* out) const {
  const size_t at = out->size();
  // Room for 16 JSON bytes a pickle byte (the repo's snapshots take up to
  // 10.6), at most 1 GiB, up front: less copying as the text grows, and
  // pages not written are never touched.
  out->reserve(at + std::min<uint64_t>(16 * impl_->read_end, uint64_t{1} << 30) + kJsonPadding);
  absl::Status st = PlainJsonWriter<std::string>(*impl_).Write(*out);
  if (!st.ok()) {
    out->resize(at);
    return st;
  }
  out->reserve(out->size() + kJsonPadding);
  return absl::OkStatus();
}

absl::Status PlainPickle::Check() const {
  CountingOut out;
  return PlainJsonWriter<CountingOut>(*impl_).Write(out);
}

uint32_t PlainPickle::Root() const { return impl_->root; }

PlainPickle::JsonType PlainPickle::Type(uint32_t id) const {
  const Value& v = impl_->values[id];
  switch (v.kind) {
    case Kind::kDict: return JsonType::kObject;
    case Kind::kList:
    case Kind::kTuple: return JsonType::kArray;
    case Kind::kStr: return JsonType::kString;
    case Kind::kBool: return JsonType::kBoolean;
    case Kind::kInt: return JsonType::kNumber;
    case Kind::kFloat: return std::isfinite(std::bit_cast<double>(v.a)) ? JsonType::kNumber : JsonType::kNull;
    default: return JsonType::kNull;  // None (nothing else passes Check)
  }
}

int64_t PlainPickle::Offset(uint32_t id) const { return static_cast<int64_t>(impl_->values[id].pos); }

absl::Status PlainPickle::Fields(uint32_t object,
                                 absl::FunctionRef<absl::Status(std::string_view, uint32_t)> fn) const {
  const Dict& dict = impl_->dicts[impl_->values[object].a];
  auto key_of = [&](uint32_t k, std::string_view* key, std::string* rebuilt) -> absl::Status {
    if (String(k, key, rebuilt)) return absl::OkStatus();
    return impl_->ErrorAt(impl_->values[k].pos,
                          "a dict key with a lone surrogate (U+D800 to U+DFFF), which JSON text cannot hold");
  };
  if (dict.str_keys) {
    for (auto [k, v] : dict.items) {
      std::string_view key;
      std::string rebuilt;
      RETURN_IF_ERROR(key_of(k, &key, &rebuilt));
      RETURN_IF_ERROR(fn(key, v));
    }
    return absl::OkStatus();
  }
  // Keys as json.dumps(key) writes them, equal texts merged: the first's
  // place, the last's value (MixedKeyDict).
  std::vector<std::pair<std::string, uint32_t>> items;
  absl::flat_hash_map<std::string, size_t> where;
  for (auto [k, v] : dict.items) {
    ASSIGN_OR_RETURN(std::string text, impl_->KeyText(k));
    auto [it, inserted] = where.try_emplace(text, items.size());
    if (inserted) {
      items.emplace_back(std::move(text), v);
    } else {
      items[it->second].second = v;
    }
  }
  for (const auto& [text, v] : items) {
    // The key's JSON text read back (the texts of keys that are no str are
    // ASCII).
    std::string_view key = text;
    std::string rebuilt;
    if (Utf8HasSurrogates(text)) {
      if (!JoinSurrogatePairs(text, &rebuilt)) {
        return impl_->ErrorAt(impl_->values[object].pos,
                              "a dict key with a lone surrogate (U+D800 to U+DFFF), which JSON text cannot hold");
      }
      key = rebuilt;
    }
    RETURN_IF_ERROR(fn(key, v));
  }
  return absl::OkStatus();
}

absl::Status PlainPickle::Elements(uint32_t array, absl::FunctionRef<absl::Status(uint32_t)> fn) const {
  for (uint32_t item : impl_->seqs[impl_->values[array].a]) RETURN_IF_ERROR(fn(item));
  return absl::OkStatus();
}

bool PlainPickle::Integer(uint32_t id, int64_t* out) const {
  const Value& v = impl_->values[id];
  if (v.kind == Kind::kInt) {
    *out = static_cast<int64_t>(v.a);
    return true;
  }
  if (v.kind != Kind::kFloat) return false;
  // ParseInteger of repr(d): no integer token, so its double branch.
  const double d = std::bit_cast<double>(v.a);
  if (!std::isfinite(d) || d != std::floor(d) || std::fabs(d) > 9.007199254740992e15) return false;
  *out = static_cast<int64_t>(d);
  return true;
}

bool PlainPickle::Double(uint32_t id, double* out) const {
  const Value& v = impl_->values[id];
  if (v.kind == Kind::kInt) {
    *out = static_cast<double>(static_cast<int64_t>(v.a));
    return true;
  }
  if (v.kind != Kind::kFloat || !std::isfinite(std::bit_cast<double>(v.a))) return false;
  *out = std::bit_cast<double>(v.a);
  return true;
}

bool PlainPickle::Bool(uint32_t id, bool* out) const {
  const Value& v = impl_->values[id];
  if (v.kind != Kind::kBool) return false;
  *out = v.a != 0;
  return true;
}

bool PlainPickle::String(uint32_t id, std::string_view* out, std::string* rebuilt) const {
  const Value& v = impl_->values[id];
  if (v.kind != Kind::kStr) return false;
  *out = impl_->Slice(v);
  if (!Utf8HasSurrogates(*out)) return true;
  if (!JoinSurrogatePairs(*out, rebuilt)) return false;
  *out = *rebuilt;
  return true;
}

std::string PlainPickle::JsonText(uint32_t id) const {
  std::string out;
  PlainJsonWriter<std::string>(*impl_).WriteValue(id, out).IgnoreError();
  return out;
}

}  // namespace gpusim::import_internal
