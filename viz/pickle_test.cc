// PickleWriter: the exact opcodes of small values (CPython's pickle reads
// them; tests/memory_viz_test.sh loads whole snapshots in Python).
#include "viz/pickle.h"

#include "gtest/gtest.h"

namespace gpusim::pickle_test {
namespace {

TEST(PickleWriter, ScalarsAndContainers) {
  PickleWriter p;
  p.BeginDict();
  p.Str("a");
  p.BeginList();
  p.Int(1);
  p.Int(-1);
  p.Int(int64_t{1} << 40);
  p.Bool(true);
  p.None();
  p.EndList();
  p.Str("t");
  p.BeginTuple();
  p.Int(0);
  p.EndTuple();
  p.EndDict();
  const std::string got = p.Finish();
  // pickle.dumps({'a': [1, -1, 2**40, True, None], 't': (0,)}, protocol=2)
  // spelled with MARK/SETITEMS, MARK/APPENDS and MARK/TUPLE.
  const std::string want = std::string("\x80\x02}(X\x01\x00\x00\x00" "a](J\x01\x00\x00\x00" "J\xff\xff\xff\xff", 22) +
                           std::string("\x8a\x08\x00\x00\x00\x00\x00\x01\x00\x00", 10) + "\x88N" "e" +
                           std::string("X\x01\x00\x00\x00t(J\x00\x00\x00\x00tu.", 15);
  EXPECT_EQ(got, want);
}

TEST(PickleWriter, FloatIsBigEndian) {
  PickleWriter p;
  p.Float(1.0);
  EXPECT_EQ(p.Finish(), std::string("\x80\x02G\x3f\xf0\x00\x00\x00\x00\x00\x00.", 12));
}

}  // namespace
}  // namespace gpusim::pickle_test
