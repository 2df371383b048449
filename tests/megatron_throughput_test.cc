// The README's rows against Megatron-LM's published throughput
// (validation/megatron_narayanan2021_table1.csv: Narayanan et al. 2021,
// Table 1): gpusim's teraFLOP/s per GPU by the paper's FLOP count is
// recomputed for the rows the file holds and must match what it records.
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "sim/config/loader.h"
#include "sim/step/megatron_step.h"

namespace gpusim::megatron_throughput_test {
namespace {

struct Row {
  std::string name;
  int64_t heads = 0, hidden = 0, layers = 0, tp = 0, pp = 0, gpus = 0, batch = 0;
  double published = 0, predicted_mbs1 = 0, predicted_mbs4 = 0;
};

std::vector<Row> Rows() {
  std::ifstream in(GPUSIM_SOURCE_DIR "/validation/megatron_narayanan2021_table1.csv");
  std::vector<Row> rows;
  std::string line;
  bool header = true;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    if (header) {
      header = false;
      continue;
    }
    const std::vector<std::string> f = absl::StrSplit(line, ',');
    EXPECT_EQ(f.size(), 11u) << line;
    if (f.size() != 11) continue;
    Row r;
    r.name = f[0];
    int64_t* ints[] = {&r.heads, &r.hidden, &r.layers, &r.tp, &r.pp, &r.gpus, &r.batch};
    for (size_t i = 0; i < 7; ++i) EXPECT_TRUE(absl::SimpleAtoi(f[i + 1], ints[i])) << line;
    EXPECT_TRUE(absl::SimpleAtod(f[8], &r.published));
    EXPECT_TRUE(absl::SimpleAtod(f[9], &r.predicted_mbs1));
    EXPECT_TRUE(absl::SimpleAtod(f[10], &r.predicted_mbs4));
    rows.push_back(r);
  }
  return rows;
}

// The paper's Eq. 3 per GPU per second, in 1e12.
double PredictedTflops(const Row& r, int mbs) {
  const std::string args = absl::StrCat(
      "--num-layers ", r.layers, " --hidden-size ", r.hidden, " --num-attention-heads ", r.heads,
      " --seq-length 2048 --max-position-embeddings 2048 --tensor-model-parallel-size ", r.tp,
      " --pipeline-model-parallel-size ", r.pp, " --micro-batch-size ", mbs, " --global-batch-size ", r.batch,
      " --tokenizer-type NullTokenizer --vocab-size 51199 --fp16 --recompute-granularity full "
      "--recompute-method uniform --attention-backend unfused");
  auto spec = ParseRunSpec(absl::StrCat("device: a100-sxm-80gb\nmegatron:\n  world_size: ", r.gpus,
                                        "\n  args: \"", args, "\"\n"),
                           "narayanan.yaml");
  EXPECT_TRUE(spec.ok()) << spec.status();
  if (!spec.ok()) return 0;
  auto m = SimulateMegatron(*spec);
  EXPECT_TRUE(m.ok()) << m.status();
  if (!m.ok()) return 0;
  const double b = static_cast<double>(r.batch), s = 2048, l = static_cast<double>(r.layers);
  const double h = static_cast<double>(r.hidden), v = 51200;
  const double f = 96 * b * s * l * h * h * (1 + s / (6 * h) + v / (16 * l * h));
  return f / m->step_time.seconds() / static_cast<double>(r.gpus) / 1e12;
}

TEST(MegatronThroughputTest, RowsMatchTheValidationFile) {
  const std::vector<Row> rows = Rows();
  ASSERT_EQ(rows.size(), 6u);
  for (const Row& r : rows) {
    SCOPED_TRACE(r.name);
    EXPECT_NEAR(PredictedTflops(r, 4), r.predicted_mbs4, 0.006);
    // gpusim stays within 15% of every published row at micro-batch 4
    // (Table 1 does not give the micro-batch size). At micro-batch 1 the
    // smaller tensor-parallel rows are bound by the host's Python under the
    // DGX A100 prices (Note [Megatron host costs]): 0.53-1.10 of published.
    EXPECT_NEAR(r.predicted_mbs4 / r.published, 1.0, 0.15);
  }
  EXPECT_NEAR(PredictedTflops(rows[0], 1), rows[0].predicted_mbs1, 0.006);
}

}  // namespace
}  // namespace gpusim::megatron_throughput_test
