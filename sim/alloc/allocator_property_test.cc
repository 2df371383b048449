// Properties every strategy in the registry keeps over random traces (fixed
// seeds): live blocks never overlap in address, every block holds its
// request, reserved ≥ allocated, and the same calls give the same result.
#include <algorithm>
#include <random>

#include "gtest/gtest.h"
#include "sim/alloc/allocator.h"
#include "sim/alloc/impl/best_of.h"
#include "sim/alloc/impl/fallback.h"
#include "sim/alloc/impl/pytorch_caching.h"

namespace gpusim::allocator_property_test {
namespace {

struct Op {
  bool alloc;
  BufferId id;
  Bytes size;
  StreamId stream;
};

// A mix like a training step's: many small tensors, some activations of a
// few MiB, a few large ones; two streams.
std::vector<Op> RandomTrace(uint32_t seed, int n) {
  std::mt19937_64 rng(seed);
  std::vector<Op> ops;
  std::vector<BufferId> live;
  BufferId next = 0;
  for (int i = 0; i < n; ++i) {
    if (live.size() < 64 && (live.empty() || rng() % 100 < 55)) {
      const int kind = static_cast<int>(rng() % 100);
      int64_t size = kind < 60 ? 1 + static_cast<int64_t>(rng() % (1 << 20))
                     : kind < 92 ? (1 << 20) + static_cast<int64_t>(rng() % (24 << 20))
                                 : (24 << 20) + static_cast<int64_t>(rng() % (160 << 20));
      if (rng() % 50 == 0) size = 0;
      ops.push_back({true, next, Bytes(size), static_cast<StreamId>(rng() % 5 == 0)});
      live.push_back(next++);
    } else {
      const size_t k = rng() % live.size();
      ops.push_back({false, live[k], Bytes(0), 0});
      live.erase(live.begin() + static_cast<std::ptrdiff_t>(k));
    }
  }
  return ops;
}

struct Outcome {
  std::vector<std::optional<uint64_t>> addresses;
  AllocatorStats stats;
  int failed_at = -1;
};

void CheckLive(const Allocator& a, const std::map<BufferId, Bytes>& live, const std::string& what) {
  std::vector<std::pair<uint64_t, uint64_t>> ranges;
  for (const auto& [id, req] : live) {
    const std::optional<uint64_t> addr = a.AddressOf(id);
    const std::optional<Bytes> block = a.BlockSizeOf(id);
    if (!addr.has_value()) continue;  // ideal places nothing
    ASSERT_TRUE(block.has_value()) << what;
    ASSERT_GE(*block, req) << what << " buffer " << id;
    if (block->value() > 0) ranges.push_back({*addr, *addr + static_cast<uint64_t>(block->value())});
  }
  std::sort(ranges.begin(), ranges.end());
  for (size_t i = 1; i < ranges.size(); ++i) {
    ASSERT_LE(ranges[i - 1].second, ranges[i].first) << what << ": overlapping blocks";
  }
  const AllocatorStats s = a.stats();
  ASSERT_GE(s.reserved, s.allocated) << what;
  ASSERT_GE(s.peak_reserved, s.reserved) << what;
  ASSERT_GE(s.peak_allocated, s.allocated) << what;
}

Outcome Replay(const AllocatorSpec& spec, const std::vector<Op>& ops, Bytes capacity, const std::string& what) {
  absl::StatusOr<std::unique_ptr<Allocator>> made = MakeAllocator(spec, capacity);
  EXPECT_TRUE(made.ok()) << made.status();
  Outcome out;
  if (!made.ok()) return out;
  Allocator& a = **made;
  std::map<BufferId, Bytes> live;
  for (size_t i = 0; i < ops.size(); ++i) {
    const Op& op = ops[i];
    if (op.alloc) {
      if (!a.Alloc(op.id, op.size, op.stream)) {
        out.failed_at = static_cast<int>(i);
        break;
      }
      live[op.id] = op.size;
    } else {
      a.Free(op.id);
      live.erase(op.id);
    }
    if (i % 97 == 0) {
      CheckLive(a, live, what);
      for (const auto& [id, size] : live) out.addresses.push_back(a.AddressOf(id));
    }
  }
  CheckLive(a, live, what);
  EXPECT_TRUE(a.Finish().ok());
  out.stats = a.stats();
  return out;
}

std::vector<AllocatorSpec> AllStrategies() {
  return {
      {"ideal", {}},
      {"pytorch_caching", {}},
      {"pytorch_caching", {{"expandable_segments", "true"}}},
      {"pytorch_caching", {{"max_split_size_mb", "64"}, {"roundup_power2_divisions", "4"}}},
      {"pytorch_caching",
       {{"per_process_memory_fraction", "0.9"}, {"garbage_collection_threshold", "0.6"}}},
      {"bfc", {}},
      {"bfc", {{"preallocate", "false"}, {"garbage_collection", "true"}}},
      {"first_fit", {}},
      {"best_fit", {}},
      {"buddy", {}},
      {"best_of", {{"members", "pytorch_caching,bfc{preallocate=false},best_fit"}}},
      {"fallback", {{"members", "buddy,pytorch_caching{expandable_segments=true}"}}},
      {"xla_best_fit", {}},
      {"xla_best_fit", {{"order", "temporal"}, {"alignment", "256"}}},
      {"greedy_by_size", {}},
  };
}

std::string Describe(const AllocatorSpec& s) {
  std::string d = s.impl;
  for (const auto& [k, v] : s.options) d += " " + k + "=" + v;
  return d;
}

TEST(AllocatorPropertyTest, EveryStrategyOnRandomTraces) {
  for (uint32_t seed : {1u, 2u, 3u}) {
    const std::vector<Op> ops = RandomTrace(seed, 1500);
    for (const AllocatorSpec& spec : AllStrategies()) {
      const std::string what = Describe(spec) + " seed " + std::to_string(seed);
      const Outcome a = Replay(spec, ops, Bytes(8LL << 30), what);
      const Outcome b = Replay(spec, ops, Bytes(8LL << 30), what);
      EXPECT_EQ(a.addresses, b.addresses) << what;
      EXPECT_EQ(a.failed_at, b.failed_at) << what;
      EXPECT_EQ(a.stats.peak_reserved, b.stats.peak_reserved) << what;
      EXPECT_EQ(a.failed_at, -1) << what << " ran out of 8 GiB";
    }
  }
}

TEST(AllocatorPropertyTest, TightCapacityStillKeepsInvariants) {
  const std::vector<Op> ops = RandomTrace(7, 1500);
  for (const AllocatorSpec& spec : AllStrategies()) {
    Replay(spec, ops, Bytes(2LL << 30), Describe(spec) + " tight");
  }
}

// Note [Huge requests] (issue 17): a request of up to 2^63-1 bytes is an OOM
// in every strategy — no CHECK, no wrapped rounding that "fits" — and the
// allocator keeps working after it.
TEST(AllocatorPropertyTest, HugeRequestsAreOutOfMemory) {
  for (const AllocatorSpec& spec : AllStrategies()) {
    for (int64_t huge : {INT64_MAX, INT64_MAX - 511, kMaxRequestBytes, kMaxRequestBytes + 1, kMaxRequestBytes - 1,
                         (int64_t{1} << 62) - 1, (int64_t{1} << 48) + 1, (int64_t{1} << 40)}) {
      const std::string what = Describe(spec) + " request " + std::to_string(huge);
      auto made = MakeAllocator(spec, Bytes(8LL << 30));
      ASSERT_TRUE(made.ok()) << what;
      Allocator& a = **made;
      ASSERT_TRUE(a.Alloc(1, Bytes(3 << 20), 0)) << what;
      EXPECT_FALSE(a.Alloc(2, Bytes(huge), 0)) << what;
      EXPECT_LE(a.stats().reserved, Bytes(8LL << 30)) << what;
      CheckLive(a, {{1, Bytes(3 << 20)}}, what);
      a.Free(1);
      // A composite drops members that ran out (the engine stops at an OOM).
      if (spec.impl != "best_of") {
        EXPECT_TRUE(a.Alloc(3, Bytes(1 << 20), 0)) << what;
      }
      EXPECT_TRUE(a.Finish().ok()) << what;
    }
  }
  EXPECT_FALSE(MakeAllocator({"bfc", {}}, Bytes(kMaxRequestBytes)).ok());
  EXPECT_FALSE(MakeAllocator({"ideal", {}}, Bytes(INT64_MAX)).ok());
}

TEST(AllocatorRegistryTest, ErrorsNameTheKey) {
  auto bad = MakeAllocator({"first_fit", {{"alignmnt", "256"}}}, Bytes(1 << 30));
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("allocator.alignmnt"), std::string_view::npos);
  EXPECT_NE(bad.status().message().find("alignment"), std::string_view::npos);
  EXPECT_FALSE(MakeAllocator({"no_such", {}}, Bytes(1 << 30)).ok());
  EXPECT_FALSE(MakeAllocator({"best_of", {}}, Bytes(1 << 30)).ok());
  EXPECT_FALSE(MakeAllocator({"fallback", {{"members", "bfc"}}}, Bytes(1 << 30)).ok());
  auto member = MakeAllocator({"best_of", {{"members", "bfc{preallocat=true}"}}}, Bytes(1 << 30));
  ASSERT_FALSE(member.ok());
  EXPECT_NE(member.status().message().find("allocator.preallocat"), std::string_view::npos);
  EXPECT_TRUE(MakeAllocator({"best_of", {{"members", "pytorch_caching{roundup_power2_divisions=[1:2,>:4]},bfc"}}},
                            Bytes(1 << 30))
                  .ok());
}

TEST(CompositeTest, BestOfReportsTheSmallestPeak) {
  std::vector<std::unique_ptr<Allocator>> m;
  m.push_back(*MakeAllocator({"bfc", {}}, Bytes(1LL << 30)));  // preallocates 768 MiB
  m.push_back(*MakeAllocator({"pytorch_caching", {}}, Bytes(1LL << 30)));
  BestOfAllocator a(std::move(m));
  ASSERT_TRUE(a.Alloc(1, Bytes(1000), 0));
  EXPECT_EQ(a.chosen().name(), "pytorch_caching");
  EXPECT_EQ(a.stats().peak_reserved, Bytes(2 << 20));
  EXPECT_EQ(a.name(), "best_of(bfc,pytorch_caching)");
}

TEST(CompositeTest, FallbackReplaysIntoTheSecondOnOom) {
  // 90 MiB device. The caching allocator keeps one 60 MiB segment split as
  // [10 free][45 used][5 free]: a 40 MiB request needs a new segment
  // (60 + 40 > 90) and nothing unsplit can be released, so it fails; the
  // ideal secondary, replayed, holds 45 + 40.
  auto a = FallbackAllocator(*MakeAllocator({"pytorch_caching", {}}, Bytes(90 << 20)),
                             *MakeAllocator({"ideal", {}}, Bytes(90 << 20)));
  ASSERT_TRUE(a.Alloc(1, Bytes(60 << 20), 0));
  a.Free(1);
  ASSERT_TRUE(a.Alloc(2, Bytes(10 << 20), 0));
  ASSERT_TRUE(a.Alloc(3, Bytes(45 << 20), 0));
  a.Free(2);
  EXPECT_FALSE(a.switched());
  ASSERT_TRUE(a.Alloc(4, Bytes(40 << 20), 0));
  EXPECT_TRUE(a.switched());
  EXPECT_EQ(a.active().name(), "ideal");
  EXPECT_EQ(a.stats().allocated, Bytes(85 << 20));
  EXPECT_EQ(a.stats().peak_allocated, Bytes(85 << 20));
}

}  // namespace
}  // namespace gpusim::allocator_property_test
