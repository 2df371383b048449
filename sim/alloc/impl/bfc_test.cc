// BFC bins, split, coalesce and region growth (xla/tsl/framework/bfc_allocator.cc).
#include "sim/alloc/impl/bfc.h"

#include "gtest/gtest.h"

namespace gpusim::bfc_test {
namespace {

constexpr uint64_t kBase = DeviceAddressSpace::kBase;
constexpr int64_t kMiB = 1 << 20;

TEST(BfcTest, BinsDoubleFrom256Bytes) {
  EXPECT_EQ(BfcAllocator::BinNumForSize(1), 0);
  EXPECT_EQ(BfcAllocator::BinNumForSize(511), 0);
  EXPECT_EQ(BfcAllocator::BinNumForSize(512), 1);
  EXPECT_EQ(BfcAllocator::BinNumForSize(256 * kMiB - 1), 19);
  EXPECT_EQ(BfcAllocator::BinNumForSize(256 * kMiB), 20);
  EXPECT_EQ(BfcAllocator::BinNumForSize(int64_t{1} << 40), 20);
  EXPECT_EQ(BfcAllocator::RoundedBytes(1), 256);
  EXPECT_EQ(BfcAllocator::RoundedBytes(257), 512);
}

TEST(BfcTest, PreallocatesTheMemoryFraction) {
  BfcAllocator a(Bytes(1LL << 30));  // JAX defaults: preallocate, 0.75
  ASSERT_TRUE(a.Alloc(1, Bytes(1000), 0));
  EXPECT_EQ(a.stats().reserved, Bytes(768 * kMiB));
  EXPECT_EQ(a.AddressOf(1), kBase);
  EXPECT_EQ(a.BlockSizeOf(1), Bytes(1024));
  ASSERT_TRUE(a.Alloc(2, Bytes(1), 0));  // split off the big chunk: right after
  EXPECT_EQ(a.AddressOf(2), kBase + 1024);
  EXPECT_FALSE(a.Alloc(3, Bytes(768 * kMiB), 0));  // over the limit though the device has room
  EXPECT_EQ(a.stats().ooms, 1);
}

TEST(BfcTest, SplitsOnlyAtTwiceTheRequestOr128MiBSpare) {
  BfcAllocator a(Bytes(4LL << 30));
  ASSERT_TRUE(a.Alloc(1, Bytes(3000), 0));  // 3072 B @0
  ASSERT_TRUE(a.Alloc(2, Bytes(1000), 0));
  a.Free(1);
  ASSERT_TRUE(a.Alloc(3, Bytes(2000), 0));  // 3072 < 2·2048: taken whole
  EXPECT_EQ(a.AddressOf(3), kBase);
  EXPECT_EQ(a.BlockSizeOf(3), Bytes(3072));

  ASSERT_TRUE(a.Alloc(4, Bytes(300 * kMiB), 0));
  ASSERT_TRUE(a.Alloc(5, Bytes(1), 0));
  const uint64_t hole = *a.AddressOf(4);
  a.Free(4);
  ASSERT_TRUE(a.Alloc(6, Bytes(200 * kMiB), 0));  // spare 100 MiB < 128 MiB: whole
  EXPECT_EQ(a.AddressOf(6), hole);
  EXPECT_EQ(a.BlockSizeOf(6), Bytes(300 * kMiB));
  a.Free(6);
  ASSERT_TRUE(a.Alloc(7, Bytes(160 * kMiB), 0));  // spare 140 MiB ≥ 128 MiB: split
  EXPECT_EQ(a.BlockSizeOf(7), Bytes(160 * kMiB));
}

TEST(BfcTest, FreeNeighboursCoalesce) {
  BfcAllocator a(Bytes(1LL << 30));
  for (BufferId id = 1; id <= 3; ++id) ASSERT_TRUE(a.Alloc(id, Bytes(kMiB), 0));
  a.Free(1);
  a.Free(3);
  EXPECT_EQ(a.stats().largest_free_block, Bytes(768 * kMiB - 2 * kMiB));
  a.Free(2);
  EXPECT_EQ(a.stats().largest_free_block, Bytes(768 * kMiB));
  EXPECT_EQ(a.stats().inactive_split, Bytes(0));
}

TEST(BfcTest, GrowthRegionsDouble) {
  BfcOptions o;
  o.preallocate = false;
  o.mem_fraction = 1.0;
  BfcAllocator a(Bytes(1LL << 30), o);
  ASSERT_TRUE(a.Alloc(1, Bytes(kMiB), 0));       // 2 MiB region; next 4 MiB
  EXPECT_EQ(a.stats().reserved, Bytes(2 * kMiB));
  ASSERT_TRUE(a.Alloc(2, Bytes(3 * kMiB), 0));   // 4 MiB region; next 8 MiB
  EXPECT_EQ(a.stats().reserved, Bytes(6 * kMiB));
  EXPECT_EQ(a.AddressOf(2), kBase + 2 * kMiB);
  ASSERT_TRUE(a.Alloc(3, Bytes(20 * kMiB), 0));  // 8 → 16 → 32 MiB region
  EXPECT_EQ(a.stats().reserved, Bytes(38 * kMiB));
  EXPECT_EQ(a.stats().segments, 3);
}

TEST(BfcTest, OptionsAreValidated) {
  EXPECT_FALSE(ParseBfcOptions({{"mem_fraction", "1.5"}}).ok());
  absl::StatusOr<BfcOptions> o = ParseBfcOptions({{"allow_growth", "true"}});
  ASSERT_FALSE(o.ok());
  EXPECT_NE(o.status().message().find("allocator.allow_growth"), std::string_view::npos);
  EXPECT_NE(o.status().message().find("preallocate"), std::string_view::npos);
}

}  // namespace
}  // namespace gpusim::bfc_test
