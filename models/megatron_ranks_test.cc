// Megatron's rank order and the nodes its groups span (Note [Megatron rank
// order]), against rank lists worked out by hand.
#include "models/megatron_ranks.h"

#include "gtest/gtest.h"

namespace gpusim::megatron_ranks_test {
namespace {

MegatronSpec Layout(int64_t cp, int64_t dp, int64_t pp, int64_t per_node) {
  MegatronSpec g;
  g.present = true;
  g.context = cp;
  g.data = dp;
  g.pipeline = pp;
  g.gpus_per_node = per_node;
  return g;
}

TEST(MegatronRanksTest, GlobalRankFollowsTheOrder) {
  // TP 2, CP 2, DP 2, PP 2: tp-cp-ep-dp-pp, rank = tp + 2 (cp + 2 (dp + 2 pp)).
  MegatronSpec g = Layout(2, 2, 2, 8);
  EXPECT_EQ(MegatronGlobalRank(g, 2, {1, 0, 0, 0}), 1);
  EXPECT_EQ(MegatronGlobalRank(g, 2, {0, 1, 0, 0}), 2);
  EXPECT_EQ(MegatronGlobalRank(g, 2, {0, 0, 1, 0}), 4);
  EXPECT_EQ(MegatronGlobalRank(g, 2, {0, 0, 0, 1}), 8);
  // tp-cp-ep-pp-dp: pp before dp.
  g.tp_pp_dp_mapping = true;
  EXPECT_EQ(MegatronGlobalRank(g, 2, {0, 0, 0, 1}), 4);
  EXPECT_EQ(MegatronGlobalRank(g, 2, {0, 0, 1, 0}), 8);
}

TEST(MegatronRanksTest, GroupsSpanNodesByTheirStride) {
  // TP 8, DP 2 on 8-GPU nodes: the TP group {0..7} is one node, the DP group
  // {0, 8} two.
  MegatronSpec g = Layout(1, 2, 1, 8);
  EXPECT_EQ(MegatronGroupNodes(g, 8, MegatronGroup::kTensor, 0), 1);
  EXPECT_EQ(MegatronGroupNodes(g, 8, MegatronGroup::kDataContext, 0), 2);
  // TP 4, DP 2: DP {0, 4} shares a node of 8, not of 4; TP {0..3} spans
  // two nodes of 2.
  g = Layout(1, 2, 1, 8);
  EXPECT_EQ(MegatronGroupNodes(g, 4, MegatronGroup::kDataContext, 0), 1);
  g.gpus_per_node = 4;
  EXPECT_EQ(MegatronGroupNodes(g, 4, MegatronGroup::kDataContext, 0), 2);
  EXPECT_EQ(MegatronGroupNodes(g, 4, MegatronGroup::kTensor, 0), 1);
  g.gpus_per_node = 2;
  EXPECT_EQ(MegatronGroupNodes(g, 4, MegatronGroup::kTensor, 0), 2);
  // TP 2, CP 2, DP 2 on nodes of 4: CP {0, 2} in one node, dp-cp {0, 2, 4, 6}
  // over two.
  g = Layout(2, 2, 1, 4);
  EXPECT_EQ(MegatronGroupNodes(g, 2, MegatronGroup::kContext, 0), 1);
  EXPECT_EQ(MegatronGroupNodes(g, 2, MegatronGroup::kDataContext, 0), 2);
  EXPECT_EQ(MegatronGroupNodes(g, 2, MegatronGroup::kWorld, 0), 2);
}

TEST(MegatronRanksTest, PipelineGroupsAndTheMapping) {
  // TP 2, DP 2, PP 2 on nodes of 4: stage 0 is ranks 0-3, stage 1 4-7. The
  // embedding group {0, 4} and the model group {0, 1, 4, 5} span two nodes.
  MegatronSpec g = Layout(1, 2, 2, 4);
  EXPECT_EQ(MegatronGroupNodes(g, 2, MegatronGroup::kEmbedding, 0), 2);
  EXPECT_EQ(MegatronGroupNodes(g, 2, MegatronGroup::kModel, 1), 2);
  EXPECT_EQ(MegatronGroupNodes(g, 2, MegatronGroup::kDataContext, 1), 1);  // {4, 6}
  // tp-cp-ep-pp-dp: stage 0 is {0, 1, 4, 5}, the DP group {0, 4} spans two
  // nodes and the embedding group {0, 2} one.
  g.tp_pp_dp_mapping = true;
  EXPECT_EQ(MegatronGroupNodes(g, 2, MegatronGroup::kDataContext, 0), 2);
  EXPECT_EQ(MegatronGroupNodes(g, 2, MegatronGroup::kEmbedding, 0), 1);
  EXPECT_EQ(MegatronGroupNodes(g, 2, MegatronGroup::kModel, 0), 1);
}

}  // namespace
}  // namespace gpusim::megatron_ranks_test
