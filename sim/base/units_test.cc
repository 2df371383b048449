#include "sim/base/units.h"

#include "gtest/gtest.h"

namespace gpusim::units_test {
namespace {

TEST(UnitsTest, FormatsExactBytesAndGiB) {
  EXPECT_EQ(FormatBytes(Bytes(1LL << 30)), "1,073,741,824 B (1.00 GiB)");
  EXPECT_EQ(WithCommas(-1234567), "-1,234,567");
  EXPECT_EQ(WithCommas(0), "0");
  EXPECT_EQ((3_MiB).value(), 3 * 1048576);
}

TEST(UnitsTest, SimTimeFromSecondsRounds) {
  EXPECT_EQ(SimTime::FromSeconds(1.5e-9).ns(), 2);
  EXPECT_EQ(SimTime::FromSeconds(0.434).ns(), 434000000);
}

}  // namespace
}  // namespace gpusim::units_test
