// Flash attention for the gpt family (models/gpt_layer.cc, Note [Megatron
// flash attention]): a gpt config with model.attention flash runs the TE
// flash kernels, saving the fp32 softmax statistics instead of the
// [b, a/t, s, s] probabilities, dropout mask and dropped probabilities.
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "sim/config/loader.h"
#include "sim/step/step.h"

namespace gpusim::gpt_flash_test {
namespace {

absl::StatusOr<StepReport> Simulate22b(const std::string& attention, const std::string& remat = "none") {
  auto spec = LoadRunSpec(GPUSIM_SOURCE_DIR "/examples/gpt22b_korthikanti.yaml",
                          {"model.attention=" + attention, "remat.policy=" + remat});
  EXPECT_TRUE(spec.ok()) << spec.status();
  if (!spec.ok()) return spec.status();
  return SimulateStep(*spec);
}

int64_t Peak(const std::string& attention) {
  auto r = Simulate22b(attention);
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? r->peak.value() : 0;
}

TEST(GptFlashTest, PeakLowerByTheScoreTensors) {
  // Korthikanti 22B: b 4, a/t 64/8, s 2048, 48 layers, f16, remat none.
  constexpr int64_t kB = 4, kAt = 8, kS = 2048, kL = 48;
  constexpr int64_t kBass = kB * kAt * kS * kS;
  // Explicit saves per layer softmax output (2 B), dropout mask (1 B) and
  // the dropped probabilities (2 B); flash saves the fp32 LSE [b, a/t, s].
  constexpr int64_t kExplicitSaved = 5 * kBass, kFlashSaved = 4 * kB * kAt * kS;
  const int64_t explicit_peak = Peak("explicit"), flash_peak = Peak("flash");
  EXPECT_EQ(explicit_peak - flash_peak, kL * (kExplicitSaved - kFlashSaved));
  // Pinned: the flash case's peak (gpusim run ... --set model.attention=flash).
  EXPECT_EQ(flash_peak, 59'419'058'176);
}

TEST(GptFlashTest, SelectiveRecomputeRerunsTheFlashKernelAndDropsItsStatistics) {
  // Megatron's selective recompute checkpoints core attention whatever its
  // backend (Note [A second output of a kernel]): under flash the fp32 LSE
  // [b, a/t, s] is not kept, and each layer's backward reruns the kernel.
  constexpr int64_t kB = 4, kAt = 8, kS = 2048, kL = 48;
  auto none = Simulate22b("flash", "none"), selective = Simulate22b("flash", "selective");
  ASSERT_TRUE(none.ok() && selective.ok());
  EXPECT_EQ(none->peak.value() - selective->peak.value(), kL * 4 * kB * kAt * kS);
  EXPECT_EQ(none->sim.recompute_busy, SimTime(0));
  EXPECT_GT(selective->sim.recompute_busy, SimTime(0));
  EXPECT_GT(selective->sim.step_time, none->sim.step_time);
}

}  // namespace
}  // namespace gpusim::gpt_flash_test
