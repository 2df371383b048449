// Note [Entry schedule] and Note [Donated allocation] on small programs.
#include "sim/lower/xla/entry_schedule.h"

#include <string>

#include "gtest/gtest.h"
#include "sim/config/loader.h"
#include "sim/ir/builder.h"
#include "sim/step/step.h"

namespace gpusim::entry_schedule_test {
namespace {

// a (400 B) and b (8 B) feed one while loop that returns c.
Program TwoInitsOneLoop() {
  ProgramBuilder b("two_inits");
  TensorId a = b.AddTensor("a", {100}, DType::kF32, Role::kTemporary);
  b.AddOp("make_a", OpKind::kElementwise, {}, {a});
  TensorId bb = b.AddTensor("b", {2}, DType::kF32, Role::kTemporary);
  b.AddOp("make_b", OpKind::kElementwise, {}, {bb});
  b.BeginRegion("loop", "loop", /*while_loop=*/true);
  TensorId t = b.AddTensor("t", {100}, DType::kF32, Role::kTemporary);
  b.AddOp("body0", OpKind::kElementwise, {a, bb}, {t});
  TensorId c = b.AddTensor("c", {100}, DType::kF32, Role::kGradient);
  b.AddOp("body1", OpKind::kElementwise, {t}, {c});
  b.EndRegion();
  b.tensor(c).live_out = true;
  return b.Finish();
}

TEST(EntryScheduleTest, ListPicksTheInstructionThatDefinesFewestBytesAndWinsTies) {
  Program p = TwoInitsOneLoop();
  auto s = ScheduleEntry(p);
  ASSERT_TRUE(s.ok()) << s.status();
  // Every order keeps a and b live into the loop: equal peaks, List kept.
  EXPECT_EQ(s->list_peak, s->dfs_peak);
  EXPECT_EQ(s->list_peak, s->post_order_peak);
  // a, b, c defined by the loop, and the body's own t while the loop runs
  // (Note [Loop bodies in the schedule's peak]).
  EXPECT_EQ(s->list_peak.value(), 400 + 8 + 400 + 400);
  EXPECT_EQ(s->chosen, "list");
  EXPECT_EQ(s->units, 3);
  // List: make_b (−8 B) before make_a (−400 B); the loop body keeps its order.
  ASSERT_EQ(p.ops.size(), 4u);
  EXPECT_EQ(p.ops[0].name, "make_b");
  EXPECT_EQ(p.ops[1].name, "make_a");
  EXPECT_EQ(p.ops[2].name, "body0");
  EXPECT_EQ(p.ops[3].name, "body1");
  for (size_t i = 0; i < p.ops.size(); ++i) EXPECT_EQ(p.ops[i].id, static_cast<OpId>(i));
  EXPECT_EQ(p.regions[0].first, 2);
  EXPECT_EQ(p.regions[0].last, 3);
  EXPECT_NE(s->Describe().find("entry schedule: list (peak 1,208 B"), std::string::npos) << s->Describe();
}

TEST(EntryScheduleTest, WithoutAWhileTheProgramOrderIsKept) {
  ProgramBuilder b("straight");
  TensorId a = b.AddTensor("a", {100}, DType::kF32, Role::kTemporary);
  b.AddOp("make_a", OpKind::kElementwise, {}, {a});
  TensorId c = b.AddTensor("c", {2}, DType::kF32, Role::kTemporary);
  b.AddOp("make_c", OpKind::kElementwise, {}, {c});
  Program p = b.Finish();
  auto s = ScheduleEntry(p);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->chosen, "program order");
  EXPECT_EQ(p.ops[0].name, "make_a");
}

StepReport ScanCarry(int t, const std::string& extra = "") {
  std::vector<std::string> sets = {"loop.mode=rolled", "loop.trip_count=" + std::to_string(t)};
  if (!extra.empty()) sets.push_back(extra);
  auto spec = LoadRunSpec(GPUSIM_SOURCE_DIR "/examples/scan_carry.yaml", sets);
  EXPECT_TRUE(spec.ok()) << spec.status();
  auto r = SimulateStep(*spec);
  EXPECT_TRUE(r.ok()) << r.status();
  return *r;
}

TEST(EntryScheduleTest, ScanCarryListWritesTheZeroCotangentBeforeTheForwardLoop) {
  StepReport r = ScanCarry(2);
  EXPECT_EQ(r.entry_schedule.chosen, "list");
  OpId zeros = -1, first_forward = -1;
  for (const Op& op : r.program.ops) {
    if (op.name == "ct_w2.zeros") zeros = op.id;
    if (op.name == "iter0.stack_w2") first_forward = op.id;
  }
  EXPECT_LT(zeros, first_forward);
  // So the root copy into w2 stays, the cotangent state has its own buffer,
  // and w2's allocation, idle during the backward loop, holds the slices.
  bool root_copy = false;
  for (const Op& op : r.program.ops) root_copy = root_copy || op.name == "root_copy.grad.w2";
  EXPECT_TRUE(root_copy);
  TensorId w2 = -1;
  for (const Tensor& t : r.program.tensors) {
    if (t.name == "w2") w2 = t.id;
  }
  int slices_in_w2 = 0;
  for (const Tensor& t : r.program.tensors) {
    if (t.name.find(".slice_w2") != std::string::npos) slices_in_w2 += t.aliases == w2;
    if (t.name == "ct_w2.zeros" || t.name == "iter2.ct_w2") {
      EXPECT_EQ(t.aliases, kNoTensor) << t.name;
    }
  }
  EXPECT_EQ(slices_in_w2, 2);
  ASSERT_EQ(r.entry_schedule.decisions.size(), 2u);  // w1 and w2
  EXPECT_NE(r.entry_schedule.decisions[1].find("the root copy `root_copy.grad.w2` into `w2` stays"),
            std::string::npos);
}

TEST(EntryScheduleTest, DynamicSliceFusionLeavesNoSliceInTheWindow) {
  StepReport r = ScanCarry(2, "xla.dynamic_slice_fusion=true");
  // No slices: the stack + the cotangent state in its own buffer.
  EXPECT_EQ((r.output + r.temp).value() >> 32, 4);  // 4 x 4 GiB: output, 2-slot stack, cotangent
  EXPECT_EQ(r.entry_schedule.decisions.back().find("slice_w2"), std::string::npos)
      << r.entry_schedule.decisions.back();
}

}  // namespace
}  // namespace gpusim::entry_schedule_test
