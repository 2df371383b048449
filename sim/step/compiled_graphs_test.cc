// Compiled-graph summaries from the markers python/gpusim_torch writes
// around each run of a torch.compile'd graph's plan.
#include "sim/step/compiled_graphs.h"

#include <string>
#include <utility>

#include "gtest/gtest.h"

namespace gpusim::compiled_graphs_test {
namespace {

// One event: a marker (its label), an alloc (id, bytes), a free (id) or a kernel.
TraceEvent Ev(EventType type, BufferId id = -1, int64_t bytes = 0, std::string name = "k") {
  TraceEvent e;
  e.type = type;
  e.buffer = id;
  e.size = Bytes(bytes);
  e.name = std::move(name);
  return e;
}
TraceEvent Marker(const std::string& name) { return Ev(EventType::kMarker, -1, 0, name); }
TraceEvent Alloc(BufferId id, int64_t bytes) { return Ev(EventType::kAlloc, id, bytes, ""); }
TraceEvent Free(BufferId id) { return Ev(EventType::kFree, id); }
TraceEvent Kernel() { return Ev(EventType::kCompute); }

TEST(CompiledGraphsTest, KeptBlocksHighestLiveAndThePeak) {
  Trace t;
  t.events = {Alloc(0, 100),                                                        // a parameter
              Marker("compiled:0_forward"), Alloc(1, 10), Kernel(), Alloc(2, 20),  // a saved tensor, a temporary
              Kernel(), Free(2), Marker("compiled_end:0_forward"),
              Alloc(3, 5), Free(3),                                                 // eager code between
              Marker("compiled:0_backward"), Alloc(4, 40), Kernel(), Free(1), Free(4),
              Alloc(5, 7), Marker("compiled_end:0_backward")};
  std::vector<CompiledGraphSummary> g = SummarizeCompiledGraphs(t);
  ASSERT_EQ(g.size(), 2u);
  EXPECT_EQ(g[0].name, "0_forward");
  EXPECT_EQ(g[0].runs, 1);
  EXPECT_EQ(g[0].kernels, 2);
  EXPECT_EQ(g[0].blocks, 2);
  EXPECT_EQ(g[0].allocated, Bytes(30));
  EXPECT_EQ(g[0].kept, Bytes(10));  // block 2 was freed inside the run
  EXPECT_EQ(g[0].live_at_start, Bytes(100));
  EXPECT_EQ(g[0].highest_live, Bytes(130));
  EXPECT_FALSE(g[0].holds_peak);
  EXPECT_EQ(g[1].name, "0_backward");
  EXPECT_EQ(g[1].kept, Bytes(7));
  EXPECT_EQ(g[1].highest_live, Bytes(150));  // 100 + 10 + 40
  EXPECT_TRUE(g[1].holds_peak);
  EXPECT_NE(RenderCompiledGraphsText(g).find("0_backward   1 run(s), 1 kernels, 2 blocks allocated: 47 B (0.00 GiB)"),
            std::string::npos)
      << RenderCompiledGraphsText(g);
}

TEST(CompiledGraphsTest, RunsCountedPerGraphAndEmptyWithoutMarkers) {
  Trace t;
  t.events = {Marker("compiled:1_inference"), Alloc(0, 8), Marker("compiled_end:1_inference"),
              Marker("compiled:1_inference"), Alloc(1, 8), Marker("compiled_end:1_inference")};
  std::vector<CompiledGraphSummary> g = SummarizeCompiledGraphs(t);
  ASSERT_EQ(g.size(), 1u);
  EXPECT_EQ(g[0].runs, 2);
  EXPECT_EQ(g[0].kept, Bytes(16));
  Trace eager;
  eager.events = {Alloc(0, 8), Kernel(), Free(0)};
  EXPECT_TRUE(SummarizeCompiledGraphs(eager).empty());
  EXPECT_EQ(RenderCompiledGraphsText({}), "");
}

}  // namespace
}  // namespace gpusim::compiled_graphs_test
