// Tests of the memory-snapshot importer (sim/import/snapshot.h), whose
// pickle reader (sim/import/pickle.h) must refuse any pickle naming a class.
#include <sys/stat.h>

#include <cstdlib>
#include <fstream>
#include <map>
#include <string>

#include "gtest/gtest.h"

#include "sim/import/byte_source.h"
#include "sim/import/import.h"
#include "sim/import/snapshot.h"
#include "sim/import/trace_path.h"
#include "sim/trace/validate.h"
#include "viz/pickle.h"

namespace gpusim::import_snapshot_test {
namespace {


constexpr char kSnapshot[] = "cs336_gpt_training_snapshot.pickle";

bool HavePython() { return std::system("python3 -c pass >/dev/null 2>&1") == 0; }

TEST(ImportSnapshotTest, GptTrainingSnapshot) {
  const std::string path = RecordedTracePath(kSnapshot);
  if (path.empty()) GTEST_SKIP() << kSnapshot << " is in neither traces/recorded/ nor ../shared/traces/";
  auto s = LoadSnapshot(path);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->segments.size(), 216u);
  EXPECT_EQ(s->TotalReserved(), Bytes(14180941824));  // 14.18 GB
  size_t blocks = 0;
  std::map<std::string, int> states;
  for (const SnapshotSegment& seg : s->segments) {
    Bytes in_blocks;
    for (const SnapshotBlock& b : seg.blocks) {
      ++blocks;
      ++states[b.state];
      in_blocks += b.size;
      // PyTorch keeps an inactive block's last requested size, so only
      // allocated blocks promise requested_size <= size.
      if (b.state == "active_allocated") {
        EXPECT_LE(b.requested_size, b.size);
      }
    }
    EXPECT_EQ(in_blocks, seg.total_size) << "blocks tile their segment";
  }
  EXPECT_EQ(blocks, 455u);
  EXPECT_EQ(states["active_allocated"], 229);
  EXPECT_EQ(states["inactive"], 226);
  EXPECT_EQ(s->segments[0].address, 47294971904);
  EXPECT_EQ(s->segments[0].segment_type, "large");

  ASSERT_EQ(s->trace.memory_events.size(), 5163u);
  std::map<MemoryEventKind, int> kinds;
  for (const RecordedMemoryEvent& m : s->trace.memory_events) ++kinds[m.kind];
  EXPECT_EQ(kinds[MemoryEventKind::kAlloc], 1721);
  EXPECT_EQ(kinds[MemoryEventKind::kFreeRequested], 1721);
  EXPECT_EQ(kinds[MemoryEventKind::kFreeCompleted], 1721);
  const RecordedMemoryEvent& first = s->trace.memory_events[0];
  EXPECT_EQ(first.address, 47294971904);
  EXPECT_EQ(first.size, Bytes(25165824));
  EXPECT_EQ(first.time, SimTime(int64_t{1776479641085368} * 1000));

  EXPECT_TRUE(s->allocator_settings.present);
  EXPECT_EQ(s->allocator_settings.max_split_size, -1);
  EXPECT_EQ(s->allocator_settings.expandable_segments, false);
  EXPECT_EQ(s->allocator_settings.garbage_collection_threshold, 0.0);

  ConversionStats st;
  auto native = ToNativeTrace(s->trace, {}, &st);
  ASSERT_TRUE(native.ok()) << native.status();
  EXPECT_TRUE(ValidateTrace(*native).ok()) << ValidateTrace(*native);
  EXPECT_EQ(st.allocs, 1721);
  EXPECT_EQ(st.frees, 1721);
  // Two blocks (327,680,000 B and 4 B) were allocated before recording began:
  // their free_completed entries have no alloc, so each gets an alloc at the
  // start of the native trace.
  EXPECT_EQ(st.frees_matched_by_address, 1719);
  EXPECT_EQ(st.allocs_before_recording, 2);
  EXPECT_EQ(st.bytes_before_recording, Bytes(327680004));
  EXPECT_EQ(st.size_mismatches, 0);

  auto via_import = ImportRecordedTrace(path);
  ASSERT_TRUE(via_import.ok()) << via_import.status();
  EXPECT_EQ(via_import->memory_events.size(), 5163u);
}

// validation/*/snapshots/ ships its pickles gzipped (x.pickle.gz): they load
// as the pickle they hold, and a gzipped JSON snapshot as its JSON.
TEST(ImportSnapshotTest, GzippedPickleAndJson) {
  auto s = LoadSnapshot(GPUSIM_SOURCE_DIR "/validation/h200_2026-12-04/snapshots/bert_test.pickle.gz");
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->trace.memory_events.size(), 900u);
  EXPECT_EQ(s->segments.size(), 10u);
  const std::string json = ::testing::TempDir() + "/snapshot.json.gz";
  ASSERT_EQ(std::system(("gzip -c " GPUSIM_SOURCE_DIR "/tests/data/snapshots/cpp_frames_snapshot.json > " + json).c_str()),
            0);
  auto j = LoadSnapshot(json);
  ASSERT_TRUE(j.ok()) << j.status();
  EXPECT_EQ(j->trace.memory_events.size(), 8u);
}

// Note [One reader, two sources]: a pickle's values read directly give
// what its JSON gives, on recorded snapshots (one with stack frames).
TEST(ImportSnapshotTest, PickleReadDirectlyAsThroughItsJson) {
  for (const std::string& path : {std::string(GPUSIM_SOURCE_DIR "/traces/recorded/") + kSnapshot,
                                 std::string(GPUSIM_SOURCE_DIR "/validation/h200_2026-12-04/snapshots/t5_test.pickle.gz")}) {
    auto src = OpenByteSource(path);
    ASSERT_TRUE(src.ok()) << src.status();
    std::string bytes, chunk(1 << 20, '\0');
    for (;;) {
      auto got = (*src)->Read(chunk.data(), chunk.size());
      ASSERT_TRUE(got.ok()) << got.status();
      if (*got == 0) break;
      bytes.append(chunk.data(), *got);
    }
    auto direct = ParseSnapshotPickle(bytes, path);
    auto json = ParseSnapshotPickle(bytes, path, PickleRead::kThroughJson);
    ASSERT_TRUE(direct.ok()) << direct.status();
    ASSERT_TRUE(json.ok()) << json.status();
    EXPECT_TRUE(direct->segments == json->segments) << path;
    EXPECT_TRUE(direct->allocator_settings == json->allocator_settings) << path;
    EXPECT_TRUE(direct->trace.memory_events == json->trace.memory_events) << path;
    EXPECT_EQ(direct->trace.frames, json->trace.frames) << path;
    EXPECT_TRUE(direct->trace.live_through == json->trace.live_through) << path;
  }
}

TEST(ImportSnapshotTest, PickleReaderRefusesAnyClass) {
  if (!HavePython()) GTEST_SKIP() << "python3 needed to write the pickles";
  const std::string evil = ::testing::TempDir() + "/with_class.pickle";
  const std::string marker = ::testing::TempDir() + "/pickle_ran_code";
  std::remove(marker.c_str());
  // A pickle whose loading would call os.system: the reader must refuse it
  // (no class is ever loaded) before anything runs.
  const std::string make =
      "python3 -c \"import pickle,os\n"
      "class E:\n"
      "  def __reduce__(self): return (os.system, ('touch " + marker + "',))\n"
      "pickle.dump({'segments': [], 'x': E()}, open('" + evil + "', 'wb'))\"";
  ASSERT_EQ(std::system(make.c_str()), 0);
  auto s = LoadSnapshot(evil);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(std::string(s.status().message()).find("STACK_GLOBAL: names posix.system: refused"), std::string::npos)
      << s.status();
  struct stat sb;
  EXPECT_NE(stat(marker.c_str(), &sb), 0) << "the pickle's code ran";

  // A harmless class (collections.OrderedDict) is refused too.
  const std::string od = ::testing::TempDir() + "/ordered.pickle";
  ASSERT_EQ(std::system(("python3 -c \"import pickle,collections; pickle.dump("
                         "{'segments': collections.OrderedDict()}, open('" + od +
                         "', 'wb'))\"").c_str()),
            0);
  auto o = LoadSnapshot(od);
  ASSERT_FALSE(o.ok());
  EXPECT_NE(std::string(o.status().message()).find("collections.OrderedDict"), std::string::npos)
      << o.status();
}

// gpusim's own snapshot pickles (viz/pickle.h PickleWriter, `--snapshot
// FILE.pickle`) read back.
TEST(ImportSnapshotTest, ReadsWhatPickleWriterWrites) {
  PickleWriter p;
  p.BeginDict();
  p.Str("segments");
  p.BeginList();
  p.BeginDict();
  p.Str("address");
  p.Int(int64_t{1} << 40);
  p.Str("total_size");
  p.Int(2097152);
  p.Str("blocks");
  p.BeginList();
  p.EndList();
  p.EndDict();
  p.EndList();
  p.Str("device_traces");
  p.BeginList();
  p.BeginList();
  p.BeginDict();
  p.Str("action");
  p.Str("alloc");
  p.Str("addr");
  p.Int(int64_t{1} << 40);
  p.Str("size");
  p.Int(512);
  p.Str("time_us");
  p.Int(3);
  p.EndDict();
  p.EndList();
  p.EndList();
  p.Str("allocator_settings");
  p.BeginDict();
  p.Str("garbage_collection_threshold");
  p.Float(0.5);
  p.Str("roundup_power2_divisions");
  p.BeginTuple();
  p.Int(1);
  p.EndTuple();
  p.EndDict();
  p.EndDict();
  const std::string path = ::testing::TempDir() + "/written.pickle";
  {
    std::ofstream f(path, std::ios::binary);
    f << p.Finish();
  }
  auto s = LoadSnapshot(path);
  ASSERT_TRUE(s.ok()) << s.status();
  ASSERT_EQ(s->segments.size(), 1u);
  EXPECT_EQ(s->segments[0].address, int64_t{1} << 40);
  EXPECT_EQ(s->TotalReserved(), Bytes(2097152));
  ASSERT_EQ(s->trace.memory_events.size(), 1u);
  EXPECT_EQ(s->trace.memory_events[0].size, Bytes(512));
  EXPECT_EQ(s->trace.memory_events[0].time, SimTime(3000));
  EXPECT_EQ(s->allocator_settings.garbage_collection_threshold, 0.5);
  ASSERT_EQ(s->allocator_settings.raw.size(), 2u);  // every key, with its JSON text
  EXPECT_EQ(s->allocator_settings.raw[0].second, "0.5");
  EXPECT_EQ(s->allocator_settings.raw[1].second, "[1]");
  std::remove(path.c_str());
}

TEST(ImportSnapshotTest, MalformedJsonNamesTheByteOffset) {
  auto a = ParseSnapshotJson(R"({"segments": [{"address": "x"}]})", "s.json");
  ASSERT_FALSE(a.ok());
  EXPECT_EQ(a.status().message(), "s.json: byte 26: \"address\": expected an integer");
  auto b = ParseSnapshotJson(R"({"segments": [], "device_traces": [[{"action": "teleport"}]]})",
                             "s.json");
  ASSERT_FALSE(b.ok());
  EXPECT_NE(std::string(b.status().message()).find("byte 36: unknown trace entry action 'teleport'"),
            std::string::npos)
      << b.status();
  auto c = ParseSnapshotJson(R"({"segments": [{"address": 1,)", "s.json");
  ASSERT_FALSE(c.ok());
  EXPECT_NE(std::string(c.status().message()).find("s.json: byte "), std::string::npos)
      << c.status();
  auto d = ParseSnapshotJson(R"({"device_traces": []})", "s.json");
  ASSERT_FALSE(d.ok());
  EXPECT_NE(std::string(d.status().message()).find("no \"segments\""), std::string::npos);
  auto e = ParseSnapshotJson("[1]", "s.json");
  ASSERT_FALSE(e.ok());
  auto f = ParseSnapshotJson(
      R"({"segments": [], "device_traces": [[{"action": "alloc", "addr": 16, "size": 8, "stream": 0, "time_us": 5}, {"action": "free_completed", "addr": 16, "size": 8, "stream": 0, "time_us": 6}]]})",
      "s.json");
  ASSERT_TRUE(f.ok()) << f.status();
  ASSERT_EQ(f->trace.memory_events.size(), 2u);
  EXPECT_EQ(f->trace.memory_events[1].kind, MemoryEventKind::kFreeCompleted);
}


}  // namespace
}  // namespace gpusim::import_snapshot_test
