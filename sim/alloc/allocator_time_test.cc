// Allocator time in the step (engine.h, Note [Allocator time]): hand-computed
// cases on a device with round numbers.
#include <memory>

#include "gtest/gtest.h"
#include "sim/alloc/impl/bfc.h"
#include "sim/alloc/impl/ideal.h"
#include "sim/alloc/impl/pytorch_caching.h"
#include "sim/engine/engine.h"

namespace gpusim::allocator_time_test {
namespace {

constexpr int64_t kMiB = 1 << 20;

// Compute: 1e6 flop per ns, 10 ns launch. Allocator calls: cudaMalloc
// 1000 ns, cudaFree 500 ns, 100 ns per page mapped, 50 per page unmapped.
DeviceSpec RoundDevice() {
  DeviceSpec d;
  d.name = "round";
  d.cuda_total = Bytes(int64_t{1} << 40);
  d.hbm_bandwidth = 1e9;
  d.peak_bf16 = d.peak_fp16 = 1e15;
  d.peak_fp32 = 1e12;
  d.launch_overhead = SimTime(10);
  d.matmul_efficiency = d.attention_efficiency = d.memory_efficiency = d.collective_efficiency = 1.0;
  d.malloc_cost = SimTime(1000);
  d.free_cost = SimTime(500);
  d.map_page_cost = SimTime(100);
  d.unmap_page_cost = SimTime(50);
  return d;
}

TraceEvent Alloc(BufferId id, int64_t bytes, StreamId s = 0) {
  TraceEvent e;
  e.type = EventType::kAlloc;
  e.buffer = id;
  e.size = Bytes(bytes);
  e.stream = s;
  return e;
}
TraceEvent Free(BufferId id, StreamId s = 0) {
  TraceEvent e;
  e.type = EventType::kFree;
  e.buffer = id;
  e.stream = s;
  return e;
}
// 2e9 flops: 2000 ns + 10 ns launch.
TraceEvent Matmul(StreamId s = 0) {
  TraceEvent e;
  e.type = EventType::kCompute;
  e.kind = OpKind::kMatmul;
  e.stream = s;
  e.flops = 2e9;
  return e;
}

TEST(AllocatorTimeTest, NewSegmentDelaysTheOpThatAllocated) {
  // 4 MiB: a 20 MiB large-pool segment (kLargeBuffer); the second 4 MiB is
  // carved from its free remainder, so only the first alloc calls cudaMalloc.
  Trace t;
  t.events = {Alloc(0, 4 * kMiB), Matmul(), Alloc(1, 4 * kMiB), Matmul(), Free(0), Free(1)};
  PyTorchCachingAllocator a(Bytes(1024 * kMiB));
  auto r = Simulate(t, RoundDevice(), &a);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->segment_allocs, 1);
  EXPECT_EQ(r->allocator.device_mallocs, 1);
  EXPECT_EQ(r->allocator_time.ns(), 1000);
  EXPECT_EQ(r->allocator_sync_wait.ns(), 0);
  EXPECT_EQ(r->start[1].ns(), 1000);   // the first matmul waits for cudaMalloc
  EXPECT_EQ(r->end[2].ns(), r->start[2].ns());  // no charge for the reuse
  EXPECT_EQ(r->start[3].ns(), 3010);
  EXPECT_EQ(r->step_time.ns(), 5020);
  EXPECT_EQ(r->critical_events, 3);     // cudaMalloc, matmul, matmul
  EXPECT_EQ(r->critical_allocator.ns(), 1000);
  EXPECT_EQ(r->critical_compute.ns(), 4020);
}

TEST(AllocatorTimeTest, RetryFreesCachedSegmentsAfterTheDeviceDrains) {
  // Capacity 40 MiB: the cached 20 MiB segment must be cudaFree'd before a
  // 30 MiB cudaMalloc fits. The free waits for stream 1's matmul (ends at
  // 2010) although stream 0 is ready at 1000.
  Trace t;
  t.events = {Alloc(0, 4 * kMiB), Free(0), Matmul(1), Alloc(1, 30 * kMiB), Matmul(), Free(1)};
  PyTorchCachingAllocator a(Bytes(40 * kMiB));
  auto r = Simulate(t, RoundDevice(), &a);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->oom.happened);
  EXPECT_EQ(r->segment_allocs, 2);
  EXPECT_EQ(r->segment_frees, 1);
  EXPECT_EQ(r->allocator_time.ns(), 1000 + 500 + 1000);
  EXPECT_EQ(r->allocator_sync_wait.ns(), 2010 - 1000);
  EXPECT_EQ(r->start[3].ns(), 2010);
  EXPECT_EQ(r->end[3].ns(), 2010 + 500 + 1000);
  EXPECT_EQ(r->start[4].ns(), 3510);
  EXPECT_EQ(r->step_time.ns(), 5520);
  // stream 1's matmul -> the drained free + cudaMalloc -> stream 0's matmul.
  EXPECT_EQ(r->critical_events, 3);
  EXPECT_EQ(r->critical_allocator.ns(), 1500);
  EXPECT_EQ(r->critical_compute.ns(), 4020);
}

TEST(AllocatorTimeTest, ExpandableSegmentsPayPerPageMapped) {
  // Large-pool pages are 20 MiB. 50 MiB maps 3 pages; 8 MiB fits in the
  // 10 MiB left mapped; 30 MiB uses the last 2 MiB and maps 2 more pages.
  PyTorchCachingOptions o;
  o.expandable_segments = true;
  PyTorchCachingAllocator a(Bytes(1024 * kMiB), o);
  Trace t;
  t.events = {Alloc(0, 50 * kMiB), Alloc(1, 8 * kMiB), Alloc(2, 30 * kMiB), Matmul(),
              Free(0), Free(1), Free(2)};
  auto r = Simulate(t, RoundDevice(), &a);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->segment_allocs, 0);  // reserving the virtual range costs nothing modelled
  EXPECT_EQ(r->pages_mapped, 5);
  EXPECT_EQ(r->allocator_time.ns(), 500);
  EXPECT_EQ(r->end[0].ns(), 300);
  EXPECT_EQ(r->end[1].ns(), 300);
  EXPECT_EQ(r->end[2].ns(), 500);
  EXPECT_EQ(r->step_time.ns(), 2510);
}

TEST(AllocatorTimeTest, BfcRegionGrowthIsACudaMalloc) {
  Trace t;
  t.events = {Alloc(0, 4 * kMiB), Matmul(), Free(0)};
  BfcAllocator a(Bytes(1024 * kMiB));
  auto r = Simulate(t, RoundDevice(), &a);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->segment_allocs, r->allocator.device_mallocs);
  EXPECT_GE(r->segment_allocs, 1);
  EXPECT_EQ(r->allocator_time.ns(), 1000 * r->segment_allocs);
  EXPECT_EQ(r->step_time.ns(), 1000 * r->segment_allocs + 2010);
}

TEST(AllocatorTimeTest, IdealAndNoAllocatorChargeNothing) {
  Trace t;
  t.events = {Alloc(0, 4 * kMiB), Matmul(), Free(0)};
  IdealAllocator a(Bytes(1024 * kMiB));
  auto r = Simulate(t, RoundDevice(), &a);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->allocator_time.ns(), 0);
  EXPECT_EQ(r->step_time.ns(), 2010);
  auto none = Simulate(t, RoundDevice(), nullptr);
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none->step_time.ns(), 2010);
}

}  // namespace
}  // namespace gpusim::allocator_time_test
