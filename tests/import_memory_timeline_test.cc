// Tests of the torch.profiler memory-timeline raw importer
// (sim/import/memory_timeline.h).
#include <sys/stat.h>

#include <map>
#include <string>

#include "gtest/gtest.h"

#include "sim/import/byte_source.h"
#include "sim/import/import.h"
#include "sim/import/memory_timeline.h"
#include "sim/trace/validate.h"
#include "sim/import/trace_path.h"

namespace gpusim::import_memory_timeline_test {
namespace {


constexpr char kTimeline[] = "hta_memory_timeline_raw.json.gz";

TEST(ImportMemoryTimelineTest, HtaRawTimeline) {
  const std::string path = RecordedTracePath(kTimeline);
  if (path.empty()) GTEST_SKIP() << kTimeline << " is in neither traces/recorded/ nor ../shared/traces/";
  auto t = ImportMemoryTimelineRaw(path);
  ASSERT_TRUE(t.ok()) << t.status();
  // 16,845 rows: 645 pre-existing, 3,345 create, 3,345 destroy, 9,510
  // increment-version rows = 4,755 pairs.
  std::map<MemoryEventKind, int> kinds;
  for (const RecordedMemoryEvent& m : t->memory_events) ++kinds[m.kind];
  EXPECT_EQ(kinds[MemoryEventKind::kPreexisting], 645);
  EXPECT_EQ(kinds[MemoryEventKind::kAlloc], 3345);
  EXPECT_EQ(kinds[MemoryEventKind::kFree], 3345);
  EXPECT_EQ(kinds[MemoryEventKind::kIncrementVersion], 4755);
  EXPECT_EQ(t->memory_events.size(), 645u + 3345 + 3345 + 4755);
  // First row [-1, 1, 37888, 7]: pre-existing, unknown category.
  EXPECT_EQ(t->memory_events[0].time, SimTime(-1));
  EXPECT_EQ(t->memory_events[0].size, Bytes(37888));
  EXPECT_FALSE(t->memory_events[0].category.has_value());

  ConversionStats st;
  auto native = ToNativeTrace(*t, {}, &st);
  ASSERT_TRUE(native.ok()) << native.status();
  EXPECT_TRUE(ValidateTrace(*native).ok()) << ValidateTrace(*native);
  EXPECT_EQ(st.allocs, 645 + 3345);
  EXPECT_EQ(st.frees, 3345);
  EXPECT_EQ(st.frees_matched_by_size + st.allocs_before_recording, 3345);
  EXPECT_EQ(st.frees_matched_by_address, 0);
  // Roles come from the categories.
  std::map<Role, int> roles;
  for (const TraceEvent& e : native->events) {
    if (e.type == EventType::kAlloc) ++roles[e.role];
  }
  EXPECT_GT(roles[Role::kParameter], 0);
  EXPECT_GT(roles[Role::kActivation], 0);

  auto detected = DetectRecordedFormat(path);
  ASSERT_TRUE(detected.ok());
  EXPECT_EQ(*detected, "memory_timeline");
}

absl::StatusOr<RecordedTrace> ImportText(const std::string& text) {
  auto src = StringByteSource(text);
  return ImportMemoryTimelineRaw(*src, "m.json");
}

TEST(ImportMemoryTimelineTest, SmallTimelineAndErrors) {
  auto ok = ImportText("[[-1, 1, 8, 0], [10, 2, 16, 4], [11, 3, -16, 4], [11, 3, 16, 5], "
                       "[12, 4, -16, 5]]");
  ASSERT_TRUE(ok.ok()) << ok.status();
  ASSERT_EQ(ok->memory_events.size(), 4u);
  EXPECT_EQ(ok->memory_events[2].kind, MemoryEventKind::kIncrementVersion);
  EXPECT_EQ(ok->memory_events[2].previous_category, Role::kActivation);
  EXPECT_EQ(ok->memory_events[2].category, Role::kGradient);
  EXPECT_EQ(ok->memory_events[3].kind, MemoryEventKind::kFree);
  EXPECT_EQ(ok->memory_events[3].size, Bytes(16));

  struct Case {
    std::string text, want;
  } cases[] = {
      {"[[1, 9, 8, 0]]", "m.json: byte 1: unknown action 9 (expected 1..4)"},
      {"[[1, 2, 8, 0], [1, 2, 8]]", "m.json: byte 23: expected ',' in a"},
      {"[[1, 3, -8, 0], [2, 2, 8, 0]]",
       "byte 16: expected the second row of the increment-version pair begun at byte 1"},
      {"[[1, 3, -8, 0]]", "increment-version pair begun at byte 1 has no second row"},
      {"[[1, 2, 8, 0], [1, 2", "byte 20: unexpected end of input inside the array opened at byte 15"},
      {"[[1, 4, 8, 0]]", "byte 1: positive bytes 8 on a destroy row"},
      {"[[1, 2, 8, 12]]", "category 12 is not one of 0..7"},
      {R"({"traceEvents": []})", "m.json: not a memory timeline raw file"},
  };
  for (const Case& c : cases) {
    auto t = ImportText(c.text);
    ASSERT_FALSE(t.ok()) << c.text;
    EXPECT_NE(std::string(t.status().message()).find(c.want), std::string::npos)
        << "input: " << c.text << "\nerror: " << t.status().message();
  }
}


}  // namespace
}  // namespace gpusim::import_memory_timeline_test
