// Note [Replaying as the trace is parsed] (sim/replay/replay_stream.cc): a
// Kineto trace replayed in one pass gives the numbers of the whole-trace
// path, byte for byte in the report; each fact the pass cannot know in time
// sends the trace to the whole-trace path, named.
#include <zlib.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

#include "sim/import/import.h"
#include "sim/import/trace_path.h"
#include "sim/replay/replay.h"

namespace gpusim::replay_stream_test {
namespace {

ReplayOptions Options(const std::string& allocator = "pytorch_caching") {
  ReplayOptions o;
  o.allocator.impl = allocator;
  o.default_capacity = Bytes(80LL << 30);
  o.default_capacity_source = "test";
  return o;
}

// The whole-trace path's result: import every event, then replay.
ReplayResult Whole(const std::string& path, const ReplayOptions& o) {
  auto rec = ImportRecordedTrace(path, "kineto");
  EXPECT_TRUE(rec.ok()) << rec.status();
  auto r = ReplayRecorded(*rec, o);
  EXPECT_TRUE(r.ok()) << r.status();
  return *r;
}

// ReplayFile's result equals the whole-trace path's, in JSON and in text
// (but for the text's "read" line, which says how the trace was read).
void ExpectSameAsWhole(const std::string& path, const ReplayOptions& o, const std::string& import) {
  auto s = ReplayFile(path, o);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->import, import);
  const ReplayResult w = Whole(path, o);
  EXPECT_EQ(RenderReplayJson(*s), RenderReplayJson(w));
  ReplayResult unmarked = *s;
  unmarked.import.clear();
  EXPECT_EQ(RenderReplayText(unmarked), RenderReplayText(w));
}

struct Event {
  int64_t ts, addr, bytes;  // bytes < 0: a free
  int device = 0;
};

// A gzip'd Kineto trace of `events` (Total Allocated after each from
// `allocated0`, Total Reserved `reserved` when >= 0); `before`/`after` are
// extra top-level text before/after the events.
std::string WriteTrace(const std::string& name, const std::vector<Event>& events, int64_t allocated0,
                       int64_t reserved, const std::string& extra_events = "", bool devices_first = true,
                       int64_t device_memory = 85899345920) {
  const std::string path = ::testing::TempDir() + "/" + name + ".pt.trace.json.gz";
  gzFile f = gzopen(path.c_str(), "wb1");
  const std::string devices = "\"deviceProperties\": [{\"id\": 0, \"name\": \"synthetic\", \"totalGlobalMem\": " +
                              std::to_string(device_memory) + "}]";
  gzputs(f, "{");
  if (devices_first) gzputs(f, (devices + ",\n").c_str());
  gzputs(f, "\"traceEvents\": [\n");
  int64_t allocated = allocated0;
  for (size_t i = 0; i < events.size(); ++i) {
    const Event& e = events[i];
    allocated += e.bytes;
    char buf[400];
    std::snprintf(buf, sizeof buf,
                  "%s{\"ph\": \"i\", \"name\": \"[memory]\", \"pid\": 1, \"tid\": 1, \"ts\": %lld, "
                  "\"args\": {\"Device Type\": 1, \"Device Id\": %d, \"Addr\": %lld, \"Bytes\": %lld, "
                  "\"Total Allocated\": %lld%s, \"Ev Idx\": %zu}}\n",
                  i == 0 ? "" : ",", static_cast<long long>(e.ts), e.device, static_cast<long long>(e.addr),
                  static_cast<long long>(e.bytes), static_cast<long long>(allocated),
                  reserved >= 0 ? (", \"Total Reserved\": " + std::to_string(reserved)).c_str() : "", i);
    gzputs(f, buf);
  }
  gzputs(f, extra_events.c_str());
  gzputs(f, "]");
  if (!devices_first) gzputs(f, (",\n" + devices).c_str());
  gzputs(f, "}\n");
  gzclose(f);
  return path;
}

// A cold stream with reuse, an implicit free (an address allocated again
// while live) and a large block: 2 MiB of small blocks, then 20 MiB.
std::vector<Event> ColdEvents() {
  const int64_t a = 0x7f0000000000;
  return {{1, a, 512},           {2, a + 512, 4096},     {3, a, -512},
          {4, a, 1024},          {5, a + 0x200000, 20 << 20}, {6, a + 512, -4096},
          {7, a + 0x200000, 8 << 20},  // implicit free of the 20 MiB block
          {8, a, -1024},         {9, a + 0x200000, -(8 << 20)}};
}

TEST(ReplayStreamTest, ColdTraceStreamsWithTheWholeTracesNumbers) {
  const std::string path = WriteTrace("cold", ColdEvents(), 0, 2 << 20);
  for (const char* impl : {"pytorch_caching", "bfc", "ideal"}) {
    SCOPED_TRACE(impl);
    ExpectSameAsWhole(path, Options(impl), "streamed");
  }
  auto r = ReplayFile(path, Options());
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->events, 9);
  EXPECT_EQ(r->conversion.implicit_frees, 1);
  ASSERT_TRUE(r->allocated.has_value());
  // The recording's Total Allocated keeps the 20 MiB block whose free it
  // did not record; the pairing frees it at the reuse (events 7 to 9).
  EXPECT_EQ(r->allocated->compared, 9);
  EXPECT_EQ(r->allocated->exact, 6);
  EXPECT_NE(RenderReplayText(*r).find("  read      streamed\n"), std::string::npos) << RenderReplayText(*r);
}

// Note [Reserved below allocated] (sim/import/kineto.cc): a Total Reserved
// of 0 beside a positive Total Allocated is no caching allocator's: it is
// read as not recorded, so it is not compared, and no warm start is
// inferred from it (before, the cold start "missed" it and a warm start
// was inferred from a reserved total smaller than the live blocks).
TEST(ReplayStreamTest, ReservedBelowAllocatedIsNotRecorded) {
  const std::string path = WriteTrace("reserved0", ColdEvents(), 0, 0);
  ExpectSameAsWhole(path, Options(), "streamed");
  auto r = ReplayFile(path, Options());
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->warm_start.has_value() && r->warm_start->applied);
  // Total Allocated stays above 0 to the end (the 20 MiB block whose free
  // was not recorded): every event's reserved 0 is below it.
  EXPECT_EQ(r->reserved_below_allocated, 9);
  EXPECT_FALSE(r->reserved.has_value());
  EXPECT_LE(r->stats.peak_reserved, Bytes(64 << 20));
  const std::string text = RenderReplayText(*r);
  EXPECT_NE(text.find("            9 events record a Total Reserved below their Total Allocated"),
            std::string::npos)
      << text;
  EXPECT_NE(RenderReplayJson(*r).find("\"reserved_below_allocated_events\": 9"), std::string::npos);
  // One event of 2 MiB reserved, above its allocated, is compared.
  const std::string mixed = WriteTrace("reserved_mixed", {{1, 0x7f0000000000, 512}}, 0, 2 << 20);
  auto m = ReplayFile(mixed, Options());
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->reserved_below_allocated, 0);
  ASSERT_TRUE(m->reserved.has_value());
  EXPECT_EQ(m->reserved->compared, 1);
}

TEST(ReplayStreamTest, BytesLiveBeforeRecordingStream) {
  // Total Allocated says 3 MiB were live before the first event and never
  // freed: Trace::preexisting, known at the first event.
  const std::string path = WriteTrace("preexisting", ColdEvents(), 3 << 20, -1);
  ExpectSameAsWhole(path, Options(), "streamed");
}

TEST(ReplayStreamTest, WhatNeedsTheWholeTraceIsNamedAndGivesTheSameNumbers) {
  const int64_t a = 0x7f0000000000;
  struct Case {
    std::string name;
    std::string path;
    ReplayOptions options;
    std::string why;
  };
  std::vector<Case> cases;
  {
    std::vector<Event> ev = ColdEvents();
    std::swap(ev[3], ev[4]);  // ts 5 before ts 4
    // Note [A bounded reorder window]: put back in order as it streams.
    const std::string unsorted = WriteTrace("unsorted", ev, 0, -1);
    cases.push_back({"unsorted", unsorted, Options(), "streamed"});
    // One event out by one place overflows a window of none.
    ReplayOptions no_window = Options();
    no_window.reorder_window = 0;
    cases.push_back({"unsorted_no_window", unsorted, no_window, "whole: memory event 4 is out of (ts, Ev Idx) order"});
    // ts 1 after three later events: a window of two overflows, three sorts it.
    std::vector<Event> far = ColdEvents();
    std::rotate(far.begin(), far.begin() + 1, far.begin() + 4);  // ts 2, 3, 4, 1, 5, ...
    const std::string far_path = WriteTrace("unsorted_far", far, 0, -1);
    ReplayOptions two = Options(), three = Options();
    two.reorder_window = 2;
    three.reorder_window = 3;
    cases.push_back({"unsorted_far_2", far_path, two,
                     "whole: memory event 3 arrives older than the 2-event reorder window allows"});
    cases.push_back({"unsorted_far_3", far_path, three, "streamed"});
  }
  {
    std::vector<Event> ev = ColdEvents();
    ev.insert(ev.begin() + 2, Event{2, a + 0x900000, -2048});  // allocated before recording
    cases.push_back({"before", WriteTrace("before", ev, 2048, -1), Options(),
                     "streamed in 2 passes (memory event 2 frees a block allocated before recording)"});
    // Note [Streaming a warm trace in passes]: what the passes cannot take
    // still goes whole.
    std::vector<Event> late = ev;
    std::swap(late[6], late[7]);
    const std::string late_path = WriteTrace("before_unsorted", late, 2048, -1);
    cases.push_back({"before_unsorted", late_path, Options(),
                     "streamed in 2 passes (memory event 2 frees a block allocated before recording)"});
    ReplayOptions no_window = Options();
    no_window.reorder_window = 0;
    cases.push_back({"before_unsorted_no_window", late_path, no_window,
                     "whole: memory event 7 is out of (ts, Ev Idx) order"});
  }
  {
    std::vector<Event> ev = ColdEvents();
    ev[5].device = 1;
    cases.push_back({"devices", WriteTrace("devices", ev, 0, -1), Options(), ""});  // an error either way
    ReplayOptions on0 = Options();
    on0.device = 0;
    std::vector<Event> ev0 = ColdEvents();
    ev0.push_back({10, a + 0x4000000, 512, 1});
    cases.push_back({"device0", WriteTrace("device0", ev0, 0, -1), on0, "streamed"});
  }
  // A warm cache: 64 MiB reserved from the first event.
  cases.push_back({"warm", WriteTrace("warm", ColdEvents(), 0, 64 << 20), Options(),
                   "streamed in 3 passes (the cold start misses the first Total Reserved: a warm start is inferred)"});
  {
    ReplayOptions cold = Options();
    cold.infer_warm_start = false;
    cases.push_back({"warm_cold", WriteTrace("warm_cold", ColdEvents(), 0, 64 << 20), cold, "streamed"});
  }
  cases.push_back({"capture",
                   WriteTrace("capture", ColdEvents(), 0, -1,
                              ",{\"ph\": \"X\", \"cat\": \"cuda_runtime\", \"name\": \"cudaStreamBeginCapture\", "
                              "\"ts\": 3, \"dur\": 1, \"pid\": 1, \"tid\": 1, \"args\": {}}\n"),
                   Options(), "streamed in 2 passes (CUDA graph captures, whose runtime calls follow the memory events)"});
  {
    // Note [Capture windows from a first pass]: a window closed inside the
    // trace (events 3-4 in it), warm and cold, written after the memory
    // events as Kineto writes runtime calls.
    const std::string window =
        ",{\"ph\": \"X\", \"cat\": \"cuda_runtime\", \"name\": \"cudaStreamBeginCapture\", "
        "\"ts\": 3, \"dur\": 1, \"pid\": 1, \"tid\": 1, \"args\": {}}\n"
        ",{\"ph\": \"X\", \"cat\": \"cuda_runtime\", \"name\": \"hipStreamEndCapture\", "
        "\"ts\": 4, \"dur\": 1, \"pid\": 1, \"tid\": 1, \"args\": {}}\n";
    const std::string why = "streamed in 2 passes (CUDA graph captures, whose runtime calls follow the memory events)";
    cases.push_back({"capture_window", WriteTrace("capture_window", ColdEvents(), 0, 2 << 20, window), Options(), why});
    cases.push_back({"capture_window_bfc", WriteTrace("capture_window_bfc", ColdEvents(), 0, -1, window),
                     Options("bfc"), why});
    cases.push_back({"capture_warm", WriteTrace("capture_warm", ColdEvents(), 0, 64 << 20, window), Options(),
                     "streamed in 3 passes (the cold start misses the first Total Reserved: a warm start is inferred)"});
  }
  // Kineto writes deviceProperties last: the caching allocator streams at a
  // capacity it never reaches and takes the recorded one at the end (the
  // reorder window is not used: these are in order).
  cases.push_back({"devices_last", WriteTrace("devices_last", ColdEvents(), 0, -1, "", /*devices_first=*/false),
                   Options(), "streamed"});
  cases.push_back({"devices_last_bfc", WriteTrace("devices_last_bfc", ColdEvents(), 0, -1, "", false), Options("bfc"),
                   "whole: deviceProperties after the memory events"});
  cases.push_back({"devices_last_small", WriteTrace("devices_last_small", ColdEvents(), 0, -1, "", false, 16 << 20),
                   Options(), "whole: deviceProperties after the memory events, and the reserved bytes reach the "
                   "capacity"});
  cases.push_back({"offline", WriteTrace("offline", ColdEvents(), 0, -1), Options("greedy_by_size"),
                   "whole: an offline planner places the whole trace at its end"});
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    auto s = ReplayFile(c.path, c.options);
    auto rec = ImportRecordedTrace(c.path, "kineto");
    ASSERT_TRUE(rec.ok()) << rec.status();
    auto w = ReplayRecorded(*rec, c.options);
    ASSERT_EQ(s.ok(), w.ok()) << s.status() << " / " << w.status();
    if (!s.ok()) {
      EXPECT_EQ(s.status(), w.status());
      continue;
    }
    EXPECT_EQ(s->import, c.why);
    EXPECT_EQ(RenderReplayJson(*s), RenderReplayJson(*w));
  }
}

// Note [Streaming a warm trace in passes] on built warm traces (those of
// tests/replay_test.cc's warm-start tests): the numbers of the whole-trace
// path, in as many passes as the inference needs.
TEST(ReplayStreamTest, WarmTracesStreamInPassesWithTheWholeTracesNumbers) {
  constexpr int64_t kMiB = 1 << 20;
  const int64_t s = 0x7f0000000000, l = 0x7f0010000000;
  struct Case {
    std::string name;
    std::vector<Event> events;
    int64_t allocated0, reserved;
    std::string import;
  };
  const std::string warm = "the cold start misses the first Total Reserved: a warm start is inferred";
  const std::string head = "memory event 0 frees a block allocated before recording";
  const std::vector<Event> inferred = {{1, s, 4096},         {2, l, 4 * kMiB},  {3, s + 4096, 8192},
                                       {4, l, -4 * kMiB},    {5, l, 6 * kMiB},  {6, s, -4096}};
  std::vector<Event> straddle = inferred;
  straddle[0].addr = straddle[5].addr = s + 2 * kMiB - 1024;  // a small block across a 2 MiB boundary
  const int64_t block = 13 * kMiB + kMiB / 2;
  const std::vector<Event> grows = {{1, l, block}, {2, l, -block}, {3, l, block}};
  // Blocks live at the start: a 1 MiB small block and a 4 MiB large one
  // freed first, then reused.
  const std::vector<Event> heads = {{1, s, -kMiB},      {2, l, -4 * kMiB},          {3, l, 2 * kMiB},
                                    {4, s + kMiB, 512}, {5, l + 2 * kMiB, 3 * kMiB}, {6, l, -2 * kMiB}};
  const std::vector<Case> cases = {
      {"inferred", inferred, 0, 24 * kMiB, "streamed in 3 passes (" + warm + ")"},
      // A small block across a 2 MiB boundary breaks a rule: named, and the
      // rest inferred (Note [Warm start from recorded addresses]).
      {"straddle", straddle, 0, 24 * kMiB, "streamed in 3 passes (" + warm + ")"},
      {"grows", grows, 0, 18 * kMiB, "streamed in 4 passes (" + warm + ")"},
      {"no_room", grows, 0, 15 * kMiB, "streamed in 3 passes (" + warm + ")"},
      // The 2 MiB request at l departs to the 2 MiB where no block lies:
      // they are the large segment's tail (Note [Departures from the
      // recorded addresses]), one more pass.
      {"heads", heads, 5 * kMiB, 24 * kMiB, "streamed in 4 passes (" + head + ")"},
      {"heads_cold", heads, 5 * kMiB, 2 * kMiB + 20 * kMiB, "streamed in 2 passes (" + head + ")"},
      // 4 MiB live before recording, never freed: a cold start holds them in
      // a segment of their own (26 MiB), the warm one where no block lies.
      {"heads_preexisting", heads, 9 * kMiB, 28 * kMiB, "streamed in 5 passes (" + head + ")"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const std::string path = WriteTrace("warm_" + c.name, c.events, c.allocated0, c.reserved);
    ExpectSameAsWhole(path, Options(), c.import);
    for (const char* impl : {"bfc", "ideal"}) ExpectSameAsWhole(path, Options(impl), c.name.substr(0, 5) == "heads" ? "streamed in 2 passes (" + head + ")" : "streamed");
    ReplayOptions cold = Options();
    cold.infer_warm_start = false;
    ExpectSameAsWhole(path, cold, c.name.substr(0, 5) == "heads" ? "streamed in 2 passes (" + head + ")" : "streamed");
    auto r = ReplayFile(path, Options());
    ASSERT_TRUE(r.ok()) << r.status();
    ASSERT_TRUE(r->warm_start.has_value() || c.name == "heads_cold");
    if (c.name == "grows") {
      EXPECT_EQ(r->warm_start->passes, 2);
    }
    if (c.name == "straddle") {
      EXPECT_TRUE(r->warm_start->applied);
      EXPECT_NE(RenderReplayText(*r).find("not recorded: 1 small-pool blocks cross a 2 MiB boundary"),
                std::string::npos)
          << RenderReplayText(*r);
    }
    if (c.name == "heads") {
      // The 512 B block recorded at s + 1 MiB, which best fit places at s
      // (its window free once the 1 MiB head block is): named, not silent.
      EXPECT_NE(RenderReplayText(*r).find("departs from the recorded addresses at memory event 3 (a 512-byte block"),
                std::string::npos)
          << RenderReplayText(*r);
    }
    if (c.name == "inferred" || c.name == "heads" || c.name == "heads_preexisting") {
      EXPECT_TRUE(r->warm_start->applied) << r->warm_start->why_not;
      EXPECT_EQ(r->reserved->exact, r->reserved->compared) << RenderReplayText(*r);
    }
  }
}

// Every shipped Kineto trace streams (Note [A bounded reorder window]: the
// V100 HTA trace, out of order by 20,380 events, and the MI300X one, by
// 276, were imported whole and sorted before), with the whole-trace
// path's numbers.
TEST(ReplayStreamTest, EveryShippedKinetoTraceGivesTheWholeTracesNumbers) {
  auto warm = [](int passes) {
    return absl::StrCat("streamed in ", passes,
                        " passes (the cold start misses the first Total Reserved: a warm start is inferred)");
  };
  struct Shipped {
    const char* name;
    std::string warm_import;  // with the warm start inferred; cold: "streamed"
  };
  const Shipped kKineto[] = {
      // Departures corrected (Note [Departures from the recorded
      // addresses]) to the pass the recording agrees with most (Note [The
      // start state the recording agrees with most]).
      {"hta_df_index_resolver_v100_rank1.pt.trace.json.gz", warm(25)},
      {"kineto_tbplugin_resnet50_v100_legacy_noaddr.pt.trace.json.gz", "streamed"},
      {"tracelens_h100_bert-small_inference.pt.trace.json.gz", warm(3)},
      {"tracelens_h100_owlv2-large_inference.pt.trace.json.gz", warm(8)},
      {"tracelens_mi300x_rocm_normalization_coldstart.pt.trace.json.gz", "streamed"},
  };
  int checked = 0;
  for (const Shipped& t : kKineto) {
    const std::string path = RecordedTracePath(t.name);
    if (path.empty()) continue;
    for (bool infer : {true, false}) {
      SCOPED_TRACE(std::string(t.name) + (infer ? " warm" : " cold"));
      ReplayOptions o = Options();
      o.infer_warm_start = infer;
      auto s = ReplayFile(path, o);
      ASSERT_TRUE(s.ok()) << s.status();
      EXPECT_EQ(s->import, infer ? t.warm_import : "streamed");
      EXPECT_EQ(RenderReplayJson(*s), RenderReplayJson(Whole(path, o))) << s->import;
      ++checked;
    }
  }
  EXPECT_GT(checked, 0);
  // The MI300X trace's event 276 is older than all 276 before it: the
  // smallest window that sorts it.
  const std::string mi300x = RecordedTracePath(kKineto[4].name);
  if (!mi300x.empty()) {
    ReplayOptions o = Options();
    o.reorder_window = 276;
    auto s = ReplayFile(mi300x, o);
    ASSERT_TRUE(s.ok()) << s.status();
    EXPECT_EQ(s->import, "streamed");
    o.reorder_window = 275;
    s = ReplayFile(mi300x, o);
    ASSERT_TRUE(s.ok()) << s.status();
    EXPECT_EQ(s->import, "whole: memory event 276 arrives older than the 275-event reorder window allows");
    EXPECT_EQ(RenderReplayJson(*s), RenderReplayJson(Whole(mi300x, o)));
  }
}

// Note [Later passes from memory] (sim/replay/event_cache.h): the passes
// after the first replay the events it packed, or, with no cache (a cap of
// 0) or past the cap (300 bytes: a few events, then the file again), read
// the file again; the results are the same byte for byte, on the built warm
// traces (one with events of another device between the replayed one's,
// one out of order, one with a capture window) and on every shipped Kineto
// trace, warm and cold, through pytorch_caching and bfc.
TEST(ReplayStreamTest, LaterPassesFromMemoryGiveTheNumbersOfReadingTheFileAgain) {
  constexpr int64_t kMiB = 1 << 20;
  const int64_t s = 0x7f0000000000, l = 0x7f0010000000;
  const std::vector<Event> heads = {{1, s, -kMiB},      {2, l, -4 * kMiB},          {3, l, 2 * kMiB},
                                    {4, s + kMiB, 512}, {5, l + 2 * kMiB, 3 * kMiB}, {6, l, -2 * kMiB}};
  const int64_t block = 13 * kMiB + kMiB / 2;
  const std::vector<Event> grows = {{1, l, block}, {2, l, -block}, {3, l, block}};
  std::vector<Event> two_devices;
  for (const Event& e : heads) {
    two_devices.push_back(e);
    two_devices.push_back({e.ts, l + 0x10000000, 4096, 1});
    two_devices.push_back({e.ts, l + 0x10000000, -4096, 1});
  }
  std::vector<Event> unsorted = heads;
  std::swap(unsorted[3], unsorted[4]);
  const std::string window =
      ",{\"ph\": \"X\", \"cat\": \"cuda_runtime\", \"name\": \"cudaStreamBeginCapture\", "
      "\"ts\": 3, \"dur\": 1, \"pid\": 1, \"tid\": 1, \"args\": {}}\n"
      ",{\"ph\": \"X\", \"cat\": \"cuda_runtime\", \"name\": \"hipStreamEndCapture\", "
      "\"ts\": 4, \"dur\": 1, \"pid\": 1, \"tid\": 1, \"args\": {}}\n";
  struct Run {
    std::string path;
    ReplayOptions options;
    bool shipped = false;  // warm through pytorch_caching, with no cache only (the V100 trace takes 25 passes)
  };
  std::vector<Run> runs;
  ReplayOptions on0 = Options();
  on0.device = 0;
  for (const auto& [path, o] : std::vector<std::pair<std::string, ReplayOptions>>{
           {WriteTrace("cache_heads", heads, 9 * kMiB, 28 * kMiB), Options()},
           {WriteTrace("cache_grows", grows, 0, 18 * kMiB), Options()},
           {WriteTrace("cache_two_devices", two_devices, 5 * kMiB, 24 * kMiB), on0},
           {WriteTrace("cache_unsorted", unsorted, 5 * kMiB, 24 * kMiB), Options()},
           {WriteTrace("cache_capture", ColdEvents(), 0, 64 << 20, window), Options()},
       }) {
    runs.push_back({path, o, false});
  }
  for (const char* name : {"hta_df_index_resolver_v100_rank1.pt.trace.json.gz",
                           "kineto_tbplugin_resnet50_v100_legacy_noaddr.pt.trace.json.gz",
                           "tracelens_h100_bert-small_inference.pt.trace.json.gz",
                           "tracelens_h100_owlv2-large_inference.pt.trace.json.gz",
                           "tracelens_mi300x_rocm_normalization_coldstart.pt.trace.json.gz"}) {
    const std::string path = RecordedTracePath(name);
    if (!path.empty()) runs.push_back({path, Options(), true});
  }
  int in_passes = 0;
  for (const Run& run : runs) {
    for (const char* impl : {"pytorch_caching", "bfc"}) {
      for (bool infer : {true, false}) {
        if (run.shipped && (impl != std::string("pytorch_caching") || !infer)) continue;
        SCOPED_TRACE(absl::StrCat(run.path, " ", impl, infer ? " warm" : " cold"));
        ReplayOptions o = run.options;
        o.allocator.impl = impl;
        o.infer_warm_start = infer;
        auto cached = ReplayFile(run.path, o);
        ASSERT_TRUE(cached.ok()) << cached.status();
        in_passes += cached->import.rfind("streamed in ", 0) == 0;
        for (int64_t cap : {int64_t{0}, int64_t{300}}) {
          if (run.shipped && cap > 0) continue;
          o.stream_cache_bytes = cap;
          auto file = ReplayFile(run.path, o);
          ASSERT_TRUE(file.ok()) << file.status();
          EXPECT_EQ(file->import, cached->import) << cap;
          EXPECT_EQ(RenderReplayJson(*file), RenderReplayJson(*cached)) << cap;
          EXPECT_EQ(RenderReplayText(*file), RenderReplayText(*cached)) << cap;
        }
      }
    }
  }
  EXPECT_GE(in_passes, 12);
}

}  // namespace
}  // namespace gpusim::replay_stream_test
