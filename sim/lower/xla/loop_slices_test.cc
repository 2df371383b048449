// Note [Materialised loop slices] on small program files: a rolled scan
// whose backward reads a stacked residual through a GEMM, one where only
// elementwise ops read it, and xla.dynamic_slice_fusion.
#include "sim/lower/xla/loop_slices.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "sim/config/loader.h"
#include "sim/report/explain.h"
#include "sim/step/step.h"

namespace gpusim {
namespace {

// w: f32[1024, 16384] = 64 MiB; x: f32[1024]. `body` is the scan body.
std::string Program(const std::string& body, const std::string& extra = "") {
  return R"(framework: jax
device: a100-sxm-80gb
loop: {mode: rolled, trip_count: 3}
program:
  name: slices
  inputs:
    x0: {shape: [1024], dtype: f32}
    w: {shape: [1024, 16384], dtype: f32, donate: true}
    X: {shape: [trip_count, 1], dtype: f32}
  scan:
    carry: {w: w, loss: zero}
    xs: {xs: X}
    consts: {h: x0}
    body:
)" + body + R"(    carry_out: {w: w_next, loss: loss_next}
  loss: loss
  grad: [w, x0]
)" + extra;
}

// z = h @ w (a GEMM: (1 + 16384) x 1024 >= 10^7), its backward dh = dz @ wᵀ
// reads the stacked residual w through a GEMM.
const char* kGemmBody = R"(      - {op: matmul, out: z, in: [h, w]}
      - {op: sum, out: zval, in: [z]}
      - {op: scale, out: w_next, in: [w, zval]}
      - {op: add, out: loss_next, in: [loss, zval]}
)";

// Only elementwise ops and a reduce read w.
const char* kElementwiseBody = R"(      - {op: mul, out: ww, in: [w, w]}
      - {op: sum, out: zval, in: [ww]}
      - {op: scale, out: w_next, in: [w, zval]}
      - {op: add, out: loss_next, in: [loss, zval]}
)";

StepReport RunProgram(const std::string& yaml) {
  auto spec = ParseRunSpec(yaml, "slices.yaml");
  EXPECT_TRUE(spec.ok()) << spec.status();
  auto r = SimulateStep(*spec);
  EXPECT_TRUE(r.ok()) << r.status();
  return *r;
}

std::vector<const Tensor*> Slices(const StepReport& r) {
  std::vector<const Tensor*> out;
  for (const Tensor& t : r.program.tensors) {
    if (t.name.find(".slice_") != std::string::npos) out.push_back(&t);
  }
  return out;
}

TEST(LoopSlicesTest, DotStaysGemmFollowsTheStrengthReductionThreshold) {
  EXPECT_TRUE(DotStaysGemm(1, 1048576, 1024, true, false));   // x @ w2 of scan_carry
  EXPECT_TRUE(DotStaysGemm(1, 1024, 1048576, false, false));  // dz @ w2ᵀ
  EXPECT_FALSE(DotStaysGemm(1024, 1048576, 1, false, false)); // outer product: (1024 + 2^20) x 1 < 10^7
  EXPECT_FALSE(DotStaysGemm(1, 1, 1 << 30, true, true));      // vector · vector
  EXPECT_FALSE(DotStaysGemm(100, 100, 49'999, false, false)); // 9,999,800 < 10^7
  EXPECT_TRUE(DotStaysGemm(100, 100, 50'000, false, false));  // exactly 10^7
}

TEST(LoopSlicesTest, ReadersThatMaterialise) {
  const XlaSpec def, dsf{true};
  EXPECT_FALSE(SliceMaterialises(SliceReader::kFused, def));
  EXPECT_TRUE(SliceMaterialises(SliceReader::kGemm, def));
  EXPECT_TRUE(SliceMaterialises(SliceReader::kCustomCall, def));
  EXPECT_TRUE(SliceMaterialises(SliceReader::kReduceScatter, def));
  EXPECT_FALSE(SliceMaterialises(SliceReader::kGemm, dsf));
  EXPECT_FALSE(SliceMaterialises(SliceReader::kReduceScatter, dsf));
  EXPECT_TRUE(SliceMaterialises(SliceReader::kAllGather, dsf));  // not a DynamicSliceFusionRewriter match
  EXPECT_TRUE(SliceMaterialises({SliceReader::kFused, SliceReader::kGemm}, def));
  EXPECT_FALSE(SliceMaterialises({SliceReader::kFused, SliceReader::kFused}, def));
}

TEST(LoopSlicesTest, StackedResidualReadByAGemmIsABufferPerIteration) {
  StepReport r = RunProgram(Program(kGemmBody));
  std::vector<const Tensor*> s = Slices(r);
  ASSERT_EQ(s.size(), 3u);  // one per backward iteration
  for (const Tensor* t : s) {
    EXPECT_EQ(t->bytes().value(), 64 << 20);
    EXPECT_NE(t->origin.find("per-iteration slice of stacked residual `w`, read by a GEMM"), std::string::npos);
  }
  // The reduce of d(w·zval) reads the slice's buffer, not the stack.
  for (const Op& op : r.program.ops) {
    if (op.name == "iter1.vjp_w_next.db") {
      EXPECT_EQ(r.program.tensor(op.inputs[1]).name, "iter1.slice_w");
    }
  }
  const std::string explain = RenderExplain(r, 20);
  EXPECT_NE(explain.find("per-iteration slice of stacked residual `w`, read by a GEMM"), std::string::npos)
      << explain;
}

TEST(LoopSlicesTest, ElementwiseReadersFuseTheSlice) {
  StepReport r = RunProgram(Program(kElementwiseBody));
  EXPECT_TRUE(Slices(r).empty());
  // The stack is read in place, one slice's bytes per read.
  bool read = false;
  for (const Op& op : r.program.ops) {
    if (op.name != "iter1.vjp_w_next.db") continue;
    read = true;
    EXPECT_EQ(r.program.tensor(op.inputs[1]).name, "residual_stack.w");
  }
  EXPECT_TRUE(read);
}

TEST(LoopSlicesTest, DynamicSliceFusionReadsTheStackInPlace) {
  StepReport off = RunProgram(Program(kGemmBody));
  StepReport on = RunProgram(Program(kGemmBody, "xla: {dynamic_slice_fusion: true}\n"));
  EXPECT_TRUE(Slices(on).empty());
  EXPECT_LT(on.temp_live_peak, off.temp_live_peak);
}

TEST(LoopSlicesTest, DynamicSliceFusionIsAnXlaOption) {
  // Refused by name where the lowering is eager (the capability check).
  auto spec = ParseRunSpec(
      "framework: pytorch\ndevice: a100-sxm-80gb\nmodel: {from: llama2-7b}\nxla: {dynamic_slice_fusion: true}\n",
      "bad.yaml");
  ASSERT_TRUE(spec.ok()) << spec.status();
  auto r = SimulateStep(*spec);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("xla.dynamic_slice_fusion: not modelled"), std::string::npos) << r.status();
}

}  // namespace
}  // namespace gpusim

namespace gpusim {
namespace {

int CountSlices(const std::vector<std::string>& sets, const std::string& what) {
  auto spec = LoadRunSpec(GPUSIM_SOURCE_DIR "/configs/llama7b.yaml", sets);
  EXPECT_TRUE(spec.ok()) << spec.status();
  auto r = PrepareStep(*spec);
  EXPECT_TRUE(r.ok()) << r.status();
  int n = 0;
  for (const Op& op : r->program.ops) {
    if (op.kind != OpKind::kDynamicSlice) continue;
    n += r->program.tensor(op.outputs[0]).origin.find(what) != std::string::npos;
  }
  return n;
}

TEST(LoopSlicesTest, LlamaBackwardSlicesWhatCudnnAttentionReads) {
  // minimal_flash saves value_proj, the attention output and its lse per
  // layer: cuDNN's backward (a custom call) reads each layer's slice.
  EXPECT_EQ(CountSlices({"model.n_layers=4"}, "read by a custom call"), 3 * 4);
  EXPECT_EQ(CountSlices({"model.n_layers=4", "xla.dynamic_slice_fusion=true"}, "read by a custom call"), 0);
  // Unrolled layers: no loop, no slices.
  EXPECT_EQ(CountSlices({"model.n_layers=4", "loop.mode=unrolled"}, "per-iteration slice"), 0);
}

TEST(LoopSlicesTest, LlamaStackedWeightsFeedingAnAllGatherAreSliced) {
  // FSDP with the gather in the weight dtype: no cast fuses the slice, the
  // all-gather reads a buffer (7 matrices per layer, both directions);
  // with the default bf16 gather the cast reads it in place.
  EXPECT_EQ(CountSlices({"model.n_layers=4", "parallelism.gather_dtype=weight"}, "read by an all-gather"),
            7 * 4 * 2);
  EXPECT_EQ(CountSlices({"model.n_layers=4"}, "read by an all-gather"), 0);
}

}  // namespace
}  // namespace gpusim
