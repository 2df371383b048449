#include "sim/lower/semantics.h"

#include "gtest/gtest.h"
#include "sim/config/settings.h"

namespace gpusim::semantics_test {
namespace {

RunSpec Spec(const std::string& framework, bool program = false) {
  RunSpec s;
  s.framework = framework;
  s.program.present = program;
  return s;
}

TEST(SemanticsTest, JaxIsXlaBufferAssignmentCheckedAgainstTheArena) {
  const LoweringSemantics s = LoweringSemanticsOf(Spec("jax"));
  EXPECT_EQ(s.lowering, Lowering::kXla);
  EXPECT_EQ(s.accounting, Accounting::kXlaMemoryAnalysis);
  EXPECT_EQ(s.runtime_check, RuntimeCheck::kJaxArena);
  EXPECT_TRUE(s.reuse_operand_buffers);
  EXPECT_TRUE(s.schedule_entry);
  EXPECT_TRUE(s.entry_result_tuple);
  EXPECT_TRUE(s.grad_cast_fuses_into_readers);
  EXPECT_TRUE(s.maxtext_metric_outputs);
  EXPECT_TRUE(s.scans_layers);
  EXPECT_FALSE(s.charge_host_timeline);
  EXPECT_FALSE(s.host_copies_on_compute_stream);
  EXPECT_EQ(s.tensor_parallel, TensorParallelRules::kMaxTextLogicalAxes);
}

TEST(SemanticsTest, AJaxProgramFileReplaysThroughTheAllocator) {
  const LoweringSemantics s = LoweringSemanticsOf(Spec("jax", /*program=*/true));
  EXPECT_EQ(s.lowering, Lowering::kXla);
  EXPECT_EQ(s.accounting, Accounting::kXlaMemoryAnalysis);
  EXPECT_EQ(s.runtime_check, RuntimeCheck::kAllocatorReplay);
}

TEST(SemanticsTest, PytorchIsEagerLiveBytesWithoutScans) {
  const LoweringSemantics s = LoweringSemanticsOf(Spec("pytorch"));
  EXPECT_EQ(s.lowering, Lowering::kEager);
  EXPECT_EQ(s.accounting, Accounting::kLiveBytes);
  EXPECT_EQ(s.runtime_check, RuntimeCheck::kAllocatorReplay);
  EXPECT_FALSE(s.reuse_operand_buffers);
  EXPECT_FALSE(s.schedule_entry);
  EXPECT_FALSE(s.entry_result_tuple);
  EXPECT_FALSE(s.grad_cast_fuses_into_readers);
  EXPECT_FALSE(s.maxtext_metric_outputs);
  EXPECT_FALSE(s.scans_layers);
  EXPECT_TRUE(s.charge_host_timeline);
  EXPECT_TRUE(s.host_copies_on_compute_stream);
  EXPECT_EQ(s.tensor_parallel, TensorParallelRules::kMegatronLm);
}

// Every XLA-only setting is a run setting, and its eager value is one the
// settings table can print (the capability check compares them as text).
TEST(SemanticsTest, XlaOnlySettingsAreRunSettingsWithEagerValues) {
  ASSERT_EQ(XlaOnlySettings().size(), 3u);
  RunSpec eager = Spec("pytorch");
  eager.model.param_scan_axis = 0;
  eager.model.scan_layers = false;
  eager.loop.mode = "unrolled";
  for (const XlaOnlySetting& x : XlaOnlySettings()) {
    const SettingInfo* s = FindSetting(x.path);
    ASSERT_NE(s, nullptr) << x.path;
    EXPECT_EQ(s->value(eager), x.eager_value) << x.path;
    EXPECT_NE(std::string(x.why).find("framework pytorch"), std::string::npos) << x.path;
  }
}

TEST(SemanticsTest, RecordedFromEagerPyTorchReadsTheTraceMeta) {
  Trace t;
  EXPECT_FALSE(RecordedFromEagerPyTorch(t));
  t.meta = {{"framework", "jax"}};
  EXPECT_FALSE(RecordedFromEagerPyTorch(t));
  t.meta = {{"framework", "pytorch"}};
  EXPECT_TRUE(RecordedFromEagerPyTorch(t));
}

}  // namespace
}  // namespace gpusim::semantics_test
