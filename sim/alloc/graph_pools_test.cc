// GraphPoolAllocator (Note [CUDA graph private pools]): a private pool's
// freed blocks serve only that pool, its segments stay through
// empty_cache, the totals are summed over the pools, addresses and logged
// actions are the pool's own moved above the main pool's space, and Alloc
// routes by the members the replay found.
#include "sim/alloc/graph_pools.h"

#include <memory>
#include <vector>

#include "gtest/gtest.h"

namespace gpusim::graph_pools_test {
namespace {

constexpr int64_t kMiB = 1 << 20;
const Bytes kCapacity(int64_t{80} << 30);

std::unique_ptr<GraphPoolAllocator> Make(GraphPoolMembers members = {}) {
  const AllocatorSpec spec{"pytorch_caching", {}};
  auto main = MakeAllocator(spec, kCapacity);
  EXPECT_TRUE(main.ok()) << main.status();
  return std::make_unique<GraphPoolAllocator>(std::move(*main), spec, kCapacity, std::move(members));
}

TEST(GraphPoolAllocatorTest, APoolsFreedBlockServesOnlyThatPool) {
  auto a = Make();
  ASSERT_TRUE(*a->AllocInPool(0, 1, Bytes(4 * kMiB), 0));
  a->Free(1);
  // The main pool cannot use the 20 MiB segment the capture left cached.
  ASSERT_TRUE(a->Alloc(2, Bytes(4 * kMiB), 0));
  EXPECT_EQ(a->usage().reserved, Bytes(40 * kMiB));
  EXPECT_EQ(a->usage().allocated, Bytes(4 * kMiB));
  // The pool's own next request reuses it.
  ASSERT_TRUE(*a->AllocInPool(0, 3, Bytes(4 * kMiB), 0));
  EXPECT_EQ(a->usage().reserved, Bytes(40 * kMiB));
  EXPECT_EQ(a->pools_used(), 1);
  const AllocatorStats s = a->stats();
  EXPECT_EQ(s.device_mallocs, 2);
  EXPECT_EQ(s.segments, 2);
  EXPECT_EQ(s.peak_reserved, Bytes(40 * kMiB));
  EXPECT_EQ(s.peak_allocated, Bytes(8 * kMiB));
  // Addresses: the pool's lie above the main pool's space.
  EXPECT_EQ(GraphPoolOfAddress(*a->AddressOf(2)), -1);
  EXPECT_EQ(GraphPoolOfAddress(*a->AddressOf(3)), 0);
  const std::vector<SegmentLayout> segs = a->Segments();
  ASSERT_EQ(segs.size(), 2u);
  EXPECT_EQ(GraphPoolOfAddress(segs[0].address), -1);
  EXPECT_EQ(GraphPoolOfAddress(segs[1].address), 0);
  EXPECT_EQ(segs[1].blocks.front().address, segs[1].address);
}

TEST(GraphPoolAllocatorTest, EmptyCacheKeepsAPoolsSegments) {
  auto a = Make();
  ASSERT_TRUE(*a->AllocInPool(0, 1, Bytes(4 * kMiB), 0));
  ASSERT_TRUE(a->Alloc(2, Bytes(4 * kMiB), 0));
  a->Free(1);
  a->Free(2);
  a->ReleaseCache();
  EXPECT_EQ(a->usage().reserved, Bytes(20 * kMiB));  // the graph still holds its pool
  EXPECT_EQ(a->usage().allocated, Bytes(0));
}

TEST(GraphPoolAllocatorTest, MembersRouteAllocAndTheLogCarriesPoolAddresses) {
  GraphPoolMembers m;
  m.pools = 2;
  m.pool_of[5] = 1;
  auto a = Make(m);
  std::vector<AllocatorEvent> log;
  a->RecordEventsTo(&log);
  ASSERT_TRUE(a->Alloc(5, Bytes(kMiB * 3), 0));
  ASSERT_TRUE(a->Alloc(6, Bytes(kMiB * 3), 0));
  a->RecordEventsTo(nullptr);
  EXPECT_EQ(GraphPoolOfAddress(*a->AddressOf(5)), 1);
  EXPECT_EQ(GraphPoolOfAddress(*a->AddressOf(6)), -1);
  int pool_segments = 0, main_segments = 0;
  for (const AllocatorEvent& e : log) {
    if (e.action != AllocatorAction::kSegmentAlloc) continue;
    (GraphPoolOfAddress(e.addr) == 1 ? pool_segments : main_segments) += 1;
  }
  EXPECT_EQ(pool_segments, 1);
  EXPECT_EQ(main_segments, 1);
  EXPECT_EQ(a->usage().reserved, Bytes(40 * kMiB));
}

TEST(GraphPoolAllocatorTest, PoolsShareTheDevice) {
  const AllocatorSpec spec{"pytorch_caching", {}};
  auto main = MakeAllocator(spec, Bytes(30 * kMiB));
  ASSERT_TRUE(main.ok());
  GraphPoolAllocator a(std::move(*main), spec, Bytes(30 * kMiB), {});
  ASSERT_TRUE(*a.AllocInPool(0, 1, Bytes(16 * kMiB), 0));  // a 20 MiB segment
  // 20 + 20 MiB would pass 30 MiB: refused, in either pool.
  EXPECT_FALSE(a.Alloc(2, Bytes(16 * kMiB), 0));
  EXPECT_FALSE(*a.AllocInPool(0, 3, Bytes(16 * kMiB), 0));
  EXPECT_FALSE(a.AllocInPool(-1, 4, Bytes(1), 0).ok());
}

}  // namespace
}  // namespace gpusim::graph_pools_test
