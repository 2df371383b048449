// Typed grid points (grid.h): a point equals LoadRunSpec with the same
// --set overrides, and a bad value fails with the same message.
#include "sim/config/grid.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gtest/gtest.h"
#include "sim/config/loader.h"
#include "sim/config/settings.h"

namespace gpusim::grid_test {
namespace {

const std::string kLlama = GPUSIM_SOURCE_DIR "/configs/llama7b.yaml";
const std::string kScan = GPUSIM_SOURCE_DIR "/examples/scan_carry.yaml";

// What a spec says, as text: every table setting, where each was written,
// the device, the program and the allocator options.
std::string Describe(const RunSpec& s) {
  std::string o;
  for (const SettingInfo& info : RunSettings()) absl::StrAppend(&o, info.path, "=", info.value(s), "\n");
  for (const auto& [path, at] : s.written) absl::StrAppend(&o, "written ", path, " @ ", at, "\n");
  const DeviceSpec& d = s.device;
  absl::StrAppend(&o, "device ", d.name, " ", d.source_file, " ", d.cuda_total.value(), " ", d.context_reserve.value(),
                  " ", d.peak_bf16, " ", d.peak_fp16, " ", d.peak_tf32, " ", d.hbm_bandwidth, " ",
                  d.host_op_cost.ns(), " ", d.kernel_model, "\n");
  absl::StrAppend(&o, "model ", s.model.name, " ", s.model.family, "\n");
  for (const ProgramInputSpec& in : s.program.inputs) {
    absl::StrAppend(&o, "input ", in.name, " [", absl::StrJoin(in.shape, ","), "] ", in.donate, "\n");
  }
  for (const auto& [k, v] : s.allocator.options) absl::StrAppend(&o, "option ", k, "=", v, "\n");
  absl::StrAppend(&o, "policy_at ", s.remat.policy_at, "\n");
  return o;
}

absl::StatusOr<RunSpec> Point(const std::string& config, const std::vector<std::string>& base_sets,
                              const std::vector<std::string>& sets) {
  auto read = RunConfig::Read(config);
  if (!read.ok()) return read.status();
  auto base = GridBase::Make(*read, base_sets);
  if (!base.ok()) return base.status();
  std::vector<GridSetting> parsed;
  for (const std::string& s : sets) {
    auto g = base->Parse(s);
    if (!g.ok()) return g.status();
    parsed.push_back(*std::move(g));
  }
  std::vector<const GridSetting*> ptrs;
  for (const GridSetting& g : parsed) ptrs.push_back(&g);
  return base->Point(ptrs);
}

void ExpectSameAsLoad(const std::string& config, const std::vector<std::string>& base_sets,
                      const std::vector<std::string>& sets) {
  std::vector<std::string> all = base_sets;
  all.insert(all.end(), sets.begin(), sets.end());
  absl::StatusOr<RunSpec> loaded = LoadRunSpec(config, all);
  absl::StatusOr<RunSpec> point = Point(config, base_sets, sets);
  const std::string what = absl::StrJoin(all, " ");
  ASSERT_EQ(loaded.ok(), point.ok()) << what << ": " << loaded.status() << " / " << point.status();
  if (!loaded.ok()) {
    EXPECT_EQ(point.status().message(), loaded.status().message()) << what;
    return;
  }
  EXPECT_EQ(Describe(*point), Describe(*loaded)) << what;
}

TEST(GridTest, PointsEqualTheConfigWithTheSameOverrides) {
  const std::vector<std::vector<std::string>> llama = {
      {"remat.policy=full", "batch.per_device=4"},
      {"model.n_heads=16"},  // n_kv_heads 32 is written: refused alone, as before
      {"model.n_kv_heads=8", "model.head_dim=64"},
      {"parallelism.tensor=2", "parallelism.sequence_parallel=true"},
      {"framework=pytorch", "allocator.impl=pytorch_caching", "allocator.expandable_segments=true"},
      {"model=llama2-13b", "model.n_layers=4"},
      {"device=a100-sxm-40gb", "device.memory.context_reserve=1GiB"},
      {"device.flops.bf16=100TFLOP/s"},  // fp16 and tf32 follow bf16 unless written
      {"remat.names=[context]", "loop.mode=unrolled", "xla.dynamic_slice_fusion=true"},
  };
  for (const auto& sets : llama) ExpectSameAsLoad(kLlama, {"model.n_layers=2"}, sets);
  const std::vector<std::vector<std::string>> scan = {
      {"loop.mode=unrolled", "loop.trip_count=2"},
      {"device.memory.context_reserve=0", "device=h100-sxm-80gb"},  // the later one replaces the whole device
      {"program.inputs.w1.donate=false", "loop.trip_count=1"},
  };
  for (const auto& sets : scan) ExpectSameAsLoad(kScan, {}, sets);
  // gpt-22b does not write n_kv_heads: it follows n_heads.
  ExpectSameAsLoad(GPUSIM_SOURCE_DIR "/examples/gpt22b_korthikanti.yaml", {}, {"model.n_heads=32"});
}

TEST(GridTest, BadValuesFailAsTheirSetDoes) {
  for (const char* set : {"batch.per_devise=1", "loop.unroll=0", "loop.mode=sideways", "model.n_kv_heads=3",
                          "device.memory.context_reserve=1000GiB", "device=no_such_gpu", "remat.method=x",
                          "allocator.foo=[1, 2]", "program_hlo=x.hlo", "program.inputs.w1.shape=[0]",
                          "parallelism.fsdp=zero"}) {
    ExpectSameAsLoad(kLlama, {}, {set});
  }
  // A combination each of whose values parses alone: the point fails as
  // the config would (the unrolled cap, Note [Magnitude checks]).
  ExpectSameAsLoad(kLlama, {}, {"model.n_layers=600", "loop.mode=unrolled"});
}

TEST(GridTest, WhatAGridCannotVaryIsRefusedByName) {
  auto r = Point(kScan, {}, {"program_hlo=x.hlo"});
  ASSERT_FALSE(r.ok());
  // The config gives the error: it would have both a program and an HLO.
  EXPECT_EQ(r.status().message(), LoadRunSpec(kScan, {"program_hlo=x.hlo"}).status().message());
  const std::string maxtext = GPUSIM_SOURCE_DIR "/examples/maxtext/llama2_7b_param_scan_axis.yaml";
  // Beside a maxtext block: its keys (the block lowered again), and the
  // keys it leaves to the run; what it sets is refused as the config does.
  ExpectSameAsLoad(maxtext, {}, {"maxtext.per_device_batch_size=2", "device=a100-sxm-80gb", "allocator.impl=bfc"});
  ExpectSameAsLoad(maxtext, {}, {"batch.per_device=2"});
  ExpectSameAsLoad(maxtext, {}, {"maxtext.no_such_key=2"});
  auto m = Point(maxtext, {}, {"framework=jax"});
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().message().rfind("--vary framework: not a setting a grid can vary", 0), 0u) << m.status();
}

}  // namespace
}  // namespace gpusim::grid_test
