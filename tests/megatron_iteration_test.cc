// Note [Megatron iteration on the host] (models/gpt_megatron_host.cc): what
// a launch line's iteration does besides its layers, and the host syncs
// that stop the host running ahead (Note [Host syncs], sim/engine/engine.h).
#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "sim/config/loader.h"
#include "sim/step/megatron_step.h"

namespace gpusim::megatron_iteration_test {
namespace {

constexpr char kSmall[] = "--num-layers 4 --hidden-size 256 --num-attention-heads 4 --seq-length 128 "
                          "--micro-batch-size 2 --global-batch-size 8 --tokenizer-type NullTokenizer "
                          "--vocab-size 1000 --bf16 --tensor-model-parallel-size 2 --pipeline-model-parallel-size 2 ";

absl::StatusOr<MegatronReport> RunLine(const std::string& line, int world) {
  auto spec = ParseRunSpec(absl::StrCat("device: a100-sxm-80gb\nmegatron:\n  world_size: ", world, "\n  args: \"",
                                        line, "\"\n"),
                           "t.yaml");
  if (!spec.ok()) return spec.status();
  return SimulateMegatron(*spec);
}

absl::StatusOr<MegatronReport> RunSmall(const std::string& extra) { return RunLine(absl::StrCat(kSmall, extra), 8); }

int64_t Syncs(const MegatronReport& r, size_t stage) { return r.ranks[stage].report.sim.host_syncs; }

// DP 2, 2 micro-batches per rank. The first stage (F F B B) syncs after
// send_forward, send_forward_recv_backward and recv_backward; the last
// (F B F B) after send_backward_recv_forward and the final send_backward,
// and checks each loss (isnan, isinf); each rank checks its one bucket;
// then the iteration's tail: update_successful, grad_norm, loss_scale (the
// last stage also its logged loss).
TEST(MegatronIterationTest, SyncsFollowTheSourcesCalls) {
  auto r = RunSmall("");
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->ranks.size(), 2u);
  EXPECT_EQ(Syncs(*r, 0), 3 + 2 + 2 + 1);
  EXPECT_EQ(Syncs(*r, 1), 2 + 2 * 2 + 2 + 2 + 1 + 1);
  for (const MegatronRank& k : r->ranks) EXPECT_GT(k.report.sim.host_sync_wait.ns(), 0);
  // Without the NaN checks: 2 syncs fewer per loss and per bucket.
  auto n = RunSmall("--no-check-for-nan-in-loss-and-grad");
  ASSERT_TRUE(n.ok()) << n.status();
  EXPECT_EQ(Syncs(*n, 0), Syncs(*r, 0) - 2);
  EXPECT_EQ(Syncs(*n, 1), Syncs(*r, 1) - 2 * 2 - 2);
  EXPECT_LT(n->step_time, r->step_time);
}

// The per-iteration logging flags change the step: kernels, all-reduces
// and syncs every iteration.
TEST(MegatronIterationTest, LoggingThatComputesCostsTime) {
  auto base = RunSmall("");
  auto norm = RunSmall("--log-params-norm");
  auto zeros = RunSmall("--log-num-zeros-in-grad");
  ASSERT_TRUE(base.ok() && norm.ok() && zeros.ok());
  EXPECT_GT(norm->step_time, base->step_time);
  EXPECT_GT(zeros->step_time, base->step_time);
  for (size_t s = 0; s < 2; ++s) {
    EXPECT_EQ(Syncs(*norm, s), Syncs(*base, s) + 1);   // norm_2.item()
    EXPECT_EQ(Syncs(*zeros, s), Syncs(*base, s) + 2);  // total_num_zeros.item(), reduce_max .item()
    // count_zeros: 3 kernels per torch parameter, each issued by the host.
    EXPECT_GT(zeros->ranks[s].report.host.launches, base->ranks[s].report.host.launches + 3 * 4);
  }
}

// Without a pipeline there are no p2p calls; the host runs ahead across
// passes and only the checks and the tail sync.
TEST(MegatronIterationTest, NoPipelineNoP2pSyncs) {
  auto r = RunLine("--num-layers 2 --hidden-size 256 --num-attention-heads 4 --seq-length 128 --micro-batch-size 2 "
                   "--global-batch-size 8 --tokenizer-type NullTokenizer --vocab-size 1000 --bf16 "
                   "--tensor-model-parallel-size 2", 2);
  ASSERT_TRUE(r.ok()) << r.status();
  // 4 micro-batches x 2 loss checks, 2 bucket checks, 3 tail syncs + the logged loss.
  EXPECT_EQ(Syncs(*r, 0), 4 * 2 + 2 + 3 + 1);
}

}  // namespace
}  // namespace gpusim::megatron_iteration_test
