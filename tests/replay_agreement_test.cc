// `gpusim replay`, `gpusim compare` and `gpusim viz` on every shipped trace:
// one import, one start state, the recorded device. replay and compare give
// the same numbers (compare's row for an allocator equals replay's result
// for it); viz draws the recorded device with the capacity replay uses.
#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "gtest/gtest.h"
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

std::string RunGpusim(const std::string& args, int* code) {
  const std::string cmd = std::string(GPUSIM_BINARY) + " " + args + " 2>&1";
  std::string out;
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  const int st = pclose(p);
  *code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return out;
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

TEST(ReplayAgreement, VizDrawsTheRecordedDevice) {
  const std::string path = RecordedTracePath("tracelens_mi300x_rocm_normalization_coldstart.pt.trace.json.gz");
  if (path.empty()) GTEST_SKIP() << "trace not shipped";
  const std::string out = ::testing::TempDir() + "/viz_mi300x";
  int code = -1;
  const std::string log = RunGpusim("viz " + path + " --out " + out, &code);
  ASSERT_EQ(code, 0) << log;
  std::ifstream in(out + "/report.html");
  std::stringstream html;
  html << in.rdbuf();
  EXPECT_NE(html.str().find("MI300X"), std::string::npos);
  EXPECT_EQ(html.str().find("H100 SXM5"), std::string::npos);
  // replay's capacity is the same recorded totalGlobalMem.
  int rc = -1;
  const std::string replay = RunGpusim("replay " + path, &rc);
  EXPECT_NE(replay.find("recorded totalGlobalMem of AMD Instinct MI300X"), std::string::npos) << replay;
}

}  // namespace
}  // namespace gpusim
