// sim/alloc/colocated_heap.h: XLA's best fit with colocations and alignment.
#include "sim/alloc/colocated_heap.h"

#include "gtest/gtest.h"

namespace gpusim::colocated_heap_test {
namespace {

TEST(ColocatedHeapTest, DisjointLifetimesShareAnOffset) {
  // A and B never overlap in time: B takes A's place.
  std::vector<ColocatedInterval> in = {{Bytes(100), 0, 5, -1}, {Bytes(100), 6, 10, -1}};
  ColocatedPlan p = PackColocatedBestOf(in, 1);
  EXPECT_EQ(p.heap_size.value(), 100);
  EXPECT_EQ(p.offsets[0].value(), 0);
  EXPECT_EQ(p.offsets[1].value(), 0);
}

TEST(ColocatedHeapTest, OffsetsAreAlignedAfterTheChunkBelow) {
  // B overlaps A: it goes above A's end rounded up to 128 (MakeFreeChunksList).
  std::vector<ColocatedInterval> in = {{Bytes(100), 0, 10, -1}, {Bytes(50), 0, 10, -1}};
  ColocatedPlan p = PackColocated(in, ColocatedOrder::kSpatial, 128);
  EXPECT_EQ(p.offsets[0].value(), 0);
  EXPECT_EQ(p.offsets[1].value(), 128);
  EXPECT_EQ(p.heap_size.value(), 178);
}

TEST(ColocatedHeapTest, ColocatedIntervalsTakeTheRootsOffsetAndKeepTheirGapsFree) {
  // C is colocated with A (one buffer, two values: [0,2] and [8,9]); B lives
  // in the gap [3,7] and may sit at A's offset; D overlaps C only.
  std::vector<ColocatedInterval> in = {
      {Bytes(64), 0, 2, -1}, {Bytes(64), 3, 7, -1}, {Bytes(64), 8, 9, 0}, {Bytes(32), 9, 9, -1}};
  ColocatedPlan p = PackColocatedBestOf(in, 1);
  EXPECT_EQ(p.offsets[2], p.offsets[0]);
  EXPECT_EQ(p.offsets[1].value(), 0);
  EXPECT_EQ(p.offsets[3].value(), 64);
  EXPECT_EQ(p.heap_size.value(), 96);
  // Chains are followed to their root (GetTransitiveColocations).
  in.push_back({Bytes(64), 10, 12, 2});
  EXPECT_EQ(PackColocatedBestOf(in, 1).offsets[4], PackColocatedBestOf(in, 1).offsets[0]);
}

}  // namespace
}  // namespace gpusim::colocated_heap_test
