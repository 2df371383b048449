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
#include <string_view>
#include <vector>

#include "gtest/gtest.h"
#include "simdjson.h"
#include "sim/import/trace_path.h"
#include "sim/replay/replay.h"

namespace gpusim::replay_agreement_test {
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

// replay, compare and viz of `path` through `impl` (viz writing `out`, with
// `viz_extra` after it) succeed and agree on peak allocated, peak reserved
// and capacity. After an OOM replay goes on (each failed allocation
// counted) where the engine stops allocating: allocated is then not
// compared with viz's. *replay and *viz get the two JSON texts.
void ExpectReplayCompareVizAgree(const std::string& path, const std::string& impl, const std::string& out,
                                 const std::string& viz_extra, std::string* replay, std::string* viz) {
  int rc = -1, cc = -1, vc = -1;
  *replay = RunGpusim("replay --format json --allocator " + impl + " " + path, &rc);
  const std::string compare = RunGpusim("compare --format json --allocators " + impl + " " + path, &cc);
  *viz = RunGpusim("viz --format json --allocator " + impl + " " + path + " --out " + out + viz_extra, &vc);
  ASSERT_EQ(rc, 0) << *replay;
  ASSERT_EQ(cc, 0) << compare;
  ASSERT_EQ(vc, 0) << *viz;
  simdjson::dom::parser rp, cp, vp;
  simdjson::dom::element r, c, v;
  ASSERT_EQ(rp.parse(*replay).get(r), simdjson::SUCCESS) << *replay;
  ASSERT_EQ(cp.parse(compare).get(c), simdjson::SUCCESS) << compare;
  ASSERT_EQ(vp.parse(*viz).get(v), simdjson::SUCCESS) << *viz;
  const simdjson::dom::element a = r["allocator"];
  const simdjson::dom::element row = c["allocators"].at(0)["allocator"];
  const bool oom = int64_t(a["ooms"]) > 0;
  for (const char* key : {"peak_allocated_bytes", "peak_reserved_bytes", "capacity_bytes"}) {
    if (!oom || std::string_view(key) != "peak_allocated_bytes") {
      EXPECT_EQ(int64_t(a[key]), int64_t(v[key])) << key << "\nreplay:\n" << *replay << "\nviz:\n" << *viz;
    }
    EXPECT_EQ(int64_t(a[key]), int64_t(row[key])) << key << "\ncompare:\n" << compare;
  }
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

// Native traces (gpusim-trace) too: replay, compare and viz give the same
// peaks, the bytes live before recording (Trace::preexisting) held by the
// allocator in all three — in a segment of their own when > 1 MiB, in the
// small pool when smaller (viz drew 33,555,456 B allocated for 73,555,456
// before: it left them out of the allocator).
TEST(ReplayAgreement, ReplayCompareAndVizAgreeOnNativeTraces) {
  auto write = [](const std::string& name, const std::string& preexisting) {
    const std::string path = ::testing::TempDir() + "/" + name + ".gpusim";
    std::ofstream(path) << "gpusim-trace 1\nname " << name << "\n" << preexisting
                        << "stream 0 compute\nalloc 1 33554432 role=activation name=a\n"
                           "compute c kind=matmul flops=8 uses=1\nalloc 2 1000 role=activation name=b\n"
                           "free 1\nfree 2\nend 5\n";
    return path;
  };
  const std::vector<std::string> traces = {
      GPUSIM_SOURCE_DIR "/tests/golden/llama7b.trace.gpusim", write("native_large_pre", "preexisting 40000000\n"),
      write("native_small_pre", "preexisting 4096\n"), write("native_cold", "")};
  int checked = 0;
  for (const std::string& path : traces) {
    SCOPED_TRACE(path);
    for (const char* impl : {"pytorch_caching", "bfc"}) {
      SCOPED_TRACE(impl);
      // (llama7b through bfc OOMs at event 63.)
      std::string replay, viz;
      ExpectReplayCompareVizAgree(path, impl, ::testing::TempDir() + "/viz_native_" + std::to_string(checked++), "",
                                  &replay, &viz);
      if (HasFatalFailure()) return;
      simdjson::dom::parser vp;
      simdjson::dom::element v;
      ASSERT_EQ(vp.parse(viz).get(v), simdjson::SUCCESS) << viz;
      if (path.find("native_large_pre") != std::string::npos) {
        EXPECT_EQ(int64_t(v["peak_allocated_bytes"]), 73555456) << viz;  // 40,000,000 B before + 32 MiB + 1,000
      }
    }
  }
}

// `gpusim run` on a recording is its replay, as on a native trace (Note
// [Every command's inputs], tools/cli.h: run and viz take the same inputs;
// main refused it, naming replay).
TEST(ReplayAgreement, RunOnARecordingIsItsReplay) {
  int checked = 0;
  for (const char* name : kShipped) {
    SCOPED_TRACE(name);
    const std::string path = RecordedTracePath(name);
    if (path.empty()) continue;
    int code = -1;
    const std::string run = RunCommand(std::string(GPUSIM_BINARY) + " run " + path + " 2>&1", &code);
    EXPECT_EQ(code, 0) << run;
    const std::string replay = RunCommand(std::string(GPUSIM_BINARY) + " replay " + path + " 2>&1", &code);
    EXPECT_EQ(run, replay);
    EXPECT_NE(run.find("replay of " + path), std::string::npos) << run;
    ++checked;
  }
  EXPECT_GT(checked, 0);
}

// The memory snapshot viz writes (--snapshot) starts from the same state:
// on the V100 HTA trace the warm start's 231 segments (48 small, 182 large,
// the untouched one; no cudaMalloc in the window) are its final segments,
// at the recorded Total Reserved peak. (181 before large blocks that meet
// at a 2 MiB boundary were kept in two segments: Note [Segment boundaries
// where blocks meet]; 235 before large segments stopped being widened to
// 20 MiB by their blocks' sizes and departures were joined.)
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
  // The pickle's segments at the end hold the start state's 231.
  const std::string count = RunCommand(
      "python3 -c \"import pickle,sys; d=pickle.load(open('" + pickle +
          "','rb')); print(len(d['segments']), sum(s['total_size'] for s in d['segments']))\"",
      &code);
  ASSERT_EQ(code, 0) << count;
  EXPECT_EQ(count, "231 12782141440\n");
}

// Note [CUDA graph private pools] in all three: a synthetic Kineto trace
// whose capture window (cudaStreamBeginCapture .. cudaStreamEndCapture,
// written after the memory events as Kineto writes runtime calls) holds a
// 4 MiB block that the graph's pool keeps, so the 4 MiB request after it
// takes a segment of the main pool. replay, compare and viz give the same
// peaks (viz refused such a trace before); the memory map marks the pool's
// segments and names the pool in the block's tooltip; the memory snapshot
// gives the pool's segment its MempoolId.
TEST(ReplayAgreement, ReplayCompareAndVizAgreeOnACaptureTrace) {
  const std::string path = ::testing::TempDir() + "/capture_agreement.json";
  std::ofstream(path) << R"({"deviceProperties": [{"id": 0, "name": "synthetic", "totalGlobalMem": 85899345920}],
 "traceEvents": [
  {"ph": "i", "name": "[memory]", "pid": 1, "tid": 1, "ts": 5, "args": {"Device Type": 1, "Device Id": 0, "Addr": 1048576000, "Bytes": 1048576}},
  {"ph": "i", "name": "[memory]", "pid": 1, "tid": 1, "ts": 12, "args": {"Device Type": 1, "Device Id": 0, "Addr": 2048576000, "Bytes": 4194304}},
  {"ph": "i", "name": "[memory]", "pid": 1, "tid": 1, "ts": 13, "args": {"Device Type": 1, "Device Id": 0, "Addr": 2048576000, "Bytes": -4194304}},
  {"ph": "i", "name": "[memory]", "pid": 1, "tid": 1, "ts": 30, "args": {"Device Type": 1, "Device Id": 0, "Addr": 1049624576, "Bytes": 4194304}},
  {"ph": "i", "name": "[memory]", "pid": 1, "tid": 1, "ts": 31, "args": {"Device Type": 1, "Device Id": 0, "Addr": 1049624576, "Bytes": -4194304}},
  {"ph": "X", "cat": "cuda_runtime", "name": "cudaStreamBeginCapture", "pid": 1, "tid": 1, "ts": 10, "dur": 1},
  {"ph": "X", "cat": "cuda_runtime", "name": "cudaStreamEndCapture", "pid": 1, "tid": 1, "ts": 20, "dur": 2}
 ]})";
  int checked = 0;
  for (const char* impl : {"pytorch_caching", "bfc"}) {
    SCOPED_TRACE(impl);
    const std::string out = ::testing::TempDir() + "/viz_capture_" + std::to_string(checked++);
    const std::string pickle = out + ".pickle";
    std::string replay, viz;
    ExpectReplayCompareVizAgree(path, impl, out, " --snapshot " + pickle, &replay, &viz);
    if (HasFatalFailure()) return;
    simdjson::dom::parser rp;
    simdjson::dom::element r;
    ASSERT_EQ(rp.parse(replay).get(r), simdjson::SUCCESS) << replay;
    const simdjson::dom::element a = r["allocator"];
    if (std::string_view(impl) == "bfc") {
      // A second BFC region (60 GiB) does not fit beside the first: the
      // capture's request is an OOM in all three, and no pool is left.
      EXPECT_EQ(int64_t(a["graph_pools"]), 0) << replay;
      EXPECT_EQ(int64_t(a["ooms"]), 1) << replay;
      EXPECT_EQ(int64_t(a["peak_reserved_bytes"]), 64424509440) << replay;
      continue;
    }
    EXPECT_EQ(int64_t(a["graph_pools"]), 1);
    EXPECT_EQ(int64_t(a["graph_pool_allocs"]), 1);
    // 2 MiB small + 20 MiB large in the main pool, 20 MiB in the graph's.
    EXPECT_EQ(int64_t(a["peak_reserved_bytes"]), 44040192) << replay;
    std::ifstream in(out + "/memory_map.svg");
    std::stringstream svg;
    svg << in.rdbuf();
    EXPECT_NE(svg.str().find("CUDA graph pool 0: segments of "), std::string::npos);
    EXPECT_NE(svg.str().find("CUDA graph pool 0 (allocated during capture)"), std::string::npos);
    EXPECT_NE(svg.str().find("1 CUDA graph pool<"), std::string::npos);
    if (std::system("python3 -c pass >/dev/null 2>&1") != 0) continue;
    int code = -1;
    const std::string pools = RunCommand(
        "python3 -c \"import pickle; d=pickle.load(open('" + pickle +
            "','rb')); print(sorted(s['segment_pool_id'] for s in d['segments']))\"",
        &code);
    ASSERT_EQ(code, 0) << pools;
    EXPECT_NE(pools.find("(1, 0)"), std::string::npos) << pools;
  }
}

}  // namespace
}  // namespace gpusim::replay_agreement_test
