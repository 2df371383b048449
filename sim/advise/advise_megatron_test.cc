// advise and compare on a Megatron-LM launch line (issue 13): each grid
// point re-derives the launch line's spec from its megatron: block with the
// point's keys set, runs every pipeline rank, and reports the rank with the
// largest peak.
#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "gtest/gtest.h"
#include "sim/advise/advise.h"
#include "sim/advise/compare.h"
#include "sim/config/loader.h"
#include "sim/step/megatron_step.h"

namespace gpusim::advise_megatron_test {
namespace {

constexpr char kYaml[] =
    "device: h100-sxm-80gb\n"
    "megatron:\n"
    "  world_size: 8\n"
    "  gpus_per_node: 8\n"
    "  args: >-\n"
    "    --num-layers 4 --hidden-size 512 --num-attention-heads 8 --seq-length 256\n"
    "    --micro-batch-size 1 --global-batch-size 8 --tokenizer-type NullTokenizer --vocab-size 4000 --bf16\n"
    "    --tensor-model-parallel-size 2 --pipeline-model-parallel-size 2\n";

std::string WriteConfig(const std::string& name, const std::string& text) {
  const std::string path = absl::StrCat(::testing::TempDir(), "/", name);
  std::ofstream(path) << text;
  return path;
}

AdviseOptions Grid(const std::string& config, std::vector<std::string> axes) {
  AdviseOptions o;
  o.config = config;
  for (const std::string& a : axes) o.axes.push_back(*ParseAxis(a));
  o.budget = Bytes(0);  // the device's usable memory
  o.jobs = 2;
  return o;
}

TEST(AdviseMegatronTest, EachPointIsTheLaunchLineWithItsArgument) {
  const std::string config = WriteConfig("advise_megatron.yaml", kYaml);
  auto r = Advise(Grid(config, {"megatron.args.micro-batch-size=1,2"}));
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->points.size(), 2u);
  for (const AdvicePoint& p : r->points) ASSERT_TRUE(p.ok) << p.error;
  // Each point is what `gpusim run` gives for the launch line written with
  // that value: the peak rank's peak, the pipeline's step.
  for (int micro : {1, 2}) {
    auto spec = ParseRunSpec(absl::StrReplaceAll(kYaml, {{"--micro-batch-size 1", absl::StrCat("--micro-batch-size ",
                                                                                               micro)}}),
                             "t.yaml");
    ASSERT_TRUE(spec.ok()) << spec.status();
    auto m = SimulateMegatron(*spec);
    ASSERT_TRUE(m.ok()) << m.status();
    const AdvicePoint& p = r->points[static_cast<size_t>(micro - 1)];
    EXPECT_EQ(p.peak, PeakRankView(*m).report.peak);
    EXPECT_DOUBLE_EQ(p.step_time_s, m->step_time.seconds());
    EXPECT_EQ(p.rank, absl::StrCat("stage ", m->peak, " of 2, ranks ", m->ranks[m->peak].first_rank, "-",
                                   m->ranks[m->peak].last_rank));
  }
  EXPECT_GT(r->points[1].peak, r->points[0].peak);  // twice the activations per micro-batch
  EXPECT_NE(RenderAdviceText(*r, 10).find("(peak rank: stage "), std::string::npos);
  EXPECT_NE(RenderAdviceJson(*r).find("\"peak_rank\": \"stage "), std::string::npos);
}

TEST(AdviseMegatronTest, GpusPerNodeAndTheMappedForm) {
  // TP 2 x PP 2 x DP 2: on nodes of 2 the DP reduce and the sends cross the
  // network, so the step is slower; the mapping form of args gives the same.
  const std::string config = WriteConfig("advise_megatron_nodes.yaml", kYaml);
  auto r = Advise(Grid(config, {"megatron.gpus_per_node=8,2"}));
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_TRUE(r->points[0].ok && r->points[1].ok);
  EXPECT_GT(r->points[1].step_time_s, r->points[0].step_time_s);
  EXPECT_EQ(r->points[1].peak, r->points[0].peak);
  const std::string mapped = WriteConfig(
      "advise_megatron_map.yaml",
      "device: h100-sxm-80gb\nmegatron:\n  world_size: 8\n  args:\n    num-layers: 4\n    hidden_size: 512\n"
      "    num-attention-heads: 8\n    seq-length: 256\n    micro-batch-size: 1\n    global-batch-size: 8\n"
      "    tokenizer-type: NullTokenizer\n    vocab-size: 4000\n    bf16:\n    tensor-model-parallel-size: 2\n"
      "    pipeline-model-parallel-size: 2\n");
  auto q = Advise(Grid(mapped, {"megatron.gpus_per_node=8,2"}));
  ASSERT_TRUE(q.ok()) << q.status();
  EXPECT_EQ(q->points[1].step_time_s, r->points[1].step_time_s);
}

TEST(AdviseMegatronTest, WhatAGridCannotVaryIsRefusedByName) {
  const std::string config = WriteConfig("advise_megatron_refuse.yaml", kYaml);
  auto no_axes = Advise(Grid(config, {}));
  ASSERT_FALSE(no_axes.ok());
  EXPECT_NE(no_axes.status().message().find("a Megatron-LM launch line has no default grid"), std::string::npos)
      << no_axes.status();
  auto beside = Advise(Grid(config, {"parallelism.tensor=2,4"}));
  ASSERT_FALSE(beside.ok());
  EXPECT_NE(beside.status().message().find("given by the megatron: block's arguments"), std::string::npos)
      << beside.status();
  auto batch = Advise(Grid(config, {"remat.policy=full"}));
  ASSERT_FALSE(batch.ok());
  auto key = Advise(Grid(config, {"megatron.world_sise=8"}));
  ASSERT_FALSE(key.ok());
  EXPECT_NE(key.status().message().find("megatron.world_sise: expected megatron.world_size"), std::string::npos)
      << key.status();
  // An argument Megatron does not know, or one gpusim refuses: by name,
  // before any point.
  auto unknown = Advise(Grid(config, {"megatron.args.num-layer=2"}));
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.status().message().find("num-layer"), std::string::npos) << unknown.status();
  auto refused = Advise(Grid(config, {"megatron.args.fp4-format=e2m1"}));
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("fp4 training is not modelled"), std::string::npos) << refused.status();
  // A modelled argument whose value this launch line cannot take (MoE with
  // TP > 1 needs --sequence-parallel): by name too.
  auto moe = Advise(Grid(config, {"megatron.args.num-experts=8"}));
  ASSERT_FALSE(moe.ok());
  EXPECT_NE(moe.status().message().find("--num-experts: MoE with TP > 1"), std::string::npos) << moe.status();
  auto split = Advise(Grid(config, {"megatron.args.tensor-model-parallel-size=2,3"}));
  ASSERT_FALSE(split.ok());  // checked once per value, before any point: 3 does not divide the world
  EXPECT_NE(split.status().message().find("TP x PP x CP = 3 x 2 x 1"), std::string::npos) << split.status();
}

TEST(AdviseMegatronTest, CompareRowsNameThePeakRank) {
  const std::string config = WriteConfig("compare_megatron.yaml", kYaml);
  auto rows = Compare(config, {}, "megatron.args.recompute-granularity=selective,full");
  ASSERT_FALSE(rows.ok());  // full needs --recompute-method: refused by name
  rows = Compare(config, {}, "megatron.args.micro-batch-size=1,2");
  ASSERT_TRUE(rows.ok()) << rows.status();
  ASSERT_EQ(rows->size(), 2u);
  EXPECT_TRUE((*rows)[0].ok) << (*rows)[0].error;
  EXPECT_NE((*rows)[0].rank.find("stage "), std::string::npos);
  EXPECT_GT((*rows)[1].peak, (*rows)[0].peak);
}

}  // namespace
}  // namespace gpusim::advise_megatron_test
