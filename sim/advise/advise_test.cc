#include "sim/advise/advise.h"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <new>
#include <stdexcept>
#include <thread>

#include "gtest/gtest.h"
#include "sim/config/loader.h"
#include "sim/step/step.h"

namespace gpusim::advise_test {
namespace {

AdviseOptions SmallGrid() {
  AdviseOptions o;
  o.config = GPUSIM_SOURCE_DIR "/examples/scan_carry.yaml";
  o.axes = {*ParseAxis("loop.mode=rolled,unrolled"), *ParseAxis("loop.trip_count=1,2")};
  o.budget = 10_GiB;
  o.jobs = 2;
  return o;
}

// Hand-checked (README table): rolled T=1 4.0 GiB, rolled T=2 12.0 GiB,
// unrolled T=1 4.0 GiB, unrolled T=2 8.0 GiB; T=2 runs twice the work.
TEST(AdviseTest, FrontAndWinnerOfASmallGrid) {
  auto r = Advise(SmallGrid());
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->points.size(), 4u);
  EXPECT_EQ(r->points[0].settings, (std::vector<std::string>{"loop.mode=rolled", "loop.trip_count=1"}));
  EXPECT_EQ(r->points[3].settings, (std::vector<std::string>{"loop.mode=unrolled", "loop.trip_count=2"}));
  EXPECT_TRUE(r->points[0].fits);
  EXPECT_FALSE(r->points[1].fits);  // rolled T=2: 12 GiB > 10 GiB
  EXPECT_TRUE(r->points[3].fits);
  // T=1 (inlined, identical either way) dominates both T=2 points.
  EXPECT_TRUE(r->points[0].on_front);
  EXPECT_TRUE(r->points[2].on_front);
  EXPECT_FALSE(r->points[1].on_front);
  EXPECT_FALSE(r->points[3].on_front);
  EXPECT_EQ(r->winner, 0);  // ties go to the earlier point
}

// Issue 32: `advise --budget 80GiB` on an h100-sxm-80gb (78.70 GiB usable)
// marked points peaking at 79.5 GiB as fitting. A budget above what the
// device can give is refused by name, for the config's device and for a
// device the grid varies.
TEST(AdviseTest, BudgetAboveTheDevicesUsableMemoryIsRefused) {
  AdviseOptions o;
  o.config = GPUSIM_SOURCE_DIR "/configs/llama7b.yaml";
  o.axes = {*ParseAxis("batch.per_device=1,2")};
  o.budget = 80_GiB;
  auto r = Advise(o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("h100-sxm-80gb (the config's device) can give"), std::string::npos)
      << r.status();
  o.axes = {*ParseAxis("device=h200-sxm-141gb,a100-sxm-80gb")};
  o.budget = 100_GiB;
  r = Advise(o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("a100-sxm-80gb (--vary device=a100-sxm-80gb)"), std::string::npos)
      << r.status();
}

// Note [Verdict]: a point fits in advise exactly when `gpusim run` of it
// says so, with the same setting named; budget 0 is the device's usable
// memory.
TEST(AdviseTest, PointsAreJudgedAsRunJudgesThem) {
  AdviseOptions o;
  o.config = GPUSIM_SOURCE_DIR "/configs/llama7b.yaml";
  o.axes = {*ParseAxis("batch.per_device=1,2")};
  auto r = Advise(o);
  ASSERT_TRUE(r.ok()) << r.status();
  for (const AdvicePoint& p : r->points) {
    ASSERT_TRUE(p.ok) << p.error;
    auto spec = LoadRunSpec(o.config, p.settings);
    ASSERT_TRUE(spec.ok()) << spec.status();
    auto run = SimulateStep(*spec);
    ASSERT_TRUE(run.ok()) << run.status();
    EXPECT_EQ(p.fits, run->verdict.fits()) << p.settings[0];
    EXPECT_EQ(p.setting, run->verdict.setting) << p.settings[0];
    EXPECT_EQ(p.need, run->verdict.need) << p.settings[0];
  }
  EXPECT_TRUE(r->points[0].fits);   // batch 1 fits with a higher fraction
  EXPECT_FALSE(r->points[0].setting.empty());
  EXPECT_FALSE(r->points[1].fits);  // batch 2: 87 GiB
}

TEST(AdviseTest, ShardsMergeToTheWholeGrid) {
  auto whole = Advise(SmallGrid());
  ASSERT_TRUE(whole.ok());
  std::vector<std::string> files;
  for (int i = 0; i < 3; ++i) {
    AdviseOptions o = SmallGrid();
    o.shard = i;
    o.num_shards = 3;
    auto part = Advise(o);
    ASSERT_TRUE(part.ok());
    files.push_back(::testing::TempDir() + "/shard" + std::to_string(i) + ".jsonl");
    std::ofstream(files.back()) << RenderAdviceJsonLines(*part);
  }
  auto merged = MergeAdviceJsonLines(files);
  ASSERT_TRUE(merged.ok()) << merged.status();
  EXPECT_EQ(RenderAdviceJson(*merged), RenderAdviceJson(*whole));
}

// Points that differ only in device (or allocator) share one prepared step
// (Note [Shared preparation] in advise.cc); each must still get exactly what
// simulating it alone gives, and the device must matter.
TEST(AdviseTest, SharedPreparationMatchesSimulatingEachPoint) {
  AdviseOptions o;
  o.config = GPUSIM_SOURCE_DIR "/examples/scan_carry.yaml";
  o.axes = {*ParseAxis("device=h100-sxm-80gb,a100-sxm-40gb"), *ParseAxis("loop.trip_count=1,2"),
            *ParseAxis("device.memory.context_reserve=0,1GiB")};
  o.jobs = 2;
  auto r = Advise(o);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->points.size(), 8u);
  for (const AdvicePoint& p : r->points) {
    ASSERT_TRUE(p.ok) << p.error;
    auto spec = LoadRunSpec(o.config, p.settings);
    ASSERT_TRUE(spec.ok()) << spec.status();
    auto alone = SimulateStep(*spec);
    ASSERT_TRUE(alone.ok()) << alone.status();
    EXPECT_EQ(p.peak, alone->peak) << p.index;
    EXPECT_EQ(p.step_time_s, alone->sim.step_time.seconds()) << p.index;
  }
  EXPECT_NE(r->points[0].step_time_s, r->points[4].step_time_s);  // h100 vs a100, same program
}

TEST(AdviseTest, BadAxisAndShardAreErrors) {
  EXPECT_FALSE(ParseAxis("remat.policy").ok());
  EXPECT_FALSE(ParseAxis("remat.policy=full,").ok());
  AdviseOptions o = SmallGrid();
  o.shard = 3;
  o.num_shards = 3;
  EXPECT_FALSE(Advise(o).ok());
}

// Issue 17: a std::bad_alloc in a worker thread (not the calling one) comes
// back from Advise as a Status (the CLI's exit 1), never std::terminate. The
// progress callback runs inside each worker's evaluation, so throwing there
// fails the worker in the middle of its work; the calling thread (worker 0)
// waits until another thread has failed.
TEST(AdviseTest, OutOfMemoryInAWorkerThreadIsAStatus) {
  AdviseOptions o = SmallGrid();  // 4 points in 4 groups, 2 threads
  const std::thread::id caller = std::this_thread::get_id();
  std::atomic<bool> thrown{false};
  o.progress = [&](int64_t, int64_t) {
    if (std::this_thread::get_id() != caller) {
      thrown = true;
      throw std::bad_alloc();
    }
    for (int i = 0; i < 10000 && !thrown; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  };
  auto r = Advise(o);
  EXPECT_TRUE(thrown);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kResourceExhausted) << r.status();
  EXPECT_EQ(r.status().message(), "advise: out of host memory evaluating the grid");
  // Any other exception from a worker is a bug (exit 2), still a Status.
  thrown = false;
  o.progress = [&](int64_t, int64_t) {
    if (std::this_thread::get_id() != caller) {
      thrown = true;
      throw std::runtime_error("boom");
    }
    for (int i = 0; i < 10000 && !thrown; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  };
  r = Advise(o);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInternal);
  EXPECT_EQ(r.status().message(), "advise: worker failed: boom");
}

}  // namespace
}  // namespace gpusim::advise_test
