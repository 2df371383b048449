// Tests of native traces as recorded traces (sim/import/native.h): what
// `gpusim replay` reads when python/gpusim_torch recorded the step.
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>

#include "gtest/gtest.h"

#include "sim/import/import.h"
#include "sim/import/native.h"
#include "sim/config/loader.h"
#include "sim/replay/native_step.h"
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

TEST(ImportNativeTest, DetectsAndConvertsAllocsAndFrees) {
  const std::string path = WriteTemp(kStep);
  auto format = DetectRecordedFormat(path);
  ASSERT_TRUE(format.ok()) << format.status();
  EXPECT_EQ(*format, "native");
  auto r = ImportRecordedTrace(path);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->memory_events.size(), 5u);
  EXPECT_EQ(r->memory_events[0].kind, MemoryEventKind::kAlloc);
  EXPECT_EQ(r->memory_events[2].kind, MemoryEventKind::kFree);
  EXPECT_EQ(r->memory_events[2].size, Bytes(2097152));  // a free carries its alloc's size
  EXPECT_EQ(r->memory_events[3].size, Bytes(3145728));  // id 1 reused after its free
  EXPECT_EQ(r->metadata.format, "native");
  std::remove(path.c_str());
}

TEST(ImportNativeTest, ReplayPeaks) {
  const std::string path = WriteTemp(kStep);
  ReplayOptions o;
  o.capacity = Bytes(int64_t{80} << 30);
  auto r = ReplayFile(path, o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->no_fragmentation_peak, Bytes(4194304 + 3145728));
  EXPECT_EQ(r->stats.peak_allocated, Bytes(4194304 + 3145728));
  std::remove(path.c_str());
}

TEST(ImportNativeTest, StepTimeAndLargestBuffersAtThePeak) {
  const std::string path = WriteTemp(kStep);
  auto trace = ReadTraceFile(path);
  ASSERT_TRUE(trace.ok()) << trace.status();
  auto device = LoadDeviceSpec("h100-sxm-80gb", "");
  ASSERT_TRUE(device.ok()) << device.status();
  auto step = SimulateNativeStep(*trace, *device, nullptr, 1);
  ASSERT_TRUE(step.ok()) << step.status();
  EXPECT_EQ(step->timed_events, 1);
  EXPECT_GT(step->step_time, SimTime(0));
  EXPECT_EQ(step->peak_live, Bytes(4194304 + 3145728));
  ASSERT_EQ(step->largest.size(), 1u);  // top 1 of the two live at the peak
  EXPECT_EQ(step->largest[0].name, "w");
  EXPECT_EQ(step->largest[0].role, Role::kParameter);
  auto step2 = SimulateNativeStep(*trace, *device, nullptr, 10);
  ASSERT_TRUE(step2.ok());
  ASSERT_EQ(step2->largest.size(), 2u);
  EXPECT_EQ(step2->largest[1].name, "reuse");
  const std::string text = RenderNativeStepText(*step2);
  EXPECT_NE(text.find("largest buffers live at the peak"), std::string::npos) << text;
  std::remove(path.c_str());
}

TEST(ImportNativeTest, InvalidTraceNamesFileAndEvent) {
  const std::string path = WriteTemp("gpusim-trace 1\nfree 3\n");
  auto r = ImportRecordedTrace(path);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find(path), std::string::npos) << r.status();
  EXPECT_NE(r.status().message().find("event 0"), std::string::npos) << r.status();
  std::remove(path.c_str());
}

}  // namespace
}  // namespace gpusim
