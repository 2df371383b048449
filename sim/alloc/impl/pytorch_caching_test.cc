// One test per documented rule of the PyTorch v2.5.1 caching allocator
// (c10/cuda/CUDACachingAllocator.cpp); addresses are checked exactly
// against the simulated address space (segments from DeviceAddressSpace::kBase).
#include "sim/alloc/impl/pytorch_caching.h"

#include "gtest/gtest.h"
#include "sim/alloc/address_space.h"

namespace gpusim::pytorch_caching_test {
namespace {

constexpr uint64_t kBase = DeviceAddressSpace::kBase;
constexpr int64_t kMiB = 1 << 20;
constexpr StreamId kS0 = 0, kS1 = 1;

PyTorchCachingOptions Opts(int64_t max_split_mb = 0) {
  PyTorchCachingOptions o;
  if (max_split_mb > 0) o.max_split_size = max_split_mb * kMiB;
  return o;
}

std::vector<AllocatorAction> Actions(const std::vector<AllocatorEvent>& ev) {
  std::vector<AllocatorAction> out;
  for (const AllocatorEvent& e : ev) out.push_back(e.action);
  return out;
}

TEST(PyTorchCachingTest, RoundsTo512Bytes) {
  const PyTorchCachingOptions o;
  EXPECT_EQ(PyTorchCachingAllocator::RoundSize(1, o), 512);
  EXPECT_EQ(PyTorchCachingAllocator::RoundSize(512, o), 512);
  EXPECT_EQ(PyTorchCachingAllocator::RoundSize(513, o), 1024);
  EXPECT_EQ(PyTorchCachingAllocator::RoundSize(5 * kMiB + 1, o), 5 * kMiB + 512);
}

TEST(PyTorchCachingTest, SegmentSizeByRequest) {
  EXPECT_EQ(PyTorchCachingAllocator::AllocationSize(512), 2 * kMiB);               // kSmallBuffer
  EXPECT_EQ(PyTorchCachingAllocator::AllocationSize(kMiB), 2 * kMiB);              // ≤ kSmallSize
  EXPECT_EQ(PyTorchCachingAllocator::AllocationSize(kMiB + 512), 20 * kMiB);       // kLargeBuffer
  EXPECT_EQ(PyTorchCachingAllocator::AllocationSize(10 * kMiB - 512), 20 * kMiB);  // < kMinLargeAlloc
  EXPECT_EQ(PyTorchCachingAllocator::AllocationSize(10 * kMiB), 10 * kMiB);        // kRoundLarge
  EXPECT_EQ(PyTorchCachingAllocator::AllocationSize(10 * kMiB + 512), 12 * kMiB);
}

TEST(PyTorchCachingTest, SmallRequestsPackIntoOne2MiBSegment) {
  PyTorchCachingAllocator a(Bytes(1LL << 30));
  ASSERT_TRUE(a.Alloc(1, Bytes(1000), kS0));
  ASSERT_TRUE(a.Alloc(2, Bytes(1000), kS0));
  EXPECT_EQ(a.AddressOf(1), kBase);
  EXPECT_EQ(a.AddressOf(2), kBase + 1024);
  EXPECT_EQ(a.BlockSizeOf(1), Bytes(1024));
  EXPECT_EQ(a.stats().reserved, Bytes(2 * kMiB));
  EXPECT_EQ(a.stats().device_mallocs, 1);
  EXPECT_EQ(a.device_stats().reserved_bytes[PyTorchDeviceStats::kSmallPool].current, 2 * kMiB);
  EXPECT_EQ(a.device_stats().reserved_bytes[PyTorchDeviceStats::kLargePool].current, 0);
}

TEST(PyTorchCachingTest, MediumRequestsShareA20MiBSegment) {
  PyTorchCachingAllocator a(Bytes(1LL << 30));
  ASSERT_TRUE(a.Alloc(1, Bytes(5 * kMiB), kS0));
  ASSERT_TRUE(a.Alloc(2, Bytes(5 * kMiB), kS0));
  EXPECT_EQ(a.AddressOf(2), kBase + 5 * kMiB);
  EXPECT_EQ(a.stats().reserved, Bytes(20 * kMiB));
  EXPECT_EQ(a.device_stats().reserved_bytes[PyTorchDeviceStats::kLargePool].current, 20 * kMiB);
  EXPECT_EQ(a.stats().inactive_split, Bytes(10 * kMiB));
}

TEST(PyTorchCachingTest, LargePoolSplitsOnlyWhenRemainderExceeds1MiB) {
  PyTorchCachingAllocator a(Bytes(1LL << 30));
  ASSERT_TRUE(a.Alloc(1, Bytes(19 * kMiB), kS0));  // remainder exactly 1 MiB: kept
  EXPECT_EQ(a.BlockSizeOf(1), Bytes(20 * kMiB));
  ASSERT_TRUE(a.Alloc(2, Bytes(18 * kMiB + kMiB / 2), kS0));  // remainder 1.5 MiB: split
  EXPECT_EQ(a.BlockSizeOf(2), Bytes(18 * kMiB + kMiB / 2));
  EXPECT_EQ(a.AddressOf(2), kBase + 20 * kMiB);
}

TEST(PyTorchCachingTest, SmallPoolSplitsDownTo512Bytes) {
  PyTorchCachingAllocator a(Bytes(1LL << 30));
  ASSERT_TRUE(a.Alloc(1, Bytes(kMiB), kS0));
  ASSERT_TRUE(a.Alloc(2, Bytes(kMiB - 512), kS0));  // remainder 512 B: split
  ASSERT_TRUE(a.Alloc(3, Bytes(1), kS0));
  EXPECT_EQ(a.BlockSizeOf(2), Bytes(kMiB - 512));
  EXPECT_EQ(a.AddressOf(3), kBase + 2 * kMiB - 512);
  EXPECT_EQ(a.stats().device_mallocs, 1);
}

TEST(PyTorchCachingTest, FreedNeighboursMergeWithinASegment) {
  PyTorchCachingAllocator a(Bytes(1LL << 30));
  for (BufferId id = 1; id <= 3; ++id) ASSERT_TRUE(a.Alloc(id, Bytes(5 * kMiB), kS0));
  a.Free(2);
  a.Free(1);
  ASSERT_TRUE(a.Alloc(4, Bytes(10 * kMiB), kS0));  // the merged [0, 10 MiB) block
  EXPECT_EQ(a.AddressOf(4), kBase);
  EXPECT_EQ(a.stats().device_mallocs, 1);
  a.Free(4);
  a.Free(3);
  EXPECT_EQ(a.stats().inactive_split, Bytes(0));
  EXPECT_EQ(a.stats().largest_free_block, Bytes(20 * kMiB));
}

TEST(PyTorchCachingTest, BestFitBySizeThenAddress) {
  PyTorchCachingAllocator a(Bytes(1LL << 30));
  // One 20 MiB segment: a@0 (6), x@6 (2), c@8 (4), y@12 (2), free@14 (6).
  ASSERT_TRUE(a.Alloc(1, Bytes(6 * kMiB), kS0));
  ASSERT_TRUE(a.Alloc(2, Bytes(2 * kMiB), kS0));
  ASSERT_TRUE(a.Alloc(3, Bytes(4 * kMiB), kS0));
  ASSERT_TRUE(a.Alloc(4, Bytes(2 * kMiB), kS0));
  a.Free(1);
  a.Free(3);
  ASSERT_TRUE(a.Alloc(5, Bytes(3 * kMiB), kS0));  // smallest fit: the 4 MiB hole
  EXPECT_EQ(a.AddressOf(5), kBase + 8 * kMiB);
  EXPECT_EQ(a.BlockSizeOf(5), Bytes(4 * kMiB));   // remainder 1 MiB is not split off
  ASSERT_TRUE(a.Alloc(6, Bytes(5 * kMiB), kS0));  // two 6 MiB holes: the lower address
  EXPECT_EQ(a.AddressOf(6), kBase);
}

TEST(PyTorchCachingTest, PoolsArePerStream) {
  PyTorchCachingAllocator a(Bytes(1LL << 30));
  ASSERT_TRUE(a.Alloc(1, Bytes(1000), kS0));
  a.Free(1);
  ASSERT_TRUE(a.Alloc(2, Bytes(1000), kS1));
  EXPECT_EQ(a.stats().device_mallocs, 2);
  EXPECT_EQ(a.AddressOf(2), kBase + 2 * kMiB);
  ASSERT_TRUE(a.Alloc(3, Bytes(1000), kS0));
  EXPECT_EQ(a.AddressOf(3), kBase);
}

TEST(PyTorchCachingTest, OversizeBlocksWithMaxSplitSize) {
  PyTorchCachingAllocator a(Bytes(1LL << 30), Opts(30));
  ASSERT_TRUE(a.Alloc(1, Bytes(60 * kMiB), kS0));
  a.Free(1);
  // A request below max_split_size never takes a cached oversize block.
  ASSERT_TRUE(a.Alloc(2, Bytes(25 * kMiB), kS0));
  EXPECT_EQ(a.AddressOf(2), kBase + 60 * kMiB);
  EXPECT_EQ(a.BlockSizeOf(2), Bytes(26 * kMiB));  // 25 MiB rounded to 2 MiB, remainder 1 MiB kept
  // An oversize request refuses a block ≥ request + 20 MiB (60 ≥ 31 + 20) ...
  ASSERT_TRUE(a.Alloc(3, Bytes(31 * kMiB), kS0));
  EXPECT_EQ(a.AddressOf(3), kBase + 86 * kMiB);
  // ... and takes one within it, unsplit (60 < 45 + 20).
  ASSERT_TRUE(a.Alloc(4, Bytes(45 * kMiB), kS0));
  EXPECT_EQ(a.AddressOf(4), kBase);
  EXPECT_EQ(a.BlockSizeOf(4), Bytes(60 * kMiB));
  EXPECT_EQ(a.device_stats().oversize_segments.current, 2);
}

TEST(PyTorchCachingTest, MaxNonSplitRoundingWidensReuse) {
  PyTorchCachingOptions o = Opts(30);
  o.max_non_split_rounding = 40 * kMiB;
  PyTorchCachingAllocator a(Bytes(1LL << 30), o);
  ASSERT_TRUE(a.Alloc(1, Bytes(60 * kMiB), kS0));
  a.Free(1);
  ASSERT_TRUE(a.Alloc(2, Bytes(31 * kMiB), kS0));  // 60 < 31 + 40
  EXPECT_EQ(a.AddressOf(2), kBase);
}

TEST(PyTorchCachingTest, RoundupPower2Divisions) {
  PyTorchCachingOptions o;
  o.roundup_power2_divisions.fill(4);
  EXPECT_EQ(PyTorchCachingAllocator::RoundSize(5 * kMiB + 1, o), 6 * kMiB);      // 4 MiB + k·1 MiB
  EXPECT_EQ(PyTorchCachingAllocator::RoundSize(1200000, o), 1310720);            // 1 MiB + k·256 KiB
  EXPECT_EQ(PyTorchCachingAllocator::RoundSize(8 * kMiB, o), 8 * kMiB);          // powers of two stay
  EXPECT_EQ(PyTorchCachingAllocator::RoundSize(1500, o), 1536);                  // ≤ 512·4: 512 B rule
  // The list form: the first entry fills the bands below; `>` refills from
  // the previous entry's band (so 1024:4 becomes 8, as upstream does).
  absl::StatusOr<PyTorchCachingOptions> p =
      ParsePyTorchCachingOptions({{"roundup_power2_divisions", "[256:1,512:2,1024:4,>:8]"}});
  ASSERT_TRUE(p.ok()) << p.status();
  const std::array<int64_t, 16> want = {1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 8, 8, 8, 8, 8, 8};
  EXPECT_EQ(p->roundup_power2_divisions, want);
  EXPECT_FALSE(ParsePyTorchCachingOptions({{"roundup_power2_divisions", "3"}}).ok());
}

TEST(PyTorchCachingTest, OptionErrorsNameTheKey) {
  absl::StatusOr<PyTorchCachingOptions> p = ParsePyTorchCachingOptions({{"max_split_size_mb", "20"}});
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("allocator.max_split_size_mb"), std::string_view::npos);
  p = ParsePyTorchCachingOptions({{"max_split_sizemb", "64"}});
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("allocator.max_split_sizemb"), std::string_view::npos);
  EXPECT_NE(p.status().message().find("max_split_size_mb"), std::string_view::npos);
  EXPECT_FALSE(ParsePyTorchCachingOptions({{"garbage_collection_threshold", "1.0"}}).ok());
  EXPECT_FALSE(ParsePyTorchCachingOptions({{"expandable_segments", "yes"}}).ok());
}

TEST(PyTorchCachingTest, RetryOrderBeforeOom) {
  PyTorchCachingAllocator a(Bytes(80 * kMiB), Opts(30));
  std::vector<AllocatorEvent> ev;
  a.RecordEventsTo(&ev);
  ASSERT_TRUE(a.Alloc(1, Bytes(40 * kMiB), kS0));  // oversize segment @0
  ASSERT_TRUE(a.Alloc(2, Bytes(5 * kMiB), kS0));   // 20 MiB segment @40
  a.Free(1);
  a.Free(2);
  ev.clear();
  // 60 + 26 > 80: free the cached oversize block first, then cudaMalloc.
  ASSERT_TRUE(a.Alloc(3, Bytes(25 * kMiB), kS0));
  EXPECT_EQ(Actions(ev), (std::vector<AllocatorAction>{AllocatorAction::kSegmentFree, AllocatorAction::kSegmentAlloc,
                                                       AllocatorAction::kAlloc}));
  EXPECT_EQ(ev[0].addr, kBase);
  EXPECT_EQ(ev[0].size, Bytes(40 * kMiB));
  EXPECT_EQ(a.AddressOf(3), kBase);  // the released range is reused
  EXPECT_EQ(a.stats().alloc_retries, 0);
  ev.clear();
  // 46 + 40 > 80 and no oversize block to free: release all unsplit cached
  // segments, then retry.
  ASSERT_TRUE(a.Alloc(4, Bytes(40 * kMiB), kS0));
  EXPECT_EQ(Actions(ev), (std::vector<AllocatorAction>{AllocatorAction::kSegmentFree, AllocatorAction::kSegmentAlloc,
                                                       AllocatorAction::kAlloc}));
  EXPECT_EQ(ev[0].addr, kBase + 40 * kMiB);
  EXPECT_EQ(a.stats().alloc_retries, 1);
  ev.clear();
  const AllocatorStats before = a.stats();
  EXPECT_FALSE(a.Alloc(5, Bytes(20 * kMiB), kS0));  // 66 + 20 > 80, nothing cached
  ASSERT_EQ(Actions(ev), (std::vector<AllocatorAction>{AllocatorAction::kOom}));
  EXPECT_EQ(ev[0].addr, static_cast<uint64_t>(14 * kMiB));  // device bytes free
  EXPECT_EQ(a.stats().ooms, 1);
  EXPECT_EQ(a.stats().reserved, before.reserved);
  EXPECT_EQ(a.AddressOf(5), std::nullopt);
}

TEST(PyTorchCachingTest, PerProcessMemoryFractionFailsBeforeTheDevice) {
  PyTorchCachingOptions o;
  o.per_process_memory_fraction = 0.5;
  PyTorchCachingAllocator a(Bytes(100 * kMiB), o);
  ASSERT_TRUE(a.Alloc(1, Bytes(40 * kMiB), kS0));
  EXPECT_FALSE(a.Alloc(2, Bytes(5 * kMiB), kS0));  // 40 + 20 > 50 allowed, though 60 ≤ 100
  EXPECT_EQ(a.stats().device_mallocs, 1);
}

TEST(PyTorchCachingTest, GarbageCollectionFreesOldCachedBlocks) {
  PyTorchCachingOptions o;
  o.per_process_memory_fraction = 1.0;
  o.garbage_collection_threshold = 0.5;
  PyTorchCachingAllocator a(Bytes(100 * kMiB), o);
  ASSERT_TRUE(a.Alloc(1, Bytes(30 * kMiB), kS0));
  ASSERT_TRUE(a.Alloc(2, Bytes(30 * kMiB), kS0));
  a.Free(1);
  a.Free(2);
  ASSERT_TRUE(a.Alloc(3, Bytes(40 * kMiB), kS0));  // 60 > 50: both cached blocks (age 1 ≥ avg) go
  EXPECT_EQ(a.stats().device_frees, 2);
  EXPECT_EQ(a.stats().reserved, Bytes(40 * kMiB));

  PyTorchCachingOptions no_gc;
  no_gc.per_process_memory_fraction = 1.0;
  PyTorchCachingAllocator b(Bytes(100 * kMiB), no_gc);
  ASSERT_TRUE(b.Alloc(1, Bytes(30 * kMiB), kS0));
  ASSERT_TRUE(b.Alloc(2, Bytes(30 * kMiB), kS0));
  b.Free(1);
  b.Free(2);
  ASSERT_TRUE(b.Alloc(3, Bytes(40 * kMiB), kS0));
  EXPECT_EQ(b.stats().reserved, Bytes(100 * kMiB));
}

TEST(PyTorchCachingTest, ExpandableSegmentsMapPagesAtTheLowestAddress) {
  PyTorchCachingOptions o;
  o.expandable_segments = true;
  PyTorchCachingAllocator a(Bytes(1LL << 30), o);
  std::vector<AllocatorEvent> ev;
  a.RecordEventsTo(&ev);
  ASSERT_TRUE(a.Alloc(1, Bytes(5 * kMiB), kS0));  // one 20 MiB page; 15 MiB stays free
  EXPECT_EQ(a.AddressOf(1), kBase);
  EXPECT_EQ(a.stats().reserved, Bytes(20 * kMiB));
  ASSERT_TRUE(a.Alloc(2, Bytes(30 * kMiB), kS0));  // the free 15 MiB + one more page, contiguous
  EXPECT_EQ(a.AddressOf(2), kBase + 5 * kMiB);
  EXPECT_EQ(a.BlockSizeOf(2), Bytes(30 * kMiB));  // 512 B split rule in the large pool
  EXPECT_EQ(a.stats().reserved, Bytes(40 * kMiB));
  ASSERT_TRUE(a.Alloc(3, Bytes(1000), kS0));  // small pool: its own segment, 2 MiB pages
  EXPECT_EQ(a.stats().reserved, Bytes(42 * kMiB));
  EXPECT_EQ(a.stats().segments, 0);  // upstream counts no `segment` stat for expandable segments
  int maps = 0;
  for (const AllocatorEvent& e : ev) maps += e.action == AllocatorAction::kSegmentMap;
  EXPECT_EQ(maps, 3);
  a.Free(1);
  a.Free(2);
  a.Free(3);
  a.ReleaseCache();
  EXPECT_EQ(a.stats().reserved, Bytes(0));
}

TEST(PyTorchCachingTest, ExpandableSegmentsUnmapFreePagesOnOom) {
  PyTorchCachingOptions o;
  o.expandable_segments = true;
  PyTorchCachingAllocator a(Bytes(100 * kMiB), o);
  std::vector<AllocatorEvent> ev;
  a.RecordEventsTo(&ev);
  // Address space: 1 1/8 × 100 MiB → 6 pages of 20 MiB.
  ASSERT_TRUE(a.Alloc(1, Bytes(40 * kMiB), kS0));  // pages 0-1
  ASSERT_TRUE(a.Alloc(2, Bytes(20 * kMiB), kS0));  // page 2
  a.Free(1);
  ev.clear();
  // 50 MiB fits only after block 2 (pages 3-5); mapping 60 MiB more would
  // exceed 100 MiB, so pages 0-1 are unmapped first, then the retry maps.
  ASSERT_TRUE(a.Alloc(3, Bytes(50 * kMiB), kS0));
  EXPECT_EQ(Actions(ev), (std::vector<AllocatorAction>{AllocatorAction::kSegmentUnmap, AllocatorAction::kSegmentMap,
                                                       AllocatorAction::kAlloc}));
  EXPECT_EQ(ev[0].addr, kBase);
  EXPECT_EQ(ev[0].size, Bytes(40 * kMiB));
  EXPECT_EQ(ev[1].addr, kBase + 60 * kMiB);
  EXPECT_EQ(ev[1].size, Bytes(60 * kMiB));
  EXPECT_EQ(a.AddressOf(3), kBase + 60 * kMiB);
  EXPECT_EQ(a.stats().reserved, Bytes(80 * kMiB));
  EXPECT_EQ(a.stats().alloc_retries, 1);
}

TEST(PyTorchCachingTest, ForcedSegmentAddress) {
  PyTorchCachingAllocator a(Bytes(1LL << 30));
  a.SetNextSegmentAddress(0x7f4a00000000ULL);
  ASSERT_TRUE(a.Alloc(1, Bytes(1000), kS0));
  EXPECT_EQ(a.AddressOf(1), 0x7f4a00000000ULL);
  ASSERT_TRUE(a.Alloc(2, Bytes(50 * kMiB), kS0));  // unforced: first fit from the base
  EXPECT_EQ(a.AddressOf(2), kBase);
  a.SetNextSegmentAddress(0x7f4a00000000ULL);  // taken: falls back, counted
  ASSERT_TRUE(a.Alloc(3, Bytes(1000), kS1));
  EXPECT_EQ(a.address_conflicts(), 1);
  EXPECT_EQ(a.AddressOf(3), kBase + 50 * kMiB);
}

}  // namespace
}  // namespace gpusim::pytorch_caching_test
