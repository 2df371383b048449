#include "sim/device/timing.h"

#include "gtest/gtest.h"
#include "sim/device/collective_model.h"
#include "sim/device/impl/roofline.h"
#include "sim/device/impl/tiled.h"
#include "sim/engine/engine.h"

namespace gpusim::timing_test {
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

// Note [fp8 peak]: an fp8 matmul runs at flops.fp8; on a device without
// fp8 tensor cores (flops.fp8 absent, A100) the engine refuses it by name.
TEST(TimingTest, Fp8MatmulAtFp8PeakAndRefusedWithoutOne) {
  DeviceSpec d = HandDevice();
  d.peak_fp8 = 2e15;
  TraceEvent e = Matmul(4096, 4096, 4096);
  e.dtype = DType::kF8;
  e.bytes_read = Bytes(4096 * 4096 * 2);  // fp8 operands: 1 byte an element
  RooflineKernelModel flat;
  EXPECT_NEAR(static_cast<double>(EventDuration(e, d, flat).ns()), 2.0 * 4096 * 4096 * 4096 / (2e15 * 0.8) * 1e9 + 3000,
              1.0);
  EXPECT_EQ(UnrunnableReason(e, d), "");
  d.peak_fp8 = 0;
  d.name = "a100";
  d.cc_major = 8;
  EXPECT_EQ(UnrunnableReason(e, d),
            "an fp8 matmul, and device 'a100' (compute capability 8.0) has no fp8 tensor cores: flops.fp8 is absent "
            "(Note [fp8 peak] in sim/config/spec_parse.cc)");
  Trace t;
  t.events.push_back(e);
  auto r = Simulate(t, d, nullptr);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("cannot run: an fp8 matmul"), std::string::npos) << r.status();
  e.dtype = DType::kBF16;  // the same matmul in bf16 runs
  EXPECT_EQ(UnrunnableReason(e, d), "");
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


// Issue 29's ATen-kernel rules (Notes [Unaligned GEMMs], [ATen copy kernels],
// [ATen reduction kernels] in sim/device/impl/tiled.h), by hand on
// HandDevice (10,000 B/ns HBM at efficiency 0.5, 3 us launch).
TEST(AtenKernelRules, EventOpNameIsTheOpOrTheNamesLastComponent) {
  TraceEvent e;
  e.name = "transformer.h.0.mlp.act:mul_ (remat)";
  EXPECT_EQ(EventOpName(e), "mul_");
  e.name = "clone";
  EXPECT_EQ(EventOpName(e), "clone");
  e.op = "_scaled_dot_product_cudnn_attention";
  EXPECT_EQ(EventOpName(e), "_scaled_dot_product_cudnn_attention");
}

TEST(AtenKernelRules, AnOddDimensionRunsAtTheAlign1Rate) {
  const DeviceSpec d = HandDevice();
  TraceEvent e = Matmul(8192, 50257, 768);
  e.dtype = DType::kBF16;
  EXPECT_TRUE(UnalignedHalfGemm(e));
  const double want_s = e.flops / (d.peak_bf16 * kUnalignedGemmShare);
  EXPECT_NEAR(TiledKernelModel().Duration(e, d).seconds(), want_s + 3e-6, 1e-9);
  TraceEvent aligned = Matmul(8192, 50304, 768);
  aligned.dtype = DType::kBF16;
  EXPECT_FALSE(UnalignedHalfGemm(aligned));
  EXPECT_LT(TiledKernelModel().Duration(aligned, d).seconds() * 3, want_s);
  // 30522 = 2 x odd: the align2 kernels, twice the align1 rate.
  TraceEvent align2 = Matmul(16384, 30522, 768);
  align2.dtype = DType::kBF16;
  EXPECT_EQ(UnalignedGemmShare(align2), kAlign2GemmShare);
  EXPECT_NEAR(TiledKernelModel().Duration(align2, d).seconds(),
              align2.flops / (d.peak_bf16 * kAlign2GemmShare) + 3e-6, 1e-9);
  e.name = "layer1.0.conv1:convolution";  // cuDNN pads channels
  EXPECT_FALSE(UnalignedHalfGemm(e));
  e.name.clear();
  e.dtype = DType::kF32;  // no tensor-core alignment rule
  EXPECT_FALSE(UnalignedHalfGemm(e));
}

TraceEvent Streaming(OpKind kind, const char* name, int64_t read, int64_t write, DType dtype = DType::kBF16) {
  TraceEvent e;
  e.type = EventType::kCompute;
  e.kind = kind;
  e.name = name;
  e.dtype = dtype;
  e.bytes_read = Bytes(read);
  e.bytes_written = Bytes(write);
  return e;
}

TEST(AtenKernelRules, CopiesByLoop) {
  DeviceSpec d = HandDevice();
  d.memory_efficiency = 1.0;  // roofline: 10,000 B/ns
  const TiledKernelModel m;
  const int64_t mib64 = int64_t{1} << 26;
  // A widening cast (bf16 -> fp32) takes the unrolled loop.
  const TraceEvent widen = Streaming(OpKind::kConvert, "layer:_to_copy", mib64, 2 * mib64);
  EXPECT_NEAR(m.Duration(widen, d).seconds(), 3.0 * mib64 / (1e13 * kCastCopyShare) + 3e-6, 1e-9);
  // A narrowing one (fp32 -> bf16) the vectorised loop: the roofline.
  const TraceEvent narrow = Streaming(OpKind::kConvert, "_to_copy", 2 * mib64, mib64);
  EXPECT_NEAR(m.Duration(narrow, d).seconds(), 3.0 * mib64 / 1e13 + 3e-6, 1e-9);
  // A strided copy (kind transpose) the legacy loop.
  const TraceEvent strided = Streaming(OpKind::kTranspose, "attn:clone", mib64, mib64);
  EXPECT_NEAR(m.Duration(strided, d).seconds(), 2.0 * mib64 / (1e13 * kStridedCopyShare) + 3e-6, 1e-9);
  // Not an ATen copy (an XLA convert): the roofline.
  const TraceEvent xla = Streaming(OpKind::kConvert, "convert.12", mib64, 2 * mib64);
  EXPECT_NEAR(m.Duration(xla, d).seconds(), 3.0 * mib64 / 1e13 + 3e-6, 1e-9);
}

TEST(AtenKernelRules, ElementwiseOpsByLoop) {
  DeviceSpec d = HandDevice();
  d.memory_efficiency = 1.0;  // roofline: 10,000 B/ns
  d.hbm_bandwidth = kMeasuredHbmPeak;  // the rates as measured
  const TiledKernelModel m;
  const int64_t mib64 = int64_t{1} << 26;  // bf16 output: 2^25 elements
  // Note [ATen elementwise loops]: no facts, the vectorised loop (roofline).
  TraceEvent add = Streaming(OpKind::kElementwise, "blocks.0:add", 2 * mib64, mib64);
  const double roofline = 3.0 * mib64 / (kMeasuredHbmPeak * d.memory_efficiency);
  EXPECT_NEAR(m.Duration(add, d).seconds(), roofline + 3e-6, 1e-9);
  add.op = "add";
  for (int loop = 1; loop <= 3; ++loop) {
    add.dims = {loop};
    EXPECT_NEAR(m.Duration(add, d).seconds(),
                std::max(roofline, static_cast<double>(mib64 / 2) / kElementwiseLoopRates[loop]) + 3e-6, 1e-9)
        << loop;
  }
  // At half the bandwidth, half the element rate.
  DeviceSpec slow = d;
  slow.hbm_bandwidth = kMeasuredHbmPeak / 2;
  add.dims = {3};
  EXPECT_NEAR(AtenElementwiseSeconds(add, slow), 2 * static_cast<double>(mib64 / 2) / kElementwiseLoopRates[3], 1e-12);
  add.dims = {0};
  EXPECT_NEAR(m.Duration(add, d).seconds(), roofline + 3e-6, 1e-9);
  // Not elementwise: the fact means nothing to the elementwise rule.
  TraceEvent copy = add;
  copy.kind = OpKind::kCopy;
  copy.dims = {2};
  EXPECT_EQ(AtenElementwiseSeconds(copy, d), 0);
}

TEST(AtenKernelRules, ReductionsAtTheirMeasuredRates) {
  DeviceSpec d = HandDevice();
  d.hbm_bandwidth = kMeasuredHbmPeak;  // the rates as measured
  d.memory_efficiency = 1.0;
  const TiledKernelModel m;
  const int64_t b = int64_t{1} << 28;
  const TraceEvent ln = Streaming(OpKind::kReduce, "ln_f:native_layer_norm_backward", b, b);
  EXPECT_NEAR(m.Duration(ln, d).seconds(), 2.0 * b / 1.28e12 + 3e-6, 1e-9);
  // sum: a rate in elements, so fp32 streams twice the bytes of bf16.
  const TraceEvent sum16 = Streaming(OpKind::kReduce, "sum", b, 0, DType::kBF16);
  const TraceEvent sum32 = Streaming(OpKind::kReduce, "sum", b, 0, DType::kF32);
  EXPECT_NEAR(m.Duration(sum16, d).seconds(), b / (0.64e12 * 2) + 3e-6, 1e-9);
  EXPECT_NEAR(m.Duration(sum32, d).seconds(), b / (0.64e12 * 4) + 3e-6, 1e-9);
  // An elementwise op, or a reduce that is not one of the ATen ops: the roofline.
  const TraceEvent other = Streaming(OpKind::kReduce, "reduce.7", b, 0);
  EXPECT_NEAR(m.Duration(other, d).seconds(), b / kMeasuredHbmPeak + 3e-6, 1e-9);
}

TEST(AtenKernelRules, SimulateSumsTimeByKindAndOp) {
  Trace t;
  t.events.push_back(Streaming(OpKind::kReduce, "a:sum", 1 << 20, 0));
  t.events.push_back(Streaming(OpKind::kReduce, "b:sum", 1 << 20, 0));
  t.events.push_back(Streaming(OpKind::kElementwise, "mul_", 1 << 20, 1 << 20));
  const DeviceSpec d = HandDevice();
  absl::StatusOr<SimResult> r = Simulate(t, d, nullptr);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->time_by_op.size(), 2u);
  const SimResult::OpTime& sum = r->time_by_op.at({OpKind::kReduce, "sum"});
  EXPECT_EQ(sum.events, 2);
  EXPECT_EQ(sum.busy, EventDuration(t.events[0], d) + EventDuration(t.events[1], d));
  EXPECT_EQ(sum.bytes, 2.0 * (1 << 20));
  SimTime all;
  for (const auto& [key, v] : r->time_by_op) all += v.busy;
  EXPECT_EQ(all, r->compute_busy);
}

}  // namespace
}  // namespace gpusim::timing_test
