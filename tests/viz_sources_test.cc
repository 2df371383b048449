// Recorded traces viewed as memory_viz views them (issue 32, deliverable 5):
// frames filtered as memory_viz's frameFilter (sim/trace/frames.h) wherever
// they are shown, blocks labelled and coloured by the user's innermost
// Python frame or a recorder's op (viz/alloc_source.h), the active memory
// timeline (viz/active_memory.cc), and a snapshot's timeline.json on its
// recorded clock (viz/perfetto.cc, Note [A snapshot's clock]).
//
// tests/data/snapshots/cpp_frames_snapshot.json is a snapshot as
// _record_memory_history(stacks="all") writes it, in the JSON form: every
// block's frames begin with the C++ unwinder, the allocator and ATen, go
// through the interpreter's ceval.c and Objects/call.c, and end in _start.
// Its blocks: 4 MiB from model.py:12 forward (live to the end), 2 MiB from
// torch/nn/functional.py's dropout called at model.py:14, and 1.5 MiB from
// torch/optim/adamw.py under train.py:33 (the user's opt.step() line).
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "sim/base/file_util.h"
#include "sim/config/loader.h"
#include "sim/replay/explain_trace.h"
#include "sim/step/step.h"
#include "sim/trace/trace_io.h"
#include "tests/cli_support.h"
#include "viz/alloc_source.h"
#include "viz/svg.h"
#include "viz/viz.h"
#include "viz/xml_check.h"

namespace gpusim::viz_sources_test {
namespace {

constexpr char kSnapshot[] = GPUSIM_SOURCE_DIR "/tests/data/snapshots/cpp_frames_snapshot.json";

// What memory_viz drops from these stacks, and must not be shown anywhere.
const std::vector<std::string>& Hidden() {
  static const auto* h = new std::vector<std::string>{"unwind::unwind", "CapturedTraceback::gather",
                                                      "gather_with_cpp", "_PyEval_EvalFrameDefault",
                                                      "_PyObject_MakeTpCall", "__libc_start_main", "boxing.h",
                                                      "RedispatchFunctions.h", "ceval.c", "Py_RunMain"};
  return *h;
}

size_t Count(const std::string& s, const std::string& what) {
  size_t n = 0;
  for (size_t at = s.find(what); at != std::string::npos; at = s.find(what, at + 1)) ++n;
  return n;
}

TEST(VizSources, ExplainShowsTheUsersFrameAndNoUnwinderFrames) {
  auto trace = LoadTraceForExplain(kSnapshot);
  ASSERT_TRUE(trace.ok()) << trace.status();
  const TracePeak p = ExplainTracePeak(*trace, "s", 5);
  const std::string text = RenderTracePeakText(p, 4);
  for (const std::string& h : Hidden()) EXPECT_EQ(text.find(h), std::string::npos) << h << "\n" << text;
  EXPECT_NE(text.find("      from model.py:12 forward (module model)\n"
                      "      c10::cuda::CUDACachingAllocator::Native::DeviceCachingAllocator::malloc"),
            std::string::npos)
      << text;
  // The dropout's block is the model's line, not torch/nn/functional.py's.
  EXPECT_NE(text.find("from model.py:14 forward (module model)"), std::string::npos) << text;
  const std::string json = RenderTracePeakJson(p);
  for (const std::string& h : Hidden()) EXPECT_EQ(json.find(h), std::string::npos) << h;
  EXPECT_NE(json.find("\"source\": \"model.py:12 forward\""), std::string::npos) << json;
  // 17 frames recorded, 7 shown (allocator, ATen, the binding, forward, _call_impl, train_step, <module>).
  EXPECT_NE(json.find("\"frames_hidden\": 10"), std::string::npos) << json;
}

TEST(VizSources, LabelColoursAreDeterministicDistinctAndLegible) {
  using viz_internal::LabelColor;
  EXPECT_EQ(LabelColor("model.py:12 forward"), LabelColor("model.py:12 forward"));
  EXPECT_NE(LabelColor("model.py:12 forward"), LabelColor("model.py:14 forward"));
  // Pinned: the same label has the same colour on every machine and run.
  EXPECT_EQ(LabelColor("model.py:12 forward"), "#a6c548");  // FNV-1a: no std::hash, no address
  for (int k = 0; k < 500; ++k) {
    const std::string c = LabelColor(absl::StrCat("f.py:", k, " g"));
    ASSERT_EQ(c.size(), 7u);
    auto hex = [&](size_t i) { return std::stoi(c.substr(i, 2), nullptr, 16); };
    const double lum = 0.299 * hex(1) + 0.587 * hex(3) + 0.114 * hex(5);
    // Neither near-white (a block lost on the page) nor near-black (its
    // label unreadable), and never the grey of "no stack recorded".
    EXPECT_GT(lum, 50) << c;
    EXPECT_LT(lum, 215) << c;
    EXPECT_NE(c, viz_internal::kUnknownSourceColor);
    const int spread = std::max({hex(1), hex(3), hex(5)}) - std::min({hex(1), hex(3), hex(5)});
    EXPECT_GT(spread, 40) << c << " is too grey to tell apart";
  }
}

// The snapshot through `gpusim viz`: every chart labels and colours by source.
class VizSnapshotCharts : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new std::string(::testing::TempDir() + "/viz_sources_snapshot");
    const Result r = Gpusim(absl::StrCat("viz ", kSnapshot, " --out ", *dir_));
    ASSERT_EQ(r.code, 0) << r.out;
  }
  static std::string File(const std::string& name) {
    auto s = ReadFileToString(*dir_ + "/" + name);
    EXPECT_TRUE(s.ok()) << s.status();
    return s.ok() ? *s : "";
  }
  static std::string* dir_;
};
std::string* VizSnapshotCharts::dir_ = nullptr;

TEST_F(VizSnapshotCharts, MemoryMapColoursAndLabelsBlocksByTheUsersFrame) {
  const std::string svg = File("memory_map.svg");
  EXPECT_TRUE(CheckXmlWellFormed(svg).ok());
  EXPECT_NE(svg.find("colour: source"), std::string::npos);
  for (const char* label : {"model.py:12 forward", "model.py:14 forward", "train.py:33 train_step"}) {
    EXPECT_NE(svg.find(absl::StrCat("fill=\"", viz_internal::LabelColor(label), "\"")), std::string::npos) << label;
    EXPECT_NE(svg.find(absl::StrCat(">", label, " ")), std::string::npos) << label;  // a block's label
  }
  EXPECT_NE(svg.find("module model"), std::string::npos);
  EXPECT_NE(svg.find("op, shape, dtype: not recorded"), std::string::npos);  // a snapshot has frames only
  EXPECT_EQ(svg.find("#bab0ac"), std::string::npos);  // no grey "temporary" block
  for (const std::string& h : Hidden()) EXPECT_EQ(svg.find(h), std::string::npos) << h;
}

TEST_F(VizSnapshotCharts, ActiveMemoryStacksEachAllocation) {
  const std::string svg = File("active_memory.svg");
  EXPECT_TRUE(CheckXmlWellFormed(svg).ok());
  EXPECT_NE(svg.find("live bytes by allocation"), std::string::npos);
  for (int b = 0; b < 3; ++b) EXPECT_GE(Count(svg, absl::StrCat("data-b=\"", b, "\"")), 1u) << b;
  EXPECT_NE(svg.find("peak 6.00 MiB at event 1"), std::string::npos);
  EXPECT_NE(svg.find(absl::StrCat("fill=\"", viz_internal::LabelColor("train.py:33 train_step"), "\"")),
            std::string::npos);
}

TEST_F(VizSnapshotCharts, TimelineJsonRunsOnTheRecordedClock) {
  const std::string json = File("timeline.json");
  EXPECT_NE(json.find("\"clock\":\"recorded (the trace's own timestamps)\""), std::string::npos) << json.substr(0, 600);
  // time_us of the first alloc is the origin; the window ends at the last
  // free_completed, 805 us later. Times are the recorder's (Note [A
  // snapshot's clock]).
  EXPECT_NE(json.find("\"time_bounds_us\":[1700000000000100,1700000000000905]"), std::string::npos);
  EXPECT_NE(json.find("\"recorded_time_origin_us\":1700000000000100"), std::string::npos);
  EXPECT_NE(json.find("{\"ph\":\"X\",\"pid\":1,\"tid\":100,\"ts\":1700000000000100,\"dur\":805,\"name\":\"recorded window\""),
            std::string::npos);
  // Each allocation a slice from its alloc to its free_completed (us).
  EXPECT_NE(json.find("{\"ph\":\"b\",\"cat\":\"buffer\",\"id\":\"0x1\",\"name\":\"model.py:14 forward\",\"pid\":1,"
                      "\"tid\":1,\"ts\":1700000000000250,"),
            std::string::npos);
  EXPECT_NE(json.find("{\"ph\":\"e\",\"cat\":\"buffer\",\"id\":\"0x1\",\"name\":\"model.py:14 forward\",\"pid\":1,"
                      "\"tid\":1,\"ts\":1700000000000410}"),
            std::string::npos);
  EXPECT_NE(json.find("\"frames_hidden\":10"), std::string::npos);
  for (const std::string& h : Hidden()) EXPECT_EQ(json.find(h), std::string::npos) << h;
}

TEST_F(VizSnapshotCharts, ReportShowsSourcesAndNoTestText) {
  const std::string html = File("report.html");
  EXPECT_NE(html.find("from model.py:12 forward; module model"), std::string::npos);
  for (const std::string& h : Hidden()) EXPECT_EQ(html.find(h), std::string::npos) << h;
  for (const char* t : {"render-check", "interaction-check", "selftest"}) {
    EXPECT_EQ(html.find(t), std::string::npos) << t;
  }
}

TEST(VizSources, ColorByOption) {
  const std::string dir = ::testing::TempDir() + "/viz_sources_color_by";
  Result r = Gpusim(absl::StrCat("viz ", kSnapshot, " --out ", dir, " --color-by allocation"));
  ASSERT_EQ(r.code, 0) << r.out;
  auto svg = ReadFileToString(dir + "/memory_map.svg");
  ASSERT_TRUE(svg.ok());
  EXPECT_NE(svg->find("one colour per allocation"), std::string::npos);
  EXPECT_EQ(svg->find(viz_internal::LabelColor("model.py:12 forward")), std::string::npos);
  r = Gpusim(absl::StrCat("viz ", kSnapshot, " --out ", dir, " --color-by module"));
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("--color-by: module not in {auto,role,source,allocation}"), std::string::npos) << r.out;
}

// A gpusim_torch recording (python/gpusim_torch): the alloc's name is the
// nn.Module path and the aten op, and the compute event after it carries
// the op's kind, dtype and matmul shape; the tensor's own shape is not in it.
constexpr char kRecorded[] =
    "gpusim-trace 1.2\n"
    "name recorded\n"
    "stream 0 compute\n"
    "alloc 0 1048576 role=parameter name=fc.weight phase=other\n"
    "alloc 1 65536 role=activation name=fc:mm\n"
    "compute fc:mm kind=matmul dtype=f32 flops=8388608 m=64 n=256 k=1024 uses=0,1 op=mm\n"
    "alloc 2 4096 role=temporary\n"
    "free 2\n"
    "free 1\n"
    "end 6\n";

// `trace` through pytorch_caching on an H100, from an empty allocator.
StepReport ReportOf(const Trace& trace) {
  RunSpec spec;
  spec.device = *LoadDeviceSpec("h100-sxm-80gb");
  spec.allocator.impl = "pytorch_caching";
  auto r = ReportFromTrace(trace, spec);
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? *r : StepReport{};
}

StepReport ReportOf(const std::string& text) {
  std::istringstream in(text);
  auto trace = ReadTrace(in, "t.trace");
  EXPECT_TRUE(trace.ok()) << trace.status();
  return trace.ok() ? ReportOf(*trace) : StepReport{};
}

TEST(VizSources, RecorderOpsAreSourcesWithTheirFactsAndUnknownsSaid) {
  const StepReport r = ReportOf(kRecorded);
  const std::vector<viz_internal::AllocSource> s = viz_internal::AllocSources(r);
  ASSERT_EQ(s.size(), 3u);
  EXPECT_EQ(s[1].label, "fc:mm");
  EXPECT_EQ(s[1].module, "fc");
  EXPECT_EQ(s[1].op, "mm (matmul m=64 n=256 k=1024, f32)");
  EXPECT_EQ(viz_internal::SourceLines(s[1]),
            (std::vector<std::string>{"from fc:mm", "module fc",
                                      "op mm (matmul m=64 n=256 k=1024, f32); tensor shape not recorded"}));
  EXPECT_EQ(s[0].op, "");  // a parameter: no compute event made it
  EXPECT_EQ(s[2].label, "");  // unnamed
  EXPECT_EQ(viz_internal::SourceLines(s[2]), (std::vector<std::string>{"source: no stack or op recorded"}));
  // Roles recorded: coloured by role, stacked by role.
  EXPECT_EQ(viz_internal::ResolveColorBy(r, s, VizColorBy::kAuto), VizColorBy::kRole);
  const std::string active = ActiveMemorySvg(r);
  EXPECT_TRUE(CheckXmlWellFormed(active).ok());
  EXPECT_NE(active.find("live bytes by role"), std::string::npos);
  EXPECT_NE(MemoryMapSvg(r).find("op mm (matmul m=64 n=256 k=1024, f32)"), std::string::npos);
}

TEST(VizSources, NoStacksNoNamesOneColourPerAllocation) {
  const StepReport r = ReportOf(
      "gpusim-trace 1\nname bare\nstream 0 compute\nalloc 7 4194304 name=0x7f0000000000\n"
      "alloc 8 2097152 name=0x7f0000400000\nfree 8\nend 3\n");
  const std::vector<viz_internal::AllocSource> s = viz_internal::AllocSources(r);
  EXPECT_EQ(viz_internal::ResolveColorBy(r, s, VizColorBy::kAuto), VizColorBy::kAllocation);
  const std::string map = MemoryMapSvg(r);
  EXPECT_NE(map.find("one colour per allocation"), std::string::npos);
  EXPECT_NE(map.find(absl::StrCat("fill=\"", std::string(viz_internal::AllocationColor(0)), "\"")), std::string::npos);
  EXPECT_NE(map.find(absl::StrCat("fill=\"", std::string(viz_internal::AllocationColor(1)), "\"")), std::string::npos);
}

TEST(VizSources, ActiveMemorySummarizesPastItsLimitAndKeepsThePeak) {
  const StepReport r = ReportOf(
      "gpusim-trace 1\nname three\nstream 0 compute\nalloc 0 4194304\nalloc 1 2097152\nfree 0\n"
      "alloc 2 1048576\nfree 1\nfree 2\nend 6\n");
  VizOptions o;
  o.max_active_allocations = 1;
  o.color_by = VizColorBy::kAllocation;
  const std::string svg = ActiveMemorySvg(r, o);
  EXPECT_TRUE(CheckXmlWellFormed(svg).ok());
  EXPECT_NE(svg.find("2 smaller allocations"), std::string::npos);
  EXPECT_EQ(Count(svg, "data-b=\"0\""), 1u);  // the largest, its own band
  EXPECT_EQ(svg.find("data-b=\"1\""), std::string::npos);
  EXPECT_NE(svg.find("peak 6.00 MiB at event 1"), std::string::npos);
  EXPECT_EQ(ActiveMemorySvg(r, o), svg);  // same input, same bytes
}

TEST(VizSources, ActiveMemoryMergesTheRestPerSource) {
  auto trace = LoadTraceForExplain(kSnapshot);
  ASSERT_TRUE(trace.ok()) << trace.status();
  const StepReport r = ReportOf(*trace);
  VizOptions o;
  o.max_active_allocations = 1;  // the 4 MiB block its own band; the others merged per source
  const std::string svg = ActiveMemorySvg(r, o);
  EXPECT_TRUE(CheckXmlWellFormed(svg).ok());
  EXPECT_NE(svg.find("2 smaller ones merged per source on top"), std::string::npos);
  for (const char* label : {"model.py:14 forward", "train.py:33 train_step"}) {
    EXPECT_NE(svg.find(absl::StrCat("1 smaller allocations from ", label, ", merged")), std::string::npos) << label;
    EXPECT_NE(svg.find(absl::StrCat("fill=\"", viz_internal::LabelColor(label), "\"")), std::string::npos) << label;
  }
  EXPECT_EQ(svg.find("smaller allocations, summarized"), std::string::npos);  // no grey band left
}

TEST(VizSources, PerfettoPlacesUntimedEventsInEventOrderAndSaysSo) {
  // No timed events: the event clock, unless recorded times are given.
  const StepReport r = ReportOf(
      "gpusim-trace 1\nname t\nstream 0 compute\nalloc 0 4096\nalloc 1 8192\nfree 1\nfree 0\nend 4\n");
  EXPECT_NE(PerfettoJson(r).find("\"clock\":\"memory events (1 ns each; the recording has no timestamps)\""),
            std::string::npos);
  // Event 0 untimed (a block live before the window), then 1,002, 1,005
  // and 1,009 us on the recorder's clock.
  const std::vector<SimTime> times = {SimTime(-1), SimTime(1000000 + 2000), SimTime(1000000 + 5000),
                                      SimTime(1000000 + 9000)};
  VizOptions o;
  o.recorded_times = &times;
  const std::string json = PerfettoJson(r, o);
  EXPECT_NE(json.find("\"events_without_recorded_time\":1"), std::string::npos) << json.substr(0, 500);
  EXPECT_NE(json.find("1 events without one placed in event order"), std::string::npos);
  EXPECT_NE(json.find("\"time_bounds_us\":[1002,1009]"), std::string::npos);
  EXPECT_NE(json.find("\"id\":\"0x1\",\"name\":\"buffer 1\",\"pid\":1,\"tid\":1,\"ts\":1002,"), std::string::npos);
  EXPECT_NE(json.find("\"id\":\"0x1\",\"name\":\"buffer 1\",\"pid\":1,\"tid\":1,\"ts\":1005}"), std::string::npos);
  EXPECT_NE(json.find("\"id\":\"0x0\",\"name\":\"buffer 0\",\"pid\":1,\"tid\":1,\"ts\":1009}"), std::string::npos);
}

}  // namespace
}  // namespace gpusim::viz_sources_test
