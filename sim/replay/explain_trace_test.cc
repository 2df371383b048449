// Stack frames through import (a snapshot's `frames`, interned), through
// ToNativeTrace and the native format (1.1), into `explain TRACE`.
#include "sim/replay/explain_trace.h"

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "gtest/gtest.h"
#include "sim/import/byte_source.h"
#include "sim/import/kineto.h"
#include "sim/import/snapshot.h"
#include "sim/trace/trace_io.h"

namespace gpusim::explain_trace_test {
namespace {

// Two allocations in the window share their outer frame; a block live
// through the window has its own stack in `segments`.
constexpr char kSnapshotJson[] = R"({
  "segments": [{"device": 0, "address": 1048576000, "total_size": 20971520, "stream": 0,
    "segment_type": "large", "blocks": [
      {"address": 1048576000, "size": 8388608, "requested_size": 8388608, "state": "active_allocated",
       "frames": [{"filename": "/src/model.py", "line": 12, "name": "init_weights"},
                  {"filename": "train.py", "line": 3, "name": "<module>"}]},
      {"address": 1056964608, "size": 12582912, "requested_size": 0, "state": "inactive"}]}],
  "device_traces": [[
    {"action": "alloc", "addr": 1056964608, "size": 4194304, "stream": 0, "time_us": 1,
     "frames": [{"filename": "/src/model.py", "line": 40, "name": "forward"},
                {"filename": "train.py", "line": 3, "name": "<module>"}]},
    {"action": "alloc", "addr": 1061158912, "size": 2097152, "stream": 0, "time_us": 2,
     "frames": [{"filename": "/src/model.py", "line": 41, "name": "forward"},
                {"filename": "train.py", "line": 3, "name": "<module>"}]},
    {"action": "free_completed", "addr": 1061158912, "size": 2097152, "stream": 0, "time_us": 3,
     "frames": []},
    {"action": "free_completed", "addr": 1056964608, "size": 4194304, "stream": 0, "time_us": 4}
  ]]})";

TEST(ExplainTrace, SnapshotFramesAreInternedAndListedAtThePeak) {
  auto snap = ParseSnapshotJson(kSnapshotJson, "s.json");
  ASSERT_TRUE(snap.ok()) << snap.status();
  // Five frames in the file, four distinct.
  ASSERT_EQ(snap->trace.frames.size(), 4u);
  EXPECT_EQ(snap->trace.frames[0], (StackFrame{"init_weights", "/src/model.py", 12}));
  EXPECT_EQ(snap->trace.memory_events[0].stack, (std::vector<int32_t>{2, 1}));
  ASSERT_EQ(snap->trace.live_through.size(), 1u);
  EXPECT_EQ(snap->trace.live_through[0].stack, (std::vector<int32_t>{0, 1}));

  auto trace = ToNativeTrace(snap->trace, {});
  ASSERT_TRUE(trace.ok()) << trace.status();
  EXPECT_EQ(trace->frames.size(), 4u);
  const TracePeak p = ExplainTracePeak(*trace, "s.json", 10);
  EXPECT_EQ(p.peak_live, Bytes(8388608 + 4194304 + 2097152));
  EXPECT_EQ(p.live_blocks, 3);
  EXPECT_EQ(p.with_stack, 3);
  ASSERT_EQ(p.largest.size(), 3u);
  EXPECT_EQ(p.largest[0].size, Bytes(8388608));
  const std::string text = RenderTracePeakText(p);
  EXPECT_NE(text.find("init_weights (/src/model.py:12)"), std::string::npos) << text;
  EXPECT_NE(text.find("forward (/src/model.py:41)"), std::string::npos) << text;
  const std::string json = RenderTracePeakJson(p);
  EXPECT_NE(json.find("\"function\": \"init_weights\""), std::string::npos) << json;

  // The native file keeps them (format 1.1) and reads back the same.
  std::ostringstream out;
  ASSERT_TRUE(WriteTrace(*trace, out).ok());
  EXPECT_EQ(out.str().rfind("gpusim-trace 1.1\n", 0), 0u) << out.str();
  std::istringstream in(out.str());
  auto back = ReadTrace(in, "t");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->frames, trace->frames);
  EXPECT_EQ(RenderTracePeakText(ExplainTracePeak(*back, "s.json", 10)), text);
}

TEST(ExplainTrace, BadFrameIsAnErrorWithItsOffset) {
  auto snap = ParseSnapshotJson(
      R"({"segments": [], "device_traces": [[{"action": "alloc", "addr": 0, "size": 512, "frames": [{"line": -4}]}]]})",
      "s.json");
  ASSERT_FALSE(snap.ok());
  EXPECT_NE(snap.status().message().find("\"line\": expected a non-negative line number"), std::string::npos)
      << snap.status();
}

// A pickle's frames are read with everything else (sim/import/pickle.h).
TEST(ExplainTrace, PickleFramesSurviveThePickleReader) {
  if (std::system("python3 -c pass >/dev/null 2>&1") != 0) GTEST_SKIP() << "python3 needed to write the pickle";
  const std::string json_path = testing::TempDir() + "/frames_snapshot.json";
  const std::string pickle_path = testing::TempDir() + "/frames_snapshot.pickle";
  {
    std::ofstream f(json_path);
    f << kSnapshotJson;
  }
  const std::string cmd = "python3 -c \"import json,pickle,sys; pickle.dump(json.load(open(sys.argv[1])), "
                          "open(sys.argv[2], 'wb'))\" " + json_path + " " + pickle_path;
  ASSERT_EQ(std::system(cmd.c_str()), 0);
  auto snap = LoadSnapshot(pickle_path);
  ASSERT_TRUE(snap.ok()) << snap.status();
  EXPECT_EQ(snap->trace.frames.size(), 4u);
  EXPECT_EQ(snap->trace.memory_events[1].stack, (std::vector<int32_t>{3, 1}));
  std::remove(json_path.c_str());
  std::remove(pickle_path.c_str());
}

// Note [Kineto call stacks]: the python_function calls open on the
// allocating thread at the [memory] event's time, innermost first.
TEST(ExplainTrace, KinetoWithStackGivesEachAllocItsPythonStack) {
  const std::string json = R"({"traceEvents": [
    {"ph": "X", "cat": "python_function", "name": "train.py(3): <module>", "pid": 7, "tid": 7, "ts": 0, "dur": 100},
    {"ph": "X", "cat": "python_function", "name": "model.py(40): forward", "pid": 7, "tid": 7, "ts": 10, "dur": 20},
    {"ph": "X", "cat": "python_function", "name": "nn.py(9): linear", "pid": 7, "tid": 7, "ts": 12, "dur": 5},
    {"ph": "X", "cat": "python_function", "name": "model.py(41): loss", "pid": 7, "tid": 7, "ts": 40, "dur": 20},
    {"ph": "X", "cat": "python_function", "name": "other.py(1): elsewhere", "pid": 7, "tid": 8, "ts": 0, "dur": 100},
    {"ph": "i", "name": "[memory]", "pid": 7, "tid": 7, "ts": 14,
     "args": {"Device Type": 1, "Device Id": 0, "Addr": 1048576, "Bytes": 4096, "Total Allocated": 4096}},
    {"ph": "i", "name": "[memory]", "pid": 7, "tid": 7, "ts": 25,
     "args": {"Device Type": 1, "Device Id": 0, "Addr": 2097152, "Bytes": 512, "Total Allocated": 4608}},
    {"ph": "i", "name": "[memory]", "pid": 7, "tid": 7, "ts": 70,
     "args": {"Device Type": 1, "Device Id": 0, "Addr": 1048576, "Bytes": -4096, "Total Allocated": 512}},
    {"ph": "i", "name": "[memory]", "pid": 7, "tid": 7, "ts": 200,
     "args": {"Device Type": 1, "Device Id": 0, "Addr": 4194304, "Bytes": 512, "Total Allocated": 1024}}
  ]})";
  auto src = StringByteSource(json);
  auto t = ImportKinetoTrace(*src, "k.json");
  ASSERT_TRUE(t.ok()) << t.status();
  ASSERT_EQ(t->memory_events.size(), 4u);
  auto names = [&](const std::vector<int32_t>& stack) {
    std::string out;
    for (int32_t f : stack) out += t->frames[static_cast<size_t>(f)].function + ";";
    return out;
  };
  EXPECT_EQ(names(t->memory_events[0].stack), "linear;forward;<module>;");
  EXPECT_EQ(names(t->memory_events[1].stack), "forward;<module>;");
  EXPECT_EQ(names(t->memory_events[2].stack), "<module>;");
  EXPECT_EQ(names(t->memory_events[3].stack), "");
  EXPECT_EQ(t->frames[2], (StackFrame{"<module>", "train.py", 3}));  // interned innermost first
  EXPECT_EQ(t->frames.size(), 3u);  // distinct frames met, "loss" and thread 8's never
  auto native = ToNativeTrace(*t, {});
  ASSERT_TRUE(native.ok()) << native.status();
  const std::string text = RenderTracePeakText(ExplainTracePeak(*native, "k.json", 5));
  EXPECT_NE(text.find("linear (nn.py:9)"), std::string::npos) << text;
}

}  // namespace
}  // namespace gpusim::explain_trace_test
