#include "sim/engine/engine.h"

#include <memory>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "sim/ir/builder.h"
#include "sim/lower/lower.h"

namespace gpusim::engine_test {
namespace {

// A device with round numbers so times can be computed by hand.
DeviceSpec RoundDevice() {
  DeviceSpec d;
  d.name = "round";
  d.cuda_total = Bytes(1000);
  d.hbm_bandwidth = 1e9;         // 1 byte per ns
  d.peak_bf16 = d.peak_fp16 = 1e15;  // 1e6 flop per ns
  d.peak_fp32 = 1e12;
  d.nvlink_bandwidth = 1e9;
  d.link_latency = SimTime(0);
  d.launch_overhead = SimTime(10);
  d.matmul_efficiency = d.attention_efficiency = d.memory_efficiency = d.collective_efficiency = 1.0;
  return d;
}

TraceEvent Alloc(BufferId id, int64_t bytes) {
  TraceEvent e;
  e.type = EventType::kAlloc;
  e.buffer = id;
  e.size = Bytes(bytes);
  return e;
}
TraceEvent Free(BufferId id) {
  TraceEvent e;
  e.type = EventType::kFree;
  e.buffer = id;
  return e;
}
TraceEvent Compute(double flops, int64_t read, int64_t write, StreamId s = 0, OpKind k = OpKind::kMatmul) {
  TraceEvent e;
  e.type = IsCollective(k) ? EventType::kCollective : EventType::kCompute;
  e.kind = k;
  e.stream = s;
  e.flops = flops;
  e.bytes_read = Bytes(read);
  e.bytes_written = Bytes(write);
  return e;
}

TEST(EngineTest, PeakOfHandComputedTrace) {
  Trace t;
  t.events = {Alloc(0, 100), Alloc(1, 300), Free(0), Alloc(2, 250), Free(1), Alloc(3, 50), Free(2), Free(3)};
  std::unique_ptr<Allocator> ideal = *MakeAllocator({"ideal", {}}, Bytes(1000));
  Allocator& a = *ideal;
  auto r = Simulate(t, RoundDevice(), &a);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->peak_live.value(), 550);  // 300 + 250 after event 3
  EXPECT_EQ(r->peak_event, 3);
  EXPECT_FALSE(r->oom.happened);
  EXPECT_EQ(r->allocator.peak_allocated.value(), 550);
}

// A stream id outside [0, kMaxStreamId] is an input error, never an index
// (issue 17: -1 crashed, -2 spun, 2^31-1 was a bad_alloc).
TEST(EngineTest, RefusesStreamIdsOutsideTheRange) {
  for (StreamId s : {-1, -2, kMaxStreamId + 1, INT32_MAX, INT32_MIN}) {
    Trace t;
    t.events = {Compute(1, 1, 1), Compute(1, 1, 1, s)};
    std::unique_ptr<Allocator> ideal = *MakeAllocator({"ideal", {}}, Bytes(1000));
    Allocator& a = *ideal;
    auto r = Simulate(t, RoundDevice(), &a);
    ASSERT_FALSE(r.ok()) << s;
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(r.status().message(),
              absl::StrCat("event 1 (compute): stream ", s, " is not in range 0 to 32767"));
  }
  Trace ok;
  ok.events = {Compute(1, 1, 1, kMaxStreamId)};
  EXPECT_TRUE(Simulate(ok, RoundDevice(), nullptr).ok());
}

TEST(EngineTest, AllocatorCurveSamplesEveryChange) {
  Trace t;
  // One sample per memory event; the compute event adds none.
  t.events = {Alloc(0, 100), Alloc(1, 300), Compute(1, 1, 1), Free(0), Alloc(2, 100), Free(1), Free(2)};
  std::unique_ptr<Allocator> ideal = *MakeAllocator({"ideal", {}}, Bytes(1000));
  Allocator& a = *ideal;
  auto r = Simulate(t, RoundDevice(), &a);
  ASSERT_TRUE(r.ok());
  std::vector<std::pair<int64_t, int64_t>> got;
  for (const AllocatorSample& s : r->allocator_curve) {
    EXPECT_EQ(s.allocated, s.reserved);  // ideal: nothing cached
    got.push_back({s.event, s.allocated.value()});
  }
  const std::vector<std::pair<int64_t, int64_t>> want = {{0, 100}, {1, 400}, {3, 300}, {4, 400}, {5, 100}, {6, 0}};
  EXPECT_EQ(got, want);
  auto none = Simulate(t, RoundDevice(), nullptr);
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->allocator_curve.empty());
}

TEST(EngineTest, AllocatorCurveKeepsCachedSegmentsReserved) {
  // PyTorch c10/cuda/CUDACachingAllocator.cpp: a 1 MiB request is served
  // from the small pool, whose segments are kSmallBuffer = 2 MiB; a freed
  // block stays cached, so reserved stays at 2 MiB.
  Trace t;
  t.events = {Alloc(0, 1 << 20), Free(0)};
  auto a = MakeAllocator({"pytorch_caching", {}}, Bytes(int64_t{1} << 30));
  ASSERT_TRUE(a.ok()) << a.status();
  auto r = Simulate(t, RoundDevice(), a->get());
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->allocator_curve.size(), 2u);
  EXPECT_EQ(r->allocator_curve[0].allocated.value(), 1 << 20);
  EXPECT_EQ(r->allocator_curve[0].reserved.value(), 2 << 20);
  EXPECT_EQ(r->allocator_curve[1].allocated.value(), 0);
  EXPECT_EQ(r->allocator_curve[1].reserved.value(), 2 << 20);
}

TEST(EngineTest, OutOfMemoryIsAResult) {
  Trace t;
  t.events = {Alloc(0, 600), Alloc(1, 500), Free(0), Free(1)};
  std::unique_ptr<Allocator> ideal = *MakeAllocator({"ideal", {}}, Bytes(1000));
  Allocator& a = *ideal;
  auto r = Simulate(t, RoundDevice(), &a);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->oom.happened);
  EXPECT_EQ(r->oom.event, 1);
  EXPECT_EQ(r->oom.requested.value(), 500);
  EXPECT_EQ(r->oom.live.value(), 600);
  EXPECT_EQ(r->peak_live.value(), 1100);  // the demand is still reported
}

TEST(EngineTest, RooflineTimes) {
  Trace t;
  // Compute-bound: 2e9 flops at 1e6/ns = 2000 ns (+10 launch).
  t.events.push_back(Compute(2e9, 100, 100));
  // Memory-bound: 5000 bytes at 1 B/ns = 5000 ns (+10).
  t.events.push_back(Compute(1e3, 4000, 1000));
  auto r = Simulate(t, RoundDevice(), nullptr);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->end[0].ns(), 2010);
  EXPECT_EQ(r->end[1].ns(), 2010 + 5010);
  EXPECT_EQ(r->step_time.ns(), 7020);
}

TEST(EngineTest, RingAllGatherTime) {
  Trace t;
  // all-gather over 4 devices of a 4000-byte result: 3/4 · 4000 B at 1 B/ns.
  TraceEvent ag = Compute(0, 1000, 4000, 1, OpKind::kAllGather);
  ag.group = 4;
  t.events.push_back(ag);
  auto r = Simulate(t, RoundDevice(), nullptr);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->step_time.ns(), 3000);
}

TEST(EngineTest, TwoStreamsOverlapAndDependenciesSerialise) {
  Trace t;
  t.events.push_back(Compute(0, 990, 0, 0));  // compute: 1000 ns
  TraceEvent ag = Compute(0, 0, 1000, 1, OpKind::kAllGather);  // 500 ns on stream 1
  ag.group = 2;
  t.events.push_back(ag);
  TraceEvent use = Compute(0, 490, 0, 0);  // 500 ns, after the gather
  use.after = {1};
  t.events.push_back(use);
  auto r = Simulate(t, RoundDevice(), nullptr);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->start[1].ns(), 0);       // overlaps the first compute
  EXPECT_EQ(r->start[2].ns(), 1000);    // stream order dominates
  EXPECT_EQ(r->step_time.ns(), 1500);
  EXPECT_EQ(r->exposed_communication.ns(), 0);
  EXPECT_EQ(r->critical_events, 2);      // compute, then compute: the gather is off the path
  EXPECT_EQ(r->critical_communication.ns(), 0);

  // Make the gather longer than the compute: 1000 ns exposed... of 2000.
  t.events[1].bytes_written = Bytes(4000);
  r = Simulate(t, RoundDevice(), nullptr);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->start[2].ns(), 2000);
  EXPECT_EQ(r->exposed_communication.ns(), 1000);
  EXPECT_EQ(r->step_time.ns(), 2500);
  EXPECT_EQ(r->critical_events, 2);      // the gather, then the compute that waits for it
  EXPECT_EQ(r->critical_communication.ns(), 2000);
}

TEST(LowerTest, EagerLoweringFreesAfterLastUseAndAccountsAliases) {
  ProgramBuilder b("p");
  TensorId w = b.AddArgument("w", {10}, DType::kF32, Role::kParameter, /*donated=*/true);
  TensorId x = b.AddArgument("x", {5}, DType::kF32, Role::kInputBatch, false);
  TensorId h = b.AddTensor("h", {20}, DType::kF32, Role::kActivation);
  TensorId y = b.AddTensor("y", {1}, DType::kF32, Role::kScalar);
  TensorId w2 = b.AddTensor("w.new", {10}, DType::kF32, Role::kParameter);
  b.tensor(y).live_out = true;
  b.tensor(w2).live_out = true;
  b.tensor(w2).aliases = w;
  b.AddOp("h", OpKind::kMatmul, {x, w}, {h}, 100);
  b.AddOp("y", OpKind::kReduce, {h}, {y}, 20);
  b.AddOp("update", OpKind::kElementwise, {w, y}, {w2}, 10);
  auto l = LowerEager(b.Finish());
  ASSERT_TRUE(l.ok()) << l.status();
  EXPECT_EQ(l->argument_bytes.value(), 60);
  EXPECT_EQ(l->output_bytes.value(), 44);
  EXPECT_EQ(l->alias_bytes.value(), 40);
  // h (80 B) is freed right after its only reader, "y".
  const BufferInfo& hb = l->buffers[2];
  EXPECT_EQ(hb.name, "h");
  ASSERT_GE(hb.free_event, 0);
  EXPECT_EQ(l->trace.events[static_cast<size_t>(hb.free_event) - 1].name, "y");
  std::unique_ptr<Allocator> ideal = *MakeAllocator({"ideal", {}}, Bytes(1 << 20));
  Allocator& a = *ideal;
  auto r = Simulate(l->trace, RoundDevice(), &a);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->peak_live.value(), 60 + 80 + 4);
}


// Note [Rolled loop built once]: a pipelined loop (a collective on stream 1
// prefetching what the next iteration's compute reads) run as 3 + 1 + 3
// iterations with the middle one repeated gives the times, busy totals,
// FLOPs, critical path and exposed communication of all iterations run.
namespace repeat_test {

// One iteration: the collective for the next one, then this one's compute,
// which waits for this iteration's collective (issued one iteration ahead).
void AddIteration(Trace& t, int64_t& prev_collective) {
  TraceEvent c = Compute(0, 0, 6000, 1, OpKind::kAllGather);  // 3,000 ns: the loop is bound by it
  c.group = 2;
  t.events.push_back(c);
  const int64_t this_collective = static_cast<int64_t>(t.events.size()) - 1;
  TraceEvent m = Compute(2e9, 100, 100, 0);
  if (prev_collective >= 0) m.after.push_back(prev_collective);
  t.events.push_back(m);
  prev_collective = this_collective;
}

Trace Loop(int64_t iterations, bool built_once) {
  Trace t;
  t.events.push_back(Compute(1e9, 0, 0, 0));  // prologue
  int64_t prev = -1;
  const int64_t built = built_once ? 7 : iterations;
  for (int64_t i = 0; i < built; ++i) {
    const int64_t first = static_cast<int64_t>(t.events.size());
    AddIteration(t, prev);
    if (built_once && i == 3) t.repeats.push_back({first, first + 1, iterations - 6});
  }
  t.events.push_back(Compute(1e9, 0, 0, 0));  // epilogue
  return t;
}

}  // namespace repeat_test

TEST(EngineTest, RepeatedIterationIsChargedPerIteration) {
  for (int64_t n : {7, 8, 50}) {
    SCOPED_TRACE(n);
    auto all = Simulate(repeat_test::Loop(n, false), RoundDevice(), nullptr);
    auto once = Simulate(repeat_test::Loop(n, true), RoundDevice(), nullptr);
    ASSERT_TRUE(all.ok()) << all.status();
    ASSERT_TRUE(once.ok()) << once.status();
    EXPECT_EQ(once->step_time, all->step_time);
    EXPECT_EQ(once->compute_busy, all->compute_busy);
    EXPECT_EQ(once->collective_busy, all->collective_busy);
    EXPECT_EQ(once->flops, all->flops);
    EXPECT_EQ(once->critical_events, all->critical_events);
    EXPECT_EQ(once->critical_compute, all->critical_compute);
    EXPECT_EQ(once->critical_communication, all->critical_communication);
    EXPECT_EQ(once->exposed_communication, all->exposed_communication);
    // The epilogue starts where it does when every iteration runs.
    EXPECT_EQ(once->start.back(), all->start.back());
    EXPECT_GT(all->exposed_communication.ns(), 0);
  }
}

TEST(EngineTest, RepeatOutsideTheTraceIsRefused) {
  Trace t = repeat_test::Loop(8, true);
  t.repeats[0].last = static_cast<int64_t>(t.events.size());
  EXPECT_FALSE(Simulate(t, RoundDevice(), nullptr).ok());
}

}  // namespace
}  // namespace gpusim::engine_test
