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

namespace gpusim {
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
}  // namespace gpusim
