#include "sim/config/units_parse.h"

#include "gtest/gtest.h"

namespace gpusim::units_parse_test {
namespace {

int64_t B(std::string_view s) {
  absl::StatusOr<Bytes> b = ParseBytes(s);
  EXPECT_TRUE(b.ok()) << s << ": " << b.status();
  return b.ok() ? b->value() : -1;
}

std::string BytesError(std::string_view s) {
  absl::StatusOr<Bytes> b = ParseBytes(s);
  EXPECT_FALSE(b.ok()) << s << " parsed as " << (b.ok() ? b->value() : 0);
  return std::string(b.status().message());
}

TEST(ConfigUnitsTest, BytesEachForm) {
  EXPECT_EQ(B("1024"), 1024);
  EXPECT_EQ(B("0"), 0);
  EXPECT_EQ(B("7B"), 7);
  EXPECT_EQ(B("2KB"), 2000);
  EXPECT_EQ(B("3MB"), 3000000);
  EXPECT_EQ(B("80GB"), 80000000000);
  EXPECT_EQ(B("2TB"), 2000000000000);
  EXPECT_EQ(B("2KiB"), 2048);
  EXPECT_EQ(B("81920MiB"), 81920LL << 20);
  EXPECT_EQ(B("80GiB"), 80LL << 30);
  EXPECT_EQ(B("1TiB"), 1LL << 40);
  EXPECT_EQ(B("80 GiB"), 80LL << 30);
  EXPECT_EQ(B("  512 MiB "), 512LL << 20);
  EXPECT_EQ(B("+5B"), 5);
}

TEST(ConfigUnitsTest, BytesExactDecimalAndScientific) {
  EXPECT_EQ(B("1.5GiB"), 3LL << 29);
  EXPECT_EQ(B("85e9B"), 85000000000);
  EXPECT_EQ(B("85.04e9 B"), 85040000000);
  EXPECT_EQ(B("8.5045477376e10"), 85045477376);
  EXPECT_EQ(B("0.5KiB"), 512);
  EXPECT_EQ(B("1.000000000000000000000000000000000GiB"), 1LL << 30);
  EXPECT_EQ(B("9223372036854775807"), INT64_MAX);  // exact, beyond a double
  EXPECT_EQ(B("9223372036854775807B"), INT64_MAX);
  EXPECT_EQ(B("1E3"), 1000);
  EXPECT_EQ(B("25e-1KB"), 2500);
  // 1 byte as a fraction of a TiB: 2^-40 has 40 decimal places.
  EXPECT_EQ(B("0.0000000000009094947017729282379150390625TiB"), 1);
}

TEST(ConfigUnitsTest, BytesErrors) {
  EXPECT_EQ(BytesError("0.5B"), "expected a whole number of bytes; got '0.5B'");
  EXPECT_EQ(BytesError("1.0000000001KB"),
            "expected a whole number of bytes; got '1.0000000001KB'");
  EXPECT_EQ(BytesError("-1GiB"), "expected a non-negative byte size; got '-1GiB'");
  EXPECT_EQ(BytesError("9223372036854775808"),
            "byte size '9223372036854775808' overflows int64 (at most "
            "9223372036854775807 bytes)");
  EXPECT_EQ(BytesError("8388608TiB"),
            "byte size '8388608TiB' overflows int64 (at most "
            "9223372036854775807 bytes)");
  EXPECT_EQ(BytesError("1e400B").substr(0, 20), "byte size '1e400B' o");
  EXPECT_EQ(BytesError("12 apples"),
            "expected a byte size such as 80GiB, 81920MiB, 85e9B or 1024; "
            "got '12 apples'");
  // Units are case-sensitive as written.
  EXPECT_EQ(BytesError("80gib"),
            "expected a byte size such as 80GiB, 81920MiB, 85e9B or 1024; "
            "got '80gib'");
  BytesError("");
  BytesError("GiB");
  BytesError(".GiB");
  BytesError("1e");
  BytesError("1..5GiB");
}

TEST(ConfigUnitsTest, Rates) {
  EXPECT_EQ(*ParseRate("3350GB/s"), 3350e9);
  EXPECT_EQ(*ParseRate("3.35TB/s"), 3.35e12);
  EXPECT_EQ(*ParseRate("2000 GiB/s"), 2000.0 * (1LL << 30));
  EXPECT_EQ(*ParseRate("1e9"), 1e9);
  EXPECT_EQ(*ParseRate("0"), 0);
  EXPECT_EQ(*ParseRate("64GB/s"), 64e9);
  EXPECT_FALSE(ParseRate("3350GB").ok());
  EXPECT_FALSE(ParseRate("-1GB/s").ok());
  EXPECT_EQ(ParseRate("fast").status().message(),
            "expected a bandwidth such as 3350GB/s, 3.35TB/s, 2000GiB/s or "
            "1e9 (bytes/s); got 'fast'");
}

TEST(ConfigUnitsTest, FlopRates) {
  EXPECT_EQ(*ParseFlopRate("989TFLOP/s"), 989e12);
  EXPECT_EQ(*ParseFlopRate("19.5TFLOP/s"), 19.5e12);
  EXPECT_EQ(*ParseFlopRate("19.5 TFLOP/s"), 19.5e12);
  EXPECT_EQ(*ParseFlopRate("67e12"), 67e12);
  EXPECT_EQ(*ParseFlopRate("500GFLOP/s"), 500e9);
  EXPECT_EQ(*ParseFlopRate("2PFLOP/s"), 2e15);
  EXPECT_EQ(*ParseFlopRate("1FLOP/s"), 1);
  EXPECT_EQ(*ParseFlopRate("312TFLOPS"), 312e12);
  EXPECT_FALSE(ParseFlopRate("989TB/s").ok());
  EXPECT_FALSE(ParseFlopRate("989tflop/s").ok());
  EXPECT_EQ(ParseFlopRate("lots").status().message(),
            "expected a FLOP rate such as 989TFLOP/s, 19.5TFLOP/s or 67e12; "
            "got 'lots'");
}

TEST(ConfigUnitsTest, Durations) {
  EXPECT_EQ(ParseDuration("5us")->ns(), 5000);
  EXPECT_EQ(ParseDuration("4.5us")->ns(), 4500);
  EXPECT_EQ(ParseDuration("1ms")->ns(), 1000000);
  EXPECT_EQ(ParseDuration("0.5s")->ns(), 500000000);
  EXPECT_EQ(ParseDuration("300ns")->ns(), 300);
  EXPECT_EQ(ParseDuration("300 ns")->ns(), 300);
  EXPECT_EQ(ParseDuration("1.4ns")->ns(), 1);  // nearest nanosecond
  EXPECT_EQ(ParseDuration("1.5ns")->ns(), 2);
  EXPECT_EQ(ParseDuration("5").status().message(),
            "expected a duration with a unit (ns, us, ms or s) such as 5us; "
            "got '5'");
  EXPECT_EQ(ParseDuration("5 minutes").status().message(),
            "expected a duration such as 5us, 4.5us, 1ms, 0.5s or 300ns; got "
            "'5 minutes'");
  EXPECT_FALSE(ParseDuration("-1us").ok());
  EXPECT_FALSE(ParseDuration("1e30s").ok());
}

}  // namespace
}  // namespace gpusim::units_parse_test
