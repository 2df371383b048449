#include "sim/device/timing.h"

#include "gtest/gtest.h"
#include "sim/device/collective_model.h"
#include "sim/device/impl/roofline.h"
#include "sim/device/impl/tiled.h"
#include "sim/engine/engine.h"

namespace gpusim {
namespace {

// Round numbers so durations can be computed by hand.
DeviceSpec HandDevice() {
  DeviceSpec d;
  d.name = "hand";
  d.sms = 132;
  d.hbm_bandwidth = 1e13;          // 10,000 B/ns
  d.peak_bf16 = d.peak_fp16 = 1e15;
  d.peak_fp32 = 1e13;
  d.nvlink_bandwidth = 1e11;       // 100 B/ns
  d.network_bandwidth = 1e10;      // 10 B/ns
  d.pcie_bandwidth = 1e10;
  d.link_latency = SimTime(1000);
  d.launch_overhead = SimTime(3000);
  d.matmul_efficiency = 0.8;
  d.attention_efficiency = 0.5;
  d.memory_efficiency = 0.5;
  d.collective_efficiency = 0.5;
  return d;
}

TraceEvent Matmul(int64_t m, int64_t n, int64_t k, StreamId s = 0) {
  TraceEvent e;
  e.type = EventType::kCompute;
  e.kind = OpKind::kMatmul;
  e.stream = s;
  e.m = m;
  e.n = n;
  e.k = k;
  e.flops = 2.0 * m * n * k;
  e.bytes_read = Bytes(2 * (m * k + k * n));
  e.bytes_written = Bytes(2 * m * n);
  return e;
}

TraceEvent Collective(OpKind kind, int64_t full_bytes, int64_t group, StreamId s = 1) {
  TraceEvent e;
  e.type = EventType::kCollective;
  e.kind = kind;
  e.stream = s;
  e.group = group;
  e.bytes_read = Bytes(kind == OpKind::kAllGather ? full_bytes / group : full_bytes);
  e.bytes_written = Bytes(kind == OpKind::kAllGather ? full_bytes : full_bytes / group);
  return e;
}

TEST(TimingTest, SingleMatmulWithWaveQuantisation) {
  // 4096³ bf16: 1.374e11 flops at 1e15·0.8 = 171,798.69 ns ideal (the
  // 100.7 MB of operands take 20,133 ns: compute-bound). Best tile
  // (256×128: 16·32 = 512 tiles, 4 waves of 132; or 128×128, 8 waves — same
  // 0.9697 wave fill) × K 4096/4224: utilisation 512/528 · 4096/4224.
  const DeviceSpec d = HandDevice();
  const TraceEvent e = Matmul(4096, 4096, 4096);
  const double util = 512.0 / 528.0 * 4096.0 / 4224.0;
  const double ns = 2.0 * 4096 * 4096 * 4096 / (1e15 * 0.8) / util * 1e9;
  EXPECT_NEAR(static_cast<double>(EventDuration(e, d).ns()), ns + 3000, 1.0);
  // The flat roofline ignores the shape.
  RooflineKernelModel flat;
  EXPECT_NEAR(static_cast<double>(EventDuration(e, d, flat).ns()),
              2.0 * 4096 * 4096 * 4096 / (1e15 * 0.8) * 1e9 + 3000, 1.0);
}

TEST(TimingTest, ShapelessMatmulAndMemoryBoundOpsUseTheRoofline) {
  const DeviceSpec d = HandDevice();
  TraceEvent e = Matmul(4096, 4096, 4096);
  e.m = 0;  // unknown shape
  EXPECT_EQ(EventDuration(e, d), RooflineKernelModel().Duration(e, d));
  TraceEvent copy;
  copy.kind = OpKind::kTranspose;
  copy.bytes_read = copy.bytes_written = Bytes(1'000'000);
  // 2e6 B at 10,000 B/ns · 0.5 = 400 ns, + 3000 launch.
  EXPECT_EQ(EventDuration(copy, d).ns(), 3400);
  TraceEvent attn;
  attn.kind = OpKind::kAttention;
  attn.flops = 1e9;  // 1e9 / (1e15 · 0.5) = 2000 ns
  attn.bytes_read = Bytes(1000);
  EXPECT_EQ(EventDuration(attn, d).ns(), 5000);
}

TEST(TimingTest, RingAllGatherIntraNodeByHand) {
  // 4 ranks, S = 8 MB: 3 steps · 1 us + 3/4 · 8e6 B / (1e11 · 0.5) = 3 us + 120 us.
  const DeviceSpec d = HandDevice();
  EXPECT_EQ(EventDuration(Collective(OpKind::kAllGather, 8'000'000, 4), d).ns(), 123'000);
  // Reduce-scatter of the same buffer: the same time; all-reduce: twice.
  EXPECT_EQ(EventDuration(Collective(OpKind::kReduceScatter, 8'000'000, 4), d).ns(), 123'000);
  EXPECT_EQ(EventDuration(Collective(OpKind::kAllReduce, 8'000'000, 4), d).ns(), 246'000);
  EXPECT_DOUBLE_EQ(BusBandwidthFactor(OpKind::kAllReduce, 4), 1.5);
  EXPECT_EQ(EventDuration(Collective(OpKind::kAllGather, 8'000'000, 1), d).ns(), 0);
}

TEST(TimingTest, RingAcrossNodesUsesTheNetwork) {
  // 16 ranks, 8 per node: 15 steps, 1 of them inter-node (9.6 us), the rest
  // 1 us; bandwidth: the network, 15/16 · 8e6 / (1e10 · 0.5) = 1500 us.
  const DeviceSpec d = HandDevice();
  EXPECT_EQ(EventDuration(Collective(OpKind::kAllGather, 8'000'000, 16), d).ns(),
            14'000 + 9'600 + 1'500'000);
  CollectiveOptions big_node;
  big_node.gpus_per_node = 16;
  EXPECT_EQ(CollectiveTime(OpKind::kAllGather, 8e6, 16, d, big_node).ns(), 15'000 + 150'000);
}

TEST(TimingTest, TheNodesAGroupSpansComeFromTheOp) {
  // 4 ranks one to a node (a data-parallel group under TP 8): all 3 steps
  // inter-node, the network's bandwidth: 3 · 9.6 us + 3/4 · 8e6 / (1e10 · 0.5).
  const DeviceSpec d = HandDevice();
  TraceEvent e = Collective(OpKind::kAllGather, 8'000'000, 4);
  e.group_nodes = 4;
  EXPECT_EQ(EventDuration(e, d).ns(), 3 * 9'600 + 1'200'000);
  // 4 ranks over 2 nodes: 1 inter-node step of 3.
  e.group_nodes = 2;
  EXPECT_EQ(EventDuration(e, d).ns(), 2 * 1'000 + 9'600 + 1'200'000);
  // One node: as without the field.
  e.group_nodes = 1;
  EXPECT_EQ(EventDuration(e, d).ns(), 123'000);
}

TEST(TimingTest, TwoStreamsOverlap) {
  // Compute (stream 0) and a gather (stream 1) start together; the step is
  // the longer one and only the gather's excess is exposed.
  const DeviceSpec d = HandDevice();
  Trace t;
  t.events.push_back(Matmul(4096, 4096, 4096, 0));
  t.events.push_back(Collective(OpKind::kAllGather, 8'000'000, 4, 1));  // 123 us
  auto r = Simulate(t, d, nullptr);
  ASSERT_TRUE(r.ok());
  const SimTime mm = EventDuration(t.events[0], d);
  ASSERT_GT(mm.ns(), 123'000);
  EXPECT_EQ(r->step_time, mm);
  EXPECT_EQ(r->exposed_communication.ns(), 0);
  // A 20x larger gather: exposed = gather − matmul.
  t.events[1] = Collective(OpKind::kAllGather, 160'000'000, 4, 1);  // 3 + 2400 us
  r = Simulate(t, d, nullptr);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->step_time.ns(), 2'403'000);
  EXPECT_EQ(r->exposed_communication.ns(), 2'403'000 - mm.ns());
}

TEST(TimingTest, RecordedDurationWins) {
  TraceEvent e = Matmul(128, 128, 128);
  e.recorded_duration = SimTime(42);
  EXPECT_EQ(EventDuration(e, HandDevice()).ns(), 42);
}

TEST(KernelModelRegistryTest, ListsAndMakes) {
  std::vector<KernelModelInfo> models = ListKernelModels();
  ASSERT_EQ(models.size(), 2u);
  EXPECT_EQ(models[0].name, "roofline");
  EXPECT_EQ(models[1].name, "tiled");
  auto m = MakeKernelModel("tiled");
  ASSERT_TRUE(m.ok());
  EXPECT_EQ((*m)->name(), "tiled");
  EXPECT_EQ(DefaultKernelModel().name(), "tiled");
  auto bad = MakeKernelModel("tiles");
  EXPECT_EQ(bad.status().message(), "kernel_model: unknown kernel model 'tiles' (did you mean 'tiled'?); available: roofline, tiled");
}

// The device YAML chooses the kernel model; the config layer's list of
// names is the registry's.
TEST(KernelModelRegistry, DeviceYamlChoosesTheModel) {
  std::vector<std::string> config_names(std::begin(kKernelModelNames), std::end(kKernelModelNames));
  std::vector<std::string> registry_names;
  for (const KernelModelInfo& m : ListKernelModels()) registry_names.push_back(m.name);
  EXPECT_EQ(config_names, registry_names);
  DeviceSpec d;
  d.peak_bf16 = 989e12;
  d.peak_fp32 = 67e12;
  d.hbm_bandwidth = 3.35e12;
  d.sms = 132;
  d.matmul_efficiency = 0.8;
  d.memory_efficiency = 0.85;
  TraceEvent e;
  e.type = EventType::kCompute;
  e.kind = OpKind::kMatmul;
  e.dtype = DType::kBF16;
  e.m = 4096 + 1;  // one row past a tile boundary: the tiled model pays a wave for it
  e.n = 4096;
  e.k = 4096;
  e.flops = 2.0 * static_cast<double>(e.m) * e.n * e.k;
  e.bytes_read = Bytes(2 * (e.m * e.k + e.k * e.n));
  e.bytes_written = Bytes(2 * e.m * e.n);
  EXPECT_EQ(KernelModelOf(d).name(), "tiled");
  const SimTime tiled = EventDuration(e, d);
  d.kernel_model = "roofline";
  EXPECT_EQ(KernelModelOf(d).name(), "roofline");
  EXPECT_EQ(EventDuration(e, d), RooflineKernelModel().Duration(e, d));
  EXPECT_NE(EventDuration(e, d), tiled);
}

}  // namespace
}  // namespace gpusim
