// Note [Host timeline]: kernels wait for the host that issues them.
#include "gtest/gtest.h"
#include "sim/engine/engine.h"

namespace gpusim::host_timeline_test {
namespace {

DeviceSpec Device() {
  DeviceSpec d;
  d.hbm_bandwidth = 1e12;
  d.memory_efficiency = 1;
  d.peak_bf16 = d.peak_fp16 = d.peak_tf32 = d.peak_fp32 = 1e15;
  d.launch_overhead = SimTime(0);
  return d;
}

TraceEvent Kernel(int64_t bytes) {
  TraceEvent e;
  e.type = EventType::kCompute;
  e.kind = OpKind::kElementwise;
  e.stream = 0;
  e.bytes_read = Bytes(bytes);
  return e;
}

TEST(HostTimelineTest, TheSlowerSideBoundsTheStep) {
  // Three 1 us kernels (1e6 B at 1e12 B/s).
  Trace t;
  for (int i = 0; i < 3; ++i) t.events.push_back(Kernel(1'000'000));
  auto gpu = Simulate(t, Device(), nullptr);
  ASSERT_TRUE(gpu.ok());
  EXPECT_EQ(gpu->step_time.ns(), 3000);
  EXPECT_EQ(gpu->host_busy.ns(), 0);
  // Issued at 5 us each: the GPU waits; the step ends 1 us after the last issue.
  DeviceSpec d = Device();
  d.host_op_cost = SimTime(5000);
  for (TraceEvent& e : t.events) e.host_ops = 1;
  auto host = Simulate(t, d, nullptr);
  ASSERT_TRUE(host.ok());
  EXPECT_EQ(host->host_busy.ns(), 15000);
  EXPECT_EQ(host->step_time.ns(), 16000);
  EXPECT_EQ(host->host_wait.ns(), 5000 + 4000 + 4000);
  // A host faster than the GPU runs ahead: GPU-bound again.
  d.host_op_cost = SimTime(100);
  auto ahead = Simulate(t, d, nullptr);
  ASSERT_TRUE(ahead.ok());
  EXPECT_EQ(ahead->step_time.ns(), 3100);
  // Module calls are priced by host.module; a fraction of a launch rounds to the ns.
  d.host_op_cost = SimTime(0);
  d.host_module_cost = SimTime(2000);
  t.events[0].host_modules = 3;
  t.events[1].host_ops = 0.5;
  auto modules = Simulate(t, d, nullptr);
  ASSERT_TRUE(modules.ok());
  EXPECT_EQ(modules->host_busy.ns(), 6000);
  EXPECT_EQ(modules->step_time.ns(), 9000);
}

// Note [Host syncs]: after a sync the host issues nothing until the device
// has drained, so host and GPU time add instead of overlapping.
TEST(HostTimelineTest, ASyncStopsTheHostRunningAhead) {
  // Three 10 us kernels issued at 1 us each: GPU-bound, 30 us.
  Trace t;
  for (int i = 0; i < 3; ++i) t.events.push_back(Kernel(10'000'000));
  for (TraceEvent& e : t.events) e.host_ops = 1;
  DeviceSpec d = Device();
  d.host_op_cost = SimTime(1000);
  auto ahead = Simulate(t, d, nullptr);
  ASSERT_TRUE(ahead.ok());
  EXPECT_EQ(ahead->step_time.ns(), 31000);
  EXPECT_EQ(ahead->host_syncs, 0);
  // A sync after the first: the host waits until 11 us, issues the second
  // at 12 us (it ends at 22), the third at 13 us (it ends at 32).
  t.events[0].host_sync = true;
  auto synced = Simulate(t, d, nullptr);
  ASSERT_TRUE(synced.ok());
  EXPECT_EQ(synced->host_syncs, 1);
  EXPECT_EQ(synced->host_sync_wait.ns(), 11000 - 1000);
  EXPECT_EQ(synced->host_busy.ns(), 3000);  // issue time only
  EXPECT_EQ(synced->step_time.ns(), 32000);
  // A sync after every kernel: issue and run alternate.
  for (TraceEvent& e : t.events) e.host_sync = true;
  auto each = Simulate(t, d, nullptr);
  ASSERT_TRUE(each.ok());
  EXPECT_EQ(each->step_time.ns(), 3 * 11000);
  EXPECT_EQ(each->host_syncs, 3);
}

// A rolled loop built once (Trace::repeats): the iterations it stands for
// are issued by the host too, one after another.
TEST(HostTimelineTest, RepeatedIterationsAreIssuedEachTime) {
  Trace t;
  for (int i = 0; i < 3; ++i) t.events.push_back(Kernel(1'000'000));
  for (TraceEvent& e : t.events) e.host_ops = 1;
  t.repeats = {{1, 1, 4}};  // event 1 stands for 4 iterations
  DeviceSpec d = Device();
  d.host_op_cost = SimTime(5000);
  auto r = Simulate(t, d, nullptr);
  ASSERT_TRUE(r.ok()) << r.status();
  // Issued at 5, 10, 15, 20, 25 and 30 us, each kernel 1 us after its issue.
  EXPECT_EQ(r->host_busy.ns(), 30000);
  EXPECT_EQ(r->step_time.ns(), 31000);
  EXPECT_EQ(r->host_wait.ns(), 5000 + 4 * 4000 + 4000);
}

// Note [Recorded host costs]: an event with recorded host work is priced by
// host.dispatch, host.node and host.python_module, and not by host.op.
TEST(HostTimelineTest, RecordedHostWorkIsPricedByItsCounts) {
  Trace t;
  for (int i = 0; i < 2; ++i) t.events.push_back(Kernel(1'000'000));  // 1 us each
  DeviceSpec d = Device();
  d.host_op_cost = SimTime(100'000);
  d.host_dispatch_cost = SimTime(10'000);
  d.host_node_cost = SimTime(20'000);
  d.host_python_module_cost = SimTime(50'000);
  t.events[0].host_recorded = true;
  t.events[0].host_dispatches = 2;
  t.events[0].host_module_calls = 1;  // 2 x 10 + 50 = 70 us
  t.events[1].host_recorded = true;
  t.events[1].host_nodes = 1;         // 20 us
  auto r = Simulate(t, d, nullptr);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->host_busy.ns(), 90'000);
  EXPECT_EQ(r->step_time.ns(), 91'000);
  // Recorded as nothing to do (the second op of a node): free for the host.
  t.events[1].host_nodes = 0;
  auto free_op = Simulate(t, d, nullptr);
  ASSERT_TRUE(free_op.ok());
  EXPECT_EQ(free_op->host_busy.ns(), 70'000);
  EXPECT_EQ(free_op->step_time.ns(), 72'000);
}

}  // namespace
}  // namespace gpusim::host_timeline_test
