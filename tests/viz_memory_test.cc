// viz/: the memory timeline's allocator and recorded curves, the pairing of
// a recorded trace's counters with its native events, and the dataflow graph
// of two loop lowerings side by side.
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "sim/config/loader.h"
#include "sim/import/import.h"
#include "sim/import/recorded_trace.h"
#include "sim/import/trace_path.h"
#include "sim/step/step.h"
#include "viz/graphviz.h"
#include "viz/step_view.h"
#include "viz/viz.h"
#include "viz/xml_check.h"

namespace gpusim::viz_memory_test {
namespace {

RecordedMemoryEvent Mem(MemoryEventKind kind, int64_t addr, int64_t size, int64_t t, int64_t total) {
  RecordedMemoryEvent m;
  m.kind = kind;
  m.address = addr;
  m.size = Bytes(size);
  m.time = SimTime(t);
  m.total_allocated = Bytes(total);
  m.total_reserved = Bytes(2 << 20);
  return m;
}

TEST(VizRecordedMemory, PairsAroundHoistedAllocsAndImplicitFrees) {
  RecordedTrace rec;
  rec.metadata.source_file = "hand.json";
  rec.memory_events = {
      Mem(MemoryEventKind::kFree, 0x100, 64, 10, 0),     // allocated before recording: head alloc
      Mem(MemoryEventKind::kAlloc, 0x200, 128, 20, 128),
      Mem(MemoryEventKind::kAlloc, 0x200, 256, 30, 256),  // 0x200 still live: implicit free first
      Mem(MemoryEventKind::kFree, 0x200, 256, 40, 0),
  };
  rec.memory_events[1].total_reserved.reset();  // a counter may be missing
  ConversionStats stats;
  auto native = ToNativeTrace(rec, {}, &stats);
  ASSERT_TRUE(native.ok()) << native.status();
  ASSERT_EQ(stats.allocs_before_recording, 1);
  ASSERT_EQ(stats.implicit_frees, 1);
  // Native: [0] head alloc, [1] free, [2] alloc 128, [3] implicit free,
  // [4] alloc 256, [5] free.
  auto samples = RecordedMemoryCounters(rec, *native, stats);
  ASSERT_TRUE(samples.ok()) << samples.status();
  ASSERT_EQ(samples->size(), 4u);
  const std::vector<int64_t> events = {(*samples)[0].event, (*samples)[1].event, (*samples)[2].event,
                                       (*samples)[3].event};
  EXPECT_EQ(events, (std::vector<int64_t>{1, 2, 4, 5}));
  EXPECT_EQ((*samples)[2].allocated->value(), 256);
  EXPECT_FALSE((*samples)[1].reserved.has_value());
  EXPECT_EQ((*samples)[3].reserved->value(), 2 << 20);

  // A native trace that does not follow the recording is refused.
  Trace other = *native;
  other.events.pop_back();
  EXPECT_FALSE(RecordedMemoryCounters(rec, other, stats).ok());
}

TEST(VizRecordedMemory, RealTracePairsEverySizedEvent) {
  const std::string path = RecordedTracePath("tracelens_h100_bert-small_inference.pt.trace.json.gz");
  if (path.empty()) GTEST_SKIP() << "bert-small trace not found";
  auto rec = ImportRecordedTrace(path);
  ASSERT_TRUE(rec.ok()) << rec.status();
  ConversionStats stats;
  auto native = ToNativeTrace(*rec, {}, &stats);
  ASSERT_TRUE(native.ok()) << native.status();
  auto samples = RecordedMemoryCounters(*rec, *native, stats);
  ASSERT_TRUE(samples.ok()) << samples.status();
  // Every recorded event carried both totals; each pairs with a native
  // event of the same kind and size (allocs: the request; frees: the freed
  // buffer's, up to the recorded size mismatches).
  ASSERT_EQ(samples->size(), rec->memory_events.size());
  std::vector<Bytes> size_of;  // native buffer id → size
  for (const TraceEvent& e : native->events) {
    if (e.type != EventType::kAlloc) continue;
    if (static_cast<size_t>(e.buffer) >= size_of.size()) size_of.resize(static_cast<size_t>(e.buffer) + 1);
    size_of[static_cast<size_t>(e.buffer)] = e.size;
  }
  int64_t mismatched = 0;
  for (size_t j = 0; j < samples->size(); ++j) {
    const RecordedMemoryEvent& m = rec->memory_events[j];
    const TraceEvent& e = native->events[static_cast<size_t>((*samples)[j].event)];
    ASSERT_EQ(e.type, m.kind == MemoryEventKind::kAlloc ? EventType::kAlloc : EventType::kFree) << j;
    const Bytes native_size = e.type == EventType::kAlloc ? e.size : size_of[static_cast<size_t>(e.buffer)];
    if (native_size != m.size) ++mismatched;
    EXPECT_EQ((*samples)[j].allocated, m.total_allocated);
  }
  EXPECT_EQ(mismatched, stats.size_mismatches);
}

TEST(VizTimeline, AllocatorAndRecordedCurves) {
  const std::string path = RecordedTracePath("tracelens_h100_bert-small_inference.pt.trace.json.gz");
  if (path.empty()) GTEST_SKIP() << "bert-small trace not found";
  auto rec = ImportRecordedTrace(path);
  ASSERT_TRUE(rec.ok()) << rec.status();
  ConversionStats stats;
  auto native = ToNativeTrace(*rec, {}, &stats);
  ASSERT_TRUE(native.ok()) << native.status();
  auto samples = RecordedMemoryCounters(*rec, *native, stats);
  ASSERT_TRUE(samples.ok()) << samples.status();
  RunSpec spec;
  auto device = LoadDeviceSpec("h100-sxm-80gb");
  ASSERT_TRUE(device.ok()) << device.status();
  spec.device = *device;
  spec.allocator.impl = "pytorch_caching";
  auto r = ReportFromTrace(*native, spec);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_FALSE(r->sim.allocator_curve.empty());
  for (const AllocatorSample& s : r->sim.allocator_curve) EXPECT_GE(s.reserved, s.allocated);

  VizOptions o;
  o.recorded_memory = &*samples;
  const std::string svg = TimelineSvg(*r, o);
  ASSERT_TRUE(CheckXmlWellFormed(svg).ok()) << CheckXmlWellFormed(svg);
  // Legend: each curve with its peak; the allocator's include the bytes
  // live before the trace began.
  const Bytes pre = r->lowered.trace.preexisting;
  EXPECT_NE(svg.find(absl::StrCat("reserved (pytorch_caching) (peak ",
                                  viz_internal::HumanBytes(pre + r->sim.allocator.peak_reserved), ")")),
            std::string::npos);
  EXPECT_NE(svg.find(absl::StrCat("allocated (pytorch_caching) (peak ",
                                  viz_internal::HumanBytes(pre + r->sim.allocator.peak_allocated), ")")),
            std::string::npos);
  Bytes rec_reserved(0);
  for (const RecordedMemorySample& s : *samples) rec_reserved = std::max(rec_reserved, *s.reserved);
  EXPECT_NE(svg.find(absl::StrCat("recorded Total Reserved (peak ", viz_internal::HumanBytes(rec_reserved), ")")),
            std::string::npos);
  EXPECT_NE(svg.find("recorded Total Allocated (peak "), std::string::npos);
  EXPECT_NE(svg.find("stroke-dasharray=\"7,4\""), std::string::npos);  // recorded: dashed
  // Without recorded counters, no recorded curve.
  EXPECT_EQ(TimelineSvg(*r).find("recorded Total"), std::string::npos);

  // The memory map places the blocks where the caching allocator put them,
  // memory live before the trace as a band below.
  const std::string map = MemoryMapSvg(*r);
  ASSERT_TRUE(CheckXmlWellFormed(map).ok());
  EXPECT_NE(map.find("addresses: pytorch_caching replay"), std::string::npos);
  if (pre.value() > 0) {
    EXPECT_NE(map.find(absl::StrCat("live before the trace began: ", viz_internal::HumanBytes(pre))),
              std::string::npos);
  }
  RunSpec ideal = spec;
  ideal.allocator.impl = "ideal";
  auto first_fit = ReportFromTrace(*native, ideal);
  ASSERT_TRUE(first_fit.ok());
  EXPECT_NE(MemoryMapSvg(*first_fit).find("addresses: first fit (display)"), std::string::npos);
}

TEST(VizTimeline, TraceWithoutTimedEventsUsesTheEventClock) {
  // A memory snapshot has no kernels: every event is at simulated t = 0, so
  // the charts count memory events instead.
  Trace t;
  t.name = "snapshot_like";
  t.streams = {{0, "default"}};
  for (int i = 0; i < 4; ++i) {
    TraceEvent a;
    a.type = EventType::kAlloc;
    a.buffer = i;
    a.size = Bytes(int64_t{1} << 20 << i);
    t.events.push_back(a);
  }
  for (int i = 0; i < 4; ++i) {
    TraceEvent f;
    f.type = EventType::kFree;
    f.buffer = i;
    t.events.push_back(f);
  }
  RunSpec spec;
  auto device = LoadDeviceSpec("h100-sxm-80gb");
  ASSERT_TRUE(device.ok());
  spec.device = *device;
  spec.allocator.impl = "pytorch_caching";
  auto r = ReportFromTrace(t, spec);
  ASSERT_TRUE(r.ok()) << r.status();
  const std::string line = TimelineSvg(*r), map = MemoryMapSvg(*r);
  EXPECT_NE(line.find("memory event (the trace has no timed events)"), std::string::npos);
  EXPECT_NE(line.find("live peak 15.0 MiB at event 3"), std::string::npos);  // after the 4th alloc
  EXPECT_NE(map.find("peak 15.0 MiB at event 3"), std::string::npos);
  EXPECT_NE(map.find("8 memory events"), std::string::npos);
}

TEST(VizDataflow, RolledBesideUnrolled) {
  auto spec = LoadRunSpec(GPUSIM_SOURCE_DIR "/examples/scan_carry.yaml", {"loop.trip_count=3"});
  ASSERT_TRUE(spec.ok()) << spec.status();
  RunSpec unrolled_spec = *spec;
  unrolled_spec.loop.mode = "unrolled";
  auto rolled = SimulateStep(*spec);
  auto unrolled = SimulateStep(unrolled_spec);
  ASSERT_TRUE(rolled.ok() && unrolled.ok());
  VizOptions o;
  o.other_loop_mode = &*unrolled;
  const std::string dot = DataflowDot(*rolled, o);
  // Either report may be the main one; the drawing is the same.
  VizOptions swapped;
  swapped.other_loop_mode = &*rolled;
  EXPECT_EQ(DataflowDot(*unrolled, swapped), dot);
  ASSERT_TRUE(CheckDot(dot).ok()) << CheckDot(dot);
  for (const char* want : {"subgraph cluster_rolled {", "subgraph cluster_unrolled {", "subgraph cluster_rolled_forward",
                           "subgraph cluster_unrolled_backward", "rolled lowering (loop.mode=rolled)",
                           "unrolled lowering (loop.mode=unrolled)", "saved residual", "saved for backward",
                           "in place 4.00 GiB"}) {
    EXPECT_NE(dot.find(want), std::string::npos) << want;
  }
  EXPECT_LT(dot.find("cluster_rolled {"), dot.find("cluster_unrolled {"));  // rolled on the left
  // The unrolled side keeps w2 of an earlier iteration for the backward pass
  // (README, examples/scan_carry.yaml): 4 GiB loop state drawn as saved.
  EXPECT_NE(dot.find("4.00 GiB loop_state\\nsaved for backward"), std::string::npos);
  auto svg = RenderDot(dot, "svg");
  ASSERT_TRUE(svg.ok()) << svg.status();
  EXPECT_TRUE(CheckXmlWellFormed(*svg).ok());
}

}  // namespace
}  // namespace gpusim::viz_memory_test
