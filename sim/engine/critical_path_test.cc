// Note [Critical path segments]: small event graphs whose critical path is
// known by hand, one per thing that can gate a start.
#include <vector>

#include "gtest/gtest.h"
#include "sim/engine/engine.h"

namespace gpusim::critical_path_test {
namespace {

// 1 byte per ns of memory traffic, no launch cost: an elementwise kernel of
// N bytes read lasts N ns.
DeviceSpec PathDevice() {
  DeviceSpec d;
  d.hbm_bandwidth = 1e9;
  d.memory_efficiency = 1;
  d.peak_bf16 = d.peak_fp16 = d.peak_tf32 = d.peak_fp32 = 1e15;
  d.nvlink_bandwidth = 1e9;
  d.link_latency = SimTime(0);
  d.collective_efficiency = 1;
  d.launch_overhead = SimTime(0);
  return d;
}

TraceEvent PathKernel(int64_t ns, StreamId stream = 0, std::vector<int64_t> after = {}) {
  TraceEvent e;
  e.type = EventType::kCompute;
  e.kind = OpKind::kElementwise;
  e.stream = stream;
  e.bytes_read = Bytes(ns);
  e.after = std::move(after);
  return e;
}

SimResult PathOf(const Trace& t, const DeviceSpec& d = PathDevice()) {
  auto r = Simulate(t, d, nullptr, nullptr, false, /*critical_path=*/true);
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? *std::move(r) : SimResult{};
}

// The segments tile [0, step_time] in time order: their lengths sum to the
// step time exactly, and none is empty.
void ExpectTiles(const SimResult& r) {
  ASSERT_FALSE(r.critical_path.empty());
  SimTime at(0), sum(0);
  for (const PathSegment& s : r.critical_path) {
    EXPECT_EQ(s.start, at) << "segment of event " << s.event;
    EXPECT_LT(s.start, s.end);
    sum += s.end - s.start;
    at = s.end;
  }
  EXPECT_EQ(at, r.step_time);
  EXPECT_EQ(sum, r.step_time);
}

struct Seg {
  PathSegment::Kind kind;
  int64_t event;
  int64_t start, end;
  PathGate gate;
};

void ExpectPath(const SimResult& r, const std::vector<Seg>& want) {
  ExpectTiles(r);
  ASSERT_EQ(r.critical_path.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    SCOPED_TRACE(i);
    const PathSegment& s = r.critical_path[i];
    EXPECT_EQ(s.kind, want[i].kind);
    EXPECT_EQ(s.event, want[i].event);
    EXPECT_EQ(s.start.ns(), want[i].start);
    EXPECT_EQ(s.end.ns(), want[i].end);
    EXPECT_EQ(PathGateName(s.gate), PathGateName(want[i].gate));
  }
}

// Every event of `t` issued by one host op of 500 ns (Note [Host timeline]).
DeviceSpec IssuedBy500ns(Trace* t) {
  for (TraceEvent& e : t->events) e.host_ops = 1;
  DeviceSpec d = PathDevice();
  d.host_op_cost = SimTime(500);
  return d;
}

constexpr PathSegment::Kind kEv = PathSegment::Kind::kEvent;
constexpr PathSegment::Kind kHost = PathSegment::Kind::kHostIssue;
constexpr PathSegment::Kind kRep = PathSegment::Kind::kRepeatedIterations;

TEST(CriticalPathTest, StreamBound) {
  Trace t;
  t.events = {PathKernel(100), PathKernel(200), PathKernel(300), PathKernel(50, 1)};
  ExpectPath(PathOf(t), {{kEv, 0, 0, 100, PathGate::kStart},
                         {kEv, 1, 100, 300, PathGate::kStreamOrder},
                         {kEv, 2, 300, 600, PathGate::kStreamOrder}});
}

TEST(CriticalPathTest, DependencyBound) {
  // Stream 0 idles after its 100 ns kernel until stream 1's 500 ns one ends.
  Trace t;
  t.events = {PathKernel(100), PathKernel(500, 1), PathKernel(100, 0, {1})};
  ExpectPath(PathOf(t), {{kEv, 1, 0, 500, PathGate::kStart}, {kEv, 2, 500, 600, PathGate::kDependency}});
}

TEST(CriticalPathTest, CollectiveBound) {
  TraceEvent ar;
  ar.type = EventType::kCollective;
  ar.kind = OpKind::kAllReduce;
  ar.stream = 1;
  ar.group = 2;
  ar.bytes_read = ar.bytes_written = Bytes(4000);
  ar.after = {0};
  Trace t;
  t.events = {PathKernel(100), ar, PathKernel(100, 0, {1})};
  const SimResult r = PathOf(t);
  const int64_t ar_end = r.end[1].ns();
  ASSERT_GT(ar_end, 200);  // the all-reduce outlasts the compute beside it
  ExpectPath(r, {{kEv, 0, 0, 100, PathGate::kStart},
                 {kEv, 1, 100, ar_end, PathGate::kDependency},
                 {kEv, 2, ar_end, ar_end + 100, PathGate::kCollectiveWait}});
}

TEST(CriticalPathTest, HostBound) {
  // Three 100 ns kernels, each issued by 500 ns of host work: the GPU waits
  // for the host, so the path is the host issuing all three, then the last.
  Trace t;
  for (int i = 0; i < 3; ++i) t.events.push_back(PathKernel(100));
  const DeviceSpec d = IssuedBy500ns(&t);
  ExpectPath(PathOf(t, d), {{kHost, 0, 0, 500, PathGate::kHostIssue},
                            {kHost, 1, 500, 1000, PathGate::kHostIssue},
                            {kHost, 2, 1000, 1500, PathGate::kHostIssue},
                            {kEv, 2, 1500, 1600, PathGate::kHostIssue}});
}

TEST(CriticalPathTest, HostThenStreamBound) {
  // A long kernel issued late: host [0, 500], the 1000 ns kernel, then the
  // next (issued at 1000 already) waits for its stream only.
  Trace t;
  t.events = {PathKernel(1000), PathKernel(100)};
  const DeviceSpec d = IssuedBy500ns(&t);
  ExpectPath(PathOf(t, d), {{kHost, 0, 0, 500, PathGate::kHostIssue},
                            {kEv, 0, 500, 1500, PathGate::kHostIssue},
                            {kEv, 1, 1500, 1600, PathGate::kStreamOrder}});
}

TEST(CriticalPathTest, ThroughAHostSyncToTheKernelItWaitedFor) {
  // The host issues a 1000 ns kernel (500 ns) and syncs (Note [Host syncs]):
  // it waits for the kernel, then issues the next. The path goes through the
  // kernel the sync waited for, not through the wait as one gap.
  Trace t;
  t.events = {PathKernel(1000), PathKernel(100)};
  t.events[0].host_sync = true;
  const DeviceSpec d = IssuedBy500ns(&t);
  ExpectPath(PathOf(t, d), {{kHost, 0, 0, 500, PathGate::kHostIssue},
                            {kEv, 0, 500, 1500, PathGate::kHostIssue},
                            {kHost, 1, 1500, 2000, PathGate::kHostIssue},
                            {kEv, 1, 2000, 2100, PathGate::kHostIssue}});
}

TEST(CriticalPathTest, ThroughAMarkerADependencyNamed) {
  // Stream 1 waits for a marker on stream 0, which took stream 0's clock.
  TraceEvent m;
  m.type = EventType::kMarker;
  Trace t;
  t.events = {PathKernel(300), m, PathKernel(100, 1, {1})};
  ExpectPath(PathOf(t), {{kEv, 0, 0, 300, PathGate::kStart}, {kEv, 2, 300, 400, PathGate::kDependency}});
}

TEST(CriticalPathTest, RepeatedIterationsFillTheirTime) {
  // Note [Rolled loop built once]: event 1 stands for 4 iterations; issued
  // at 500, 1000 (x4 = until 2500 with the shift), 3000 for event 2.
  Trace t;
  for (int i = 0; i < 3; ++i) t.events.push_back(PathKernel(100));
  for (TraceEvent& e : t.events) e.host_ops = 1;
  t.repeats = {{1, 1, 4}};
  DeviceSpec d = PathDevice();
  d.host_op_cost = SimTime(500);
  const SimResult r = PathOf(t, d);
  EXPECT_EQ(r.step_time.ns(), 3100);
  ExpectPath(r, {{kHost, 0, 0, 500, PathGate::kHostIssue},
                 {kHost, 1, 500, 1000, PathGate::kHostIssue},
                 {kRep, 1, 1000, 2500, PathGate::kRepeatedIterations},
                 {kHost, 2, 2500, 3000, PathGate::kHostIssue},
                 {kEv, 2, 3000, 3100, PathGate::kHostIssue}});
}

TEST(CriticalPathTest, OnlyWhenAskedAndNothingElseChanges) {
  Trace t;
  t.events = {PathKernel(100), PathKernel(500, 1), PathKernel(100, 0, {1})};
  for (TraceEvent& e : t.events) e.host_ops = 1;
  DeviceSpec d = PathDevice();
  d.host_op_cost = SimTime(120);
  auto plain = Simulate(t, d, nullptr);
  ASSERT_TRUE(plain.ok());
  EXPECT_TRUE(plain->critical_path.empty());
  const SimResult a = PathOf(t, d), b = PathOf(t, d);
  ExpectTiles(a);
  EXPECT_EQ(a.step_time, plain->step_time);
  EXPECT_EQ(a.critical_events, plain->critical_events);
  EXPECT_EQ(a.critical_compute, plain->critical_compute);
  EXPECT_EQ(a.start, plain->start);
  ASSERT_EQ(a.critical_path.size(), b.critical_path.size());
  for (size_t i = 0; i < a.critical_path.size(); ++i) {
    EXPECT_EQ(a.critical_path[i].event, b.critical_path[i].event);
    EXPECT_EQ(a.critical_path[i].start, b.critical_path[i].start);
    EXPECT_EQ(a.critical_path[i].end, b.critical_path[i].end);
    EXPECT_EQ(a.critical_path[i].gate, b.critical_path[i].gate);
  }
}

}  // namespace
}  // namespace gpusim::critical_path_test
