// Issue 11's first paragraph, as a table through the binary: every setting
// it names either changes the printed result or exits 1 naming the key
// (tests/cli_test.cc CliCapabilityTest covers several one by one; this
// pins the whole list, including the rows no other test runs from the CLI).
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/cli_support.h"

namespace gpusim::issue11_settings_test {
namespace {

const std::string kLlama = std::string(GPUSIM_SOURCE_DIR) + "/configs/llama7b.yaml";
const std::string kGpt = std::string(GPUSIM_SOURCE_DIR) + "/examples/gpt22b_korthikanti.yaml";

struct Row {
  std::string config;
  std::string args;     // after "run CONFIG"
  std::string refusal;  // "" = the JSON must differ from the config's own
};

TEST(Issue11SettingsTest, EachNamedSettingChangesTheResultOrIsRefusedByName) {
  const std::vector<Row> rows = {
      {kLlama, "--set parallelism.tensor=2", ""},
      {kLlama, "--set parallelism.tensor=2 --set parallelism.sequence_parallel=true", ""},
      {kLlama, "--set parallelism.sequence_parallel=true", "parallelism.sequence_parallel:"},
      {kLlama, "--set loop.unroll=2", "--set loop.unroll=2: loop.unroll: not modelled"},
      {kLlama, "--set loop.trip_count=16", "--set loop.trip_count=16: loop.trip_count: not modelled"},
      {kLlama, "--set remat.method=block --set remat.num_layers=3", "remat.method: not modelled"},
      {kGpt, "--set model.n_kv_heads=8", ""},
      {kGpt, "--set model.tied_embeddings=false", ""},
      {kGpt, "--set model.attention=flash", ""},  // modelled: models/gpt_layer.cc
      {kGpt, "--set parallelism.fsdp=8", "--set parallelism.fsdp=8: parallelism.fsdp: not modelled"},
      {kLlama, "--set allocator.impl=bfc --set allocator.mem_fraction=0.5", ""},
      {kLlama, "--set allocator.impl=pytorch_caching", "--set allocator.impl=pytorch_caching: allocator.impl:"},
  };
  const std::string llama = Gpusim("run " + kLlama + " --format json").out;
  const std::string gpt = Gpusim("run " + kGpt + " --format json").out;
  for (const Row& row : rows) {
    Result r = Gpusim("run " + row.config + " " + row.args + " --format json");
    if (row.refusal.empty()) {
      EXPECT_EQ(r.code, 0) << row.args << "\n" << r.out;
      EXPECT_NE(r.out, row.config == kLlama ? llama : gpt) << row.args;
    } else {
      EXPECT_EQ(r.code, 1) << row.args << "\n" << r.out;
      EXPECT_NE(r.out.find(row.refusal), std::string::npos) << row.args << "\n" << r.out;
    }
  }
  Result grid = Gpusim("advise " + kLlama + " --vary batch.per_devise=1,2");
  EXPECT_EQ(grid.code, 1) << grid.out;
  EXPECT_NE(grid.out.find("batch: unknown key 'per_devise' (did you mean 'per_device'?)"), std::string::npos)
      << grid.out;
}

// Allocator options are parsed once, when the spec is checked, and a bad
// one is refused where it was written (AllocatorSpec::typed), before any
// grid point runs.
TEST(Issue11SettingsTest, BadAllocatorOptionNamesWhereItWasWritten) {
  Result r = Gpusim("run " + kLlama + " --set allocator.impl=bfc --set allocator.mem_fraction=2");
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("--set allocator.mem_fraction=2: allocator.mem_fraction:"), std::string::npos) << r.out;
  const std::string file = Write("bad_option.yaml", "framework: pytorch\ndevice: a100-sxm-80gb\nmodel: llama2-7b\n"
                                                    "allocator:\n  impl: pytorch_caching\n  max_split_sise_mb: 4\n");
  Result f = Gpusim("run " + file);
  EXPECT_EQ(f.code, 1) << f.out;
  EXPECT_NE(f.out.find("bad_option.yaml:6:22: allocator.max_split_sise_mb:"), std::string::npos) << f.out;
  Result grid = Gpusim("advise " + kLlama + " --set allocator.impl=bfc --vary allocator.mem_fraction=0.5,2");
  EXPECT_EQ(grid.code, 1) << grid.out;
  EXPECT_NE(grid.out.find("--set allocator.mem_fraction=2: allocator.mem_fraction:"), std::string::npos) << grid.out;
}

}  // namespace
}  // namespace gpusim::issue11_settings_test
