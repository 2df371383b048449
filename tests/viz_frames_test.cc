// Recorded stack frames in the charts' data: the memory map's tooltips and
// report.html's table of buffers at the peak list the frames of each
// buffer's alloc (native trace 1.1 `frame` lines, Trace::frames).
#include <sstream>
#include <string>

#include "gtest/gtest.h"
#include "sim/config/loader.h"
#include "sim/step/step.h"
#include "sim/trace/trace_io.h"
#include "viz/step_view.h"
#include "viz/viz.h"

namespace gpusim::viz_frames_test {
namespace {

constexpr char kTrace[] =
    "gpusim-trace 1.1\n"
    "name frames\n"
    "stream 0 compute\n"
    "frame 0 forward model.py 12\n"
    "frame 1 <module> train.py 3\n"
    "alloc 0 4194304 role=activation name=act stack=0,1\n"
    "alloc 1 2097152 role=temporary name=tmp\n"
    "free 1\n"
    "free 0\n"
    "end 4\n";

TEST(VizFrames, MemoryMapTooltipsAndPeakTableShowTheAllocFrames) {
  std::istringstream in(kTrace);
  auto trace = ReadTrace(in, "frames.trace");
  ASSERT_TRUE(trace.ok()) << trace.status();
  RunSpec spec;
  auto device = LoadDeviceSpec("h100-sxm-80gb");
  ASSERT_TRUE(device.ok()) << device.status();
  spec.device = *device;
  spec.allocator.impl = "pytorch_caching";
  auto r = ReportFromTrace(*trace, spec);
  ASSERT_TRUE(r.ok()) << r.status();

  BufferId act = -1, tmp = -1;
  for (const BufferInfo& b : r->lowered.buffers) (b.name == "act" ? act : tmp) = b.id;
  ASSERT_GE(act, 0);
  EXPECT_EQ(viz_internal::AllocFrames(*r, act, 6),
            (std::vector<std::string>{"forward (model.py:12)", "<module> (train.py:3)"}));
  EXPECT_EQ(viz_internal::AllocFrames(*r, act, 1),
            (std::vector<std::string>{"forward (model.py:12)", "… 1 more frames"}));
  EXPECT_TRUE(viz_internal::AllocFrames(*r, tmp, 6).empty());

  const std::string svg = MemoryMapSvg(*r);
  EXPECT_NE(svg.find("\n  at forward (model.py:12)\n  at &lt;module&gt; (train.py:3)</title>"), std::string::npos)
      << svg;
  auto html = HtmlReport(*r);
  ASSERT_TRUE(html.ok()) << html.status();
  EXPECT_NE(html->find("forward (model.py:12)<br>&lt;module&gt; (train.py:3)"), std::string::npos);
}

}  // namespace
}  // namespace gpusim::viz_frames_test
