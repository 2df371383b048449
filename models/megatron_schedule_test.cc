// Megatron's pipeline schedules: warm-up counts and the activations each
// stage holds at once (Note [Megatron pipeline schedules]).
#include "models/megatron_schedule.h"
#include "models/megatron_schedule_buckets.h"

#include "gtest/gtest.h"

namespace gpusim::megatron_schedule_test {
namespace {

TEST(MegatronScheduleTest, OneFOneBStageRHoldsPMinusRMicroBatches) {
  // p = 4, m = 8: stage r warms up with p - r - 1 forwards and holds p - r.
  for (int64_t r = 0; r < 4; ++r) {
    EXPECT_EQ(MegatronWarmup(4, r, 1, 8, 4), 3 - r);
    const auto s = MegatronSchedule(4, r, 1, 8, 4);
    EXPECT_EQ(static_cast<int64_t>(s.size()), 16);
    EXPECT_EQ(MaxInFlight(s), 4 - r) << "stage " << r;
  }
  // Fewer micro-batches than stages: all of them are in flight on stage 0.
  EXPECT_EQ(MaxInFlight(MegatronSchedule(8, 0, 1, 3, 8)), 3);
}

TEST(MegatronScheduleTest, OneFOneBOrder) {
  // Stage 0 of 2, 3 micro-batches: F0 | F1 B0 | F2 B1 | B2.
  const auto s = MegatronSchedule(2, 0, 1, 3, 2);
  ASSERT_EQ(s.size(), 6u);
  const bool fwd[] = {true, true, false, true, false, false};
  const int64_t mb[] = {0, 1, 0, 2, 1, 2};
  for (size_t i = 0; i < s.size(); ++i) {
    EXPECT_EQ(s[i].forward, fwd[i]) << i;
    EXPECT_EQ(s[i].microbatch, mb[i]) << i;
  }
}

TEST(MegatronScheduleTest, InterleavedWarmupAndInFlight) {
  // p = 4, v = 2, m = 8, group 4: warm-up (p - r - 1) x 2 + (v - 1) x 4.
  const int64_t warm[] = {10, 8, 6, 4};
  for (int64_t r = 0; r < 4; ++r) {
    EXPECT_EQ(MegatronWarmup(4, r, 2, 8, 4), warm[r]);
    const auto s = MegatronSchedule(4, r, 2, 8, 4);
    EXPECT_EQ(static_cast<int64_t>(s.size()), 32);
    // Chunk activations held at once: the warm-up plus the steady forward,
    // each 1/v of the stage: stage 0 holds 11 / 2 = 5.5 micro-batches'
    // worth against 1F1B's 4 (Narayanan et al. 2021, Sec. 2.2).
    EXPECT_EQ(MaxInFlight(s), warm[r] + 1) << "stage " << r;
  }
  // Chunk order: the first group of 4 micro-batches through chunk 0, then
  // chunk 1; the first backward is chunk 1 of micro-batch 0.
  const auto s = MegatronSchedule(4, 0, 2, 8, 4);
  EXPECT_EQ(s[3].chunk, 0);
  EXPECT_EQ(s[4].chunk, 1);
  EXPECT_EQ(s[4].microbatch, 0);
  EXPECT_FALSE(s[11].forward);
  EXPECT_EQ(s[11].chunk, 1);
  EXPECT_EQ(s[11].microbatch, 0);
}

TEST(MegatronScheduleTest, AllWarmupWhenTheScheduleIsShort) {
  // p = 4, v = 2, m = 4: stage 0's warm-up 10 > m x v = 8: every forward first.
  EXPECT_EQ(MegatronWarmup(4, 0, 2, 4, 4), 8);
  EXPECT_EQ(MaxInFlight(MegatronSchedule(4, 0, 2, 4, 4)), 8);
}

// Note [Megatron gradient buffer layout], worked by hand from
// _ParamAndGradBuffer.__init__.
TEST(MegatronBufferLayoutTest, DistributedOptimizerPadsParamStartsAndBucketEnds) {
  // dp 3: bucket ends at multiples of lcm(3, 128) = 384, params start at
  // multiples of 64. p0 [0, 100); p1 starts at 128, ends 178 >= 120: bucket
  // [0, 384); p2 [384, 1384): bucket [384, 1536).
  const MegatronBufferLayout l = LayOutGradBuffer({100, 50, 1000}, {false, false, false}, 120, true, 3);
  ASSERT_EQ(l.buckets.size(), 2u);
  EXPECT_EQ(l.buckets[0].end, 384);
  EXPECT_EQ(l.buckets[0].numel_unpadded, 178);
  EXPECT_EQ(l.buckets[0].last_param, 1);
  EXPECT_EQ(l.buckets[1].start, 384);
  EXPECT_EQ(l.buckets[1].end, 1536);
  EXPECT_EQ(l.numel, 1536);
  EXPECT_EQ(l.padding(), 1536 - 1150);
  // Without the distributed optimizer nothing is padded: [0, 150), [150, 1150).
  const MegatronBufferLayout plain = LayOutGradBuffer({100, 50, 1000}, {false, false, false}, 120, false, 3);
  ASSERT_EQ(plain.buckets.size(), 2u);
  EXPECT_EQ(plain.buckets[0].end, 150);
  EXPECT_EQ(plain.numel, 1150);
  EXPECT_EQ(plain.padding(), 0);
  // One bucket (bucket_size 0), dp 8: the end padded to 128.
  EXPECT_EQ(LayOutGradBuffer({1000}, {false}, 0, true, 8).numel, 1024);
}

TEST(MegatronBufferLayoutTest, SharedEmbeddingGetsItsOwnBucket) {
  // dp 2, lcm 128: p0 [0, 10) closes at p1's padded start 64 -> [0, 128);
  // the shared p1 [128, 148) -> [128, 256); p2 [256, 286) -> [256, 384).
  const MegatronBufferLayout l = LayOutGradBuffer({10, 20, 30}, {false, true, false}, 0, true, 2);
  ASSERT_EQ(l.buckets.size(), 3u);
  EXPECT_EQ(l.buckets[0].end, 128);
  EXPECT_EQ(l.buckets[0].numel_unpadded, 64);
  EXPECT_EQ(l.buckets[1].start, 128);
  EXPECT_EQ(l.buckets[1].end, 256);
  EXPECT_EQ(l.buckets[2].end, 384);
  EXPECT_EQ(l.numel, 384);
}

}  // namespace
}  // namespace gpusim::megatron_schedule_test
