// The pipeline replay (Note [Megatron pipeline in time]) on hand-made rank
// timelines, against figures worked out by hand.
#include "sim/step/megatron_step_pipeline.h"

#include <algorithm>

#include "gtest/gtest.h"
#include "models/megatron_schedule.h"

namespace gpusim::megatron_step_pipeline_test {
namespace {

RunSpec Pipeline(int64_t p, int64_t m, int64_t v = 1) {
  RunSpec s;
  s.megatron.present = true;
  s.megatron.pipeline = p;
  s.megatron.virtual_stages = v;
  s.megatron.microbatches = m;
  s.megatron.microbatch_group = p;
  s.megatron.overlap_p2p = v > 1;
  s.megatron.world_size = p;
  s.batch.seq_len = 2048;
  s.batch.per_device = 1;
  s.model.d_model = 1024;
  s.model.compute_dtype = DType::kBF16;
  return s;
}

// A device whose links take `per_message` for the 4 MiB message above.
DeviceSpec Links(SimTime per_message) {
  DeviceSpec d;
  d.nvlink_bandwidth = 2048.0 * 1024 * 2 / std::max(per_message.seconds(), 1e-30);
  d.network_bandwidth = d.nvlink_bandwidth;
  d.collective_efficiency = 1;
  d.link_latency = SimTime(0);
  return d;
}

// Each rank's own timeline: forwards take f, backwards b, back to back.
std::vector<MegatronRankTimes> Uniform(const RunSpec& s, SimTime f, SimTime b, SimTime tail = SimTime(0)) {
  std::vector<MegatronRankTimes> out;
  const MegatronSpec& g = s.megatron;
  for (int64_t r = 0; r < g.pipeline; ++r) {
    MegatronRankTimes t;
    SimTime now(0);
    for (const PipelineSlot& slot : MegatronSchedule(g.pipeline, r, g.virtual_stages, g.microbatches, g.microbatch_group)) {
      now += slot.forward ? f : b;
      t.slot_end.push_back(now);
    }
    t.own_step = now + tail;
    out.push_back(t);
  }
  return out;
}

TEST(MegatronPipelineTest, OneFOneBWithoutSendTimeIsTheBubbleFormula) {
  // (m + p - 1)(f + b): Narayanan et al. 2021 Sec. 2.2.1.
  const RunSpec s = Pipeline(4, 8);
  auto t = SimulatePipeline(Uniform(s, SimTime(1000), SimTime(2000), SimTime(500)), s, Links(SimTime(0)));
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->step.ns(), (8 + 4 - 1) * 3000 + 500);
  EXPECT_EQ(t->bubble.ns(), 3 * 3000);
  EXPECT_EQ(t->rank_wait[0].ns(), 3 * 3000);  // the first stage waits (p - 1) passes for its first gradient
}

TEST(MegatronPipelineTest, BlockingSendsByHand) {
  // p = 2, m = 1: F0 [0, f]; its send arrives at f + T; F1 [f + T, 2f + T];
  // B1 [2f + T, 2f + T + b]; the gradient arrives T later; B0 ends
  // 2f + 2T + 2b.
  const RunSpec s = Pipeline(2, 1);
  const SimTime f(1000), b(2000), T(300);
  auto t = SimulatePipeline(Uniform(s, f, b), s, Links(T));
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_NEAR(static_cast<double>(t->send_time[0].ns()), 300, 1);
  EXPECT_NEAR(static_cast<double>(t->step.ns()), 2 * 1000 + 2 * 300 + 2 * 2000, 2);
  // Stage 1 sent its gradient last and waited for it to arrive.
  EXPECT_NEAR(static_cast<double>(t->rank_end[1].ns()), 2 * 1000 + 2 * 300 + 2000, 2);
}

TEST(MegatronPipelineTest, ALateReceiveHoldsTheTransfer) {
  // p = 3, m = 2, f = 1, b = 2, T = 3 (us). Rank 1 is in send_forward(F0)
  // until rank 2 has it (5 + 3 = 8), and only then posts recv_forward(F1).
  // Rank 0 posted its send of F1 at 5, but the transfer starts when both
  // sides have posted: F1 reaches rank 1 at 8 + 3 = 11, not 5 + 3 = 8 (Note
  // [Late-posted receives]). Rank 1: F1 [11, 12], its send_forward_recv_backward
  // with rank 2 (posted at 11) done at 15, B0 [15, 17], its send_backward to
  // rank 0 done at 20; rank 0: B0 [20, 22]; rank 2 sends B1 at 18, rank 1
  // posts for it at 20: 23, B1 [23, 25], sent to rank 0 by 28; rank 0's B1
  // [28, 30]. The rule without the receiver's post gives 27.
  const RunSpec s = Pipeline(3, 2);
  auto t = SimulatePipeline(Uniform(s, SimTime(1000), SimTime(2000)), s, Links(SimTime(3000)));
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_NEAR(static_cast<double>(t->rank_end[0].ns()), 30000, 10);
  EXPECT_NEAR(static_cast<double>(t->rank_end[1].ns()), 28000, 10);
  EXPECT_NEAR(static_cast<double>(t->rank_end[2].ns()), 23000, 10);
}

TEST(MegatronPipelineTest, OverlappedSendsFreeTheSender) {
  // Interleaved, p = 2, v = 2, m = 2: with overlap the senders never wait on
  // their own sends, so the step is no longer than when they do.
  RunSpec s = Pipeline(2, 2, 2);
  const auto ranks = Uniform(s, SimTime(1000), SimTime(2000));
  auto overlapped = SimulatePipeline(ranks, s, Links(SimTime(400)));
  s.megatron.overlap_p2p = false;
  auto blocking = SimulatePipeline(ranks, s, Links(SimTime(400)));
  ASSERT_TRUE(overlapped.ok() && blocking.ok());
  EXPECT_LT(overlapped->step, blocking->step);
}

TEST(MegatronPipelineTest, ADeviceWithoutLinksIsRefusedByName) {
  const RunSpec s = Pipeline(2, 1);
  DeviceSpec d;
  d.name = "bare";
  auto t = SimulatePipeline(Uniform(s, SimTime(1000), SimTime(2000)), s, d);
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("device 'bare': links.nvlink or links.pcie"), std::string::npos) << t.status();
}

TEST(MegatronPipelineTest, MessageBytesAndNodes) {
  RunSpec s = Pipeline(2, 1);
  s.parallelism.tensor = 4;
  s.parallelism.sequence_parallel = true;
  s.batch.per_device = 2;
  EXPECT_EQ(PipelineMessageBytes(s), 2048 / 4 * 2 * 1024 * 2);
  MegatronSpec g = s.megatron;
  g.gpus_per_node = 8;
  g.data = 1;
  EXPECT_TRUE(CrossesNodes(g, 8, 0, 1));   // ranks 0-7 and 8-15
  g.data = 2;
  EXPECT_FALSE(CrossesNodes(g, 2, 0, 1));  // 0-3 and 4-7
  g.gpus_per_node = 4;
  g.data = 4;
  EXPECT_TRUE(CrossesNodes(g, 2, 0, 1));   // tp-cp-ep-dp-pp: stage 0 is 0-7, stage 1 8-15
  g.tp_pp_dp_mapping = true;
  EXPECT_FALSE(CrossesNodes(g, 2, 0, 1));  // tp-cp-ep-pp-dp: {0,1} beside {2,3}, ...
}

}  // namespace
}  // namespace gpusim::megatron_step_pipeline_test
