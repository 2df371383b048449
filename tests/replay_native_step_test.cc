// Tests of a native trace's step report (sim/replay/native_step.h): what
// `gpusim replay` prints for a step python/gpusim_torch recorded.
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>

#include "gtest/gtest.h"

#include "sim/config/loader.h"
#include "sim/step/native_step.h"
#include "sim/replay/replay.h"
#include "sim/trace/trace_io.h"

namespace gpusim::replay_native_step_test {
namespace {

std::string WriteTemp(const std::string& text) {
  char name[] = "/tmp/gpusim_native_XXXXXX";
  const int fd = mkstemp(name);
  EXPECT_GE(fd, 0);
  close(fd);
  std::ofstream(name) << text;
  return name;
}

constexpr char kStep[] =
    "# a comment first\n"
    "gpusim-trace 1.1\n"
    "name step\n"
    "stream 0 compute\n"
    "frame 0 forward model.py 12\n"
    "alloc 0 4194304 role=parameter name=w\n"
    "marker step\n"
    "alloc 1 2097152 role=activation name=0:mm stack=0\n"
    "compute 0:mm kind=matmul flops=8 uses=0,1 stack=0\n"
    "free 1\n"
    "alloc 1 3145728 role=temporary name=reuse\n"
    "free 1\n"
    "end 7\n";

TEST(NativeStepTest, ReplayPeaks) {
  const std::string path = WriteTemp(kStep);
  ReplayOptions o;
  o.capacity = Bytes(int64_t{80} << 30);
  auto r = ReplayFile(path, o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->format, "gpusim-trace");
  EXPECT_EQ(r->no_fragmentation_peak, Bytes(4194304 + 3145728));
  EXPECT_EQ(r->stats.peak_allocated, Bytes(4194304 + 3145728));
  std::remove(path.c_str());
}

// Note [Warm-up history] (sim/replay/replay.cc): a 100 MiB activation the
// warm-up step made and freed leaves its segment cached; the window's 60 MiB
// is carved from it, so the window reserves 20 MiB (the parameter's
// kLargeBuffer segment, CUDACachingAllocator.cpp get_allocation_size) +
// 100 MiB, where a cold start maps a 60 MiB segment. The window's peaks
// begin at the history's end (reset_peak_memory_stats): its 100 MiB
// allocated peak is not the window's.
TEST(NativeStepTest, WarmupHistoryStartsTheWindowFromItsSegments) {
  constexpr int64_t kMiB = 1 << 20;
  const std::string window =
      "marker start_state\n"
      "alloc 10 4194304 role=parameter name=w\n"
      "marker step\n"
      "alloc 20 62914560 role=activation name=act\n"
      "free 20\n"
      "end 5\n";
  const std::string warm = WriteTemp("gpusim-trace 1.5\nwarmup alloc 10 4194304\nwarmup alloc 11 104857600\n"
                                     "warmup free 11\n" + window);
  const std::string cold = WriteTemp("gpusim-trace 1.1\n" + window);
  ReplayOptions o;
  o.capacity = Bytes(int64_t{80} << 30);
  auto w = ReplayFile(warm, o);
  ASSERT_TRUE(w.ok()) << w.status();
  auto c = ReplayFile(cold, o);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(w->allocator, "pytorch_caching");
  EXPECT_EQ(w->stats.peak_reserved, Bytes((20 + 100) * kMiB));
  EXPECT_EQ(c->stats.peak_reserved, Bytes((20 + 60) * kMiB));
  EXPECT_EQ(w->stats.peak_allocated, Bytes((4 + 60) * kMiB));
  EXPECT_EQ(c->stats.peak_allocated, Bytes((4 + 60) * kMiB));
  EXPECT_NE(w->start_state.find("warm-up history (2 allocations, 1 frees)"), std::string::npos) << w->start_state;
  // A history that leaves live what the start state does not allocate.
  const std::string bad = WriteTemp("gpusim-trace 1.5\nwarmup alloc 10 4194304\nwarmup alloc 12 512\n" + window);
  auto b = ReplayFile(bad, o);
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.status().message().find("warm-up: buffer 12 is live at the end of the warm-up"), std::string::npos)
      << b.status();
  for (const std::string& p : {warm, cold, bad}) std::remove(p.c_str());
}

TEST(NativeStepTest, StepTimeAndLargestBuffersAtThePeak) {
  const std::string path = WriteTemp(kStep);
  auto trace = ReadTraceFile(path);
  ASSERT_TRUE(trace.ok()) << trace.status();
  auto device = LoadDeviceSpec("h100-sxm-80gb", "");
  ASSERT_TRUE(device.ok()) << device.status();
  auto step = SimulateNativeStep(*trace, path, *device, nullptr, 1);
  ASSERT_TRUE(step.ok()) << step.status();
  EXPECT_EQ(step->timed_events, 1);
  EXPECT_GT(step->step_time, SimTime(0));
  EXPECT_EQ(step->peak_live, Bytes(4194304 + 3145728));
  ASSERT_EQ(step->largest.size(), 1u);  // top 1 of the two live at the peak
  EXPECT_EQ(step->largest[0].name, "w");
  EXPECT_EQ(step->largest[0].role, Role::kParameter);
  auto step2 = SimulateNativeStep(*trace, path, *device, nullptr, 10);
  ASSERT_TRUE(step2.ok());
  ASSERT_EQ(step2->largest.size(), 2u);
  EXPECT_EQ(step2->largest[1].name, "reuse");
  EXPECT_EQ(step2->largest[1].role, Role::kTemporary);
  const std::string text = RenderNativeStepText(*step2);
  EXPECT_NE(text.find("largest buffers live at the peak"), std::string::npos) << text;
  std::remove(path.c_str());
}

TEST(NativeStepTest, InvalidTraceNamesTheEvent) {
  const std::string path = WriteTemp("gpusim-trace 1\nfree 3\n");
  ReplayOptions o;
  o.capacity = Bytes(int64_t{80} << 30);
  auto r = ReplayFile(path, o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("event 0"), std::string::npos) << r.status();
  std::remove(path.c_str());
}

}  // namespace
}  // namespace gpusim::replay_native_step_test
