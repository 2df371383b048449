#include "sim/import/hlo/hlo_to_program.h"

#include <fstream>
#include <sstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "sim/import/hlo/hlo_parser.h"
#include "sim/lower/lower.h"

namespace gpusim::hlo_to_program_test {
namespace {

using ::testing::HasSubstr;

absl::StatusOr<Program> Import(const std::string& text, HloImportOptions o = {}, HloImportStats* stats = nullptr) {
  auto m = ParseHloModule(text, "t.hlo");
  if (!m.ok()) return m.status();
  return HloToProgram(*m, o, stats);
}

int CountOps(const Program& p, OpKind k) {
  int n = 0;
  for (const Op& op : p.ops) n += op.kind == k;
  return n;
}

TEST(HloToProgramTest, ElementwiseChainsFuseIntoOneKernel) {
  auto p = Import(R"(HloModule m
ENTRY main {
  a = f32[256]{0} parameter(0)
  b = f32[256]{0} parameter(1)
  e = f32[256]{0} exponential(a)
  c = f32[] constant(2)
  bc = f32[256]{0} broadcast(c), dimensions={}
  m = f32[256]{0} multiply(e, bc)
  ROOT s = f32[256]{0} add(m, b)
}
)");
  ASSERT_TRUE(p.ok()) << p.status();
  ASSERT_EQ(p->ops.size(), 1u);  // one loop fusion; the root array has no tuple table
  EXPECT_EQ(p->ops[0].kind, OpKind::kElementwise);
  EXPECT_EQ(p->ops[0].bytes_read.value(), 2 * 1024);
  EXPECT_DOUBLE_EQ(p->ops[0].flops, 3 * 256);  // exp, multiply, add
  ASSERT_EQ(p->ops[0].outputs.size(), 1u);
  EXPECT_TRUE(p->tensor(p->ops[0].outputs[0]).live_out);
}

TEST(HloToProgramTest, GemmOperandsMaterialiseAndDotsAreSized) {
  auto p = Import(R"(HloModule m
ENTRY main {
  a = bf16[4,64,32]{2,1,0} parameter(0)
  w = bf16[4,32,16]{2,1,0} parameter(1)
  n = bf16[4,64,32]{2,1,0} negate(a)
  ROOT d = bf16[4,64,16]{2,1,0} dot(n, w), lhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_batch_dims={0}, rhs_contracting_dims={1}
}
)");
  ASSERT_TRUE(p.ok()) << p.status();
  ASSERT_EQ(p->ops.size(), 2u);
  EXPECT_EQ(p->ops[0].kind, OpKind::kElementwise);  // the negate, written for cuBLAS
  const Op& dot = p->ops[1];
  EXPECT_EQ(dot.kind, OpKind::kMatmul);
  EXPECT_EQ(dot.batch, 4);
  EXPECT_EQ(dot.m, 64);
  EXPECT_EQ(dot.k, 32);
  EXPECT_EQ(dot.n, 16);
  EXPECT_DOUBLE_EQ(dot.flops, 2.0 * 4 * 64 * 32 * 16);
  EXPECT_EQ(dot.dtype, DType::kBF16);
}

// Note [Gemm results are not written over] (sim/lower/lower.cc): XLA-GPU's
// fusion reading a cuBLAS custom call's result (a tuple element) never takes
// its buffer, even where the result dies and has its size.
TEST(HloToProgramTest, GemmResultsAreNotWrittenOver) {
  // tests/data/hlo/gemm_result.hlo: d = dot(a, w); e = exponential(d); dot(e, w).
  std::ifstream in(GPUSIM_SOURCE_DIR "/tests/data/hlo/gemm_result.hlo");
  std::stringstream text;
  text << in.rdbuf();
  auto p = Import(text.str());
  ASSERT_TRUE(p.ok()) << p.status();
  auto temps = [&](bool reuse_matmul_results) {
    auto lowered = LowerEager(*p, {.reuse_operand_buffers = true, .reuse_matmul_results = reuse_matmul_results});
    EXPECT_TRUE(lowered.ok()) << lowered.status();
    int n = 0;
    for (const BufferInfo& b : lowered->buffers) n += !b.argument && !b.output;
    return n;
  };
  EXPECT_EQ(temps(true), 1);   // exp written over the dying gemm result
  EXPECT_EQ(temps(false), 2);  // a buffer of its own beside it
}

// Note [Optimization barrier]: what reads a barrier's output waits for every
// operand's write, the cotangent's too, though it reads only the weight.
TEST(HloToProgramTest, OptBarrierOrdersItsReadersAfterEveryOperand) {
  auto p = Import(R"(HloModule m
ENTRY main {
  w = f32[4,256]{1,0} parameter(0)
  g = f32[256]{0} parameter(1)
  s = f32[1,256]{1,0} slice(w), slice={[1:2], [0:256]}
  ws = f32[256]{0} reshape(s)
  ct = f32[256]{0} exponential(g)
  t = (f32[256]{0}, f32[256]{0}) tuple(ws, ct)
  b = (f32[256]{0}, f32[256]{0}) opt-barrier(t)
  bw = f32[256]{0} get-tuple-element(b), index=0
  cw = bf16[256]{0} convert(bw)
  ROOT d = bf16[256]{0} multiply(cw, cw)
}
)");
  ASSERT_TRUE(p.ok()) << p.status();
  // The slice and the cotangent are written for the barrier, then the
  // convert-multiply fusion that reads only the slice.
  ASSERT_EQ(p->ops.size(), 3u);
  const Op& reader = p->ops[2];
  ASSERT_EQ(reader.inputs.size(), 1u);
  EXPECT_EQ(reader.inputs[0], p->ops[0].outputs[0]);
  EXPECT_EQ(reader.control_deps, (std::vector<OpId>{0, 1}));
  EXPECT_TRUE(p->ops[0].control_deps.empty());
  EXPECT_TRUE(p->ops[1].control_deps.empty());
}

// Note [Sibling multi-output fusion]: a reduction of an array a loop fusion
// also reads is computed by that fusion, though the module prints it last.
TEST(HloToProgramTest, ReductionFusesIntoItsLoopFusionSibling) {
  auto p = Import(R"(HloModule m
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
ENTRY main {
  x = f32[64,256]{1,0} parameter(0)
  w = f32[256,256]{1,0} parameter(1)
  d = f32[64,256]{1,0} dot(x, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  n = f32[64,256]{1,0} negate(d)
  e = f32[64,256]{1,0} dot(n, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  c = f32[] constant(0)
  r = f32[256]{0} reduce(d, c), dimensions={0}, to_apply=add
  ROOT t = (f32[64,256]{1,0}, f32[256]{0}) tuple(e, r)
}
)");
  ASSERT_TRUE(p.ok()) << p.status();
  ASSERT_EQ(CountOps(*p, OpKind::kReduce), 1);
  EXPECT_EQ(CountOps(*p, OpKind::kElementwise), 0);  // the negate's loop fusion became the reduction fusion
  const Op* fused = nullptr;
  for (const Op& op : p->ops) {
    if (op.kind == OpKind::kReduce) fused = &op;
  }
  ASSERT_NE(fused, nullptr);
  EXPECT_EQ(fused->id, 1);  // between the two dots: where the negate runs
  ASSERT_EQ(fused->outputs.size(), 2u);
  EXPECT_EQ(p->tensor(fused->outputs[0]).shape, (std::vector<int64_t>{64, 256}));
  EXPECT_EQ(p->tensor(fused->outputs[1]).shape, (std::vector<int64_t>{256}));
  EXPECT_EQ(fused->bytes_read.value(), 64 * 256 * 4);  // d read once for both
}

// A fori_loop as JAX lowers it: (i, acc) with i < 5.
constexpr char kLoop[] = R"(HloModule loop, input_output_alias={ {0}: (0, {}, may-alias) }
body {
  p = (s32[], f32[1024]{0}, f32[1024]{0}) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  one = s32[] constant(1)
  next = s32[] add(i, one)
  acc = f32[1024]{0} get-tuple-element(p), index=1
  x = f32[1024]{0} get-tuple-element(p), index=2
  e = f32[1024]{0} exponential(x)
  s = f32[1024]{0} add(acc, e)
  ROOT t = (s32[], f32[1024]{0}, f32[1024]{0}) tuple(next, s, x)
}
cond {
  p = (s32[], f32[1024]{0}, f32[1024]{0}) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  n = s32[] constant(LIMIT)
  ROOT lt = pred[] compare(i, n), direction=LT
}
ENTRY main {
  acc0 = f32[1024]{0} parameter(0)
  x = f32[1024]{0} parameter(1)
  zero = s32[] constant(0)
  init = (s32[], f32[1024]{0}, f32[1024]{0}) tuple(zero, acc0, x)
  w = (s32[], f32[1024]{0}, f32[1024]{0}) while(init), condition=cond, body=body
  ROOT r = f32[1024]{0} get-tuple-element(w), index=1
}
)";

std::string LoopWithLimit(const std::string& limit) {
  std::string s = kLoop;
  s.replace(s.find("LIMIT"), 5, limit);
  return s;
}

TEST(HloToProgramTest, WhileStateIsOneBufferPerElement) {
  HloImportStats stats;
  auto p = Import(LoopWithLimit("5"), {}, &stats);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(stats.trip_counts, std::vector<int64_t>{5});
  // The donated acc0 holds the accumulator for the whole loop, x is read
  // in place (never written), the counter gets one buffer.
  EXPECT_EQ(CountOps(*p, OpKind::kCopy), 0);
  auto lowered = LowerEager(*p, {.reuse_operand_buffers = true});
  ASSERT_TRUE(lowered.ok()) << lowered.status();
  int temps = 0;
  for (const BufferInfo& b : lowered->buffers) temps += !b.argument && !b.output;
  EXPECT_EQ(temps, 1);  // the s32 induction variable
  EXPECT_EQ(lowered->alias_bytes.value(), 4096);
  EXPECT_EQ(lowered->output_bytes.value(), 4096);
  // Five iterations, each one fusion for the accumulator and one for i.
  EXPECT_EQ(CountOps(*p, OpKind::kElementwise), 1 + 5 * 2);
}

TEST(HloToProgramTest, TripCounts) {
  auto unknown = LoopWithLimit("5");
  unknown.replace(unknown.find("direction=LT"), 12, "direction=NE");
  auto p = Import(unknown);
  ASSERT_FALSE(p.ok());
  EXPECT_THAT(p.status().message(), HasSubstr("t.hlo:"));
  EXPECT_THAT(p.status().message(), HasSubstr("--set loop.trip_count=N"));
  HloImportStats stats;
  auto given = Import(unknown, {.trip_count = 7}, &stats);
  ASSERT_TRUE(given.ok()) << given.status();
  EXPECT_EQ(stats.trip_counts, std::vector<int64_t>{7});
  auto unused = Import(LoopWithLimit("5"), {.trip_count = 7});
  ASSERT_FALSE(unused.ok());
  EXPECT_THAT(unused.status().message(), HasSubstr("no while loop needs it"));
  // One trip is inlined: no loop state of its own.
  auto once = Import(LoopWithLimit("1"), {}, &stats);
  ASSERT_TRUE(once.ok()) << once.status();
  EXPECT_TRUE(once->regions.empty());
  auto known = LoopWithLimit("5");
  known.replace(known.find("body=body"), 9, "body=body, backend_config={\"known_trip_count\":{\"n\":\"3\"}}");
  ASSERT_TRUE(Import(known, {}, &stats).ok());
  EXPECT_EQ(stats.trip_counts, std::vector<int64_t>{3});
}

TEST(HloToProgramTest, DynamicUpdateSliceIsInPlaceUnlessTheOldValueIsRead) {
  const std::string base = R"(HloModule m
ENTRY main {
  s = f32[8,128]{1,0} parameter(0)
  u = f32[1,128]{1,0} parameter(1)
  i = s32[] parameter(2)
  z = s32[] constant(0)
  e = f32[8,128]{1,0} exponential(s)
  d = f32[8,128]{1,0} dynamic-update-slice(e, u, i, z)
  ROOT t = (f32[8,128]{1,0}, f32[8,128]{1,0}) tuple(d, EXTRA)
}
)";
  std::string in_place = base, copied = base;
  in_place.replace(in_place.find("EXTRA"), 5, "s");
  copied.replace(copied.find("EXTRA"), 5, "e");
  auto a = Import(in_place);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(CountOps(*a, OpKind::kDynamicUpdateSlice), 1);
  int copies = 0;
  // (The result tuple's table is written after the outputs it points to, reading none of their bytes.)
  for (const Op& op : a->ops) copies += op.kind == OpKind::kCopy && op.name != "output tuple" && !op.inputs.empty();
  EXPECT_EQ(copies, 1);  // output 1 returns a parameter: copied into its own buffer
  auto b = Import(copied);
  ASSERT_TRUE(b.ok()) << b.status();
  int b_copies = 0;
  for (const Op& op : b->ops) {
    b_copies += op.kind == OpKind::kCopy && op.name != "output tuple" && !op.inputs.empty();
  }
  EXPECT_EQ(b_copies, 1);  // the exp is still returned: the update goes into a copy
}

// A dot of a reshaped buffer contracts the reshape's dims (attention's
// probs x V after the values' reshape): batch 32, m 128, k 2048, n 2048.
TEST(HloToProgramTest, DotDimsFromTheDeclaredOperandShapes) {
  auto p = Import(R"(HloModule m
ENTRY main {
  a = bf16[1,2048,4096]{2,1,0} parameter(0)
  w = bf16[4096,4096]{1,0} parameter(1)
  probs = bf16[1,32,2048,2048]{3,2,1,0} parameter(2)
  v = bf16[1,2048,4096]{2,1,0} dot(a, w), lhs_contracting_dims={2}, rhs_contracting_dims={0}
  r = bf16[1,2048,32,128]{3,2,1,0} reshape(v)
  ROOT o = bf16[1,32,128,2048]{3,2,1,0} dot(r, probs), lhs_batch_dims={0,2}, lhs_contracting_dims={1}, rhs_batch_dims={0,1}, rhs_contracting_dims={3}
}
)");
  ASSERT_TRUE(p.ok()) << p.status();
  const Op* o = nullptr;
  for (const Op& op : p->ops) {
    if (op.name == "o") o = &op;
  }
  ASSERT_NE(o, nullptr);
  EXPECT_EQ(o->batch, 32);
  EXPECT_EQ(o->m, 128);
  EXPECT_EQ(o->k, 2048);
  EXPECT_EQ(o->n, 2048);
}

// An AdamW-like update: the new moment m2 is an output (donated into m) and
// read by the parameter update p2, itself an output read by a norm. XLA:
// one kernel (priority fusion leaves live-out producers alone; multi-output
// fusion merges them into their consumer), reading g, m, p once.
TEST(HloToProgramTest, LiveOutProducersFuseIntoTheirConsumer) {
  auto p = Import(R"(HloModule m, input_output_alias={ {0}: (0, {}, may-alias), {1}: (1, {}, may-alias) }
ENTRY main {
  pp = f32[1024,1024]{1,0} parameter(0)
  mm = f32[1024,1024]{1,0} parameter(1)
  g = f32[1024,1024]{1,0} parameter(2)
  c = f32[] constant(0.9)
  cb = f32[1024,1024]{1,0} broadcast(c), dimensions={}
  m1 = f32[1024,1024]{1,0} multiply(mm, cb)
  m2 = f32[1024,1024]{1,0} add(m1, g)
  p2 = f32[1024,1024]{1,0} subtract(pp, m2)
  sq = f32[1024,1024]{1,0} multiply(p2, p2)
  z = f32[] constant(0)
  n = f32[] reduce(sq, z), dimensions={0,1}, to_apply=add_f32
  ROOT t = (f32[1024,1024]{1,0}, f32[1024,1024]{1,0}, f32[]) tuple(p2, m2, n)
}
add_f32 {
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  ROOT s = f32[] add(x, y)
}
)");
  ASSERT_TRUE(p.ok()) << p.status();
  int kernels = 0;
  const Op* fused = nullptr;
  for (const Op& op : p->ops) {
    if (op.name == "output tuple") continue;
    ++kernels;
    fused = &op;
  }
  EXPECT_EQ(kernels, 1);  // m2, p2 and the reduce in one kernel
  ASSERT_NE(fused, nullptr);
  EXPECT_EQ(fused->kind, OpKind::kReduce);
  EXPECT_EQ(fused->outputs.size(), 3u);
  EXPECT_EQ(fused->bytes_read.value(), 3 * 4 * 1024 * 1024);  // pp, mm, g once each
}

// Note [Conditional branches]: every branch's buffers, in order, whichever
// comes first (the heap holds the largest branch's temps); branch 0 timed.
TEST(HloToProgramTest, ConditionalHoldsEveryBranchAndTimesTheFirst) {
  const std::string base = R"(HloModule m
small {
  a = f32[1024]{0} parameter(0)
  ROOT r = f32[1024]{0} exponential(a)
}
big {
  b = f32[1024]{0} parameter(0)
  w = f32[1024,4096]{1,0} broadcast(b), dimensions={0}
  e = f32[1024,4096]{1,0} exponential(w)
  d = f32[1024,1024]{1,0} dot(e, e), lhs_contracting_dims={1}, rhs_contracting_dims={1}
  z = f32[] constant(0)
  s = f32[1024]{0} reduce(d, z), dimensions={1}, to_apply=add_f32
  ROOT r2 = f32[1024]{0} add(s, b)
}
add_f32 {
  p = f32[] parameter(0)
  q = f32[] parameter(1)
  ROOT t = f32[] add(p, q)
}
ENTRY main {
  i = s32[] parameter(0)
  v = f32[1024]{0} parameter(1)
  ROOT c = f32[1024]{0} conditional(i, v, v), branch_computations={ORDER}
}
)";
  for (const char* order : {"small, big", "big, small"}) {
    SCOPED_TRACE(order);
    std::string text = base;
    text.replace(text.find("ORDER"), 5, order);
    auto p = Import(text);
    ASSERT_TRUE(p.ok()) << p.status();
    // The big branch's GEMM operand (16 MiB) and result (4 MiB) are in the program either way.
    int64_t gemm_flops = 0, dots = 0;
    bool operand = false;
    for (const Op& op : p->ops) {
      if (op.kind != OpKind::kMatmul) continue;
      ++dots;
      gemm_flops += static_cast<int64_t>(op.flops);
      for (TensorId t : op.inputs) operand = operand || p->tensor(t).bytes().value() == 16 << 20;
    }
    EXPECT_EQ(dots, 1);
    EXPECT_TRUE(operand);
    // Timed only when it is branch 0.
    EXPECT_EQ(gemm_flops > 0, std::string(order) == "big, small");
  }
}

TEST(HloToProgramTest, RefusesWhatItDoesNotModelByName) {
  auto p = Import(R"(HloModule m
ENTRY main {
  a = f32[8]{0} parameter(0)
  ROOT b = f32[8]{0} custom-call(a), custom_call_target="my_kernel"
}
)");
  ASSERT_FALSE(p.ok());
  EXPECT_THAT(p.status().message(), HasSubstr("t.hlo:4:3: b: custom-call target 'my_kernel' is not modelled"));
  auto q = Import(R"(HloModule m
ENTRY main {
  a = f32[8]{0} parameter(0)
  ROOT b = f32[8]{0} frobnicate(a)
}
)");
  ASSERT_FALSE(q.ok());
  EXPECT_THAT(q.status().message(), HasSubstr("opcode 'frobnicate' is not modelled"));
}

TEST(HloToProgramTest, CollectivesAndAttention) {
  auto p = Import(R"(HloModule m, num_partitions=8
add {
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  ROOT s = f32[] add(x, y)
}
ENTRY main {
  g = f32[1024]{0} parameter(0)
  q = bf16[2,128,8,64]{3,2,1,0} parameter(1)
  k = bf16[2,256,8,64]{3,2,1,0} parameter(2)
  ar = f32[1024]{0} all-reduce(g), replica_groups=[2,4]<=[8], to_apply=add
  ag = f32[8192]{0} all-gather(ar), dimensions={0}, replica_groups={}
  o = (bf16[2,128,8,64]{3,2,1,0}, u8[0]{0}) custom-call(q, k, k), custom_call_target="__cudnn$fmhaSoftmax"
  o0 = bf16[2,128,8,64]{3,2,1,0} get-tuple-element(o), index=0
  ROOT t = (f32[8192]{0}, bf16[2,128,8,64]{3,2,1,0}) tuple(ag, o0)
}
)");
  ASSERT_TRUE(p.ok()) << p.status();
  const Op* ar = nullptr;
  const Op* ag = nullptr;
  const Op* att = nullptr;
  for (const Op& op : p->ops) {
    if (op.kind == OpKind::kAllReduce) ar = &op;
    if (op.kind == OpKind::kAllGather) ag = &op;
    if (op.kind == OpKind::kAttention) att = &op;
  }
  ASSERT_TRUE(ar && ag && att);
  EXPECT_EQ(ar->group, 4);
  EXPECT_EQ(ag->group, 8);
  EXPECT_DOUBLE_EQ(att->flops, 4.0 * 2 * 8 * 128 * 256 * 64);
}

TEST(HloToProgramTest, RefusesAnUnpartitionedShardedModule) {
  auto p = Import(R"(HloModule m, num_partitions=2
ENTRY main {
  a = f32[8]{0} parameter(0), sharding={devices=[2]<=[2]}
  ROOT b = f32[8]{0} negate(a)
}
)");
  ASSERT_FALSE(p.ok());
  EXPECT_THAT(p.status().message(), HasSubstr("t.hlo:3:3: a: sharding={devices=[2]<=[2]} with num_partitions=2"));
}

}  // namespace
}  // namespace gpusim::hlo_to_program_test
