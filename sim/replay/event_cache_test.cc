// Note [Later passes from memory]: the packed events come back exactly as
// they went in, whatever their values; past the cap, or for an event it
// cannot hold, the cache holds nothing.
#include "sim/replay/event_cache.h"

#include <cstdint>
#include <limits>
#include <vector>

#include "gtest/gtest.h"

namespace gpusim {
namespace replay_internal {
namespace {

constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
constexpr int64_t kMax = std::numeric_limits<int64_t>::max();

struct Indexed {
  RecordedMemoryEvent m;
  int64_t index;
};

void ExpectSame(const RecordedMemoryEvent& a, const RecordedMemoryEvent& b) {
  EXPECT_EQ(a.kind, b.kind);
  EXPECT_EQ(a.address, b.address);
  EXPECT_EQ(a.size, b.size);
  EXPECT_EQ(a.stream, b.stream);
  EXPECT_EQ(a.time, b.time);
  EXPECT_EQ(a.device, b.device);
  EXPECT_EQ(a.device_type, b.device_type);
  EXPECT_EQ(a.seq, b.seq);
  EXPECT_EQ(a.total_allocated, b.total_allocated);
  EXPECT_EQ(a.total_reserved, b.total_reserved);
  EXPECT_EQ(a.category, b.category);
  EXPECT_EQ(a.previous_category, b.previous_category);
  EXPECT_EQ(a.stack, b.stack);
}

std::vector<Indexed> ReadBack(const MemoryEventCache& c) {
  std::vector<Indexed> out;
  MemoryEventCache::Reader r(c);
  RecordedMemoryEvent m;
  m.stack = {7};  // the reader sets every field
  m.category = Role::kParameter;
  int64_t index = 0;
  while (r.Next(m, index)) out.push_back({m, index});
  return out;
}

RecordedMemoryEvent Event(MemoryEventKind kind, std::optional<int64_t> address, int64_t size, int64_t time, int64_t seq,
                          std::optional<int64_t> allocated, std::optional<int64_t> reserved, int32_t device = 0,
                          int32_t device_type = 1) {
  RecordedMemoryEvent m;
  m.kind = kind;
  m.address = address;
  m.size = Bytes(size);
  m.time = SimTime(time);
  m.seq = seq;
  m.device = device;
  m.device_type = device_type;
  if (allocated.has_value()) m.total_allocated = Bytes(*allocated);
  if (reserved.has_value()) m.total_reserved = Bytes(*reserved);
  return m;
}

TEST(MemoryEventCacheTest, EveryValueRoundTrips) {
  using K = MemoryEventKind;
  std::vector<Indexed> in = {
      // The common case: totals implied, index and Ev Idx one past the last.
      {Event(K::kAlloc, 0x7f0000000000, 512, 1000, 0, 512, 2 << 20), 0},
      {Event(K::kAlloc, 0x7f0000000200, 4096, 2000, 1, 4608, 2 << 20), 1},
      {Event(K::kFree, 0x7f0000000000, 512, 2000, 2, 4096, 2 << 20), 2},
      // A free whose Total Allocated is not the last less its bytes, a new
      // Total Reserved, a skipped index, another device.
      {Event(K::kFree, 0x7f0000000200, 4096, 1500, 7, 12345, 4 << 20, 3, 6), 9},
      // No address, no totals, Ev Idx not recorded.
      {Event(K::kAlloc, std::nullopt, 0, -1, -1, std::nullopt, std::nullopt, -1, -1), 10},
      // The extremes of every field.
      {Event(K::kAlloc, kMin, kMax, kMin, kMax, kMin, kMax, std::numeric_limits<int32_t>::min(),
             std::numeric_limits<int32_t>::max()),
       11},
      {Event(K::kFree, kMax, 0, kMax, kMin, kMax, kMin, std::numeric_limits<int32_t>::max(),
             std::numeric_limits<int32_t>::min()),
       kMax},
  };
  MemoryEventCache c(1 << 20);
  for (const Indexed& e : in) c.Add(e.m, e.index);
  ASSERT_TRUE(c.complete());
  EXPECT_EQ(c.events(), static_cast<int64_t>(in.size()));
  const std::vector<Indexed> out = ReadBack(c);
  ASSERT_EQ(out.size(), in.size());
  for (size_t k = 0; k < in.size(); ++k) {
    SCOPED_TRACE(k);
    ExpectSame(out[k].m, in[k].m);
    EXPECT_EQ(out[k].index, in[k].index);
  }
  // Read twice: a reader does not consume the events.
  EXPECT_EQ(ReadBack(c).size(), in.size());
}

TEST(MemoryEventCacheTest, ManyEventsAcrossChunksAtAFewBytesEach) {
  MemoryEventCache c(int64_t{64} << 20);
  std::vector<Indexed> in;
  int64_t allocated = 0;
  for (int64_t i = 0; i < 400'000; ++i) {
    const bool alloc = i % 2 == 0;
    const int64_t size = 512 * (1 + i % 4096);
    allocated += alloc ? size : -size;
    in.push_back({Event(alloc ? MemoryEventKind::kAlloc : MemoryEventKind::kFree, 0x7f0000000000 + (i / 2) * 0x200000,
                        size, 1000 * i, i, allocated, 80 << 20),
                  i});
    c.Add(in.back().m, i);
  }
  ASSERT_TRUE(c.complete());
  EXPECT_GT(c.bytes(), int64_t{1} << 20);  // more than one chunk
  EXPECT_LE(c.bytes(), 400'000 * 12);
  const std::vector<Indexed> out = ReadBack(c);
  ASSERT_EQ(out.size(), in.size());
  for (size_t k = 0; k < in.size(); ++k) {
    if (out[k].index != in[k].index || out[k].m.address != in[k].m.address || out[k].m.size != in[k].m.size ||
        out[k].m.time != in[k].m.time || out[k].m.total_allocated != in[k].m.total_allocated ||
        out[k].m.total_reserved != in[k].m.total_reserved || out[k].m.seq != in[k].m.seq) {
      ADD_FAILURE() << "event " << k << " differs";
      break;
    }
  }
}

TEST(MemoryEventCacheTest, PastTheCapOrAnEventItCannotHoldItHoldsNothing) {
  const RecordedMemoryEvent m = Event(MemoryEventKind::kAlloc, 0x7f0000000000, 512, 1000, 0, 512, 0);
  MemoryEventCache none(0);
  none.Add(m, 0);
  EXPECT_FALSE(none.complete());
  EXPECT_TRUE(ReadBack(none).empty());

  MemoryEventCache small(200);  // one chunk of 200 bytes: a few events, then full
  int64_t i = 0;
  for (; small.complete() && i < 1000; ++i) small.Add(m, i);
  EXPECT_FALSE(small.complete());
  EXPECT_GT(i, 2);
  EXPECT_EQ(small.bytes(), 0);
  EXPECT_TRUE(ReadBack(small).empty());
  small.Add(m, i);  // and stays empty
  EXPECT_FALSE(small.complete());

  for (int what = 0; what < 3; ++what) {
    RecordedMemoryEvent odd = m;
    if (what == 0) odd.kind = MemoryEventKind::kSegmentAlloc;
    if (what == 1) odd.stream = 2;
    if (what == 2) odd.stack = {0};
    MemoryEventCache c(1 << 20);
    c.Add(m, 0);
    c.Add(odd, 1);
    EXPECT_FALSE(c.complete()) << what;
    EXPECT_TRUE(ReadBack(c).empty()) << what;
  }
}

}  // namespace
}  // namespace replay_internal
}  // namespace gpusim
