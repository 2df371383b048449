// Issue 13: every collective of a Megatron launch line reads
// megatron.gpus_per_node through Megatron's rank order (Note [Megatron rank
// order], models/megatron_ranks.h): a group whose ranks share a node is
// priced on NVLink, one that spans nodes on the network.
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "gtest/gtest.h"
#include "sim/config/loader.h"
#include "sim/step/megatron_step.h"

namespace gpusim::megatron_topology_test {
namespace {

constexpr char kLine[] = "--num-layers 2 --hidden-size 1024 --num-attention-heads 8 --seq-length 1024 "
                         "--micro-batch-size 1 --global-batch-size 4 --tokenizer-type NullTokenizer "
                         "--vocab-size 32000 --bf16 --tensor-model-parallel-size 4";

RunSpec Spec(int gpus_per_node, const std::string& extra = "") {
  auto spec = ParseRunSpec(absl::StrCat("device: h100-sxm-80gb\nmegatron:\n  world_size: 8\n  gpus_per_node: ",
                                        gpus_per_node, "\n  args: \"", kLine, extra, "\"\n"),
                           "t.yaml");
  EXPECT_TRUE(spec.ok()) << spec.status();
  return spec.ok() ? *spec : RunSpec();
}

struct CollectiveTimes {
  SimTime data, tensor;  // the gradient reduce; every TP all-reduce of the layers
  int64_t data_nodes = 0, tensor_nodes = 0;
};

CollectiveTimes TimesOf(const RunSpec& spec) {
  auto r = SimulateMegatron(spec);
  EXPECT_TRUE(r.ok()) << r.status();
  CollectiveTimes t;
  if (!r.ok()) return t;
  const StepReport& rep = r->ranks[0].report;
  for (size_t i = 0; i < rep.lowered.trace.events.size(); ++i) {
    const TraceEvent& e = rep.lowered.trace.events[i];
    if (e.type != EventType::kCollective) continue;
    const SimTime d = rep.sim.end[i] - rep.sim.start[i];
    if (absl::StartsWith(e.name, "grad_sync.")) {
      t.data += d;
      t.data_nodes = e.group_nodes;
    } else if (e.group == 4 && absl::StrContains(e.name, "layer")) {
      t.tensor += d;
      t.tensor_nodes = e.group_nodes;
    }
  }
  return t;
}

TEST(MegatronTopologyTest, GroupsThatSpanNodesArePricedOnTheNetwork) {
  // TP 4, DP 2 over 8 GPUs: the TP groups are {0-3}, {4-7}, the DP groups
  // {0, 4}, ... On nodes of 8 both sit in one node; on nodes of 4 the DP
  // group spans two (the TP group does not); on nodes of 2 both do.
  const CollectiveTimes n8 = TimesOf(Spec(8)), n4 = TimesOf(Spec(4)), n2 = TimesOf(Spec(2));
  EXPECT_EQ(n8.data_nodes, 1);
  EXPECT_EQ(n8.tensor_nodes, 1);
  EXPECT_EQ(n4.data_nodes, 2);
  EXPECT_EQ(n4.tensor_nodes, 1);
  EXPECT_EQ(n2.data_nodes, 2);
  EXPECT_EQ(n2.tensor_nodes, 2);
  ASSERT_GT(n8.data.ns(), 0);
  ASSERT_GT(n8.tensor.ns(), 0);
  EXPECT_GT(n4.data, n8.data);     // the DP reduce now crosses the network
  EXPECT_EQ(n4.tensor, n8.tensor);  // the TP group still shares a node
  EXPECT_EQ(n2.data, n4.data);
  EXPECT_GT(n2.tensor, n4.tensor);
}

TEST(MegatronTopologyTest, TheMappingMovesWhichGroupSpansNodes) {
  // TP 2, PP 2, DP 2 on nodes of 4. tp-cp-ep-dp-pp: stage 0 is {0-3}, its DP
  // group {0, 2} one node. tp-cp-ep-pp-dp: stage 0 is {0, 1, 4, 5}, its DP
  // group {0, 4} two nodes.
  const std::string pp = " --pipeline-model-parallel-size 2";
  auto data = [&](const std::string& extra) {
    auto spec = ParseRunSpec(absl::StrCat("device: h100-sxm-80gb\nmegatron:\n  world_size: 8\n  gpus_per_node: 4\n"
                                          "  args: \"", absl::StrReplaceAll(kLine, {{"model-parallel-size 4",
                                                                                    "model-parallel-size 2"}}),
                                          pp, extra, "\"\n"),
                             "t.yaml");
    EXPECT_TRUE(spec.ok()) << spec.status();
    CollectiveTimes t = TimesOf(*spec);
    return t;
  };
  const CollectiveTimes plain = data(""), mapped = data(" --use-tp-pp-dp-mapping");
  EXPECT_EQ(plain.data_nodes, 1);
  EXPECT_EQ(mapped.data_nodes, 2);
  EXPECT_GT(mapped.data, plain.data);
}

}  // namespace
}  // namespace gpusim::megatron_topology_test
