// The text report says which phase holds the peak and why (the largest
// buffers live then), and reports host offload (pinned bytes, PCIe time).
#include <string>

#include "gtest/gtest.h"
#include "sim/config/loader.h"
#include "sim/report/render.h"
#include "sim/step/step.h"

namespace gpusim {
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
// one temp heap) through BFC over mem_fraction of the device.
TEST(ReportJaxArenaTest, DefaultFractionDoesNotHoldLlama7bButAHigherOneDoes) {
  auto spec = LoadRunSpec(GPUSIM_SOURCE_DIR "/configs/llama7b.yaml", {});
  ASSERT_TRUE(spec.ok()) << spec.status();
  auto r = SimulateStep(*spec);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_TRUE(r->jax_arena.checked);
  EXPECT_DOUBLE_EQ(r->jax_arena.mem_fraction, 0.75);
  EXPECT_FALSE(r->jax_arena.fits);  // 74.6 GiB > 0.75 x 78.7 GiB
  EXPECT_TRUE(r->fits);             // but the device holds it
  EXPECT_NEAR(r->jax_arena.needed_fraction,
              static_cast<double>(r->peak.value()) / static_cast<double>(r->capacity.value()), 1e-12);
  const double need = r->jax_arena.needed_fraction;
  auto at = [&](double f) {
    auto s = LoadRunSpec(GPUSIM_SOURCE_DIR "/configs/llama7b.yaml",
                         {"allocator.impl=bfc", "allocator.mem_fraction=" + std::to_string(f)});
    EXPECT_TRUE(s.ok()) << s.status();
    auto rep = SimulateStep(*s);
    EXPECT_TRUE(rep.ok()) << rep.status();
    return rep->jax_arena.fits;
  };
  EXPECT_TRUE(at(need + 0.002));
  EXPECT_FALSE(at(need - 0.002));
}

}  // namespace
}  // namespace gpusim
