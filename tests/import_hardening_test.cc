// Malformed recorded traces, native traces and configs: each gives a Status
// whose text names a byte offset, an event index or FILE:LINE:COL, never a
// crash. Includes every input the fuzzers (tests/fuzz/README.md) found, from
// tests/fuzz/regressions/<target>/, fed the way the fuzzer feeds it.
#include <zlib.h>

#include <algorithm>
#include <climits>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

#include "models/jax_program.h"
#include "sim/config/loader.h"
#include "sim/import/byte_source.h"
#include "sim/import/kineto.h"
#include "sim/import/memory_timeline.h"
#include "sim/import/recorded_trace.h"
#include "sim/import/snapshot.h"
#include "sim/trace/trace_io.h"
#include "sim/trace/validate.h"

namespace gpusim::import_hardening_test {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

std::string Message(const absl::Status& s) { return std::string(s.message()); }

absl::StatusOr<RecordedTrace> Kineto(const std::string& text) {
  auto src = StringByteSource(text);
  return ImportKinetoTrace(*src, "t.json");
}

absl::StatusOr<RecordedTrace> Timeline(const std::string& text) {
  auto src = StringByteSource(text);
  return ImportMemoryTimelineRaw(*src, "m.json");
}

// Writes `bytes` gzip-compressed to a temporary file, cut to `keep` bytes of
// the compressed stream (npos: whole).
std::string WriteGzip(const std::string& name, const std::string& bytes,
                      size_t keep = std::string::npos) {
  const std::string whole = ::testing::TempDir() + "/" + name + ".whole.gz";
  gzFile g = gzopen(whole.c_str(), "wb");
  gzwrite(g, bytes.data(), static_cast<unsigned>(bytes.size()));
  gzclose(g);
  std::ifstream in(whole, std::ios::binary);
  std::string gz((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::string path = ::testing::TempDir() + "/" + name;
  std::ofstream(path, std::ios::binary) << gz.substr(0, keep);
  return path;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

std::vector<std::string> RegressionFiles(const std::string& target) {
  std::vector<std::string> files;
  const std::filesystem::path dir =
      std::filesystem::path(GPUSIM_SOURCE_DIR) / "tests/fuzz/regressions" / target;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) files.push_back(e.path());
  std::sort(files.begin(), files.end());
  return files;
}

// --- Inputs the fuzzers found -------------------------------------------------

TEST(FuzzRegressionTest, KinetoInputs) {
  for (const std::string& path : RegressionFiles("kineto")) {
    auto t = ImportKinetoTrace(path);  // the file path: gzip through zlib
    if (t.ok()) continue;
    EXPECT_TRUE(t.status().code() == absl::StatusCode::kInvalidArgument ||
                t.status().code() == absl::StatusCode::kDataLoss)
        << path << ": " << t.status();
    EXPECT_TRUE(Message(t.status()).find("byte ") != std::string::npos ||
                Message(t.status()).find("decompressed bytes") != std::string::npos)
        << path << ": " << t.status();
  }
}

// kineto_fuzzer (issue 17's libFuzzer runs): a JSON object without a
// "traceEvents" array was refused with no position; it now names the
// object's closing brace (regressions/kineto/no_trace_events_array.json).
TEST(FuzzRegressionTest, ObjectWithoutTraceEventsNamesItsEnd) {
  auto t = Kineto(R"({"schemaVersion": 1, "x": [1]})");
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Message(t.status()),
              HasSubstr("byte 29: no \"traceEvents\" array at the top level: not a recorded trace gpusim reads"));
}

TEST(FuzzRegressionTest, CorruptGzipNamesThePathOnce) {
  const std::string path =
      std::string(GPUSIM_SOURCE_DIR) + "/tests/fuzz/regressions/kineto/corrupt_gzip_crc.json.gz";
  auto t = ImportKinetoTrace(path);
  ASSERT_EQ(t.status().code(), absl::StatusCode::kDataLoss) << t.status();
  EXPECT_THAT(Message(t.status()), StartsWith(path + ": gzip: incorrect data check after "));
  EXPECT_THAT(Message(t.status()), HasSubstr("decompressed bytes"));
}

TEST(FuzzRegressionTest, SnapshotInputs) {
  for (const std::string& path : RegressionFiles("snapshot")) {
    auto s = ParseSnapshotJson(ReadFile(path), "s.json");
    if (s.ok()) continue;
    EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument) << path;
    EXPECT_THAT(Message(s.status()), HasSubstr("s.json: byte ")) << path;
  }
  // time_us * 1000 overflowed int64 (UBSan: signed integer overflow).
  auto s = ParseSnapshotJson(R"({"segments": [], "device_traces": [[{"action": "alloc",
      "addr": 1, "size": 8, "time_us": 171776479641085878}]]})",
                             "s.json");
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(Message(s.status()),
              HasSubstr("byte 95: \"time_us\": 171776479641085878 us is out of range"));
}

TEST(FuzzRegressionTest, EmptySnapshotIsAnErrorNotANullRead) {
  // simdjson's iterate() fails on empty input; asking that document for its
  // location read through a null pointer (UBSan).
  for (const std::string text : {"", "  \n"}) {
    auto s = ParseSnapshotJson(text, "s.json");
    ASSERT_FALSE(s.ok());
    EXPECT_EQ(Message(s.status()), "s.json: byte 0: empty file, expected a snapshot JSON object");
  }
}

// --- Truncated gzip and truncated JSON in each importer -------------------------

TEST(MalformedTraceTest, TruncatedGzip) {
  const std::string kineto_doc =
      R"({"traceEvents": [)" + std::string(2000, ' ') +
      R"({"ph":"i","name":"[memory]","ts":1,"args":{"Device Type":1,"Bytes":8}}]})";
  const std::string timeline_doc = "[[1, 2, 8, 0]," + std::string(2000, ' ') + "[2, 4, -8, 0]]";
  const std::string k = WriteGzip("k.json.gz", kineto_doc, 20);
  const std::string m = WriteGzip("m.json.gz", timeline_doc, 20);
  for (auto t : {ImportKinetoTrace(k), ImportMemoryTimelineRaw(m)}) {
    ASSERT_EQ(t.status().code(), absl::StatusCode::kDataLoss) << t.status();
    EXPECT_THAT(Message(t.status()), HasSubstr("decompressed bytes (truncated .gz file?)"));
  }
}

TEST(MalformedTraceTest, TruncatedJson) {
  // A whole gzip stream whose JSON stops mid-row: the offset counts
  // decompressed bytes.
  auto m = ImportMemoryTimelineRaw(WriteGzip("cut.json.gz", "[[1, 2, 8, 0], [2, 4, -8"));
  ASSERT_FALSE(m.ok());
  EXPECT_THAT(Message(m.status()),
              HasSubstr("byte 24 of the decompressed input: unexpected end of input inside the "
                        "array opened at byte 15 (truncated file?)"));
  auto k = Kineto(R"({"traceEvents": [{"ph":"i","name":"[memory]","ts":1,"args":{"Bytes":"1)");
  ASSERT_FALSE(k.ok());
  EXPECT_THAT(Message(k.status()), HasSubstr("t.json: byte 70: unexpected end of input inside the "
                                             "object opened at byte 59 (truncated file?)"));
  auto s = ParseSnapshotJson(R"({"segments": [{"address": 1, "blocks": [{"size": 2)", "s.json");
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(Message(s.status()), HasSubstr("s.json: byte "));
}

// --- Wrong types -----------------------------------------------------------------

TEST(MalformedTraceTest, WrongTypes) {
  auto k = Kineto(R"({"traceEvents": [{"ph":"i","name":"[memory]","ts":"1","args":{"Bytes":8}}]})");
  ASSERT_FALSE(k.ok());
  EXPECT_THAT(Message(k.status()),
              HasSubstr("t.json: byte 50: \"ts\": expected a number of microseconds, got '\"1\"'"));
  auto k2 = Kineto(R"({"traceEvents": [{"ph":"i","name":"[memory]","ts":1,"args":[8]}]})");
  ASSERT_FALSE(k2.ok());
  EXPECT_THAT(Message(k2.status()), HasSubstr("byte 59: \"args\": expected an object, got '['"));
  auto m = Timeline(R"([[1, 2, 8, 0], [2, "4", -8, 0]])");
  ASSERT_FALSE(m.ok());
  EXPECT_THAT(Message(m.status()), HasSubstr("m.json: byte 19: expected an integer in a "
                                             "[timestamp_ns, action, bytes, category] row"));
  auto s = ParseSnapshotJson(R"({"segments": [{"blocks": [{"size": "8"}]}]})", "s.json");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(Message(s.status()), "s.json: byte 35: \"size\": expected an integer");
  auto s2 = ParseSnapshotJson(R"({"segments": {}})", "s.json");
  ASSERT_FALSE(s2.ok());
  EXPECT_EQ(Message(s2.status()), "s.json: byte 13: segments: expected an array");
}

// --- Negative and out-of-range sizes ---------------------------------------------

TEST(MalformedTraceTest, NegativeAndOutOfRangeSizes) {
  struct Case {
    std::string text, want;
  } kineto[] = {
      // -INT64_MIN does not exist: the free's size cannot be taken.
      {R"({"traceEvents": [{"ph":"i","name":"[memory]","ts":1,"args":{"Device Type":1,)"
       R"("Bytes":-9223372036854775808}}]})",
       "t.json: byte 17: [memory] event: args.Bytes -9223372036854775808 is out of range"},
      {R"({"traceEvents": [{"ph":"i","name":"[memory]","ts":1,"args":{"Device Type":1,)"
       R"("Bytes":8,"Total Allocated":-8}}]})",
       "t.json: byte 17: [memory] event: negative args.\"Total Allocated\" -8"},
      {R"({"traceEvents": [{"ph":"i","name":"[memory]","ts":1,"args":{"Device Type":1,)"
       R"("Bytes":8,"Total Reserved":-1}}]})",
       "t.json: byte 17: [memory] event: negative args.\"Total Reserved\" -1"},
      {R"({"traceEvents": [{"ph":"i","name":"[memory]","ts":1,"args":{"Device Type":1,)"
       R"("Device Id":4294967296,"Bytes":8}}]})",
       "t.json: byte 17: [memory] event: args.\"Device Id\" 4294967296 is out of range"},
  };
  for (const Case& c : kineto) {
    auto t = Kineto(c.text);
    ASSERT_FALSE(t.ok()) << c.text;
    EXPECT_THAT(Message(t.status()), HasSubstr(c.want));
  }
  auto m = Timeline("[[1, 2, -8, 0]]");
  ASSERT_FALSE(m.ok());
  EXPECT_THAT(Message(m.status()), HasSubstr("m.json: byte 1: negative bytes -8 on a create row"));
  auto m2 = Timeline("[[1, 2, 8, 0], [1, 4, -9223372036854775808, 0]]");
  ASSERT_FALSE(m2.ok());
  EXPECT_THAT(Message(m2.status()),
              HasSubstr("m.json: byte 15: bytes -9223372036854775808 is out of range"));
  for (const std::string text : {
           R"({"segments": [{"total_size": -2097152}]})",
           R"({"segments": [{"blocks": [{"size": 512, "requested_size": -1}]}]})",
           R"({"segments": [], "device_traces": [[{"action": "alloc", "size": -8}]]})"}) {
    auto s = ParseSnapshotJson(text, "s.json");
    ASSERT_FALSE(s.ok()) << text;
    EXPECT_THAT(Message(s.status()), ::testing::MatchesRegex("s.json: byte [0-9]+: \"[a-z_]+\": "
                                                             "negative size -[0-9]+"));
  }
}

TEST(MalformedTraceTest, LiveBytesBeyondInt64AreAnErrorWithTheEventIndex) {
  RecordedTrace t;
  t.metadata.source_file = "big.json";
  for (int64_t addr : {0, 1}) {
    RecordedMemoryEvent a;
    a.address = addr;
    a.size = Bytes(INT64_MAX / 2 + 1);
    t.memory_events.push_back(a);
  }
  auto n = ToNativeTrace(t);
  ASSERT_FALSE(n.ok());
  EXPECT_EQ(Message(n.status()), "big.json: memory event 1 (alloc): live bytes exceed 2^63 - 1");

  // The same two allocs at one address: the second implies the first's free,
  // so live bytes never exceed one block.
  t.memory_events[1].address = 0;
  auto same = ToNativeTrace(t);
  ASSERT_TRUE(same.ok()) << same.status();
  EXPECT_TRUE(ValidateTrace(*same).ok());

  // Total Allocated + the first free's size overflows.
  RecordedTrace f;
  f.metadata.source_file = "f.json";
  RecordedMemoryEvent e;
  e.kind = MemoryEventKind::kFree;
  e.address = 7;
  e.size = Bytes(INT64_MAX);
  e.total_allocated = Bytes(1);
  f.memory_events.push_back(e);
  auto g = ToNativeTrace(f);
  ASSERT_FALSE(g.ok());
  EXPECT_THAT(Message(g.status()), HasSubstr("f.json: memory event 0 (free): Total Allocated"));

  // The native reader takes such sizes; ValidateTrace names the file, line and event.
  std::istringstream in("gpusim-trace 1\nalloc 0 9223372036854775807\nalloc 1 1\n");
  auto r = ReadTrace(in, "t.trace");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(Message(ValidateTrace(*r)), "t.trace:3: event 1 (alloc): live bytes exceed 2^63 - 1");
  EXPECT_EQ(ComputeTraceStats(*r).peak_live, Bytes(INT64_MAX));  // saturates
}

// --- Frees of unknown addresses --------------------------------------------------

TEST(MalformedTraceTest, FreeOfUnknownAddressIsABlockFromBeforeRecording) {
  // Kineto: a free at an address never allocated in the trace.
  auto k = Kineto(R"({"traceEvents": [)"
                  R"({"ph":"i","name":"[memory]","ts":1,"args":{"Device Type":1,"Addr":16,"Bytes":8}},)"
                  R"({"ph":"i","name":"[memory]","ts":2,"args":{"Device Type":1,"Addr":99,"Bytes":-32}}]})");
  ASSERT_TRUE(k.ok()) << k.status();
  // Snapshot: free_completed of an address with no alloc in device_traces.
  auto s = ParseSnapshotJson(
      R"({"segments": [], "device_traces": [[{"action": "free_requested", "addr": 64, "size": 32},)"
      R"( {"action": "free_completed", "addr": 64, "size": 32}]]})",
      "s.json");
  ASSERT_TRUE(s.ok()) << s.status();
  // Memory timeline: a destroy with no create of its size.
  auto m = Timeline("[[1, 2, 8, 0], [2, 4, -32, 0]]");
  ASSERT_TRUE(m.ok()) << m.status();
  for (const RecordedTrace* t : {&*k, &s->trace, &*m}) {
    ConversionStats st;
    auto n = ToNativeTrace(*t, {}, &st);
    ASSERT_TRUE(n.ok()) << n.status();
    EXPECT_EQ(st.allocs_before_recording, 1) << t->metadata.format;
    EXPECT_EQ(st.bytes_before_recording, Bytes(32)) << t->metadata.format;
    EXPECT_TRUE(ValidateTrace(*n).ok()) << t->metadata.format;
  }
}

// --- Streaming: reads of any size give the same result ---------------------------

class TrickleSource : public ByteSource {
 public:
  TrickleSource(std::string data, size_t chunk) : data_(std::move(data)), chunk_(chunk) {}
  absl::StatusOr<size_t> Read(char* buf, size_t n) override {
    const size_t k = std::min({n, chunk_, data_.size() - pos_});
    data_.copy(buf, k, pos_);
    pos_ += k;
    return k;
  }
  bool decompressed() const override { return false; }

 private:
  std::string data_;
  size_t chunk_;
  size_t pos_ = 0;
};

TEST(MalformedTraceTest, ReadsOfAnySizeGiveTheSameTrace) {
  const std::string seed =
      ReadFile(std::string(GPUSIM_SOURCE_DIR) + "/tests/fuzz/kineto/bert_small_h100.json");
  ASSERT_FALSE(seed.empty());
  auto whole = Kineto(seed);
  ASSERT_TRUE(whole.ok()) << whole.status();
  for (size_t chunk : {1, 2, 3, 7, 64, 4096}) {
    TrickleSource src(seed, chunk);
    auto t = ImportKinetoTrace(src, "t.json");
    ASSERT_TRUE(t.ok()) << chunk << ": " << t.status();
    ASSERT_EQ(t->memory_events.size(), whole->memory_events.size()) << chunk;
    ASSERT_EQ(t->ops.size(), whole->ops.size()) << chunk;
    for (size_t i = 0; i < t->memory_events.size(); ++i) {
      EXPECT_EQ(t->memory_events[i].address, whole->memory_events[i].address);
      EXPECT_EQ(t->memory_events[i].time, whole->memory_events[i].time);
    }
    // The same input cut short fails at the same byte whatever the reads.
    TrickleSource cut(seed.substr(0, seed.size() / 2), chunk);
    auto c = ImportKinetoTrace(cut, "t.json");
    ASSERT_FALSE(c.ok());
    EXPECT_EQ(c.status(), Kineto(seed.substr(0, seed.size() / 2)).status()) << chunk;
  }
}

// --- Configs held in memory ------------------------------------------------------

TEST(MalformedConfigTest, ParseRunSpecErrorsNameFileLineColumn) {
  auto ok = ParseRunSpec(ReadFile(std::string(GPUSIM_SOURCE_DIR) + "/examples/scan_carry.yaml"),
                         std::string(GPUSIM_SOURCE_DIR) + "/examples/scan_carry.yaml");
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_TRUE(ok->program.present);
  auto bad = ParseRunSpec("framework: jax\ndevice: a100-sxm-80gb\nmodel: llama2-7b\nloop: {trip_count: -1}\n",
                          "mem/run.yaml");
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(Message(bad.status()), StartsWith("mem/run.yaml:4:"));
  auto syntax = ParseRunSpec("a: [1, 2\n", "mem/run.yaml");
  ASSERT_FALSE(syntax.ok());
  EXPECT_THAT(Message(syntax.status()), StartsWith("mem/run.yaml:"));
}

TEST(MalformedConfigTest, ProgramSizesThatOverflowAreErrors) {
  const std::string path = std::string(GPUSIM_SOURCE_DIR) + "/examples/scan_carry.yaml";
  const std::string text = ReadFile(path);
  // From the config fuzzer: trip_count 2^63 - 1 overflowed Tensor::elements.
  auto huge = ParseRunSpec(text, path, {"loop.trip_count=9223372036854775807"});
  ASSERT_TRUE(huge.ok()) << huge.status();
  auto p = BuildJaxProgram(*huge);
  ASSERT_FALSE(p.ok());
  EXPECT_THAT(Message(p.status()), HasSubstr("loop.trip_count: 9223372036854775807 iterations"));
  // A shape whose bytes, stacked over the trip count, exceed int64.
  auto wide = ParseRunSpec(text, path, {"program.inputs.w1.shape=[1, 4611686018427387904]"});
  ASSERT_TRUE(wide.ok()) << wide.status();
  auto q = BuildJaxProgram(*wide);
  ASSERT_FALSE(q.ok());
  EXPECT_THAT(Message(q.status()),
              HasSubstr("program.inputs.w1: f32[1,4611686018427387904] stacked over trip_count 4 "
                        "exceeds 2^63 - 1 bytes"));
}

}  // namespace
}  // namespace gpusim::import_hardening_test
