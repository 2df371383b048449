// The fast XLA heap planner against its O(n^2) oracle on the temps of real
// steps: llama7b rolled and unrolled under several remat policies (a
// scanned model's stacked residuals, thousands of buffers), both orders.
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "sim/alloc/heap_planner.h"
#include "sim/config/loader.h"
#include "sim/step/step.h"
#include "sim/step/temp_heap.h"

namespace gpusim::heap_planner_llama_test {
namespace {

TEST(HeapPlannerLlamaTest, MatchesQuadraticOracleOnLlama7bTemps) {
  for (const char* loop : {"rolled", "unrolled"}) {
    for (const char* policy : {"full", "none", "save_qkv_proj"}) {
      const std::vector<std::string> sets = {std::string("loop.mode=") + loop, std::string("remat.policy=") + policy};
      auto spec = LoadRunSpec(GPUSIM_SOURCE_DIR "/configs/llama7b.yaml", sets);
      ASSERT_TRUE(spec.ok()) << spec.status();
      auto step = PrepareStep(*spec);
      ASSERT_TRUE(step.ok()) << step.status();
      const std::vector<HeapBuffer> temps = TempHeapBuffers(step->lowered);
      ASSERT_GT(temps.size(), 1000u);
      for (HeapOrder order : {HeapOrder::kSpatial, HeapOrder::kTemporal}) {
        const HeapPlan fast = PackBestFit(temps, order);
        const HeapPlan oracle = internal::PackBestFitQuadratic(temps, order);
        EXPECT_EQ(fast.heap_size, oracle.heap_size) << loop << " " << policy;
        EXPECT_EQ(fast.offsets, oracle.offsets) << loop << " " << policy;
      }
    }
  }
}

}  // namespace
}  // namespace gpusim::heap_planner_llama_test
