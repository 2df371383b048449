#include "sim/lower/eager/device_memory_nccl.h"

#include <gtest/gtest.h>

#include "sim/lower/eager/test_device.h"
#include "sim/lower/eager/device_memory.h"

namespace gpusim::device_memory_nccl_test {
namespace {

// A DDP step of rank 1 of 4 as python/gpusim_torch writes it: one bucket's
// all-reduce on the collective stream, after the gradient's compute, and the
// copy back waiting for it.
Trace DdpStep() {
  Trace t;
  t.meta = {{"framework", "pytorch"}, {"torch_version", "2.15.0"}, {"world_size", "4"},
            {"rank", "1"},           {"comm.0", "0,1,2,3"},       {"comm.1", "1"}};
  auto ev = [](EventType type, const std::string& name) {
    TraceEvent e;
    e.type = type;
    e.name = name;
    return e;
  };
  TraceEvent a = ev(EventType::kAlloc, "bucket");
  a.buffer = 0;
  a.size = Bytes(1 << 20);
  TraceEvent g = ev(EventType::kCompute, "grad");
  g.op = "mm";  // a cuBLAS op: the workspace alloc is inserted before it
  g.uses = {0};
  TraceEvent c = ev(EventType::kCollective, "allreduce_");
  c.kind = OpKind::kAllReduce;
  c.group = 4;
  c.stream = 1;
  c.bytes_read = c.bytes_written = Bytes(1 << 20);
  c.after = {1};
  TraceEvent back = ev(EventType::kCompute, "copy_");
  back.after = {2};
  t.streams = {{0, "compute"}, {1, "collective"}};
  t.events = {a, g, c, back};
  return t;
}

TEST(NcclMemory, RingBuffersPerCommunicatorAndChannel) {
  const Trace t = DdpStep();
  absl::StatusOr<NcclMemory> m = NcclDeviceMemory(t, Device("h100-sxm-80gb"));
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_TRUE(m->distributed);
  EXPECT_EQ(m->world_size, 4);
  EXPECT_EQ(m->rank, 1);
  ASSERT_EQ(m->communicators.size(), 2u);
  // 4 KiB + LL 524,288 + LL128 4,915,200 + Simple 4,194,304 rounded up to
  // 2 MiB = 10 MiB received, 2 MiB sent, per channel; 32 channels.
  EXPECT_EQ(m->communicators[0].ranks, 4);
  EXPECT_EQ(m->communicators[0].per_channel, Bytes(12 << 20));
  EXPECT_EQ(m->communicators[0].bytes, Bytes(int64_t{32} * (12 << 20)));
  EXPECT_EQ(m->communicators[1].bytes, Bytes(0));  // one rank: no connections
  EXPECT_EQ(m->total, Bytes(int64_t{384} << 20));
  EXPECT_NE(m->assumption.find("ASSUMED 32"), std::string::npos) << m->assumption;
  // P2P read (A100): Simple on the sender's side, 6 + 6 MiB.
  m = NcclDeviceMemory(t, Device("a100-sxm-80gb"));
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->communicators[0].per_channel, Bytes(12 << 20));
}

TEST(NcclMemory, RecordedEnvironmentChangesTheSizes) {
  Trace t = DdpStep();
  t.meta.push_back({"NCCL_BUFFSIZE", "16777216"});  // Simple 16 MiB
  t.meta.push_back({"NCCL_MAX_NCHANNELS", "8"});
  absl::StatusOr<NcclMemory> m = NcclDeviceMemory(t, Device("h100-sxm-80gb"));
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->communicators[0].channels, 8);
  // 4 KiB + 524,288 + 4,915,200 + 16 MiB -> 22 MiB; send 2 MiB.
  EXPECT_EQ(m->communicators[0].per_channel, Bytes(24 << 20));
  EXPECT_NE(m->assumption.find("bounded by the recorded NCCL_MIN/MAX_NCHANNELS"), std::string::npos);
}

TEST(NcclMemory, MalformedMetaIsRefusedByKey) {
  const DeviceSpec h100 = Device("h100-sxm-80gb");
  auto with = [](const std::string& key, const std::string& value) {
    Trace t = DdpStep();
    for (auto& [k, v] : t.meta) {
      if (k == key) v = value;
    }
    return t;
  };
  EXPECT_NE(NcclDeviceMemory(with("world_size", "x"), h100).status().message().find("meta world_size 'x'"),
            std::string::npos);
  EXPECT_NE(NcclDeviceMemory(with("rank", "4"), h100).status().message().find("meta rank '4'"), std::string::npos);
  EXPECT_NE(NcclDeviceMemory(with("comm.0", "0,1,1,3"), h100).status().message().find("distinct global ranks"),
            std::string::npos);
  EXPECT_NE(NcclDeviceMemory(with("comm.0", "0,2,3"), h100).status().message().find("rank 1 is not in the group"),
            std::string::npos);
  Trace odd = DdpStep();
  odd.events[2].group = 8;
  EXPECT_NE(NcclDeviceMemory(odd, h100).status().message().find("no meta comm.ID names a process group of that"),
            std::string::npos);
  Trace bare = DdpStep();
  bare.meta.resize(2);  // no world_size
  EXPECT_NE(NcclDeviceMemory(bare, h100).status().message().find("without meta world_size"), std::string::npos);
}

TEST(NcclMemory, DeviceModelReportsNcclAndKeepsAfterOnTimedEvents) {
  EagerDeviceMemory report;
  absl::StatusOr<Trace> out = AddEagerDeviceMemory(DdpStep(), Device("h100-sxm-80gb"), &report);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(report.nccl.total, Bytes(int64_t{384} << 20));
  ASSERT_FALSE(report.assumptions.empty());
  EXPECT_NE(report.assumptions.back().find("NCCL channels per communicator ASSUMED 32"), std::string::npos);
  // The cuBLAS workspace alloc went in before the mm: every after= index
  // still names the same timed event.
  ASSERT_EQ(out->events.size(), 5u);
  EXPECT_EQ(out->events[1].type, EventType::kAlloc);
  EXPECT_EQ(out->events[3].name, "allreduce_");
  EXPECT_EQ(out->events[3].after, std::vector<int64_t>{2});
  EXPECT_EQ(out->events[4].after, std::vector<int64_t>{3});
}

}  // namespace
}  // namespace gpusim::device_memory_nccl_test
