// The host timeline of eager steps (Note [Eager host costs] in
// sim/lower/eager/host_timeline.h): multi_tensor_apply launch counts, module
// calls and hooks read from op fields, and small models bound by the host.
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "sim/config/loader.h"
#include "sim/lower/eager/host_timeline.h"
#include "sim/step/megatron_step.h"
#include "sim/step/native_step.h"
#include "sim/step/step.h"

namespace gpusim::host_timeline_test {
namespace {

TEST(EagerHostTimelineTest, MultiTensorApplyLaunchesWhenTheTensorOrBlockListFills) {
  const int64_t chunk = 65536;
  EXPECT_EQ(MultiTensorApplyLaunches(std::vector<int64_t>(110, 10), 1), 1);
  EXPECT_EQ(MultiTensorApplyLaunches(std::vector<int64_t>(111, 10), 1), 2);
  EXPECT_EQ(MultiTensorApplyLaunches(std::vector<int64_t>(36, 10), 4), 1);
  EXPECT_EQ(MultiTensorApplyLaunches(std::vector<int64_t>(37, 10), 4), 2);
  EXPECT_EQ(MultiTensorApplyLaunches({320 * chunk}, 1), 1);
  EXPECT_EQ(MultiTensorApplyLaunches({320 * chunk + 1}, 1), 2);
  // A tensor cut by a full block list carries on into the next launch's list.
  EXPECT_EQ(MultiTensorApplyLaunches({640 * chunk, 1}, 1), 3);
  EXPECT_EQ(MultiTensorApplyLaunches({}, 1), 0);
}

std::vector<std::string> Tiny(std::vector<std::string> more) {
  std::vector<std::string> o = {"model.n_layers=2",   "model.d_model=256",  "model.n_heads=4",
                                "model.head_dim=64",  "model.mlp_dim=1024", "model.vocab=1024",
                                "batch.seq_len=128",  "batch.per_device=1", "parallelism.tensor=1",
                                "remat.policy=none"};
  o.insert(o.end(), more.begin(), more.end());
  return o;
}

StepReport Simulated(const std::vector<std::string>& sets) {
  auto spec = LoadRunSpec(GPUSIM_SOURCE_DIR "/examples/gpt22b_korthikanti.yaml", sets);
  EXPECT_TRUE(spec.ok()) << spec.status();
  auto r = SimulateStep(*spec);
  EXPECT_TRUE(r.ok()) << r.status();
  return *r;
}

// Two layers of a 256-wide GPT: microseconds of GPU work per op, so the
// step is as long as the host takes to issue it (issue 13: 4-14x too fast
// without the host side).
TEST(EagerHostTimelineTest, ASmallEagerModelIsBoundByTheHost) {
  const StepReport r = Simulated(Tiny({}));
  EXPECT_GT(r.sim.host_busy.ns(), 2 * r.sim.compute_busy.ns());
  EXPECT_GE(r.sim.step_time, r.sim.host_busy);
  EXPECT_GT(r.sim.host_wait, SimTime(0));
  // 4 containers + the 4 linears of each layer, the embedding and the output
  // projection: 2 x 8 + 2 module calls, and one more: the plain gpt family
  // builds the head's backward GEMM in the forward phase (models/gpt.cc
  // BackwardSlot), so it reads as a call of the output layer.
  EXPECT_EQ(r.host.module_calls, 19);
  EXPECT_EQ(r.host.grad_hooks, 0);  // torch's DDP hooks are C++
  // torch AdamW foreach: 8 foreach calls over the few small tensors (one
  // launch each) and one CPU step per tensor.
  EXPECT_EQ(r.host.optimizer_launches, 8 + r.host.optimizer_updates);
  // The engine prices what the lowering counted with the device's costs.
  // (The optimizer's launches spread over its updates round to the ns.)
  EXPECT_NEAR(static_cast<double>(r.sim.host_busy.ns()),
              static_cast<double>((r.host.launches + r.host.optimizer_launches) * r.spec.device.host_op_cost.ns() +
                                  (r.host.module_calls + r.host.grad_hooks) * r.spec.device.host_module_cost.ns()),
              static_cast<double>(r.host.optimizer_updates));
}

TEST(EagerHostTimelineTest, StepTimeFollowsTheHostCostsWhenHostBound) {
  const StepReport base = Simulated(Tiny({}));
  const StepReport slow = Simulated(Tiny({"device.host.op=120us"}));  // 4x the default
  EXPECT_GT(slow.sim.step_time.seconds(), 1.5 * base.sim.step_time.seconds());
}

// The 22B layer on A100 takes milliseconds per matmul: the host (about a
// seventh of the GPU's busy time at Note [Host cost per kernel]'s costs) is
// hidden.
TEST(EagerHostTimelineTest, ALargeModelIsBoundByTheGpu) {
  const StepReport r = Simulated({});
  EXPECT_LT(static_cast<double>(r.sim.host_busy.ns()), 0.25 * static_cast<double>(r.sim.compute_busy.ns()));
  // Only the first kernels wait, for the first launches.
  EXPECT_LT(static_cast<double>(r.sim.host_wait.ns()), 1e-3 * static_cast<double>(r.sim.step_time.ns()));
  EXPECT_GT(r.host.launches, 0);
}

// Recomputed forwards call their modules again.
TEST(EagerHostTimelineTest, FullRecomputeCallsTheModulesTwice) {
  const StepReport none = Simulated(Tiny({}));
  const StepReport full = Simulated(Tiny({"remat.policy=full"}));
  EXPECT_EQ(full.host.module_calls - none.host.module_calls, 16);
}

// Megatron-LM: the Python hook per parameter gradient, FusedAdam's
// multi_tensor_apply (depth 4, 36 tensors a launch).
TEST(EagerHostTimelineTest, MegatronChargesGradientHooksAndFusedAdam) {
  auto spec = ParseRunSpec(
      "device: h100-sxm-80gb\nmegatron:\n  world_size: 1\n  args: \"--num-layers 2 --hidden-size 256 "
      "--num-attention-heads 4 --seq-length 128 --micro-batch-size 1 --tokenizer-type NullTokenizer "
      "--vocab-size 1000 --bf16\"\n",
      "t.yaml");
  ASSERT_TRUE(spec.ok()) << spec.status();
  auto m = SimulateMegatron(*spec);
  ASSERT_TRUE(m.ok()) << m.status();
  const StepReport& r = m->ranks[0].report;
  EXPECT_GT(r.host.grad_hooks, 0);
  EXPECT_EQ(r.host.optimizer_launches, (r.host.optimizer_updates + 35) / 36);
  EXPECT_GE(r.sim.step_time, r.sim.host_busy);
}

// A PyTorch recording: each recorded op is one dispatch; another
// framework's recording is not charged.
TEST(EagerHostTimelineTest, RecordedPyTorchOpsAreIssuedByTheHost) {
  Trace t;
  t.meta = {{"framework", "pytorch"}};
  for (int i = 0; i < 4; ++i) {
    TraceEvent e;
    e.type = EventType::kCompute;
    e.kind = OpKind::kElementwise;
    e.bytes_read = Bytes(1000);
    t.events.push_back(e);
  }
  auto device = LoadDeviceSpec("h100-sxm-80gb", "");
  ASSERT_TRUE(device.ok()) << device.status();
  auto r = SimulateNativeStep(t, "t.gpusim", *device, nullptr, 1);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->host_charged_events, 4);
  EXPECT_EQ(r->host_busy, device->host_op_cost * 4);
  EXPECT_GE(r->step_time, r->host_busy);
  t.meta = {{"framework", "jax"}};
  auto jax = SimulateNativeStep(t, "t.gpusim", *device, nullptr, 1);
  ASSERT_TRUE(jax.ok());
  EXPECT_EQ(jax->host_charged_events, 0);
  EXPECT_EQ(jax->host_busy, SimTime(0));
}

}  // namespace
}  // namespace gpusim::host_timeline_test
