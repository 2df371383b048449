// Note [One start state for every command] (start_state.cc): a state
// captured from one caching allocator restores into a fresh one with the
// same segments and totals; the engine does not allocate the blocks the
// state holds again; a strategy without segments refuses segments by name.
#include "sim/alloc/start_state.h"

#include <memory>

#include "gtest/gtest.h"
#include "sim/engine/engine.h"

namespace gpusim::start_state_test {
namespace {

constexpr int64_t kMiB = 1 << 20;

TEST(StartState, CapturedSegmentsRestoreToTheSameState) {
  const AllocatorSpec spec{"pytorch_caching", {}};
  auto a = MakeAllocator(spec, Bytes(int64_t{1} << 36));
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE((*a)->Alloc(0, Bytes(30 * kMiB), 0));
  ASSERT_TRUE((*a)->Alloc(1, Bytes(5 * kMiB), 0));
  ASSERT_TRUE((*a)->Alloc(2, Bytes(1000), 0));  // small pool
  (*a)->Free(0);                                // a cached free block
  const AllocatorStartState s = CaptureStartState(**a, {2, 1, 1}, Bytes(0), -1);
  EXPECT_EQ(s.held, (std::vector<BufferId>{1, 2}));
  auto b = MakeStartedAllocator(spec, Bytes(int64_t{1} << 36), s);
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ((*b)->usage().allocated, (*a)->usage().allocated);
  EXPECT_EQ((*b)->usage().reserved, (*a)->usage().reserved);
  ASSERT_EQ((*b)->Segments().size(), (*a)->Segments().size());
  EXPECT_EQ((*b)->AddressOf(1), (*a)->AddressOf(1));
  // The cached 30 MiB block serves the next request in both, without a new segment.
  ASSERT_TRUE((*a)->Alloc(3, Bytes(20 * kMiB), 0));
  ASSERT_TRUE((*b)->Alloc(3, Bytes(20 * kMiB), 0));
  EXPECT_EQ((*b)->AddressOf(3), (*a)->AddressOf(3));
  EXPECT_EQ((*b)->stats().device_mallocs, 0);
}

TEST(StartState, EngineSkipsTheHeldAllocsAndCountsThemLive) {
  const AllocatorSpec spec{"pytorch_caching", {}};
  auto a = MakeAllocator(spec, Bytes(int64_t{1} << 36));
  ASSERT_TRUE(a.ok());
  ASSERT_TRUE((*a)->Alloc(0, Bytes(40 * kMiB), 0));  // live before the window, freed in it
  const AllocatorStartState s = CaptureStartState(**a, {0}, Bytes(0), -1);
  Trace t;
  TraceEvent alloc0, alloc1, free0, free1;
  alloc0.type = alloc1.type = EventType::kAlloc;
  free0.type = free1.type = EventType::kFree;
  alloc0.buffer = free0.buffer = 0;
  alloc1.buffer = free1.buffer = 1;
  alloc0.size = Bytes(40 * kMiB);
  alloc1.size = Bytes(10 * kMiB);
  t.events = {alloc0, free0, alloc1, free1};
  DeviceSpec d;
  d.cuda_total = Bytes(int64_t{1} << 36);
  auto started = MakeStartedAllocator(spec, d.cuda_total, s);
  ASSERT_TRUE(started.ok());
  auto r = Simulate(t, d, started->get(), &s);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->peak_live, Bytes(40 * kMiB));
  EXPECT_EQ(r->allocator.device_mallocs, 0);  // the 10 MiB request reuses the held block's segment
  EXPECT_EQ(r->allocator.peak_reserved, Bytes(40 * kMiB));
  // Cold, the same trace needs its own segment.
  auto cold = MakeAllocator(spec, d.cuda_total);
  auto rc = Simulate(t, d, cold->get());
  ASSERT_TRUE(rc.ok());
  EXPECT_EQ(rc->allocator.device_mallocs, 1);
}

TEST(StartState, StrategiesWithoutSegmentsRefuseThemByName) {
  auto a = MakeAllocator({"pytorch_caching", {}}, Bytes(int64_t{1} << 36));
  ASSERT_TRUE(a.ok());
  ASSERT_TRUE((*a)->Alloc(0, Bytes(kMiB), 0));
  const AllocatorStartState s = CaptureStartState(**a, {0}, Bytes(0), -1);
  auto b = MakeStartedAllocator({"ideal", {}}, Bytes(int64_t{1} << 36), s);
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.status().message().find("allocator ideal does not model segments"), std::string::npos);
  // Without segments the bytes live before recording are allocated first.
  auto ideal = MakeAllocator({"ideal", {}}, Bytes(int64_t{1} << 36));
  const AllocatorStartState f = CaptureStartState(**ideal, {}, Bytes(3 * kMiB), 9);
  auto c = MakeStartedAllocator({"ideal", {}}, Bytes(int64_t{1} << 36), f);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ((*c)->usage().allocated, Bytes(3 * kMiB));
}

}  // namespace
}  // namespace gpusim::start_state_test
