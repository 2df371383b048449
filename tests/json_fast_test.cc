// The one-pass reader's number scan, literal runs and event shapes
// (sim/import/json_fast.h, Note [Events of one shape]): values exact against
// std::from_chars, every token ending where the JSON grammar ends it, and
// hostile text (truncated, escapes, huge exponents, unterminated strings,
// deep nesting) declined, never read past the buffer.
#include "sim/import/json_fast.h"

#include <charconv>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "gtest/gtest.h"

namespace gpusim::import_internal::json_fast_test {
namespace {

struct NumberRead {
  bool ok = false;
  std::string token;
  int64_t value = 0;
  bool integer = false;
  size_t consumed = 0;
};

// Number at the start of `text`, the buffer ending where `text` ends.
NumberRead ReadNumber(const std::string& text) {
  // A copy of its own, so that a read past the end is a sanitizer error.
  const std::vector<char> buf(text.begin(), text.end());
  FastJson j(std::string_view(buf.data(), buf.size()));
  NumberRead r;
  std::string_view tok;
  r.ok = j.Number(&tok, &r.value, &r.integer);
  if (r.ok) r.token = std::string(tok);
  r.consumed = static_cast<size_t>(j.pos() - buf.data());
  return r;
}

TEST(FastJsonNumberTest, IntegersOfEveryLengthAreExact) {
  // Both the 16-byte scan (a long tail after the number) and the byte loop
  // (the number near the end of the buffer) for 1..20 digits.
  uint64_t x = 0x9e3779b97f4a7c15ULL;
  for (int digits = 1; digits <= 20; ++digits) {
    for (int trial = 0; trial < 50; ++trial) {
      x ^= x << 13;
      x ^= x >> 7;
      x ^= x << 17;
      std::string d = std::to_string(x);
      d = d.substr(0, static_cast<size_t>(digits));
      if (d.size() < static_cast<size_t>(digits)) d += std::string(static_cast<size_t>(digits) - d.size(), '7');
      if (d[0] == '0') d[0] = '1';
      for (const std::string sign : {"", "-"}) {
        for (const std::string tail : {",", "}", "]", " ", "\n", ", \"next\": 1234567890123456789}"}) {
          const std::string num = sign + d;
          const NumberRead r = ReadNumber(num + tail);
          ASSERT_TRUE(r.ok) << num + tail;
          EXPECT_EQ(r.token, num);
          EXPECT_EQ(r.consumed, num.size());
          EXPECT_EQ(r.integer, digits <= 18) << num;
          if (digits <= 18) {
            int64_t want = 0;
            ASSERT_EQ(std::from_chars(num.data(), num.data() + num.size(), want).ec, std::errc()) << num;
            EXPECT_EQ(r.value, want) << num + tail;
          }
        }
      }
    }
  }
}

TEST(FastJsonNumberTest, TheGrammarDecidesWhereATokenEnds) {
  struct Case {
    std::string text;
    bool ok;
    std::string token;
    bool integer;
    int64_t value;
  };
  const std::vector<Case> cases = {
      {"0,", true, "0", true, 0},
      {"-0}", true, "-0", true, 0},
      {"7]                ", true, "7", true, 7},
      {"01,", false, "", false, 0},                    // a leading zero
      {"00000000000000001,", false, "", false, 0},     // a leading zero, long
      {"-,", false, "", false, 0},                     // a sign alone
      {"-a,", false, "", false, 0},
      {"+1,", false, "", false, 0},                    // no plus sign in JSON
      {"1.5,", true, "1.5", false, 0},
      {"1.,", false, "", false, 0},                    // a fraction needs digits
      {"1e5,", true, "1e5", false, 0},
      {"1E+05}", true, "1E+05", false, 0},
      {"2.5e-3 ", true, "2.5e-3", false, 0},
      {"1e999999999999999999999,", true, "1e999999999999999999999", false, 0},  // huge exponent: a token
      {"1e,", false, "", false, 0},
      {"1e+,", false, "", false, 0},
      {"12x,", false, "", false, 0},                   // no byte may follow but an end
      {"123456789012345\"", false, "", false, 0},
      {"1234567890123456789012345678901234567890,", true, "1234567890123456789012345678901234567890", false, 0},
      {"999999999999999999,", true, "999999999999999999", true, 999999999999999999},
      {"-999999999999999999,", true, "-999999999999999999", true, -999999999999999999},
      {"1234567890123456", false, "", false, 0},       // truncated: the buffer ends in the digits
      {"12", false, "", false, 0},
      {"-", false, "", false, 0},
      {"", false, "", false, 0},
      {"   42,", true, "42", true, 42},                 // blanks before it are skipped
      {"1\xff,", false, "", false, 0},                  // a non-ASCII byte after the digits
  };
  for (const Case& c : cases) {
    // Alone (the byte loop near the end) and followed by 32 more bytes (the
    // 16-byte scan).
    for (const std::string pad : {"", "                                "}) {
      const NumberRead r = ReadNumber(c.text + pad);
      const bool want_ok = c.ok || (!pad.empty() && (c.text == "1234567890123456" || c.text == "12"));
      ASSERT_EQ(r.ok, want_ok) << "'" << c.text << "' pad " << pad.size();
      if (!r.ok) continue;
      if (!c.ok) continue;  // the padded truncations: read as numbers, checked above
      EXPECT_EQ(r.token, c.token) << c.text;
      EXPECT_EQ(r.integer, c.integer) << c.text;
      if (c.integer) {
        EXPECT_EQ(r.value, c.value) << c.text;
      }
    }
  }
}

TEST(FastJsonExpectTest, RunsOfEveryLengthMatchExactly) {
  const std::string text = R"({"ph": "i", "cat": "cpu_instant_event", "name": "[memory]", "pid": 1, "tid": 1})";
  for (size_t at = 0; at < text.size(); ++at) {
    for (size_t n = 0; at + n <= text.size() && n <= 48; ++n) {
      std::string run = text.substr(at, n);
      run.append(16, '\0');  // EventShape's padding
      {
        FastJson j(std::string_view(text).substr(at));
        EXPECT_TRUE(j.Expect(run.data(), n)) << at << "+" << n;
        EXPECT_EQ(j.pos(), text.data() + at + n);
      }
      // One byte different anywhere: declined, nothing consumed.
      for (size_t k = 0; k < n; ++k) {
        std::string bad = run;
        bad[k] ^= 0x20;
        FastJson j(std::string_view(text).substr(at));
        EXPECT_FALSE(j.Expect(bad.data(), n)) << at << "+" << n << " @" << k;
        EXPECT_EQ(j.pos(), text.data() + at);
      }
    }
    // A run longer than what is left.
    std::string longer = text.substr(at) + "x";
    longer.append(16, '\0');
    FastJson j(std::string_view(text).substr(at));
    EXPECT_FALSE(j.Expect(longer.data(), longer.size() - 16));
  }
}

// A small walk as the Kineto importer's: each integer field of `keys` is a
// hole (its key index), every other value is skipped (and so literal).
struct Walked {
  std::vector<int64_t> values;  // by key index, -1 when absent
};
const KeyTable& Keys() {
  static const auto& t = *new KeyTable({"ts", "Addr", "Bytes"});
  return t;
}
bool ReadHole(FastJson& j, int k, Walked& w, EventShape* record) {
  std::string_view tok;
  int64_t v = 0;
  bool integer = false;
  if (!j.Number(&tok, &v, &integer) || !integer) return false;
  w.values[static_cast<size_t>(k)] = v;
  if (record != nullptr) record->Hole(k, tok.data(), j.pos());
  return true;
}
bool Walk(FastJson& j, Walked& w, EventShape* record) {
  w.values.assign(3, -1);
  return j.Object(Keys(), [&](int k, std::string_view, int*) {
    if (k == FastJson::kUnknownKey) return j.SkipValue(1);
    return ReadHole(j, k, w, record);
  });
}

// `event` read against the shape learned from `first`: the walk's values
// and end, or nullopt-like false when the shape declines.
bool MatchAgainst(const std::string& first, const std::string& event, Walked* got, size_t* end) {
  EventShape shape;
  FastJson learn(first);
  shape.Begin(first.data());
  Walked w;
  if (!Walk(learn, w, &shape) || !shape.Learn(learn.pos())) return false;
  const std::vector<char> buf(event.begin(), event.end());  // exact size: overreads are caught
  FastJson j(std::string_view(buf.data(), buf.size()));
  got->values.assign(3, -1);
  if (!shape.Match(j, [&](int k) { return ReadHole(j, k, *got, nullptr); })) return false;
  *end = static_cast<size_t>(j.pos() - buf.data());
  return true;
}

TEST(EventShapeTest, AnEventOfTheSameShapeReadsAsTheWalkReadsIt) {
  const std::string first = R"({"ts": 5, "s": "t", "args": {"Addr": 4096, "x": [1, {"y": null}]}, "Bytes": -512})";
  const std::vector<std::string> same = {
      R"({"ts": 123456789, "s": "t", "args": {"Addr": 4096, "x": [1, {"y": null}]}, "Bytes": 0})",
      R"({"ts": -1, "s": "t", "args": {"Addr": 4096, "x": [1, {"y": null}]}, "Bytes": 999999999999999999})",
      R"({"ts": 5, "s": "t", "args": {"Addr": 4096, "x": [1, {"y": null}]}, "Bytes": -512}, {"next": 1})",
  };
  for (const std::string& e : same) {
    Walked got, walked;
    size_t end = 0;
    ASSERT_TRUE(MatchAgainst(first, e, &got, &end)) << e;
    FastJson j(e);
    ASSERT_TRUE(Walk(j, walked, nullptr));
    EXPECT_EQ(got.values, walked.values) << e;
    EXPECT_EQ(end, static_cast<size_t>(j.pos() - e.data())) << e;
  }
}

TEST(EventShapeTest, AnythingElseDeclines) {
  const std::string first = R"({"ts": 5, "s": "t", "args": {"Addr": 4096}, "Bytes": -512})";
  const std::vector<std::string> others = {
      R"({"ts": 5, "s": "u", "args": {"Addr": 4096}, "Bytes": -512})",       // a literal value differs
      R"({"ts": 5,  "s": "t", "args": {"Addr": 4096}, "Bytes": -512})",      // a blank more
      R"({"ts": 5, "s": "t", "args": {"Addr": 4096}, "bytes": -512})",       // a key differs
      R"({"ts": 5, "s": "t", "args": {"Addr": 4096}})",                      // a field fewer
      R"({"ts": 5, "s": "t", "args": {"Addr": 4096}, "Bytes": -512, "z": 1})",  // a field more
      R"({"ts": 5.5, "s": "t", "args": {"Addr": 4096}, "Bytes": -512})",     // the hole's read fails
      R"({"ts": "5", "s": "t", "args": {"Addr": 4096}, "Bytes": -512})",
      R"({"ts": 1e999999, "s": "t", "args": {"Addr": 4096}, "Bytes": -512})",
      R"({"ts": 5, "s": "\t", "args": {"Addr": 4096}, "Bytes": -512})",      // an escape
      R"({"ts": 5, "s": "t", "args": {"Addr": 4096}, "Bytes": -512)",        // truncated
      R"({"ts": 5, "s": "t", "args": {"Addr": 4096}, "Bytes": -51)",
      R"({"ts": 5, "s": "t)",                                                // an unterminated string
      R"({"ts": 5)",
      "",
  };
  for (const std::string& e : others) {
    Walked got;
    size_t end = 0;
    EXPECT_FALSE(MatchAgainst(first, e, &got, &end)) << e;
  }
}

TEST(EventShapeTest, AWalkWithTooManyHolesLearnsNothing) {
  std::string event = "{";
  for (int i = 0; i <= EventShape::kMaxHoles; ++i) event += std::string(i == 0 ? "" : ", ") + "\"ts\": " + std::to_string(i);
  event += "}";
  EventShape shape;
  FastJson j(event);
  shape.Begin(event.data());
  Walked w;
  ASSERT_TRUE(Walk(j, w, &shape));
  EXPECT_FALSE(shape.Learn(j.pos()));
  EXPECT_TRUE(shape.empty());
}

TEST(FastJsonSkipTest, HostileValuesDeclineWithoutReadingPastTheBuffer) {
  const std::vector<std::string> bad = {
      "\"unterminated",
      "\"esc\\\"aped\"",
      "\"ctl\x01\"",
      std::string(FastJson::kMaxDepth + 1, '[') + std::string(FastJson::kMaxDepth + 1, ']'),
      std::string(100000, '['),
      "{\"a\": ",
      "{\"a\" 1}",
      "[1, 2,",
      "tru",
      "nul",
      "1e",
  };
  for (const std::string& t : bad) {
    const std::vector<char> buf(t.begin(), t.end());
    FastJson j(std::string_view(buf.data(), buf.size()));
    EXPECT_FALSE(j.SkipValue(0)) << t.substr(0, 40);
  }
  // Nesting up to the limit is read.
  const std::string deep = std::string(FastJson::kMaxDepth, '[') + std::string(FastJson::kMaxDepth, ']') + ",";
  FastJson j(deep);
  EXPECT_TRUE(j.SkipValue(0));
}

}  // namespace
}  // namespace gpusim::import_internal::json_fast_test
