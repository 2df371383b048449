// Issue 28: an eager (framework pytorch) Llama step carries no XLA scan
// structure (Note [Framework semantics], sim/lower/semantics.h). Its peak
// does not depend on the XLA-only settings, and a run that writes one of
// them to a value an eager step cannot run is refused by name, where it was
// written.
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "sim/config/loader.h"
#include "sim/step/families.h"
#include "sim/step/model_program.h"
#include "sim/step/step.h"

namespace gpusim::eager_llama_test {
namespace {

const char kLlama7b[] = GPUSIM_SOURCE_DIR "/configs/llama7b.yaml";

// llama7b.yaml under pytorch with the XLA-only settings at their eager
// values, 4 layers.
RunSpec Eager() {
  auto s = LoadRunSpec(kLlama7b, {"framework=pytorch", "model.param_scan_axis=0", "loop.mode=unrolled",
                                  "model.n_layers=4"});
  EXPECT_TRUE(s.ok()) << s.status();
  return *s;
}

// The program the llama family builds for `s`, without the capability
// check (which would refuse the XLA-only values written below).
Program Build(const RunSpec& s) {
  auto family = FamilyOf(s);
  EXPECT_TRUE(family.ok()) << family.status();
  auto p = BuildFamilyProgram(**family, s);
  EXPECT_TRUE(p.ok()) << p.status();
  return *p;
}

std::vector<std::string> TensorsAndBytes(const Program& p) {
  std::vector<std::string> out;
  for (const Tensor& t : p.tensors) out.push_back(t.name + " " + std::to_string(t.bytes().value()));
  return out;
}

TEST(EagerLlamaTest, ProgramIgnoresNoScanSettingButHasNoScanStructure) {
  RunSpec base = Eager();
  base.model.scan_layers = false;
  const Program want = Build(base);
  for (const bool scan : {false, true}) {
    for (const int axis : {0, 1}) {
      for (const char* mode : {"unrolled", "rolled"}) {
        RunSpec s = base;
        s.model.scan_layers = scan;
        s.model.param_scan_axis = axis;
        s.loop.mode = mode;
        const Program p = Build(s);
        EXPECT_EQ(TensorsAndBytes(p), TensorsAndBytes(want)) << "scan " << scan << " axis " << axis << " " << mode;
        for (const Tensor& t : p.tensors) {
          EXPECT_FALSE(absl::StrContains(t.name, "layers_first")) << t.name;
          EXPECT_FALSE(absl::StrContains(t.name, "residual_stack")) << t.name;
          EXPECT_FALSE(absl::StrContains(t.name, "grad_stack")) << t.name;
          EXPECT_FALSE(absl::StrContains(t.name, ".stacked")) << t.name;
        }
        for (const Region& r : p.regions) EXPECT_FALSE(r.while_loop || r.repeat > 1) << r.name;
      }
    }
  }
}

// The same settings under jax do change the program (the structure above
// is XLA's), so the test above can fail.
TEST(EagerLlamaTest, UnderJaxTheScanSettingsMakeScanStructure) {
  RunSpec s = Eager();
  s.framework = "jax";
  s.model.scan_layers = true;
  s.model.param_scan_axis = 1;
  s.loop.mode = "rolled";
  const Program p = Build(s);
  int transposes = 0, stacks = 0;
  for (const Tensor& t : p.tensors) {
    transposes += absl::StrContains(t.name, "layers_first");
    stacks += absl::StrContains(t.name, "grad_stack");
    if (absl::StrContains(t.name, "layers_first")) {
      EXPECT_EQ(t.origin_kind, "transposed copy of stacked params (param_scan_axis=1)") << t.name;
    }
  }
  EXPECT_GT(transposes, 0);
  EXPECT_GT(stacks, 0);
}

TEST(EagerLlamaTest, PeakIsTheSameWhateverTheLayoutOnlyXlaReads) {
  auto a = SimulateStep(Eager());
  ASSERT_TRUE(a.ok()) << a.status();
  RunSpec s = Eager();
  s.written.erase("loop.mode");
  s.written.erase("model.param_scan_axis");
  s.loop.mode = "rolled";  // the defaults a plain framework: pytorch config has
  s.model.scan_layers = true;
  auto b = SimulateStep(s);
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(a->peak.value(), b->peak.value());
  // What was simulated is what the report prints.
  EXPECT_EQ(b->spec.loop.mode, "unrolled");
  EXPECT_FALSE(b->spec.model.scan_layers);
  EXPECT_EQ(b->semantics.accounting, Accounting::kLiveBytes);
}

// The command: param_scan_axis 1 under pytorch is refused by name.
TEST(EagerLlamaTest, WrittenXlaOnlyValuesAreRefusedWhereWritten) {
  auto s = LoadRunSpec(kLlama7b, {"framework=pytorch", "model.param_scan_axis=1", "loop.mode=unrolled"});
  ASSERT_TRUE(s.ok()) << s.status();
  auto r = SimulateStep(*s);
  ASSERT_FALSE(r.ok());
  const std::string m(r.status().message());
  EXPECT_TRUE(absl::StrContains(m, "--set model.param_scan_axis=1: model.param_scan_axis: 1 is not modelled")) << m;
  EXPECT_TRUE(absl::StrContains(m, "module list")) << m;
  EXPECT_TRUE(absl::StrContains(m, "use framework: jax")) << m;
  // Written in the file: the file position.
  auto f = LoadRunSpec(kLlama7b, {"framework=pytorch", "loop.mode=unrolled"});
  ASSERT_TRUE(f.ok()) << f.status();
  auto rf = SimulateStep(*f);
  ASSERT_FALSE(rf.ok());
  EXPECT_TRUE(absl::StrContains(rf.status().message(), "llama7b.yaml:")) << rf.status();
  EXPECT_TRUE(absl::StrContains(rf.status().message(), "model.param_scan_axis: 1")) << rf.status();
  // loop.mode: rolled, written in the file.
  auto l = LoadRunSpec(kLlama7b, {"framework=pytorch", "model.param_scan_axis=0"});
  ASSERT_TRUE(l.ok()) << l.status();
  auto rl = SimulateStep(*l);
  ASSERT_FALSE(rl.ok());
  EXPECT_TRUE(absl::StrContains(rl.status().message(), "loop.mode: rolled is not modelled")) << rl.status();
}

}  // namespace
}  // namespace gpusim::eager_llama_test
