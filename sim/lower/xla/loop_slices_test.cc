// Note [Materialised loop slices] on small program files: a rolled scan
// whose backward reads a stacked residual through a GEMM, one where only
// elementwise ops read it, and xla.dynamic_slice_fusion.
#include "sim/lower/xla/loop_slices.h"

#include <map>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "sim/ir/builder.h"
#include "sim/lower/xla/entry_tuple.h"
#include "sim/config/loader.h"
#include "sim/report/explain.h"
#include "sim/step/step.h"

namespace gpusim::loop_slices_test {
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
}  // namespace gpusim::loop_slices_test

namespace gpusim::loop_slices_test {
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
}  // namespace gpusim::loop_slices_test

namespace gpusim::loop_slices_test {
namespace {

TEST(LoopSlicesTest, DotReadersAreResolvedByTheirShape) {
  EXPECT_EQ(ResolveReader({SliceReader::kDot, {1, 1048576, 1024, true, false}}), SliceReader::kGemm);
  EXPECT_EQ(ResolveReader({SliceReader::kDot, {100, 100, 49'999, false, false}}), SliceReader::kFused);
  EXPECT_EQ(ResolveReader({SliceReader::kDot, {1, 1, 1 << 30, true, true}}), SliceReader::kFused);
  EXPECT_EQ(ResolveReader({SliceReader::kAllGather, {}}), SliceReader::kAllGather);
}

// A stack, a GEMM, an all-gather, then the slice with its reader and a
// host copy issued after the slice; `reader` decides the slice.
::gpusim::Program SliceProgram(SliceReader reader) {
  ProgramBuilder b("p");
  const TensorId stack = b.AddArgument("stack", {4, 8}, DType::kF32, Role::kResidual, false);
  const TensorId w = b.AddArgument("w", {8}, DType::kF32, Role::kParameter, true);
  const TensorId a = b.AddTensor("a", {8}, DType::kF32, Role::kTemporary);
  b.AddOp("gemm", OpKind::kMatmul, {w}, {a});
  const TensorId g = b.AddTensor("g", {8}, DType::kF32, Role::kTemporary);
  b.AddOp("gather", OpKind::kAllGather, {a}, {g});
  b.BeginRegion("iter0", "iteration");
  const TensorId s =
      b.AddLoopSlice("iter0.slice_r", stack, {8}, DType::kF32, Role::kResidual,
                     {SliceSource::kStackedResidual, "r", {{SliceReader::kFused, {}}, {reader, {}}}});
  const TensorId out = b.AddTensor("out", {8}, DType::kF32, Role::kParameter);
  b.tensor(out).live_out = true;
  b.tensor(out).aliases = w;
  Op& read = b.AddOp("read", OpKind::kElementwise, {s, g}, {out});
  EXPECT_EQ(read.bytes_read.value(), 64);  // the slice's 32 B and g's
  b.EndRegion();
  const TensorId h = b.AddTensor("h", {8}, DType::kF32, Role::kTemporary);
  Op& copy = b.AddOp("copy", OpKind::kHostToDevice, {}, {h});
  copy.control_deps = {2, 3};  // the slice, and the reader
  return b.Finish();
}

TEST(LoopSlicesTest, AFusedSliceIsRemovedAndTheProgramClosesUp) {
  ::gpusim::Program p = SliceProgram(SliceReader::kFused);
  LowerLoopSlices(XlaSpec{}, &p);
  ASSERT_EQ(p.ops.size(), 4u);
  ASSERT_EQ(p.tensors.size(), 6u);
  for (size_t i = 0; i < p.ops.size(); ++i) EXPECT_EQ(p.ops[i].id, static_cast<OpId>(i));
  for (size_t i = 0; i < p.tensors.size(); ++i) EXPECT_EQ(p.tensors[i].id, static_cast<TensorId>(i));
  const Op& read = p.ops[2];
  EXPECT_EQ(read.name, "read");
  EXPECT_EQ(p.tensor(read.inputs[0]).name, "stack");  // in place
  EXPECT_EQ(p.tensor(read.inputs[1]).name, "g");
  EXPECT_EQ(p.tensor(read.outputs[0]).name, "out");
  EXPECT_EQ(read.bytes_read.value(), 64);             // one slice's bytes, as built
  EXPECT_EQ(p.tensor(read.outputs[0]).aliases, 1);    // still `w`
  // The dependency on the slice moves to the compute op before it (the
  // gemm; the all-gather runs on the collective stream).
  EXPECT_EQ(p.ops[3].control_deps, (std::vector<OpId>{0, 2}));
  EXPECT_EQ(p.regions[0].first, 2);
  EXPECT_EQ(p.regions[0].last, 2);
}

TEST(LoopSlicesTest, AMaterialisedSliceStaysWithItsOrigin) {
  ::gpusim::Program p = SliceProgram(SliceReader::kGemm);
  LowerLoopSlices(XlaSpec{}, &p);
  ASSERT_EQ(p.ops.size(), 5u);
  EXPECT_EQ(p.ops[2].kind, OpKind::kDynamicSlice);
  EXPECT_EQ(p.tensor(p.ops[3].inputs[0]).name, "iter0.slice_r");
  EXPECT_EQ(p.tensor(p.ops[2].outputs[0]).origin,
            "per-iteration slice of stacked residual `r`, read by a GEMM (a buffer of its own: Note [Materialised "
            "loop slices])");
  EXPECT_EQ(p.ops[4].control_deps, (std::vector<OpId>{2, 3}));
  EXPECT_EQ(p.regions[0].first, 2);
  EXPECT_EQ(p.regions[0].last, 3);
  XlaSpec dsf;
  dsf.dynamic_slice_fusion = true;
  ::gpusim::Program q = SliceProgram(SliceReader::kGemm);
  LowerLoopSlices(dsf, &q);
  EXPECT_EQ(q.ops.size(), 4u);
}

TEST(EntryTupleTest, AMarkedProgramWithTwoOutputsGetsItsTable) {
  auto make = [](bool marked, int outputs) {
    ProgramBuilder b("p");
    b.set_phase(Phase::kOptimizer);
    for (int i = 0; i < outputs; ++i) {
      const TensorId t = b.AddTensor("o" + std::to_string(i), {4}, DType::kF32, Role::kParameter);
      b.tensor(t).live_out = true;
      b.AddOp("write" + std::to_string(i), OpKind::kElementwise, {}, {t});
    }
    b.set_entry_result_tuple(marked);
    ::gpusim::Program p = b.Finish();
    AddEntryTupleTable(&p);
    return p;
  };
  const ::gpusim::Program p = make(true, 3);
  ASSERT_EQ(p.tensors.size(), 4u);
  EXPECT_EQ(p.tensors[3].name, "output tuple index table");
  EXPECT_EQ(p.tensors[3].bytes().value(), 24);
  EXPECT_TRUE(p.tensors[3].live_out);
  ASSERT_EQ(p.ops.size(), 4u);
  EXPECT_EQ(p.ops[3].inputs, (std::vector<TensorId>{0, 1, 2}));
  EXPECT_EQ(p.ops[3].bytes_read.value(), 0);
  EXPECT_EQ(p.ops[3].phase, Phase::kOptimizer);
  EXPECT_EQ(make(false, 3).tensors.size(), 3u);  // not a jitted step's result
  EXPECT_EQ(make(true, 1).tensors.size(), 1u);   // a single output is the array itself
}

}  // namespace
}  // namespace gpusim::loop_slices_test

namespace gpusim::loop_slices_test {
namespace {

// The per-layer weight gradients dW = Xᵀ·dY (name -> bytes) of `sets` on
// llama7b, 4 layers, no FSDP, bf16 weights: the GEMMs read the weight
// slices directly, so their materialisation follows dynamic_slice_fusion.
std::map<std::string, int64_t> WeightGradBytes(const std::string& dynamic_slice_fusion) {
  auto spec = LoadRunSpec(GPUSIM_SOURCE_DIR "/configs/llama7b.yaml",
                          {"parallelism.fsdp=1", "model.n_layers=4", "model.weight_dtype=bf16",
                           "xla.dynamic_slice_fusion=" + dynamic_slice_fusion});
  EXPECT_TRUE(spec.ok()) << spec.status();
  auto r = PrepareStep(*spec);
  EXPECT_TRUE(r.ok()) << r.status();
  std::map<std::string, int64_t> dw;
  for (const Op& op : r->program.ops) {
    if (op.kind != OpKind::kMatmul || !absl::StartsWith(op.name, "layer") || !absl::EndsWith(op.name, ".dw")) {
      continue;
    }
    dw[op.name] = r->program.tensor(op.outputs[0]).bytes().value();
  }
  return dw;
}

TEST(LoopSlicesTest, AFusedWeightSliceLeavesTheWeightGradientOneLayer) {
  // A fused slice is read in place at its offset in the stack
  // (DynamicSliceFusionRewriter), but dW = Xᵀ·dY is an HLO dot of shape
  // [kdim, ndim] whatever reads W, and buffer assignment sizes it from that
  // shape: one layer's weight, never the stack (the builder once sized it
  // from the stack the GEMM read: 4 x 90,177,536 B for wi_1).
  const std::map<std::string, int64_t> kept = WeightGradBytes("false"), fused = WeightGradBytes("true");
  ASSERT_EQ(kept.size(), 7u * 4u);
  EXPECT_EQ(fused, kept);
  EXPECT_EQ(fused.at("layer3.d_wi_1.dw"), int64_t{4096} * 11008 * 2);
  EXPECT_EQ(fused.at("layer0.d_wq.dw"), int64_t{4096} * 4096 * 2);
}

}  // namespace
}  // namespace gpusim::loop_slices_test
