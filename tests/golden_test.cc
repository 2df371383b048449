// Golden test: the JSON result of every shipped config (configs/*.yaml) and
// example (examples/*.yaml), and the native trace `--out` writes for
// configs/llama7b.yaml, byte for byte against tests/golden/.
//
// Regenerate (after a change that is meant to move a figure; say which in the
// commit): GPUSIM_UPDATE_GOLDEN=1 build/gpusim_tests --gtest_filter='GoldenTest.*'
// or `GPUSIM_UPDATE_GOLDEN=1 ctest -R GoldenTest` from build/. The files are
// then rewritten and the test passes; `git diff tests/golden` shows what moved.
#include <sys/wait.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace gpusim::golden_test {
namespace {

namespace fs = std::filesystem;

const fs::path kSource(GPUSIM_SOURCE_DIR);
const fs::path kGolden = kSource / "tests" / "golden";

bool Updating() {
  const char* v = std::getenv("GPUSIM_UPDATE_GOLDEN");
  return v != nullptr && std::string(v) == "1";
}

// Runs the gpusim binary in the source tree (so configs are named by their
// relative paths, as the JSON's "file" shows them); stdout only.
int Gpusim(const std::string& args, std::string* out) {
  const std::string cmd = "cd '" + kSource.string() + "' && " + std::string(GPUSIM_BINARY) + " " + args;
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return -1;
  char buf[65536];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out->append(buf, n);
  const int st = pclose(p);
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

std::string ReadFile(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// The first line where `a` and `b` differ, for the failure message.
std::string FirstDifference(const std::string& a, const std::string& b) {
  std::istringstream sa(a), sb(b);
  std::string la, lb;
  for (int line = 1;; ++line) {
    const bool ea = !std::getline(sa, la), eb = !std::getline(sb, lb);
    if (ea && eb) return "identical lines (trailing bytes differ)";
    if (ea || eb || la != lb) {
      return "line " + std::to_string(line) + ":\n  golden: " + (ea ? "<end>" : la) +
             "\n  now:    " + (eb ? "<end>" : lb);
    }
  }
}

// Compares `actual` with the golden file `name`, or rewrites it when updating.
void ExpectGolden(const std::string& name, const std::string& actual) {
  const fs::path path = kGolden / name;
  if (Updating()) {
    fs::create_directories(kGolden);
    std::ofstream(path, std::ios::binary) << actual;
    return;
  }
  ASSERT_TRUE(fs::exists(path)) << path << " missing; regenerate with GPUSIM_UPDATE_GOLDEN=1";
  const std::string golden = ReadFile(path);
  EXPECT_TRUE(golden == actual) << name << " differs from the golden file; "
                                << FirstDifference(golden, actual)
                                << "\n(regenerate with GPUSIM_UPDATE_GOLDEN=1 if the change is meant)";
}

// configs/*.yaml, examples/*.yaml and examples/megatron/*.yaml, sorted (device and model files under
// configs/devices, configs/models are not run configs).
std::vector<fs::path> RunConfigs() {
  std::vector<fs::path> out;
  for (const char* dir : {"configs", "examples", "examples/megatron"}) {
    for (const fs::directory_entry& e : fs::directory_iterator(kSource / dir)) {
      if (e.is_regular_file() && e.path().extension() == ".yaml") out.push_back(e.path());
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::string GoldenName(const fs::path& config) {
  return config.parent_path().filename().string() + "_" + config.stem().string() + ".json";
}

TEST(GoldenTest, JsonResultOfEveryShippedConfig) {
  const std::vector<fs::path> configs = RunConfigs();
  ASSERT_GE(configs.size(), 4u);
  for (const fs::path& c : configs) {
    SCOPED_TRACE(c.string());
    std::string out;
    const std::string rel = fs::relative(c, kSource).string();
    ASSERT_EQ(Gpusim("run " + rel + " --format json", &out), 0) << out;
    ExpectGolden(GoldenName(c), out);
  }
}

TEST(GoldenTest, EveryGoldenFileHasItsConfig) {
  if (Updating()) GTEST_SKIP() << "updating";
  std::vector<std::string> expected;
  for (const fs::path& c : RunConfigs()) expected.push_back(GoldenName(c));
  expected.push_back("llama7b.trace.gpusim");
  for (const fs::directory_entry& e : fs::directory_iterator(kGolden)) {
    const std::string name = e.path().filename().string();
    if (name == "README.md") continue;
    EXPECT_NE(std::find(expected.begin(), expected.end(), name), expected.end())
        << name << " has no config; delete it or regenerate";
  }
}

TEST(GoldenTest, NativeTraceOfLlama7b) {
  const fs::path dir = fs::path(::testing::TempDir()) / "golden_llama7b_out";
  fs::remove_all(dir);
  std::string out;
  ASSERT_EQ(Gpusim("run configs/llama7b.yaml --out " + dir.string(), &out), 0)
      << out;
  ExpectGolden("llama7b.trace.gpusim", ReadFile(dir / "trace.gpusim"));
  fs::remove_all(dir);
}

}  // namespace
}  // namespace gpusim::golden_test
