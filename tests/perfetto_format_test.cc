// timeline.json against the Chrome Trace Event Format's rules (the format
// document "Trace Event Format", Google, as chrome://tracing and Perfetto's
// JSON importer read it): every event has a known phase and a pid; complete
// slices have ts and dur ≥ 0 and nest or are disjoint on their thread, with
// the end taken as a reader takes it (ts + dur in double arithmetic: a slice
// whose end rounds past the next one's start overlaps it, and Chrome
// DevTools' trace engine drops it from the thread's tree);
// counters carry numeric args and each counter track is in time order;
// async begin/end pairs match by (cat, id, name) and never end before they
// begin; instants have a scope; every thread and process is named. Run on a
// config (XLA), an eager step that runs out of memory through
// pytorch_caching, and a replayed Kineto trace with recorded counters.
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "gtest/gtest.h"
#include "simdjson.h"
#include "sim/base/file_util.h"

namespace gpusim::perfetto_format_test {
namespace {

struct Summary {
  std::map<std::string, int64_t> counter_samples;   // by track
  std::map<std::string, int64_t> counter_max;       // "track/series" -> max
  int64_t slices = 0, async_pairs = 0;
  std::vector<std::string> instants;
  int64_t peak_bytes = -1;
  double max_ts = 0;           // the latest event's ts (µs)
  double bound_start = -1;     // otherData time_bounds_us[0]
  double bound_end = -1;       // otherData time_bounds_us[1]
  double min_ts = -1;          // the earliest event's ts (µs)
  std::string clock;           // otherData clock
};

// Checks every rule; failures are gtest failures naming the event index.
Summary CheckTraceEventFormat(const std::string& json) {
  Summary s;
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  auto err = parser.parse(json).get(doc);
  EXPECT_FALSE(err) << simdjson::error_message(err);
  if (err) return s;
  std::string_view unit;
  if (!doc["displayTimeUnit"].get(unit)) {
    EXPECT_TRUE(unit == "ms" || unit == "ns") << unit;
  }
  int64_t peak = -1;
  if (!doc["otherData"]["peak_bytes"].get(peak)) s.peak_bytes = peak;
  std::string_view clock;
  if (!doc["otherData"]["clock"].get(clock)) s.clock = std::string(clock);
  simdjson::dom::array bounds;
  if (!doc["otherData"]["time_bounds_us"].get(bounds) && bounds.size() == 2) {
    EXPECT_FALSE(bounds.at(0).get(s.bound_start));
    EXPECT_FALSE(bounds.at(1).get(s.bound_end));
  }
  simdjson::dom::array events;
  EXPECT_FALSE(doc["traceEvents"].get(events));
  std::set<std::pair<int64_t, int64_t>> named_threads, used_threads;
  std::set<int64_t> named_processes, used_processes;
  std::map<std::string, double> last_counter_ts;
  std::map<std::tuple<std::string, std::string, std::string>, double> open_async;
  std::map<std::pair<int64_t, int64_t>, std::vector<std::pair<double, double>>> slices;  // µs, as read
  const std::set<std::string> phases = {"X", "B", "E", "C", "i", "I", "b", "e", "n", "M", "s", "t", "f"};
  int64_t k = -1;
  for (simdjson::dom::element e : events) {
    ++k;
    std::string_view ph, name;
    int64_t pid = 0, tid = 0;
    double ts = 0;
    if (e["ph"].get(ph)) {
      ADD_FAILURE() << "event " << k << ": no ph";
      continue;
    }
    EXPECT_TRUE(phases.count(std::string(ph))) << "event " << k << ": unknown ph " << ph;
    EXPECT_FALSE(e["pid"].get(pid)) << "event " << k << ": no pid";
    EXPECT_FALSE(e["name"].get(name)) << "event " << k << ": no name";
    const bool has_tid = !e["tid"].get(tid);
    if (ph != "M") {
      EXPECT_FALSE(e["ts"].get(ts)) << "event " << k << ": no ts";
      EXPECT_GE(ts, 0) << "event " << k;
      s.max_ts = std::max(s.max_ts, ts);
      s.min_ts = s.min_ts < 0 ? ts : std::min(s.min_ts, ts);
      used_processes.insert(pid);
    }
    if (ph == "M") {
      simdjson::dom::object args;
      EXPECT_FALSE(e["args"].get(args)) << "event " << k;
      if (name == "process_name") named_processes.insert(pid);
      if (name == "thread_name") {
        EXPECT_TRUE(has_tid) << "event " << k;
        named_threads.insert({pid, tid});
      }
      EXPECT_TRUE(name == "process_name" || name == "thread_name" || name == "process_sort_index" ||
                  name == "thread_sort_index")
          << "event " << k << ": metadata " << name;
    } else if (ph == "X") {
      double dur = -1;
      EXPECT_FALSE(e["dur"].get(dur)) << "event " << k;
      EXPECT_GE(dur, 0) << "event " << k;
      EXPECT_TRUE(has_tid) << "event " << k;
      used_threads.insert({pid, tid});
      slices[{pid, tid}].push_back({ts, ts + dur});
      ++s.slices;
    } else if (ph == "C") {
      simdjson::dom::object args;
      EXPECT_FALSE(e["args"].get(args)) << "event " << k;
      const std::string track = std::to_string(pid) + "/" + std::string(name);
      auto it = last_counter_ts.find(track);
      if (it != last_counter_ts.end()) {
        EXPECT_GE(ts, it->second) << "event " << k << ": counter " << name << " goes back in time";
      }
      last_counter_ts[track] = ts;
      ++s.counter_samples[std::string(name)];
      for (auto field : args) {
        int64_t v = 0;
        EXPECT_FALSE(field.value.get(v)) << "event " << k << ": counter value " << field.key << " not a number";
        EXPECT_GE(v, 0) << "event " << k << ": negative " << field.key;
        auto& m = s.counter_max[std::string(name) + "/" + std::string(field.key)];
        m = std::max(m, v);
      }
    } else if (ph == "b" || ph == "e") {
      std::string_view cat, id;
      EXPECT_FALSE(e["cat"].get(cat)) << "event " << k;
      EXPECT_FALSE(e["id"].get(id)) << "event " << k;
      const auto key = std::make_tuple(std::string(cat), std::string(id), std::string(name));
      if (ph == "b") {
        EXPECT_EQ(open_async.count(key), 0u) << "event " << k << ": async " << id << " begun twice";
        open_async[key] = ts;
      } else {
        auto it = open_async.find(key);
        if (it == open_async.end()) {
          ADD_FAILURE() << "event " << k << ": async end " << id << " without a begin";
        } else {
          EXPECT_GE(ts, it->second) << "event " << k << ": async " << id << " ends before it begins";
          open_async.erase(it);
          ++s.async_pairs;
        }
      }
    } else if (ph == "i" || ph == "I") {
      std::string_view scope;
      EXPECT_FALSE(e["s"].get(scope)) << "event " << k;
      EXPECT_TRUE(scope == "g" || scope == "p" || scope == "t") << "event " << k;
      s.instants.emplace_back(name);
    }
  }
  EXPECT_TRUE(open_async.empty()) << open_async.size() << " async slices never end";
  for (const auto& t : used_threads) EXPECT_TRUE(named_threads.count(t)) << "thread " << t.second << " unnamed";
  for (int64_t p : used_processes) EXPECT_TRUE(named_processes.count(p)) << "process " << p << " unnamed";
  // Complete events on one thread nest or are disjoint.
  for (auto& [thread, v] : slices) {
    std::sort(v.begin(), v.end(), [](auto& a, auto& b) { return a.first != b.first ? a.first < b.first : a.second > b.second; });
    std::vector<double> stack;
    for (const auto& [b, e] : v) {
      while (!stack.empty() && stack.back() <= b) stack.pop_back();
      if (!stack.empty()) {
        EXPECT_LE(e, stack.back()) << "thread " << thread.second << ": slices overlap at " << b;
      }
      stack.push_back(e);
    }
  }
  return s;
}

std::string Timeline(const std::string& args) {
  const std::string dir = ::testing::TempDir() + "/perfetto_format_" + std::to_string(getpid());
  const std::string cmd = "mkdir -p " + dir + " && " GPUSIM_BINARY " " + args + " --timeline " + dir +
                          "/t.json >/dev/null 2>&1";
  const int st = std::system(cmd.c_str());
  EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << cmd;
  auto json = ReadFileToString(dir + "/t.json");
  EXPECT_TRUE(json.ok()) << json.status();
  return json.ok() ? *json : "";
}

TEST(PerfettoFormat, XlaConfig) {
  Summary s = CheckTraceEventFormat(Timeline("run " GPUSIM_SOURCE_DIR "/configs/llama7b.yaml"));
  EXPECT_GT(s.slices, 3000);
  EXPECT_GT(s.async_pairs, 2000);
  EXPECT_GT(s.counter_samples["live bytes"], 1000);
  EXPECT_GT(s.counter_samples["live bytes by role"], 1000);
  ASSERT_FALSE(s.instants.empty());
  EXPECT_EQ(s.instants[0].rfind("peak ", 0), 0u);
}

TEST(PerfettoFormat, EagerOutOfMemoryWithAllocatorCurves) {
  Summary s = CheckTraceEventFormat(Timeline(
      "run " GPUSIM_SOURCE_DIR "/configs/llama7b.yaml --set framework=pytorch --set model.param_scan_axis=0 "
      "--set loop.mode=unrolled --set allocator.impl=pytorch_caching --set batch.per_device=4"));
  EXPECT_GT(s.counter_samples["allocated bytes"], 20);  // until the OOM
  EXPECT_GT(s.counter_samples["reserved bytes"], 5);
  EXPECT_GE(s.counter_max["reserved bytes/reserved"], s.counter_max["allocated bytes/allocated"]);
  bool oom = false;
  for (const std::string& i : s.instants) oom |= i.rfind("out of memory: ", 0) == 0;
  EXPECT_TRUE(oom);
}

TEST(PerfettoFormat, ReplayedKinetoTraceWithRecordedCounters) {
  const std::string dir = ::testing::TempDir() + "/perfetto_format_viz_" + std::to_string(getpid());
  const std::string cmd = GPUSIM_BINARY " viz " GPUSIM_SOURCE_DIR
                          "/traces/recorded/tracelens_h100_bert-small_inference.pt.trace.json.gz --out " + dir +
                          " >/dev/null 2>&1";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  auto json = ReadFileToString(dir + "/timeline.json");
  ASSERT_TRUE(json.ok()) << json.status();
  Summary s = CheckTraceEventFormat(*json);
  EXPECT_GT(s.counter_samples["recorded allocated bytes"], 50);
  EXPECT_GT(s.counter_samples["recorded reserved bytes"], 1);
  EXPECT_GT(s.counter_samples["allocated bytes"], 50);
  // Eager semantics: the live counter's maximum is the reported peak.
  EXPECT_EQ(s.counter_max["live bytes/live"], s.peak_bytes);
  EXPECT_GT(s.async_pairs, 50);
}

// A memory snapshot has no timed events: it runs on its trace entries'
// time_us (Note [A snapshot's clock], viz/perfetto.cc), with a slice over the
// recorded window, one async slice per allocation, the allocator's counters
// and time bounds that hold every event. The test snapshot is JSON (no
// python3 needed); the CS336 pickle, when python3 is here.
void CheckSnapshotTimeline(const std::string& snapshot, int64_t allocations, double window_us) {
  const std::string dir = ::testing::TempDir() + "/perfetto_format_snapshot_" + std::to_string(getpid());
  const std::string cmd = std::string(GPUSIM_BINARY " viz ") + snapshot + " --out " + dir + " >/dev/null 2>&1";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  auto json = ReadFileToString(dir + "/timeline.json");
  ASSERT_TRUE(json.ok()) << json.status();
  Summary s = CheckTraceEventFormat(*json);
  EXPECT_EQ(s.clock.rfind("recorded (the trace's own timestamps", 0), 0u) << s.clock;
  EXPECT_GE(s.slices, 1);  // the recorded window
  EXPECT_EQ(s.async_pairs, allocations);
  EXPECT_GT(s.counter_samples["allocated bytes"], 1);
  EXPECT_GT(s.counter_samples["reserved bytes"], 0);
  EXPECT_GT(s.counter_samples["live bytes"], 1);
  // On the recorder's clock (Note [A snapshot's clock]): the bounds are
  // the first and last recorded times, not 0 and the window's length.
  EXPECT_GT(s.bound_start, 0);
  EXPECT_DOUBLE_EQ(s.bound_end - s.bound_start, window_us);
  EXPECT_GE(s.min_ts, s.bound_start);
  EXPECT_LE(s.max_ts, s.bound_end + 0.001);  // every event within the bounds (one 1 ns settle point at most)
}

TEST(PerfettoFormat, ReplayedSnapshotOnItsRecordedClock) {
  CheckSnapshotTimeline(GPUSIM_SOURCE_DIR "/tests/data/snapshots/cpp_frames_snapshot.json", 3, 805);
  if (std::system("python3 -c pass >/dev/null 2>&1") != 0) GTEST_SKIP() << "python3 not found: the pickle is not read";
  // CS336: 1,721 allocations in the window and 229 blocks allocated before
  // it (no time_us: at the head, in event order), over 248,181 us of time_us.
  CheckSnapshotTimeline(GPUSIM_SOURCE_DIR "/traces/recorded/cs336_gpt_training_snapshot.pickle", 1721 + 229,
                        248181);
}

}  // namespace
}  // namespace gpusim::perfetto_format_test
