// Note [Every command's inputs] (tools/cli.h): one input of each kind
// through every command that takes an input. run, viz, explain and validate
// take every kind; the others take theirs and refuse the rest with one
// message per kind (issue 28: `viz a.yml` said "not a recorded trace" where
// `run a.yml` worked).
#include <unistd.h>

#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/cli_support.h"

namespace gpusim::cli_inputs_test {
namespace {

const std::string kSrc = GPUSIM_SOURCE_DIR;

struct Kind {
  std::string name;   // InputKindName
  std::string path;
  std::string words;  // InputKindWords
  std::string extra;  // what run, viz, explain and diff need (an HLO module: --device)
  bool trace;
};

std::vector<Kind> Kinds() {
  return {
      {"run_config", kSrc + "/examples/scan_carry.yaml", "a run config (YAML)", "", false},
      {"hlo_module", kSrc + "/tests/fuzz/hlo/scan_rolled_2.hlo", "an HLO module", "--device h100-sxm-80gb", false},
      {"native_trace", kSrc + "/tests/fuzz/engine_replay/alloc_free.trace", "a native trace (gpusim-trace)", "", true},
      {"kineto", kSrc + "/traces/recorded/tracelens_h100_bert-small_inference.pt.trace.json.gz", "a Kineto trace", "",
       true},
      {"snapshot", kSrc + "/traces/recorded/cs336_gpt_training_snapshot.pickle", "a memory snapshot", "", true},
      {"snapshot", kSrc + "/validation/h200_2026-12-04/snapshots/bert_test.pickle.gz", "a memory snapshot", "", true},
      {"memory_timeline", kSrc + "/traces/recorded/hta_memory_timeline_raw.json.gz", "a memory timeline", "", true},
  };
}

// Which kinds each command takes (the table of the Note, written out here
// again so that a change to it shows).
bool Takes(const std::string& command, const Kind& k) {
  if (command == "replay") return k.trace;
  if (command == "compare") return k.name != "hlo_module";
  if (command == "diff") return !k.trace;
  if (command == "advise") return k.name == "run_config";
  return true;  // run, viz, explain, validate
}

TEST(CliInputs, EveryKindThroughEveryCommand) {
  const std::string dir = ::testing::TempDir() + "/cli_inputs_" + std::to_string(getpid()) + "_";
  int accepted = 0, refused = 0;
  for (const Kind& k : Kinds()) {
    for (const std::string command : {"run", "replay", "viz", "explain", "validate", "compare", "diff", "advise"}) {
      SCOPED_TRACE(command + " " + k.path);
      std::string args = command + " " + k.path;
      if (command == "run" || command == "viz" || command == "explain" || command == "diff") args += " " + k.extra;
      if (command == "viz") args += " --out " + dir + std::to_string(accepted);
      if (command == "compare") args += k.trace ? " --allocators pytorch_caching" : " --vary loop.mode=rolled,unrolled";
      if (command == "diff") args += " --set loop.mode=unrolled";
      if (command == "advise") args += " --vary loop.mode=rolled,unrolled";
      const Result r = Gpusim(args);
      // The refusal: what it is, what the command takes, and the command
      // that takes it.
      const std::string refusal = command + " " + k.path + ": " + k.words + "; " + command + " takes ";
      const std::string hint = k.trace ? "; `gpusim replay " + k.path + "` replays it"
                                       : "; `gpusim run " + k.path + "` simulates it";
      if (Takes(command, k)) {
        EXPECT_EQ(r.out.find(refusal), std::string::npos) << r.out;
        // diff of an HLO module varies a setting it may not have; every other
        // accepted pair succeeds.
        if (!(command == "diff" && k.name == "hlo_module")) EXPECT_EQ(r.code, 0) << r.out;
        if (command == "validate") EXPECT_NE(r.out.find(": valid "), std::string::npos) << r.out;
        ++accepted;
      } else {
        EXPECT_EQ(r.code, 1) << r.out;
        EXPECT_NE(r.out.find(refusal), std::string::npos) << r.out;
        EXPECT_NE(r.out.find(hint), std::string::npos) << r.out;
        ++refused;
      }
    }
  }
  EXPECT_EQ(accepted + refused, 7 * 8);
  EXPECT_GT(refused, 0);
}

// `run` of a trace is its replay, byte for byte (as a native trace's always
// was), and `viz` of a run config named without .yaml is the run config's.
TEST(CliInputs, RunOfATraceIsItsReplay) {
  for (const Kind& k : Kinds()) {
    if (!k.trace) continue;
    SCOPED_TRACE(k.path);
    const Result run = GpusimStdout("run " + k.path + " --format json");
    const Result replay = GpusimStdout("replay " + k.path + " --format json");
    EXPECT_EQ(run.code, 0);
    EXPECT_EQ(run.out, replay.out);
    EXPECT_FALSE(run.out.empty());
  }
}

TEST(CliInputs, RunConfigWithoutYamlNameIsOneForEveryCommand) {
  std::ifstream f(kSrc + "/examples/scan_carry.yaml");
  std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  const std::string config = Write("cli_inputs_config", text);
  const std::string dir = ::testing::TempDir() + "/cli_inputs_noext_" + std::to_string(getpid());
  for (const std::string& args : {"run " + config, "explain " + config, "validate " + config,
                                  "viz " + config + " --out " + dir}) {
    const Result r = Gpusim(args);
    EXPECT_EQ(r.code, 0) << args << ": " << r.out;
  }
}

}  // namespace
}  // namespace gpusim::cli_inputs_test
