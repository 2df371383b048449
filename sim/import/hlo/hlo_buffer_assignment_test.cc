// Note [Compiled-module buffer assignment] on small compiled modules; the
// nine H200 modules are checked by ctest hlo.h200_xla_gpu.
#include "sim/import/hlo/hlo_buffer_assignment.h"

#include <string>

#include "gtest/gtest.h"
#include "sim/import/hlo/hlo_normalization.h"
#include "sim/import/hlo/hlo_parser.h"

namespace gpusim::hlo_buffer_assignment_test {
namespace {

std::string Chain(const std::string& alias) {
  return "HloModule m, is_scheduled=true" + alias + R"(

FileNames
1 "step.py"

StackFrames
1 {file_location_id=1 parent_frame_id=1}

%fused (p0: f32[256], p1: f32[256]) -> f32[256] {
  %p0 = f32[256]{0} parameter(0)
  %p1 = f32[256]{0} parameter(1)
  ROOT %a = f32[256]{0} add(%p0, %p1)
}

ENTRY %main (x: f32[256], y: f32[256]) -> (f32[256]) {
  %x = f32[256]{0} parameter(0)
  %y = f32[256]{0} parameter(1)
  %f1 = f32[256]{0} fusion(%x, %y), kind=kLoop, calls=%fused
  %f2 = f32[256]{0} fusion(%f1, %y), kind=kLoop, calls=%fused
  %f3 = f32[256]{0} fusion(%f2, %y), kind=kLoop, calls=%fused
  ROOT %t = (f32[256]{0}) tuple(%f3)
}
)";
}

TEST(CompiledBufferAssignmentTest, TempsLiveInTheOutputsAllocationBeforeItsValue) {
  auto m = ParseHloModule(Chain(""), "chain.hlo");
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_TRUE(m->is_scheduled);
  auto a = AssignCompiledBuffers(*m);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->argument.value(), 2048);
  EXPECT_EQ(a->alias.value(), 0);
  // f3 is live out: an output allocation of its own, and the 8 B table.
  EXPECT_EQ(a->output.value(), 1024 + 8);
  // The live-out f3 is assigned first (largest, live-out first) and its
  // allocation is reusable: f1 and f2 end where f3 begins (f3 may be
  // written over f2, FusionCanShareBufferHint), so they take it too
  // (AssignSingleHloBuffer) and no temp is left.
  EXPECT_EQ(a->heap.value(), 0);
  EXPECT_EQ(a->temp.value(), 0);
}

TEST(CompiledBufferAssignmentTest, ADonatedParameterHoldsTheChain) {
  auto m = ParseHloModule(Chain(", input_output_alias={ {0}: (0, {}, may-alias) }"), "chain.hlo");
  ASSERT_TRUE(m.ok()) << m.status();
  auto a = AssignCompiledBuffers(*m);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->alias.value(), 1024);
  EXPECT_EQ(a->output.value(), 1024 + 8);
  // x dies at f1, which may be written over it; f2 over f1; f3 is x's
  // buffer (input_output_alias): all in the parameter's allocation.
  EXPECT_EQ(a->temp.value(), 0);
}

TEST(CompiledBufferAssignmentTest, RefusesWhatItDoesNotReadByName) {
  auto m = ParseHloModule(R"(HloModule m, is_scheduled=true

%c (p: f32[4]) -> f32[4] {
  ROOT %p = f32[4]{0} parameter(0)
}

ENTRY %main (x: f32[4]) -> f32[4] {
  %x = f32[4]{0} parameter(0)
  ROOT %k = f32[4]{0} call(%x), to_apply=%c
}
)",
                          "call.hlo");
  ASSERT_TRUE(m.ok()) << m.status();
  auto a = AssignCompiledBuffers(*m);
  ASSERT_FALSE(a.ok());
  EXPECT_NE(std::string(a.status().message()).find("call.hlo:9:3: k: 'call' in a compiled module is not modelled"),
            std::string::npos)
      << a.status();
  auto unopt = ParseHloModule("HloModule m\n\nENTRY %main (x: f32[4]) -> f32[4] {\n  ROOT %x = f32[4]{0} parameter(0)\n}\n",
                              "u.hlo");
  ASSERT_TRUE(unopt.ok());
  EXPECT_FALSE(AssignCompiledBuffers(*unopt).ok());
}

std::string Softmax(bool exp_is_output) {
  return std::string(R"(HloModule s

%mx (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %m = f32[] maximum(%a, %b)
}

%sm (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %s = f32[] add(%a, %b)
}

ENTRY %main (x: f32[4,8]) -> (f32[4,8], f32[4,8]) {
  %x = f32[4,8]{1,0} parameter(0)
  %ninf = f32[] constant(-inf)
  %m = f32[4]{0} reduce(%x, %ninf), dimensions={1}, to_apply=%mx
  %mb = f32[4,8]{1,0} broadcast(%m), dimensions={0}
  %s = f32[4,8]{1,0} subtract(%x, %mb)
  %e = f32[4,8]{1,0} exponential(%s)
  %zero = f32[] constant(0)
  %r = f32[4]{0} reduce(%e, %zero), dimensions={1}, to_apply=%sm
  %rb = f32[4,8]{1,0} broadcast(%r), dimensions={0}
  %p = f32[4,8]{1,0} divide(%e, %rb)
  ROOT %t = (f32[4,8]{1,0}, f32[4,8]{1,0}) tuple(%p, )") +
         (exp_is_output ? "%e" : "%p") + ")\n}\n";
}

TEST(NormalizationFusionTest, TheMaxAndSumDiamondsAreOneFusionUnlessTheExpHasOtherReaders) {
  for (bool exp_is_output : {false, true}) {
    auto m = ParseHloModule(Softmax(exp_is_output), "softmax.hlo");
    ASSERT_TRUE(m.ok()) << m.status();
    const HloComputation& c = m->entry_computation();
    std::vector<bool> live(c.instructions.size(), true);
    const std::vector<bool> out = NormalizationFusionOutputs(c, live);
    std::vector<std::string> marked;
    for (size_t i = 0; i < out.size(); ++i) {
      if (out[i]) marked.push_back(c.instructions[i].name);
    }
    // The chain ends at the probabilities, or at the exp when something
    // else reads it (then the sum diamond is a fusion of its own).
    if (exp_is_output) {
      EXPECT_EQ(marked, (std::vector<std::string>{"e", "p"}));
    } else {
      EXPECT_EQ(marked, (std::vector<std::string>{"p"}));
    }
  }
}

}  // namespace
}  // namespace gpusim::hlo_buffer_assignment_test
