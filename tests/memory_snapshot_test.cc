// viz/memory_snapshot.cc and the Perfetto writer on a small native trace
// with call stacks (FORMAT 1.1): the snapshot pickle carries the recorded
// frames for the live block and the trace entries, the Perfetto async slice
// carries them as args; a step on an allocator that places nothing is
// refused by name.
#include <string>

#include "gtest/gtest.h"
#include "sim/config/loader.h"
#include "sim/step/step.h"
#include "viz/viz.h"

namespace gpusim::memory_snapshot_test {
namespace {

Trace Stacked() {
  Trace t;
  t.name = "stacked";
  t.streams.push_back({0, "compute"});
  t.frames.push_back({"make_weights", "model.py", 12});
  t.frames.push_back({"main", "train.py", 3});
  TraceEvent a;
  a.type = EventType::kAlloc;
  a.buffer = 0;
  a.size = Bytes(3 << 20);
  a.name = "w";
  a.stack = {0, 1};
  TraceEvent b = a;
  b.buffer = 1;
  b.name = "tmp";
  b.stack = {};
  TraceEvent f;
  f.type = EventType::kFree;
  f.buffer = 1;
  t.events = {a, b, f};
  return t;
}

StepReport Report(const std::string& allocator) {
  RunSpec s;
  auto dev = LoadDeviceSpec("h100-sxm-80gb", "");
  EXPECT_TRUE(dev.ok());
  s.device = *dev;
  s.allocator.impl = allocator;
  auto r = ReportFromTrace(Stacked(), s);
  EXPECT_TRUE(r.ok()) << r.status();
  return *std::move(r);
}

TEST(MemorySnapshot, RecordedFramesTravel) {
  const StepReport r = Report("pytorch_caching");
  auto pickle = MemorySnapshotPickle(r);
  ASSERT_TRUE(pickle.ok()) << pickle.status();
  EXPECT_EQ(pickle->substr(0, 2), "\x80\x02");
  EXPECT_NE(pickle->find("make_weights"), std::string::npos);
  EXPECT_NE(pickle->find("model.py"), std::string::npos);
  EXPECT_NE(pickle->find("free_completed"), std::string::npos);
  EXPECT_NE(pickle->find("segment_alloc"), std::string::npos);
  EXPECT_NE(pickle->find("active_allocated"), std::string::npos);
  EXPECT_NE(pickle->find("inactive"), std::string::npos);  // tmp's freed block
  const std::string json = PerfettoJson(r);
  EXPECT_NE(json.find("\"frames\":[\"make_weights (model.py:12)\",\"main (train.py:3)\"]"), std::string::npos);
  // Same report, same bytes.
  EXPECT_EQ(*pickle, *MemorySnapshotPickle(r));
}

TEST(MemorySnapshot, RefusesAnAllocatorThatPlacesNothing) {
  auto pickle = MemorySnapshotPickle(Report("ideal"));
  ASSERT_FALSE(pickle.ok());
  EXPECT_NE(pickle.status().message().find("'ideal', which places no blocks"), std::string::npos)
      << pickle.status();
}

}  // namespace
}  // namespace gpusim::memory_snapshot_test
