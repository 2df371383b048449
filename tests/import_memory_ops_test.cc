// ToMemoryOps: ToNativeTrace's conversion without the TraceEvents (what a
// replay reads): the same alloc/free events, buffer ids, order, sources,
// statistics and errors, on built streams and on every shipped trace.
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "sim/import/import.h"
#include "sim/import/recorded_trace.h"
#include "sim/import/trace_path.h"

namespace gpusim::import_memory_ops_test {
namespace {

void ExpectSameAsNative(const RecordedTrace& t) {
  ToNativeOptions o;
  o.include_gpu_ops = false;
  std::vector<int64_t> native_source, ops_source;
  o.source_index = &native_source;
  ConversionStats native_stats, ops_stats;
  auto native = ToNativeTrace(t, o, &native_stats);
  o.source_index = &ops_source;
  auto ops = ToMemoryOps(t, o, &ops_stats);
  ASSERT_EQ(native.ok(), ops.ok()) << native.status() << " / " << ops.status();
  if (!native.ok()) {
    EXPECT_EQ(native.status(), ops.status());
    return;
  }
  EXPECT_EQ(ops->preexisting, native->preexisting);
  std::vector<int64_t> want_source;
  std::vector<int64_t> index;
  const MemoryOpStream of_native = MemoryOpsOf(*native, &index);
  for (int64_t i : index) want_source.push_back(native_source[static_cast<size_t>(i)]);
  ASSERT_EQ(ops->ops.size(), of_native.ops.size());
  for (size_t i = 0; i < ops->ops.size(); ++i) {
    const MemoryOp& a = ops->ops[i];
    const MemoryOp& b = of_native.ops[i];
    ASSERT_TRUE(a.type == b.type && a.buffer == b.buffer && a.stream == b.stream &&
                (a.type == EventType::kFree || a.size == b.size))
        << "event " << i;
  }
  EXPECT_EQ(ops_source, want_source);
  EXPECT_EQ(ops_stats.allocs, native_stats.allocs);
  EXPECT_EQ(ops_stats.frees, native_stats.frees);
  EXPECT_EQ(ops_stats.implicit_frees, native_stats.implicit_frees);
  EXPECT_EQ(ops_stats.allocs_before_recording, native_stats.allocs_before_recording);
  EXPECT_EQ(ops_stats.allocs_live_through, native_stats.allocs_live_through);
}

RecordedMemoryEvent Event(MemoryEventKind kind, int64_t addr, int64_t size, int64_t stream = 7) {
  RecordedMemoryEvent m;
  m.kind = kind;
  m.address = addr;
  m.size = Bytes(size);
  m.stream = stream;
  return m;
}

TEST(MemoryOps, HeadAllocsImplicitFreesAndLiveThroughAsToNativeTrace) {
  RecordedTrace t;
  t.metadata.source_file = "built";
  t.live_through.push_back(Event(MemoryEventKind::kPreexisting, 0x1000, 4096));
  t.memory_events.push_back(Event(MemoryEventKind::kAlloc, 0x2000, 512));
  t.memory_events.push_back(Event(MemoryEventKind::kFree, 0x9000, 1024));  // allocated before recording
  t.memory_events.push_back(Event(MemoryEventKind::kAlloc, 0x2000, 512, 3));  // implicit free of the first
  t.memory_events.push_back(Event(MemoryEventKind::kFree, 0x2000, 512, 3));
  t.memory_events[0].total_allocated = Bytes(8192 + 512);
  ExpectSameAsNative(t);
  auto ops = ToMemoryOps(t);
  ASSERT_TRUE(ops.ok()) << ops.status();
  // live-through alloc, the head alloc of 0x9000, then the body.
  ASSERT_EQ(ops->ops.size(), 7u);
  EXPECT_EQ(ops->ops[0].size, Bytes(4096));
  EXPECT_EQ(ops->ops[1].size, Bytes(1024));
  EXPECT_EQ(ops->preexisting, Bytes(8192 - 1024));
  // Errors are ToNativeTrace's.
  t.memory_events.push_back(Event(MemoryEventKind::kAlloc, 0x3000, -5));
  ExpectSameAsNative(t);
}

TEST(MemoryOps, EveryShippedTraceAsToNativeTrace) {
  for (const char* name : {"hta_df_index_resolver_v100_rank1.pt.trace.json.gz",
                           "kineto_tbplugin_resnet50_v100_legacy_noaddr.pt.trace.json.gz",
                           "tracelens_h100_owlv2-large_inference.pt.trace.json.gz",
                           "tracelens_mi300x_rocm_normalization_coldstart.pt.trace.json.gz",
                           "hta_memory_timeline_raw.json.gz"}) {
    SCOPED_TRACE(name);
    const std::string path = RecordedTracePath(name);
    if (path.empty()) continue;
    auto t = ImportRecordedTrace(path);
    ASSERT_TRUE(t.ok()) << t.status();
    ExpectSameAsNative(*t);
  }
}

}  // namespace
}  // namespace gpusim::import_memory_ops_test
