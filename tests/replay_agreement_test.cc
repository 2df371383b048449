// `gpusim replay`, `gpusim compare` and `gpusim viz` on every shipped trace:
// one import, one start state, the recorded device. replay and compare give
// the same numbers (compare's row for an allocator equals replay's result
// for it); viz draws what replay replays, from the same start state, on
// the recorded device.
#include <sys/wait.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <iterator>
#include <string>

#include "gtest/gtest.h"
#include "simdjson.h"
#include "sim/import/trace_path.h"
#include "sim/replay/replay.h"

namespace gpusim {
namespace {

const char* const kShipped[] = {
    "cs336_gpt_training_snapshot.pickle",
    "hta_df_index_resolver_v100_rank1.pt.trace.json.gz",
    "hta_memory_timeline_raw.json.gz",
    "kineto_tbplugin_resnet50_v100_legacy_noaddr.pt.trace.json.gz",
    "tracelens_h100_bert-small_inference.pt.trace.json.gz",
    "tracelens_h100_owlv2-large_inference.pt.trace.json.gz",
    "tracelens_mi300x_rocm_normalization_coldstart.pt.trace.json.gz",
};

// Standard output only (the JSON under test); standard error is appended
// when the command fails, for the assertion's message. Under the sanitizer
// build LeakSanitizer prints its "Suppressions used" table on standard error
// at exit, which must not reach the JSON parser.
std::string RunCommand(const std::string& command, int* code) {
  const std::string err_path = ::testing::TempDir() + "/replay_agreement_stderr.txt";
  const std::string cmd = command + " 2>" + err_path;
  std::string out;
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  const int st = pclose(p);
  *code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  if (*code != 0) {
    std::ifstream err(err_path);
    out += std::string(std::istreambuf_iterator<char>(err), std::istreambuf_iterator<char>());
  }
  std::remove(err_path.c_str());
  return out;
}

std::string RunGpusim(const std::string& args, int* code) {
  return RunCommand(std::string(GPUSIM_BINARY) + " " + args, code);
}

TEST(ReplayAgreement, ReplayAndCompareAgreeOnEveryShippedTrace) {
  if (std::system("python3 -c pass >/dev/null 2>&1") != 0) GTEST_SKIP() << "python3 needed for the pickle";
  for (const char* name : kShipped) {
    SCOPED_TRACE(name);
    const std::string path = RecordedTracePath(name);
    if (path.empty()) continue;
    for (const char* impl : {"pytorch_caching"}) {  // the allocator with per-source start states
      int rc = -1, cc = -1;
      const std::string replay = RunGpusim(std::string("replay --format json --allocator ") + impl + " " + path, &rc);
      const std::string compare = RunGpusim(std::string("compare --format json --allocators ") + impl + " " + path, &cc);
      ASSERT_EQ(rc, 0) << replay;
      ASSERT_EQ(cc, 0) << compare;
      // compare's one row is replay's object, inside {"allocators": [...]}.
      std::string body = replay.substr(replay.find('{') + 1);
      body = body.substr(0, body.rfind('}'));
      std::string flat_replay, flat_compare;
      for (char c : body) if (c != ' ' && c != '\n') flat_replay += c;
      for (char c : compare) if (c != ' ' && c != '\n') flat_compare += c;
      EXPECT_NE(flat_compare.find(flat_replay), std::string::npos) << impl << "\nreplay:\n" << replay
                                                                   << "\ncompare:\n" << compare;
    }
  }
}

// Note [One start state for every command] (sim/alloc/start_state.cc): viz
// draws what replay replays. Every figure the two share — peak allocated,
// peak reserved, capacity, device — agrees on every shipped trace (the V100
// HTA trace's warm start: 11.90 GiB reserved in both; viz drew 6.39 GiB
// cold before), and report.html names the device, never a default H100.
TEST(ReplayAgreement, VizDrawsWhatReplayReplaysOnEveryShippedTrace) {
  if (std::system("python3 -c pass >/dev/null 2>&1") != 0) GTEST_SKIP() << "python3 needed for the pickle";
  int checked = 0;
  for (const char* name : kShipped) {
    SCOPED_TRACE(name);
    const std::string path = RecordedTracePath(name);
    if (path.empty()) continue;
    int rc = -1, vc = -1;
    const std::string replay = RunGpusim("replay --format json " + path, &rc);
    const std::string out = ::testing::TempDir() + "/viz_agreement_" + std::to_string(checked);
    const std::string viz = RunGpusim("viz --format json " + path + " --out " + out, &vc);
    ASSERT_EQ(rc, 0) << replay;
    ASSERT_EQ(vc, 0) << viz;
    simdjson::dom::parser rp, vp;
    simdjson::dom::element r, v;
    ASSERT_EQ(rp.parse(replay).get(r), simdjson::SUCCESS) << replay;
    ASSERT_EQ(vp.parse(viz).get(v), simdjson::SUCCESS) << viz;
    const simdjson::dom::element a = r["allocator"];
    for (const char* key : {"peak_allocated_bytes", "peak_reserved_bytes", "capacity_bytes"}) {
      EXPECT_EQ(int64_t(a[key]), int64_t(v[key])) << key << "\nreplay:\n" << replay << "\nviz:\n" << viz;
    }
    // The device replay's capacity is from: the recorded one, else the default.
    const std::string source{std::string_view(a["capacity_source"])};
    const std::string recorded_prefix = "recorded totalGlobalMem of ";
    const std::string device{std::string_view(v["device"])};
    if (source.rfind(recorded_prefix, 0) == 0) {
      EXPECT_EQ(device, source.substr(recorded_prefix.size()));
    } else {
      EXPECT_EQ(device, "h100-sxm-80gb") << source;
    }
    // The timeline's allocator counters peak there too (the bytes live
    // before recording counted once: the start state holds them).
    simdjson::dom::parser tp;
    simdjson::dom::element timeline;
    ASSERT_EQ(tp.load(out + "/timeline.json").get(timeline), simdjson::SUCCESS);
    int64_t allocated = 0, reserved = 0;
    for (simdjson::dom::element e : timeline["traceEvents"].get_array()) {
      std::string_view ph, counter;
      if (e["ph"].get(ph) != simdjson::SUCCESS || ph != "C" || e["name"].get(counter) != simdjson::SUCCESS) continue;
      int64_t x = 0;
      if (counter == "allocated bytes" && e["args"]["allocated"].get(x) == simdjson::SUCCESS) {
        allocated = std::max(allocated, x);
      }
      if (counter == "reserved bytes" && e["args"]["reserved"].get(x) == simdjson::SUCCESS) {
        reserved = std::max(reserved, x);
      }
    }
    EXPECT_EQ(allocated, int64_t(a["peak_allocated_bytes"]));
    EXPECT_EQ(reserved, int64_t(a["peak_reserved_bytes"]));
    std::ifstream in(out + "/report.html");
    std::stringstream html;
    html << in.rdbuf();
    EXPECT_NE(html.str().find(device), std::string::npos);
    if (device != "h100-sxm-80gb") {
      EXPECT_EQ(html.str().find("H100 SXM5"), std::string::npos);
    }
    ++checked;
  }
  EXPECT_EQ(checked, static_cast<int>(std::size(kShipped)));
}

// The memory snapshot viz writes (--snapshot) starts from the same state:
// on the V100 HTA trace the warm start's 181 segments (no cudaMalloc in the
// window) are its final segments, at the recorded Total Reserved peak.
TEST(ReplayAgreement, VizSnapshotStartsFromTheReplayStartState) {
  const std::string path = RecordedTracePath("hta_df_index_resolver_v100_rank1.pt.trace.json.gz");
  if (path.empty()) GTEST_SKIP() << "trace not shipped";
  const std::string out = ::testing::TempDir() + "/viz_v100_start";
  const std::string pickle = ::testing::TempDir() + "/viz_v100_start.pickle";
  int code = -1;
  const std::string viz = RunGpusim("viz --format json " + path + " --out " + out + " --snapshot " + pickle, &code);
  ASSERT_EQ(code, 0) << viz;
  simdjson::dom::parser vp;
  simdjson::dom::element v;
  ASSERT_EQ(vp.parse(viz).get(v), simdjson::SUCCESS) << viz;
  EXPECT_EQ(int64_t(v["peak_reserved_bytes"]), 12782141440);  // the recorded Total Reserved peak
  if (std::system("python3 -c pass >/dev/null 2>&1") != 0) return;
  // The pickle's segments at the end hold at least the start state's 181.
  const std::string count = RunCommand(
      "python3 -c \"import pickle,sys; d=pickle.load(open('" + pickle +
          "','rb')); print(len(d['segments']), sum(s['total_size'] for s in d['segments']))\"",
      &code);
  ASSERT_EQ(code, 0) << count;
  EXPECT_EQ(count, "181 12782141440\n");
}

}  // namespace
}  // namespace gpusim
