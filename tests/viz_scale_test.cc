// viz/ at scale: the synthetic step of 100,000 buffers (tests/viz_scale_step.h)
// charts with bounded, well-formed output: each SVG under its size bound,
// the memory map merging what it cannot draw, the allocator's curves drawn.
// How long it takes is bench/viz_benchmark.cc's (BM_VizScale*), not a test's.
#include <string>

#include "gtest/gtest.h"
#include "tests/viz_scale_step.h"
#include "viz/graphviz.h"
#include "viz/viz.h"
#include "viz/xml_check.h"

namespace gpusim::viz_scale_test {
namespace {

void CheckScale(const StepReport& r, const char* label) {
  EXPECT_EQ(r.lowered.buffers.size(), static_cast<size_t>(kVizScaleBuffers));
  const std::string map = MemoryMapSvg(r);
  const std::string life = LifetimesSvg(r);
  const std::string line = TimelineSvg(r);
  const std::string active = ActiveMemorySvg(r);  // by role
  VizOptions by_alloc;
  by_alloc.color_by = VizColorBy::kAllocation;  // stacked by allocation, the 200 largest
  const std::string stacked = ActiveMemorySvg(r, by_alloc);
  for (const std::string* s : {&map, &life, &line, &active, &stacked}) EXPECT_TRUE(CheckXmlWellFormed(*s).ok());
  EXPECT_LT(active.size(), 1u << 20);
  EXPECT_LT(stacked.size(), 2u << 20);
  EXPECT_NE(active.find("live bytes by role"), std::string::npos);
  EXPECT_NE(stacked.find("smaller allocations"), std::string::npos);
  EXPECT_LT(map.size(), 2u << 20);
  EXPECT_LT(life.size(), 1u << 20);
  EXPECT_LT(line.size(), 1u << 20);
  EXPECT_NE(map.find("merged"), std::string::npos);
  EXPECT_TRUE(CheckDot(DataflowDot(r)).ok());
  if (!r.sim.allocator_curve.empty()) {
    EXPECT_NE(line.find("reserved (pytorch_caching)"), std::string::npos);
  }
  const std::string dir = ::testing::TempDir() + "/viz_scale_" + label;
  EXPECT_TRUE(WriteCharts(r, dir).ok());
}

TEST(VizScale, HundredThousandBuffersEager) {
  auto r = VizScaleStep(false);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_GT(r->sim.allocator_curve.size(), size_t{kVizScaleBuffers});
  CheckScale(*r, "eager");
}

TEST(VizScale, HundredThousandBuffersXla) {
  auto r = VizScaleStep(true);
  ASSERT_TRUE(r.ok()) << r.status();
  CheckScale(*r, "xla");
}

}  // namespace
}  // namespace gpusim::viz_scale_test
