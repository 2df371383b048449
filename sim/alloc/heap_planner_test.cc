#include "sim/alloc/heap_planner.h"

#include <random>

#include "gtest/gtest.h"

namespace gpusim::heap_planner_test {
namespace {

// No two buffers overlap in both time and address.
void ExpectDisjoint(const std::vector<HeapBuffer>& bs, const HeapPlan& p) {
  for (size_t i = 0; i < bs.size(); ++i) {
    for (size_t j = i + 1; j < bs.size(); ++j) {
      const bool time = !(bs[i].end < bs[j].start || bs[j].end < bs[i].start);
      const bool space = !(p.offsets[i] + bs[i].size <= p.offsets[j] || p.offsets[j] + bs[j].size <= p.offsets[i]);
      EXPECT_FALSE(time && space) << i << " and " << j;
    }
  }
}

TEST(HeapPlannerTest, DisjointLifetimesShareSpace) {
  std::vector<HeapBuffer> bs = {{0, Bytes(100), 0, 1}, {1, Bytes(100), 2, 3}, {2, Bytes(50), 4, 5}};
  HeapPlan p = PackBestOf(bs);
  EXPECT_EQ(p.heap_size.value(), 100);
  EXPECT_EQ(NoFragmentationPeak(bs).value(), 100);
  ExpectDisjoint(bs, p);
}

// Drawn by hand:
//   A: 60 B over [0,2]; B: 40 B over [0,5]; C: 60 B over [3,5]; D: 30 B over [1,4]
// Spatial order A, C (60) then B (40) then D (30): A at 0, C at 0 (disjoint
// in time), B at 60, D must avoid A [0,60), B [60,100), C [0,60) → 100.
// The live peak is A+B+D = 130 at t=1..2, and C+B+D = 130 at t=3..4.
TEST(HeapPlannerTest, HandDrawnCase) {
  std::vector<HeapBuffer> bs = {{0, Bytes(60), 0, 2}, {1, Bytes(40), 0, 5}, {2, Bytes(60), 3, 5},
                                {3, Bytes(30), 1, 4}};
  HeapPlan s = PackBestFit(bs, HeapOrder::kSpatial);
  EXPECT_EQ(s.offsets[0].value(), 0);
  EXPECT_EQ(s.offsets[2].value(), 0);
  EXPECT_EQ(s.offsets[1].value(), 60);
  EXPECT_EQ(s.offsets[3].value(), 100);
  EXPECT_EQ(s.heap_size.value(), 130);
  EXPECT_EQ(NoFragmentationPeak(bs).value(), 130);
  ExpectDisjoint(bs, s);
}

// Fragmentation: a small long-lived buffer placed between two large ones
// forces the heap above the live peak in one order but not the other.
TEST(HeapPlannerTest, BestOfKeepsTheSmallerHeap) {
  std::vector<HeapBuffer> bs = {
      {0, Bytes(100), 0, 0}, {1, Bytes(10), 0, 9}, {2, Bytes(100), 1, 1}, {3, Bytes(150), 2, 2},
  };
  HeapPlan s = PackBestFit(bs, HeapOrder::kSpatial);
  HeapPlan t = PackBestFit(bs, HeapOrder::kTemporal);
  HeapPlan best = PackBestOf(bs);
  EXPECT_EQ(best.heap_size, Min(s.heap_size, t.heap_size));
  EXPECT_GE(best.heap_size, NoFragmentationPeak(bs));
  EXPECT_EQ(NoFragmentationPeak(bs).value(), 160);
  ExpectDisjoint(bs, best);
}

TEST(HeapPlannerTest, BestFitTakesTheSmallestGap) {
  // Spatial order places L1@0, H1@100, M1@150, M2@195, H2@235, M3@260. When
  // Y (20 B over [5,9]) comes, H1 and H2 are dead: holes [100,150) (50 B)
  // and [235,260) (25 B). Best fit takes the 25-byte hole.
  std::vector<HeapBuffer> bs = {
      {0, Bytes(100), 0, 9}, {1, Bytes(50), 0, 4}, {2, Bytes(45), 0, 9}, {3, Bytes(40), 0, 9},
      {4, Bytes(25), 0, 4},  {5, Bytes(24), 0, 9}, {6, Bytes(20), 5, 9},
  };
  HeapPlan p = PackBestFit(bs, HeapOrder::kSpatial);
  EXPECT_EQ(p.offsets[4].value(), 235);
  EXPECT_EQ(p.offsets[6].value(), 235);
  EXPECT_EQ(p.heap_size.value(), 284);
  ExpectDisjoint(bs, p);
}

// Property: the fast planner (overlap index, free windows) places every
// buffer exactly where the O(n^2) oracle does, in both orders, over 2,444
// random interval sets. The sets draw sizes from a few values (ties in the
// order and equal gaps), include zero-sized buffers, mix short and
// whole-program lifetimes, and in every fourth set nest a third of the
// lifetimes (many windows between long-lived chunks); the last
// rounds have thousands of buffers, so that the block tree of Note [Overlap
// index] has several levels and long-lived buffers span many of its nodes.
TEST(HeapPlannerTest, FastPlannerMatchesQuadraticOracle) {
  std::mt19937_64 rng(20261130);
  for (int round = 0; round < 2444; ++round) {
    const int n = 1 + static_cast<int>(rng() % (round < 2200 ? 40 : round < 2440 ? 500 : 3000));
    const int64_t horizon = 1 + static_cast<int64_t>(rng() % (round % 3 == 0 ? 8 : 200));
    const bool coarse = rng() % 2 == 0;  // few distinct sizes: many ties
    std::vector<HeapBuffer> bs;
    for (int i = 0; i < n; ++i) {
      HeapBuffer b;
      b.id = i;
      b.size = Bytes(coarse ? static_cast<int64_t>(rng() % 4) * 64 : static_cast<int64_t>(rng() % 5000));
      b.start = static_cast<int64_t>(rng() % static_cast<uint64_t>(horizon));
      b.end = rng() % 5 == 0 ? horizon : b.start + static_cast<int64_t>(rng() % static_cast<uint64_t>(horizon / 4 + 1));
      if (round % 4 == 1 && i % 3 == 0) {  // nested lifetimes, as an unrolled model's saved activations
        b.start = static_cast<int64_t>(rng() % static_cast<uint64_t>(horizon / 2 + 1));
        b.end = horizon - b.start;
      }
      bs.push_back(b);
    }
    for (HeapOrder order : {HeapOrder::kSpatial, HeapOrder::kTemporal}) {
      const HeapPlan fast = PackBestFit(bs, order);
      const HeapPlan oracle = internal::PackBestFitQuadratic(bs, order);
      ASSERT_EQ(fast.heap_size, oracle.heap_size) << "round " << round;
      ASSERT_EQ(fast.offsets, oracle.offsets) << "round " << round;
      ASSERT_EQ(fast.algorithm, oracle.algorithm);
      if (round % 10 == 0) ExpectDisjoint(bs, fast);
    }
    // PackBestOf (its temporal packing may stop early) keeps what the
    // oracle's best-of keeps: the smaller heap, spatial on a tie.
    const HeapPlan s = internal::PackBestFitQuadratic(bs, HeapOrder::kSpatial);
    const HeapPlan t = internal::PackBestFitQuadratic(bs, HeapOrder::kTemporal);
    const HeapPlan& want = t.heap_size < s.heap_size ? t : s;
    const HeapPlan best = PackBestOf(bs);
    ASSERT_EQ(best.algorithm, want.algorithm) << "round " << round;
    ASSERT_EQ(best.heap_size, want.heap_size) << "round " << round;
    ASSERT_EQ(best.offsets, want.offsets) << "round " << round;
  }
  const HeapPlan empty = PackBestOf({});
  EXPECT_EQ(empty.algorithm, "spatial");
  EXPECT_EQ(empty.heap_size.value(), 0);
}

}  // namespace
}  // namespace gpusim::heap_planner_test
