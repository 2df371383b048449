// The text report says which phase holds the peak and why (the largest
// buffers live then), and reports host offload (pinned bytes, PCIe time).
#include <string>

#include "absl/strings/str_format.h"
#include "gtest/gtest.h"
#include "sim/config/loader.h"
#include "sim/report/render.h"
#include "sim/step/step.h"

namespace gpusim::report_peak_test {
namespace {

TEST(ReportPeakTest, Llama7bDefaultBatchPeakPhaseAndWhy) {
  auto spec = LoadRunSpec(GPUSIM_SOURCE_DIR "/configs/llama7b.yaml", {});
  ASSERT_TRUE(spec.ok()) << spec.status();
  auto r = SimulateStep(*spec);
  ASSERT_TRUE(r.ok()) << r.status();
  const std::string text = RenderText(*r);
  // param_scan_axis 1: the transposed fp32 layer weights are the largest
  // temps at the peak; the backward loop reads them (xs forwarding), so the
  // peak is in the backward phase, with the residual and gradient stacks.
  EXPECT_NE(text.find("why: the temp peak is reached in the backward phase"), std::string::npos) << text;
  ASSERT_FALSE(r->peak_holders.empty());
  const BufferInfo& top = r->lowered.buffers[static_cast<size_t>(r->peak_holders[0])];
  // Among the largest (2.69 GiB, tied with the MLP residual stacks).
  bool transposed = false;
  for (BufferId b : r->peak_holders) {
    const BufferInfo& h = r->lowered.buffers[static_cast<size_t>(b)];
    transposed = transposed || (h.name.find("layers_first") != std::string::npos && h.bytes == top.bytes);
  }
  EXPECT_TRUE(transposed) << top.name;
  for (size_t i = 1; i < r->peak_holders.size(); ++i) {
    EXPECT_GE(top.bytes, r->lowered.buffers[static_cast<size_t>(r->peak_holders[i])].bytes);
  }
  EXPECT_EQ(text.find("pinned host memory"), std::string::npos);  // nothing offloaded
  EXPECT_EQ(r->layer_times.size(), 32u);
}

TEST(ReportPeakTest, OffloadShowsHostBytesAndPcieTime) {
  auto spec = LoadRunSpec(GPUSIM_SOURCE_DIR "/configs/llama7b.yaml",
                          {"remat.policy=qkv_proj_offloaded", "model.n_layers=2"});
  ASSERT_TRUE(spec.ok()) << spec.status();
  auto r = SimulateStep(*spec);
  ASSERT_TRUE(r.ok()) << r.status();
  const std::string text = RenderText(*r), json = RenderJson(*r);
  // q, k, v [1, 4096, 32, 128] bf16, 2 layers.
  EXPECT_NE(text.find("host       201,326,592 B"), std::string::npos) << text;
  EXPECT_NE(text.find("to host"), std::string::npos);
  EXPECT_NE(json.find("\"host_bytes\": 201326592"), std::string::npos) << json;
  EXPECT_NE(json.find("\"host_to_device_bytes\": 201326592"), std::string::npos);
}


// Note [JAX arena]: the XLA step's blocks (arguments, non-aliased outputs,
// one temp heap) through BFC over mem_fraction of the device's total
// memory (gpu_helpers.cc CreateBFCAllocator); Note [Verdict]: the fraction
// named is the lowest in hundredths that holds them, never above what the
// CUDA context leaves.
TEST(ReportJaxArenaTest, DefaultFractionDoesNotHoldLlama7bButTheNamedOneDoes) {
  auto spec = LoadRunSpec(GPUSIM_SOURCE_DIR "/configs/llama7b.yaml", {});
  ASSERT_TRUE(spec.ok()) << spec.status();
  auto r = SimulateStep(*spec);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_TRUE(r->jax_arena.checked);
  EXPECT_DOUBLE_EQ(r->jax_arena.mem_fraction, 0.75);
  EXPECT_EQ(r->jax_arena.arena.value(),
            static_cast<int64_t>(0.75 * static_cast<double>(spec->device.cuda_total.value())));
  EXPECT_FALSE(r->jax_arena.fits);  // 75.7 GiB > 0.75 x 79.2 GiB
  EXPECT_EQ(r->verdict.kind, Verdict::Kind::kFitsWithSetting);
  EXPECT_TRUE(r->fits);
  const double f = r->jax_arena.fitting_fraction;
  EXPECT_EQ(r->verdict.setting, absl::StrFormat("XLA_PYTHON_CLIENT_MEM_FRACTION=%.2f", f));
  EXPECT_GE(f, r->jax_arena.needed_fraction);
  EXPECT_LE(f * static_cast<double>(spec->device.cuda_total.value()), static_cast<double>(r->capacity.value()));
  auto at = [&](double fraction) {
    auto s = LoadRunSpec(GPUSIM_SOURCE_DIR "/configs/llama7b.yaml",
                         {"allocator.impl=bfc", absl::StrFormat("allocator.mem_fraction=%.2f", fraction)});
    EXPECT_TRUE(s.ok()) << s.status();
    auto rep = SimulateStep(*s);
    EXPECT_TRUE(rep.ok()) << rep.status();
    return rep->verdict.kind;
  };
  EXPECT_EQ(at(f), Verdict::Kind::kFits);
  EXPECT_EQ(at(f - 0.01), Verdict::Kind::kFitsWithSetting);
}

// A step the device cannot hold at any fraction: no setting is named (never
// a fraction above 1), the shortfall is the peak less the usable memory.
TEST(ReportJaxArenaTest, TooLargeForAnyFractionNamesTheShortfall) {
  auto spec = LoadRunSpec(GPUSIM_SOURCE_DIR "/configs/llama7b.yaml", {"batch.per_device=4"});
  ASSERT_TRUE(spec.ok()) << spec.status();
  auto r = SimulateStep(*spec);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->verdict.kind, Verdict::Kind::kDoesNotFit);
  EXPECT_FALSE(r->fits);
  EXPECT_EQ(r->jax_arena.fitting_fraction, 0);
  EXPECT_TRUE(r->verdict.setting.empty());
  EXPECT_EQ(r->verdict.shortfall, r->peak - r->capacity);
  EXPECT_EQ(r->verdict.Line().find("MEM_FRACTION"), std::string::npos);
}

}  // namespace
}  // namespace gpusim::report_peak_test
