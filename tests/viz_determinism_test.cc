// Same input, same chart bytes (issue 17, deliverable 4): the dataflow graph
// laid out by Graphviz in one process (heap churn between calls) and across
// processes (`gpusim run --out` and `gpusim viz --out` twice), and every file
// of an --out directory compared byte for byte. The cause of the variants
// this used to produce: Note [Deterministic Graphviz IDs] in viz/graphviz.cc.
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "sim/base/file_util.h"
#include "sim/config/loader.h"
#include "sim/step/step.h"
#include "viz/graphviz.h"
#include "viz/viz.h"

namespace gpusim::viz_determinism_test {
namespace {

int Sh(const std::string& cmd) {
  const int st = std::system(cmd.c_str());
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

TEST(VizDeterminism, DataflowLayoutIsTheSameOnEveryCallInOneProcess) {
  auto spec = LoadRunSpec(GPUSIM_SOURCE_DIR "/examples/scan_carry.yaml", {"loop.trip_count=2"});
  ASSERT_TRUE(spec.ok()) << spec.status();
  auto rolled = SimulateStep(*spec);
  ASSERT_TRUE(rolled.ok()) << rolled.status();
  spec->loop.mode = "unrolled";
  auto unrolled = SimulateStep(*spec);
  ASSERT_TRUE(unrolled.ok()) << unrolled.status();
  VizOptions o;
  o.other_loop_mode = &*unrolled;
  const std::string dot = DataflowDot(*rolled, o);
  auto first = RenderDot(dot, "svg");
  ASSERT_TRUE(first.ok()) << first.status();
  std::vector<std::unique_ptr<std::string>> churn;  // moves the heap between calls
  for (int i = 0; i < 4; ++i) {
    for (int k = 0; k < 64; ++k) churn.push_back(std::make_unique<std::string>(static_cast<size_t>(17 * k + i), 'x'));
    auto again = RenderDot(dot, "svg");
    ASSERT_TRUE(again.ok()) << again.status();
    EXPECT_EQ(*again, *first) << "call " << i;
  }
}

// Every file two runs wrote into `a` and `b`.
void ExpectSameFiles(const std::string& a, const std::string& b) {
  for (const char* name : {"dataflow.dot", "dataflow.svg", "dataflow.png", "memory_map.svg", "memory_map.png",
                           "lifetimes.svg", "lifetimes.png", "timeline.svg", "timeline.png", "active_memory.svg",
                           "active_memory.png", "timeline.json", "report.html"}) {
    auto x = ReadFileToString(a + "/" + name);
    auto y = ReadFileToString(b + "/" + name);
    ASSERT_TRUE(x.ok()) << x.status();
    ASSERT_TRUE(y.ok()) << y.status();
    EXPECT_FALSE(x->empty()) << name;
    EXPECT_TRUE(*x == *y) << name << " differs between two identical runs";
  }
}

TEST(VizDeterminism, TwoRunsWriteTheSameBytes) {
  const std::string dir = ::testing::TempDir() + "/viz_determinism_" + std::to_string(getpid());
  ASSERT_EQ(Sh("mkdir -p " + dir), 0);
  const std::string bin = GPUSIM_BINARY;
  for (int i = 0; i < 2; ++i) {
    ASSERT_EQ(Sh(bin + " run " GPUSIM_SOURCE_DIR "/examples/scan_carry.yaml --set loop.trip_count=2 --out " + dir +
                 "/run" + std::to_string(i) + " >/dev/null"), 0);
    ASSERT_EQ(Sh(bin + " viz " GPUSIM_SOURCE_DIR
                 "/traces/recorded/tracelens_h100_bert-small_inference.pt.trace.json.gz --out " + dir + "/viz" +
                 std::to_string(i) + " >/dev/null"), 0);
    // A snapshot: coloured by source (label hashes), on its recorded clock.
    ASSERT_EQ(Sh(bin + " viz " GPUSIM_SOURCE_DIR "/tests/data/snapshots/cpp_frames_snapshot.json --out " + dir +
                 "/snap" + std::to_string(i) + " >/dev/null"), 0);
  }
  ExpectSameFiles(dir + "/run0", dir + "/run1");
  ExpectSameFiles(dir + "/viz0", dir + "/viz1");
  ExpectSameFiles(dir + "/snap0", dir + "/snap1");
  Sh("rm -rf " + dir);
}

}  // namespace
}  // namespace gpusim::viz_determinism_test
