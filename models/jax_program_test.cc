// Hand-derived buffers of the scan_vs_unroll program (examples/scan_carry.yaml):
// w2 is f32[1024, 1048576] = 4 GiB; w1, h are 4 KiB; z is 4 MiB.
#include "models/jax_program.h"

#include <fstream>
#include <map>

#include "gtest/gtest.h"
#include "sim/config/loader.h"
#include "sim/step/step.h"

namespace gpusim::jax_program_test {
namespace {

constexpr int64_t kGiB4 = 4LL << 30;  // w2
constexpr int64_t kW1 = 4096;         // w1, h

StepReport Simulate(const std::string& mode, int t) {
  auto spec = LoadRunSpec(GPUSIM_SOURCE_DIR "/examples/scan_carry.yaml",
                          {"loop.mode=" + mode, "loop.trip_count=" + std::to_string(t)});
  EXPECT_TRUE(spec.ok()) << spec.status();
  auto r = SimulateStep(*spec);
  EXPECT_TRUE(r.ok()) << r.status();
  return *r;
}

// Number of temp buffers of w2's size (4 GiB).
int BigTemps(const StepReport& r) {
  int n = 0;
  for (const BufferInfo& b : r.lowered.buffers) n += !b.argument && !b.output && b.bytes.value() == kGiB4;
  return n;
}

TEST(JaxProgramTest, ArgumentsOutputsAndDonation) {
  StepReport r = Simulate("rolled", 3);
  // model (w1 + w2) + X [3, 1] f32.
  EXPECT_EQ(r.argument.value(), kGiB4 + kW1 + 3 * 4);
  // jax.grad returns d model, written into the donated model's buffers,
  // and the result tuple's two pointers (Note [Entry result tuple]).
  EXPECT_EQ(r.output.value(), kGiB4 + kW1 + 2 * 8);
  EXPECT_EQ(r.alias.value(), kGiB4 + kW1);
}

TEST(JaxProgramTest, UnrolledKeepsOneCarryPerIterationAfterTheFirst) {
  // Unrolled: w2 of iterations 1..T-1 are separate buffers the backward
  // reads; w2 of iteration 0 is the argument itself; the last iteration's
  // new carry is dead code; d w2 accumulates in place into the output.
  for (int t = 1; t <= 4; ++t) {
    StepReport r = Simulate("unrolled", t);
    int carries = 0;
    for (const BufferInfo& b : r.lowered.buffers) carries += b.name.find(".w2_next") != std::string::npos;
    EXPECT_EQ(carries, t - 1) << "T=" << t;
    // Plus one 4 GiB cotangent temp (d w2 of the later iterations) when T >= 2.
    EXPECT_EQ(BigTemps(r), t - 1 + (t >= 2 ? 1 : 0)) << "T=" << t;
    EXPECT_EQ(r.temp_live_peak.value() / kGiB4, t - 1) << "T=" << t;
  }
}

TEST(JaxProgramTest, RolledStacksEveryCarryIncludingACopyOfTheFirst) {
  // Rolled (T >= 2): the carry w2 is an extensive residual stacked [T, ...]
  // — slot 0 a copy of the initial carry; the forward loop state lives in
  // the donated argument's buffer. The entry schedule (List) writes the
  // zero cotangent of w2 before the forward loop, so the backward
  // cotangent state is the one 4 GiB temp of its own (Note [Donated
  // allocation]); the per-iteration slices of the w2 stack the backward
  // GEMM reads sit in w2's idle allocation.
  for (int t = 2; t <= 4; ++t) {
    StepReport r = Simulate("rolled", t);
    int stacks = 0;
    for (const BufferInfo& b : r.lowered.buffers) {
      if (b.name == "residual_stack.w2") {
        ++stacks;
        EXPECT_EQ(b.bytes.value(), t * kGiB4);
      }
    }
    EXPECT_EQ(stacks, 1);
    EXPECT_EQ(BigTemps(r), 1);
    EXPECT_EQ(r.temp_live_peak.value() / kGiB4, t + 1) << "T=" << t;
    EXPECT_EQ(r.entry_schedule.chosen, "list");
    // output + temp = (T + 2) x 4 GiB, plus the small buffers.
    EXPECT_EQ((r.output + r.temp).value() / kGiB4, t + 2) << "T=" << t;
  }
}

TEST(JaxProgramTest, TripCountOneIsInlined) {
  StepReport rolled = Simulate("rolled", 1);
  StepReport unrolled = Simulate("unrolled", 1);
  EXPECT_EQ(rolled.temp, unrolled.temp);
  EXPECT_EQ(rolled.output, unrolled.output);
}

TEST(JaxProgramTest, XsSliceResidualIsNotCopied) {
  // x (a slice of the scanned input X) is read by d w1 = outer(x, d h):
  // forwarded, so no residual stack of x exists.
  StepReport r = Simulate("rolled", 3);
  for (const BufferInfo& b : r.lowered.buffers) EXPECT_NE(b.name, "residual_stack.x");
}

TEST(JaxProgramTest, NonDonatedModelGetsALoopStateCopy) {
  auto spec = LoadRunSpec(GPUSIM_SOURCE_DIR "/examples/scan_carry.yaml",
                          {"loop.trip_count=3", "program.inputs.w2.donate=false"});
  ASSERT_TRUE(spec.ok()) << spec.status();
  auto r = SimulateStep(*spec);
  ASSERT_TRUE(r.ok()) << r.status();
  // Read-only parameter: the while state starts as a copy (copy insertion),
  // and d w2 can no longer be written into w2's buffer.
  EXPECT_EQ(r->alias.value(), kW1);
  bool copy = false;
  for (const BufferInfo& b : r->lowered.buffers) copy |= b.name == "w2.loop_state";
  EXPECT_TRUE(copy);
}

// A loop-invariant value the backward pass needs (ws = w * c, computed from
// consts only) is hoisted out of the scan and stored once, not stacked.
TEST(JaxProgramTest, LoopInvariantResidualIsStoredOnce) {
  const std::string path = ::testing::TempDir() + "/invariant.yaml";
  std::ofstream(path) << R"(framework: jax
device: a100-sxm-80gb
loop: {mode: rolled, trip_count: 4}
program:
  inputs:
    W: {shape: [512, 512], dtype: f32, donate: true}
    C: {shape: [], dtype: f32}
    H0: {shape: [512], dtype: f32}
    X: {shape: [trip_count, 512], dtype: f32}
  scan:
    carry: {h: H0, loss: zero}
    xs: {x: X}
    consts: {w: W, c: C}
    body:
      - {op: scale, out: ws, in: [w, c]}
      - {op: matmul, out: a, in: [h, ws]}
      - {op: add, out: b, in: [a, x]}
      - {op: sum, out: s, in: [b]}
      - {op: add, out: loss_next, in: [loss, s]}
    carry_out: {h: b, loss: loss_next}
  loss: loss
  grad: [W]
)";
  for (const char* mode : {"rolled", "unrolled"}) {
    auto spec = LoadRunSpec(path, {std::string("loop.mode=") + mode});
    ASSERT_TRUE(spec.ok()) << spec.status();
    auto r = SimulateStep(*spec);
    ASSERT_TRUE(r.ok()) << r.status();
    int hoisted = 0;
    for (const BufferInfo& b : r->lowered.buffers) {
      EXPECT_NE(b.name, "residual_stack.ws") << mode;
      hoisted += b.name == "hoisted.ws";
      if (b.name == "residual_stack.h") {
        EXPECT_EQ(b.bytes.value(), 4 * 512 * 4) << mode;  // the carry is stacked
      }
    }
    EXPECT_EQ(hoisted, 1) << mode;
    // dW = sum over iterations of c · outer(h_t, da_t): one gradient output,
    // written into the donated W.
    EXPECT_EQ(r->alias.value(), 512 * 512 * 4) << mode;
  }
}

}  // namespace
}  // namespace gpusim::jax_program_test
