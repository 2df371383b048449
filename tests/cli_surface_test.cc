// The CLI surface (issue 18, "One CLI"): --version; --format json on every
// subcommand, each printing one JSON document; validate for every input
// kind; --allocator NAME the same as --set allocator.impl=NAME everywhere.
#include <unistd.h>

#include <fstream>
#include <string>

#include "gtest/gtest.h"
#include "tests/cli_support.h"
#include "simdjson.h"

namespace gpusim::cli_surface_test {
namespace {

// Here a command's output is its stdout alone (JSON documents).
Result Stdout(const std::string& args) { return GpusimStdout(args); }

const std::string kSrc = GPUSIM_SOURCE_DIR;
const std::string kLlama = kSrc + "/configs/llama7b.yaml";
const std::string kScan = kSrc + "/examples/scan_carry.yaml --set loop.trip_count=2";
const std::string kKineto = kSrc + "/traces/recorded/tracelens_mi300x_rocm_normalization_coldstart.pt.trace.json.gz";

// One JSON document: an object (an array for `compare CONFIG`, its rows).
bool IsJsonObject(const std::string& text, std::string* why) {
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  if (auto err = parser.parse(text).get(doc)) {
    *why = simdjson::error_message(err);
    return false;
  }
  if (!doc.is_object() && !doc.is_array()) {
    *why = "not an object or array";
    return false;
  }
  return true;
}

TEST(CliSurface, Version) {
  Result r = Stdout("--version");
  EXPECT_EQ(r.code, 0);
  EXPECT_EQ(r.out.rfind("gpusim ", 0), 0u) << r.out;
  EXPECT_NE(r.out.find('.'), std::string::npos) << r.out;
}

TEST(CliSurface, EverySubcommandHasFormatJson) {
  const std::string dir = ::testing::TempDir() + "/cli_surface_viz_" + std::to_string(getpid());
  const char* kCommands[] = {
      "run SCAN", "explain SCAN --top 3", "diff SCAN --set loop.mode=unrolled",
      "compare SCAN --vary loop.mode=rolled,unrolled", "compare KINETO --allocators pytorch_caching,bfc",
      "replay KINETO", "advise SCAN --vary loop.mode=rolled,unrolled", "viz SCAN --out DIR",
      "validate SCAN", "validate KINETO", "devices",
      "calibrate CAL"};
  for (std::string c : kCommands) {
    auto sub = [&](const std::string& from, const std::string& to) {
      const size_t at = c.find(from);
      if (at != std::string::npos) c.replace(at, from.size(), to);
    };
    sub("SCAN", kScan);
    sub("KINETO", kKineto);
    sub("DIR", dir);
    sub("CAL", kSrc + "/traces/calibration/maxtext_llama7b.yaml");
    Result r = Stdout(c + " --format json");
    ASSERT_EQ(r.code, 0) << c;
    std::string why;
    EXPECT_TRUE(IsJsonObject(r.out, &why)) << c << ": " << why << "\n" << r.out.substr(0, 200);
  }
}

TEST(CliSurface, ValidateReadsEveryInputKind) {
  const std::pair<std::string, std::string> kInputs[] = {
      {kLlama, "run_config"},
      {kKineto, "kineto"},
      {kSrc + "/traces/recorded/cs336_gpt_training_snapshot.pickle", "snapshot"},
      {kSrc + "/traces/recorded/hta_memory_timeline_raw.json.gz", "memory_timeline"},
      {kSrc + "/tests/fuzz/hlo/scan_rolled_2.hlo", "hlo_module"},
  };
  for (const auto& [file, kind] : kInputs) {
    Result r = Stdout("validate " + file + " --format json");
    ASSERT_EQ(r.code, 0) << file;
    EXPECT_NE(r.out.find("\"kind\": \"" + kind + "\""), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("\"valid\": true"), std::string::npos) << r.out;
  }
  // A config override on a trace is refused, not ignored.
  EXPECT_EQ(Stdout("validate " + kKineto + " --set batch.per_device=2").code, 1);
  // An HLO module takes loop.trip_count only; a malformed one names line and column.
  EXPECT_EQ(Stdout("validate " + kSrc + "/tests/fuzz/hlo/scan_rolled_2.hlo --set device=h100-sxm-80gb").code, 1);
  const std::string bad = ::testing::TempDir() + "/cli_surface_bad.hlo";
  std::ofstream(bad) << "HloModule m\n\nENTRY e {\n  p = f32[2 parameter(0)\n}\n";
  Result b = Stdout("validate " + bad);
  EXPECT_EQ(b.code, 1);
}

TEST(CliSurface, AllocatorFlagIsTheSameAsSetAllocatorImpl) {
  const std::string base =
      "run " + kLlama + " --set framework=pytorch --set model.param_scan_axis=0 --set loop.mode=unrolled --format json";
  Result a = Stdout(base + " --allocator bfc");
  Result b = Stdout(base + " --set allocator.impl=bfc");
  ASSERT_EQ(a.code, 0);
  EXPECT_EQ(a.out, b.out);
  EXPECT_NE(a.out.find("\"name\": \"bfc\""), std::string::npos);
  EXPECT_NE(a.out, Stdout(base).out);  // the config's allocator: block (ideal) otherwise
  Result v = Stdout("validate " + kLlama + " --allocator no_such_allocator");
  EXPECT_EQ(v.code, 1);
  // A trace: --allocator NAME is --allocators NAME.
  Result c1 = Stdout("compare " + kKineto + " --allocator bfc --format json");
  Result c2 = Stdout("compare " + kKineto + " --allocators bfc --format json");
  ASSERT_EQ(c1.code, 0);
  EXPECT_EQ(c1.out, c2.out);
}

}  // namespace
}  // namespace gpusim::cli_surface_test
