// viz/ at scale: a synthetic step of 100,000 buffers (100,000 ops in 1,000
// loop iterations of 100 ops, lifetimes from one op to the whole step) must
// chart in seconds with bounded output. Prints the timings.
#include <chrono>
#include <cstdio>

#include "gtest/gtest.h"
#include "sim/alloc/allocator.h"
#include "sim/config/loader.h"
#include "sim/engine/engine.h"
#include "sim/ir/builder.h"
#include "sim/lower/lower.h"
#include "viz/graphviz.h"
#include "viz/viz.h"
#include "viz/xml_check.h"

namespace gpusim {
namespace {

constexpr int kBuffers = 100000;

StepReport BigStep(bool xla) {
  ProgramBuilder b("synthetic_100k");
  std::vector<TensorId> t;
  t.reserve(kBuffers);
  const Role roles[] = {Role::kActivation, Role::kTemporary, Role::kResidual, Role::kGradient};
  for (int i = 0; i < kBuffers; ++i) {
    b.set_layer(i / 100);
    b.set_phase(i < kBuffers / 2 ? Phase::kForward : Phase::kBackward);
    // Sizes from 4 KiB to ~64 MiB; every op reads its predecessor and one
    // value up to 2,000 ops back, so lifetimes vary widely.
    const int64_t elems = int64_t{1024} << ((i * 2654435761u) % 15);
    std::vector<TensorId> in;
    if (i > 0) in.push_back(t[static_cast<size_t>(i - 1)]);
    if (i > 2000) in.push_back(t[static_cast<size_t>(i - 1 - (i * 7919) % 2000)]);
    const TensorId out = b.AddTensor("v" + std::to_string(i), {elems}, DType::kF32, roles[i % 4]);
    b.AddOp("op" + std::to_string(i), OpKind::kElementwise, in, {out}, 1e6);
    t.push_back(out);
  }
  StepReport r;
  r.program = b.Finish();
  r.spec.framework = xla ? "jax" : "pytorch";
  auto device = LoadDeviceSpec("h100-sxm-80gb");
  EXPECT_TRUE(device.ok()) << device.status();
  r.spec.device = *device;
  auto lowered = LowerEager(r.program);
  EXPECT_TRUE(lowered.ok()) << lowered.status();
  r.lowered = std::move(*lowered);
  // Eager: through the caching allocator, so the timeline also draws its
  // allocated / reserved curves (one sample per memory event).
  std::unique_ptr<Allocator> alloc;
  if (!xla) {
    auto a = MakeAllocator({"pytorch_caching", {}}, r.spec.device.usable());
    EXPECT_TRUE(a.ok()) << a.status();
    alloc = std::move(*a);
  }
  auto sim = Simulate(r.lowered.trace, r.spec.device, alloc.get());
  EXPECT_TRUE(sim.ok()) << sim.status();
  r.sim = std::move(*sim);
  r.capacity = r.spec.device.usable();
  r.peak = r.sim.peak_live;
  if (xla) {
    // Offsets need only be plausible here: a round-robin of 64 slots.
    r.temp_offsets.assign(r.lowered.buffers.size(), Bytes(-1));
    const int64_t slot = int64_t{64} << 20;
    for (const BufferInfo& buf : r.lowered.buffers) {
      r.temp_offsets[static_cast<size_t>(buf.id)] = Bytes((buf.id % 64) * slot * 4);
    }
    r.temp = Bytes(64 * slot * 4);
    r.peak = r.temp;
    r.temp_peak_event = r.sim.peak_event;
  }
  EXPECT_EQ(r.lowered.buffers.size(), static_cast<size_t>(kBuffers));
  return r;
}

double Seconds(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - since).count();
}

void CheckScale(const StepReport& r, const char* label) {
  auto t = std::chrono::steady_clock::now();
  const std::string map = MemoryMapSvg(r);
  const double t_map = Seconds(t);
  t = std::chrono::steady_clock::now();
  const std::string life = LifetimesSvg(r);
  const double t_life = Seconds(t);
  t = std::chrono::steady_clock::now();
  const std::string line = TimelineSvg(r);
  const double t_line = Seconds(t);
  t = std::chrono::steady_clock::now();
  const std::string trace = PerfettoJson(r);
  const double t_trace = Seconds(t);
  t = std::chrono::steady_clock::now();
  const std::string dir = ::testing::TempDir() + "/viz_scale_" + label;
  ASSERT_TRUE(WriteCharts(r, dir).ok());
  const double t_all = Seconds(t);
  std::printf("[%s] %d buffers: memory map %.3f s (%zu KB), lifetimes %.3f s (%zu KB), timeline %.3f s (%zu KB), "
              "perfetto %.3f s (%zu MB), WriteCharts with PNGs %.2f s\n",
              label, kBuffers, t_map, map.size() >> 10, t_life, life.size() >> 10, t_line, line.size() >> 10,
              t_trace, trace.size() >> 20, t_all);
  for (const std::string* s : {&map, &life, &line}) EXPECT_TRUE(CheckXmlWellFormed(*s).ok());
  EXPECT_LT(map.size(), 2u << 20);
  EXPECT_LT(life.size(), 1u << 20);
  EXPECT_LT(line.size(), 1u << 20);
  EXPECT_NE(map.find("merged"), std::string::npos);
  EXPECT_LT(t_map + t_life + t_line, 5.0);
  EXPECT_LT(t_all, 30.0);
  EXPECT_TRUE(CheckDot(DataflowDot(r)).ok());
  if (!r.sim.allocator_curve.empty()) {
    EXPECT_NE(line.find("reserved (pytorch_caching)"), std::string::npos);
  }
}

TEST(VizScale, HundredThousandBuffersEager) {
  const StepReport r = BigStep(false);
  EXPECT_GT(r.sim.allocator_curve.size(), size_t{kBuffers});
  CheckScale(r, "eager");
}
TEST(VizScale, HundredThousandBuffersXla) { CheckScale(BigStep(true), "xla"); }

}  // namespace
}  // namespace gpusim
