// gpusim compare: one row per value, in order; failures become rows.
#include "sim/report/compare.h"

#include "gtest/gtest.h"

namespace gpusim::compare_test {
namespace {

TEST(CompareTest, OneRowPerValueInOrder) {
  const std::vector<std::string> sets = {"model.n_layers=2", "batch.seq_len=512"};
  auto rows = Compare(GPUSIM_SOURCE_DIR "/examples/remat_llama7b.yaml", sets,
                      "remat.policy=none,full,qkv_proj_offloaded,no_such_policy");
  ASSERT_TRUE(rows.ok()) << rows.status();
  ASSERT_EQ(rows->size(), 4u);
  EXPECT_EQ((*rows)[0].setting, "remat.policy=none");
  EXPECT_EQ((*rows)[2].setting, "remat.policy=qkv_proj_offloaded");
  // none recomputes nothing; full recomputes.
  EXPECT_EQ((*rows)[0].recompute_s, 0);
  EXPECT_GT((*rows)[1].recompute_s, 0);
  EXPECT_EQ((*rows)[1].host.value(), 0);
  // q, k, v [1, 512, 32, 128] bf16 per layer, 2 layers, on the host.
  EXPECT_EQ((*rows)[2].host.value(), 2 * 3 * 512 * 32 * 128 * 2);
  EXPECT_GT((*rows)[2].host_transfer_s, 0);
  EXPECT_FALSE((*rows)[3].ok);
  EXPECT_NE((*rows)[3].error.find("no_such_policy"), std::string::npos);
  EXPECT_NE(RenderCompareText(*rows).find("error:"), std::string::npos);
  EXPECT_EQ(Compare(GPUSIM_SOURCE_DIR "/examples/remat_llama7b.yaml", sets, "remat.policy").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(Compare(GPUSIM_SOURCE_DIR "/examples/remat_llama7b.yaml", sets, "remat.nope=1").ok());
}

}  // namespace
}  // namespace gpusim::compare_test
