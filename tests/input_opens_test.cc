// Note [One sniffer, one open] (sim/import/input.h): an input is classified
// once, and every pass of its replay reads it through the one open the
// sniff made; a pass served from the event cache (Note [Later passes from
// memory]) reads nothing. Pinned with in-process counters (InputFileOpens,
// InputFd::sources), so no strace is needed and the test cannot be skipped;
// tests/input_opens_strace.sh checks the gpusim binary the same way where
// strace is installed.
#include <fstream>
#include <string>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "sim/import/byte_source.h"
#include "sim/import/input.h"
#include "sim/import/trace_path.h"
#include "sim/replay/explain_trace.h"
#include "sim/replay/replay.h"

namespace gpusim::input_opens_test {
namespace {

struct Counted {
  int64_t opens = -1;    // files opened, the sniff's included
  int64_t sources = -1;  // passes over the bytes of the one open
  ReplayResult replay;
};

ReplayOptions Options() {
  ReplayOptions o;
  o.default_capacity = Bytes(80LL << 30);
  o.default_capacity_source = "test";
  return o;
}

// Sniffs and replays shipped trace `name` as `gpusim replay` does.
Counted Replay(const std::string& name, InputKind want) {
  Counted c;
  const std::string path = RecordedTracePath(name);
  if (path.empty()) {
    ADD_FAILURE() << name << " is not shipped";
    return c;
  }
  const int64_t before = InputFileOpens();
  absl::StatusOr<Input> in = SniffInput(path);
  EXPECT_TRUE(in.ok()) << in.status();
  if (!in.ok()) return c;
  EXPECT_EQ(in->kind, want);
  auto r = ReplayFile(*in, Options());
  EXPECT_TRUE(r.ok()) << r.status();
  c.opens = InputFileOpens() - before;
  c.sources = in->file->sources();
  if (r.ok()) c.replay = *std::move(r);
  return c;
}

TEST(InputOpens, OnePassColdTraceIsOpenedAndReadOnce) {
  const Counted c = Replay("kineto_tbplugin_resnet50_v100_legacy_noaddr.pt.trace.json.gz", InputKind::kKineto);
  EXPECT_EQ(c.replay.import, "streamed");
  EXPECT_EQ(c.opens, 1);
  EXPECT_EQ(c.sources, 1);
}

// bert-small streams in 3 passes: the facts pass reads the file, passes 2
// and 3 replay from memory. Before them, the one-pass attempt read it as far
// as its first free of a block allocated before recording. Main opened it
// 14 times (issue 28).
TEST(InputOpens, ThreePassTraceIsOpenedOnce) {
  const Counted c = Replay("tracelens_h100_bert-small_inference.pt.trace.json.gz", InputKind::kKineto);
  EXPECT_TRUE(absl::StartsWith(c.replay.import, "streamed in 3 passes")) << c.replay.import;
  EXPECT_EQ(c.opens, 1);
  EXPECT_EQ(c.sources, 2);  // the one-pass attempt, the facts pass
}

TEST(InputOpens, SnapshotIsOpenedAndReadOnce) {
  const Counted c = Replay("cs336_gpt_training_snapshot.pickle", InputKind::kSnapshot);
  EXPECT_EQ(c.replay.format, "snapshot");
  EXPECT_EQ(c.opens, 1);
  EXPECT_EQ(c.sources, 1);
}

TEST(InputOpens, MemoryTimelineIsOpenedAndReadOnce) {
  const Counted c = Replay("hta_memory_timeline_raw.json.gz", InputKind::kMemoryTimeline);
  EXPECT_EQ(c.replay.format, "memory_timeline");
  EXPECT_EQ(c.opens, 1);
  EXPECT_EQ(c.sources, 1);
}

TEST(InputOpens, ExplainReadsTheSniffedOpen) {
  const std::string path = RecordedTracePath("tracelens_h100_bert-small_inference.pt.trace.json.gz");
  ASSERT_FALSE(path.empty());
  const int64_t before = InputFileOpens();
  absl::StatusOr<Input> in = SniffInput(path);
  ASSERT_TRUE(in.ok()) << in.status();
  ASSERT_TRUE(LoadTraceForExplain(*in).ok());
  EXPECT_EQ(InputFileOpens() - before, 1);
  EXPECT_EQ(in->file->sources(), 1);
}

std::string Write(const std::string& name, const std::string& bytes) {
  const std::string path = ::testing::TempDir() + "/" + name;
  std::ofstream(path, std::ios::binary) << bytes;
  return path;
}

// Step 1 of the Note: by name, nothing opened; step 2: by content.
TEST(SniffInput, KindsByNameAndByContent) {
  struct Case {
    std::string name, bytes;
    InputKind kind;
    bool opened;
  } cases[] = {
      {"a.yaml", "model: x\n", InputKind::kRunConfig, false},
      {"a.yml", "{not: json}", InputKind::kRunConfig, false},
      {"a.hlo", "garbage", InputKind::kHloModule, false},
      {"a.txt", "# c\nHloModule m\n", InputKind::kHloModule, false},
      {"a.trace", "\n# comment\ngpusim-trace 1.5\n", InputKind::kNativeTrace, true},
      {"a.json", " {\"traceEvents\": []}", InputKind::kKineto, true},
      {"t.json", "[ [1, 0, 2, 3]]", InputKind::kMemoryTimeline, true},
      {"s.json", "{\"segments\": []}", InputKind::kSnapshot, true},
      {"s.pickle", "not even a pickle", InputKind::kSnapshot, true},
      {"p.bin", std::string("\x80\x04", 2), InputKind::kSnapshot, true},
      {"cfg", "model: llama\n", InputKind::kRunConfig, false},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const std::string path = Write(c.name, c.bytes);
    const int64_t before = InputFileOpens();
    absl::StatusOr<Input> in = SniffInput(path);
    ASSERT_TRUE(in.ok()) << in.status();
    EXPECT_EQ(InputKindName(in->kind), InputKindName(c.kind));
    EXPECT_EQ(in->file != nullptr, c.opened);
    EXPECT_LE(InputFileOpens() - before, 1);
  }
}

TEST(SniffInput, RefusesByName) {
  const std::string empty = Write("empty.json", "");
  EXPECT_EQ(SniffInput(empty).status().message(), empty + ": empty file");
  const std::string binary = Write("b.dat", std::string("ab\0c", 4));
  EXPECT_TRUE(absl::StrContains(SniffInput(binary).status().message(), "binary data (a NUL byte at offset 2)"))
      << SniffInput(binary).status();
  EXPECT_TRUE(absl::StrContains(SniffInput(::testing::TempDir()).status().message(), "a directory"));
}

}  // namespace
}  // namespace gpusim::input_opens_test
