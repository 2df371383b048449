// Note [One memory event log] (sim/engine/engine.h): a step's memory is
// replayed once, by the engine, and the charts, report.html, the Perfetto
// timeline and the memory snapshot read the engine's log. Pinned with the
// in-process counter of Note [Counting memory replays]
// (sim/alloc/allocator.h), as tests/input_opens_test.cc pins the opens.
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "sim/alloc/allocator.h"
#include "sim/config/loader.h"
#include "sim/step/step.h"
#include "sim/trace/trace_io.h"
#include "viz/viz.h"

namespace gpusim::memory_replays_test {
namespace {

// Every file `gpusim viz --out DIR --snapshot FILE` writes, from `r`:
// the memory replays they made.
int64_t ReplaysOfOutputs(const StepReport& r, std::string* snapshot) {
  const int64_t before = MemoryReplays();
  const std::string dir = ::testing::TempDir();
  VizOptions o;
  o.png = false;
  EXPECT_TRUE(WriteCharts(r, dir, o).ok());
  EXPECT_TRUE(WritePerfettoTimeline(r, dir + "/timeline.json", o).ok());
  EXPECT_TRUE(WriteHtmlReport(r, dir, o).ok());
  absl::StatusOr<std::string> pickle = MemorySnapshotPickle(r);
  EXPECT_TRUE(pickle.ok()) << pickle.status();
  if (pickle.ok()) *snapshot = *std::move(pickle);
  return MemoryReplays() - before;
}

// The allocator actions of `r`'s step replayed again through a fresh
// allocator, as the memory map and the snapshot did before the log.
std::vector<AllocatorEvent> ReplayedAgain(const StepReport& r) {
  std::vector<AllocatorEvent> log;
  auto a = StartedAllocator(r);
  EXPECT_TRUE(a.ok()) << a.status();
  if (!a.ok()) return log;
  (*a)->RecordEventsTo(&log);
  for (const TraceEvent& e : r.lowered.trace.events) {
    if (e.type == EventType::kAlloc && !r.start.Holds(e.buffer)) {
      if (!(*a)->Alloc(e.buffer, e.size, e.stream)) break;
    } else if (e.type == EventType::kFree) {
      (*a)->Free(e.buffer);
    }
  }
  (*a)->RecordEventsTo(nullptr);
  return log;
}

void ExpectLogIsTheReplay(const StepReport& r) {
  const MemoryEventLog& log = r.sim.memory_log;
  ASSERT_TRUE(log.kept);
  const std::vector<AllocatorEvent> again = ReplayedAgain(r);
  ASSERT_EQ(log.actions.size(), again.size());
  ASSERT_FALSE(again.empty());
  for (size_t k = 0; k < again.size(); ++k) {
    const AllocatorEvent& x = log.actions[k].action;
    EXPECT_EQ(x.action, again[k].action) << k;
    EXPECT_EQ(x.addr, again[k].addr) << k;
    EXPECT_EQ(x.size, again[k].size) << k;
    EXPECT_EQ(x.buffer, again[k].buffer) << k;
    if (x.action != again[k].action || x.addr != again[k].addr) break;
  }
}

// A small eager step whose allocator places blocks.
absl::StatusOr<RunSpec> EagerSpec() {
  return LoadRunSpec(GPUSIM_SOURCE_DIR "/examples/scan_carry.yaml",
                     {"framework=pytorch", "allocator.impl=pytorch_caching"});
}

TEST(MemoryReplays, SimulatedStepIsReplayedOnceForEveryOutput) {
  auto spec = EagerSpec();
  ASSERT_TRUE(spec.ok()) << spec.status();
  const int64_t before = MemoryReplays();
  auto r = SimulateStep(*spec);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(MemoryReplays() - before, 1);  // the engine
  ExpectLogIsTheReplay(*r);
  std::string snapshot;
  // On main: 3 (the memory map for memory_map.svg and for report.html, the
  // snapshot).
  EXPECT_EQ(ReplaysOfOutputs(*r, &snapshot), 0);
  EXPECT_TRUE(absl::StrContains(snapshot, "segment_alloc"));
}

// explain --time: the step's own run walks its critical path; on main
// StepCriticalPath ran the engine a second time.
TEST(MemoryReplays, CriticalPathIsTheStepsOwnRun) {
  auto spec = EagerSpec();
  ASSERT_TRUE(spec.ok()) << spec.status();
  auto plain = SimulateStep(*spec);
  ASSERT_TRUE(plain.ok()) << plain.status();
  int64_t before = MemoryReplays();
  auto again = StepCriticalPath(*plain);  // a report that did not walk it
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(MemoryReplays() - before, 1);
  before = MemoryReplays();
  auto r = SimulateStep(*spec, /*critical_path=*/true);
  ASSERT_TRUE(r.ok()) << r.status();
  auto path = StepCriticalPath(*r);
  ASSERT_TRUE(path.ok()) << path.status();
  EXPECT_EQ(MemoryReplays() - before, 1);
  ASSERT_FALSE(path->critical_path.empty());
  ASSERT_EQ(path->critical_path.size(), again->critical_path.size());
  for (size_t i = 0; i < path->critical_path.size(); ++i) {
    EXPECT_EQ(path->critical_path[i].event, again->critical_path[i].event) << i;
    EXPECT_EQ(path->critical_path[i].end, again->critical_path[i].end) << i;
  }
  EXPECT_EQ(path->step_time, again->step_time);
  EXPECT_EQ(path->host_wait, again->host_wait);
}

// The golden native trace through pytorch_caching on an H100 whose CUDA
// total is `cuda_total` (0: the device's own).
absl::StatusOr<StepReport> RecordedReport(Bytes cuda_total = Bytes(0)) {
  auto trace = ReadTraceFile(GPUSIM_SOURCE_DIR "/tests/golden/llama7b.trace.gpusim");
  if (!trace.ok()) return trace.status();
  RunSpec spec;
  spec.allocator = AllocatorSpec{"pytorch_caching", {}};
  auto device = LoadDeviceSpec("h100-sxm-80gb");
  if (!device.ok()) return device.status();
  spec.device = *device;
  if (cuda_total > Bytes(0)) spec.device.cuda_total = cuda_total;
  return ReportFromTrace(*trace, spec, nullptr);
}

TEST(MemoryReplays, RecordedStepIsReplayedOnceForEveryOutput) {
  const int64_t before = MemoryReplays();
  auto r = RecordedReport();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(MemoryReplays() - before, 1);
  ExpectLogIsTheReplay(*r);
  std::string snapshot;
  EXPECT_EQ(ReplaysOfOutputs(*r, &snapshot), 0);
  EXPECT_FALSE(snapshot.empty());
}

// A step the allocator cannot hold: the log stops at the out of memory, as
// the allocator does, and the snapshot ends with it.
TEST(MemoryReplays, LogStopsAtTheOutOfMemory) {
  auto r = RecordedReport(Bytes(int64_t{8} << 30));
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_TRUE(r->sim.oom.happened);
  const MemoryEventLog& log = r->sim.memory_log;
  ASSERT_FALSE(log.actions.empty());
  EXPECT_EQ(log.actions.back().action.action, AllocatorAction::kOom);
  EXPECT_EQ(log.actions.back().event, r->sim.oom.event);
  ExpectLogIsTheReplay(*r);
  auto pickle = MemorySnapshotPickle(*r);
  ASSERT_TRUE(pickle.ok()) << pickle.status();
  EXPECT_TRUE(absl::StrContains(*pickle, "oom"));
}

}  // namespace
}  // namespace gpusim::memory_replays_test
