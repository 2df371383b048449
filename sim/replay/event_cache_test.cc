// Note [Later passes from memory]: the packed events come back exactly as
// they went in, whatever their values; past the cap, or for an event it
// cannot hold, the cache holds nothing.
#include "sim/replay/event_cache.h"

#include <cstdint>
#include <limits>
#include <vector>

#include "gtest/gtest.h"

namespace gpusim {
namespace replay_internal::event_cache_test {
namespace {

constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
constexpr int64_t kMax = std::numeric_limits<int64_t>::max();

struct Indexed {
  RecordedMemoryEvent m;
  int64_t index;
  std::vector<MemoryOp> ops;  // as the pairing makes them
  bool head = false;
};

// Pairs `e` as the pairing would (Note [Paired ops kept with the events]):
// an alloc takes the next id, after an implicit free of `freed` (>= 0); a
// free ends `freed`, or a head block (the next id) when it is -1.
Indexed Paired(RecordedMemoryEvent m, int64_t index, BufferId& next_id, BufferId freed = -1) {
  Indexed e{std::move(m), index, {}, false};
  if (e.m.kind == MemoryEventKind::kAlloc) {
    if (freed >= 0) e.ops.push_back({EventType::kFree, 0, freed, Bytes(0)});
    e.ops.push_back({EventType::kAlloc, 0, next_id++, e.m.size});
  } else if (freed >= 0) {
    e.ops.push_back({EventType::kFree, 0, freed, Bytes(0)});
  } else {
    e.head = true;
    e.ops.push_back({EventType::kFree, 0, next_id++, Bytes(0)});
  }
  return e;
}

void ExpectSameOps(const std::vector<MemoryOp>& a, const std::vector<MemoryOp>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t k = 0; k < a.size(); ++k) {
    EXPECT_EQ(a[k].type, b[k].type);
    EXPECT_EQ(a[k].stream, b[k].stream);
    EXPECT_EQ(a[k].buffer, b[k].buffer);
    EXPECT_EQ(a[k].size, b[k].size);
  }
}

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
  MemoryOp ops[2] = {{EventType::kAlloc, 3, 99, Bytes(1)}, {EventType::kAlloc, 3, 99, Bytes(1)}};  // replaced
  size_t n = 7;
  bool head = true;
  while (r.Next(m, index, ops, n, head)) out.push_back({m, index, std::vector<MemoryOp>(ops, ops + n), head});
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
  BufferId next = 0;
  std::vector<Indexed> in;
  // The common case: totals implied, index and Ev Idx one past the last.
  in.push_back(Paired(Event(K::kAlloc, 0x7f0000000000, 512, 1000, 0, 512, 2 << 20), 0, next));
  in.push_back(Paired(Event(K::kAlloc, 0x7f0000000200, 4096, 2000, 1, 4608, 2 << 20), 1, next));
  in.push_back(Paired(Event(K::kFree, 0x7f0000000000, 512, 2000, 2, 4096, 2 << 20), 2, next, 0));
  // A head block's free whose Total Allocated is not the last less its
  // bytes, a new Total Reserved, a skipped index, another device.
  in.push_back(Paired(Event(K::kFree, 0x7f0000000400, 4096, 1500, 7, 12345, 4 << 20, 3, 6), 9, next));
  // No address, no totals, Ev Idx not recorded; an implicit free.
  in.push_back(Paired(Event(K::kAlloc, std::nullopt, 0, -1, -1, std::nullopt, std::nullopt, -1, -1), 10, next, 1));
  // The extremes of every field.
  in.push_back(Paired(Event(K::kAlloc, kMin, kMax, kMin, kMax, kMin, kMax, std::numeric_limits<int32_t>::min(),
                            std::numeric_limits<int32_t>::max()),
                      11, next));
  in.push_back(Paired(Event(K::kFree, kMax, 0, kMax, kMin, kMax, kMin, std::numeric_limits<int32_t>::max(),
                            std::numeric_limits<int32_t>::min()),
                      kMax, next, 4));
  MemoryEventCache c(1 << 20);
  for (const Indexed& e : in) c.Add(e.m, e.index, e.ops, e.head);
  ASSERT_TRUE(c.complete());
  EXPECT_EQ(c.events(), static_cast<int64_t>(in.size()));
  const std::vector<Indexed> out = ReadBack(c);
  ASSERT_EQ(out.size(), in.size());
  for (size_t k = 0; k < in.size(); ++k) {
    SCOPED_TRACE(k);
    ExpectSame(out[k].m, in[k].m);
    EXPECT_EQ(out[k].index, in[k].index);
    ExpectSameOps(out[k].ops, in[k].ops);
    EXPECT_EQ(out[k].head, in[k].head);
  }
  // Read twice: a reader does not consume the events.
  EXPECT_EQ(ReadBack(c).size(), in.size());
}

TEST(MemoryEventCacheTest, ManyEventsAcrossChunksAtAFewBytesEach) {
  MemoryEventCache c(int64_t{64} << 20);
  std::vector<Indexed> in;
  int64_t allocated = 0;
  BufferId next = 0;
  for (int64_t i = 0; i < 400'000; ++i) {
    const bool alloc = i % 2 == 0;
    const int64_t size = 512 * (1 + i % 4096);
    allocated += alloc ? size : -size;
    in.push_back(Paired(Event(alloc ? MemoryEventKind::kAlloc : MemoryEventKind::kFree,
                              0x7f0000000000 + (i / 2) * 0x200000, size, 1000 * i, i, allocated, 80 << 20),
                        i, next, alloc ? -1 : next - 1));
    c.Add(in.back().m, i, in.back().ops, in.back().head);
  }
  ASSERT_TRUE(c.complete());
  EXPECT_GT(c.bytes(), int64_t{1} << 20);  // more than one chunk
  EXPECT_LE(c.bytes(), 400'000 * 12);
  const std::vector<Indexed> out = ReadBack(c);
  ASSERT_EQ(out.size(), in.size());
  for (size_t k = 0; k < in.size(); ++k) {
    if (out[k].index != in[k].index || out[k].m.address != in[k].m.address || out[k].m.size != in[k].m.size ||
        out[k].m.time != in[k].m.time || out[k].m.total_allocated != in[k].m.total_allocated ||
        out[k].m.total_reserved != in[k].m.total_reserved || out[k].m.seq != in[k].m.seq ||
        out[k].ops.size() != in[k].ops.size() || out[k].ops.back().buffer != in[k].ops.back().buffer) {
      ADD_FAILURE() << "event " << k << " differs";
      break;
    }
  }
}

TEST(MemoryEventCacheTest, PastTheCapOrAnEventItCannotHoldItHoldsNothing) {
  const RecordedMemoryEvent m = Event(MemoryEventKind::kAlloc, 0x7f0000000000, 512, 1000, 0, 512, 0);
  BufferId next = 0;
  MemoryEventCache none(0);
  none.Add(m, 0, Paired(m, 0, next).ops, false);
  EXPECT_FALSE(none.complete());
  EXPECT_TRUE(ReadBack(none).empty());

  MemoryEventCache small(250);  // one chunk of 250 bytes: a few events, then full
  int64_t i = 0;
  next = 0;
  for (; small.complete() && i < 1000; ++i) small.Add(m, i, Paired(m, i, next).ops, false);
  EXPECT_FALSE(small.complete());
  EXPECT_GT(i, 2);
  EXPECT_EQ(small.bytes(), 0);
  EXPECT_TRUE(ReadBack(small).empty());
  small.Add(m, i, Paired(m, i, next).ops, false);  // and stays empty
  EXPECT_FALSE(small.complete());

  // Events of other kinds, streams, stacks; ops of another form.
  for (int what = 0; what < 6; ++what) {
    RecordedMemoryEvent odd = m;
    if (what == 0) odd.kind = MemoryEventKind::kSegmentAlloc;
    if (what == 1) odd.stream = 2;
    if (what == 2) odd.stack = {0};
    next = 0;
    MemoryEventCache c(1 << 20);
    c.Add(m, 0, Paired(m, 0, next).ops, false);
    std::vector<MemoryOp> ops = Paired(odd, 1, next).ops;
    if (what == 3) ops.back().buffer = 7;  // not the next id
    if (what == 4) ops.back().stream = 1;
    if (what == 5) ops.clear();
    c.Add(odd, 1, ops, false);
    EXPECT_FALSE(c.complete()) << what;
    EXPECT_TRUE(ReadBack(c).empty()) << what;
  }
}

}  // namespace
}  // namespace replay_internal::event_cache_test
}  // namespace gpusim
