// Per-layer activation memory of GPT layers exactly as Korthikanti et al.
// 2022 (arXiv 2205.05198, Table 2) count it; ../shared/reference/
// measurements.md §B. s = sequence, b = micro-batch, h = hidden, a = heads,
// t = tensor-parallel size; 16-bit activations, 1-byte dropout masks.
#include <unistd.h>

#include <fstream>
#include <string>

#include "gtest/gtest.h"
#include "models/gpt.h"
#include "sim/config/loader.h"
#include "sim/step/model_program.h"

namespace gpusim::korthikanti_test {
namespace {

struct Shape {
  int64_t s, b, h, a, t;
};

Bytes LayerBytes(const Shape& x, const std::string& policy, bool sp, int64_t t) {
  // One file per process and shape: ctest runs the shapes in parallel, and
  // other checkouts' test runs share the temp directory.
  const std::string path = ::testing::TempDir() + "/gpt_shape_" + std::to_string(getpid()) + "_" +
                           std::to_string(x.s) + "_" + std::to_string(x.h) + "_" + std::to_string(t) + ".yaml";
  std::ofstream(path) << "framework: pytorch\ndevice: a100-sxm-80gb\nmodel:\n  from: gpt-22b\n  d_model: " << x.h
                      << "\n  n_heads: " << x.a << "\n  head_dim: " << x.h / x.a << "\n  mlp_dim: " << 4 * x.h
                      << "\n  n_layers: 3\n  vocab: 1024\n";
  auto spec = LoadRunSpec(path, {"remat.policy=" + policy, "parallelism.tensor=" + std::to_string(t),
                                 std::string("parallelism.sequence_parallel=") + (sp ? "true" : "false"),
                                 "batch.per_device=" + std::to_string(x.b), "batch.seq_len=" + std::to_string(x.s)});
  EXPECT_TRUE(spec.ok()) << spec.status();
  auto p = BuildModelProgram(*spec);
  EXPECT_TRUE(p.ok()) << p.status();
  return GptLayerActivationBytes(*p, 1);
}

class KorthikantiTest : public ::testing::TestWithParam<Shape> {};

TEST_P(KorthikantiTest, EveryRowOfTable2) {
  const Shape x = GetParam();
  const int64_t sbh = x.s * x.b * x.h, as2b = x.a * x.s * x.s * x.b, t = x.t;
  // no parallelism: sbh (34 + 5as/h)
  EXPECT_EQ(LayerBytes(x, "none", false, 1).value(), 34 * sbh + 5 * as2b);
  // tensor parallel: sbh (10 + 24/t + 5as/(ht))
  EXPECT_EQ(LayerBytes(x, "none", false, t).value(), 10 * sbh + 24 * sbh / t + 5 * as2b / t);
  // tensor + sequence parallel: sbh (34/t + 5as/(ht))
  EXPECT_EQ(LayerBytes(x, "none", true, t).value(), 34 * sbh / t + 5 * as2b / t);
  // tensor parallel + selective recompute: sbh (10 + 24/t)
  EXPECT_EQ(LayerBytes(x, "selective", false, t).value(), 10 * sbh + 24 * sbh / t);
  // tensor + sequence parallel + selective recompute: 34 sbh / t
  EXPECT_EQ(LayerBytes(x, "selective", true, t).value(), 34 * sbh / t);
  // full recompute: 2 sbh (the layer input only)
  EXPECT_EQ(LayerBytes(x, "full", false, t).value(), 2 * sbh);
}

INSTANTIATE_TEST_SUITE_P(Shapes, KorthikantiTest,
                         ::testing::Values(Shape{128, 2, 256, 8, 4}, Shape{64, 1, 128, 4, 2},
                                           Shape{512, 3, 512, 16, 8}, Shape{2048, 4, 6144, 64, 8}));

}  // namespace
}  // namespace gpusim::korthikanti_test
