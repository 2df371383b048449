#include "sim/lower/eager/device_memory_sort.h"

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "sim/lower/eager/test_device.h"

namespace gpusim::device_memory_sort_test {
namespace {

constexpr CubBuild kCub2{8, true};
constexpr CubBuild kCub1{4, false};

TEST(IndexPutSort, NumBitsFollowsCubCuh) {
  EXPECT_EQ(CubNumBits(0), 1);
  EXPECT_EQ(CubNumBits(1), 1);
  EXPECT_EQ(CubNumBits(2), 2);
  EXPECT_EQ(CubNumBits(9999), 14);  // the CS336 embedding: 10,000 rows
}

TEST(IndexPutSort, CubBuildFromTheRecordedCuda) {
  EXPECT_EQ(CubBuildFor("2.15.0+cu132", "13.2")->offset_bytes, 8);
  EXPECT_EQ(CubBuildFor("1.13.0a0", "none")->offset_bytes, 4);
  EXPECT_EQ(CubBuildFor("1.13.1+cu117", "11.7")->offset_bytes, 4);
  EXPECT_FALSE(CubBuildFor("1.13.0", "none")->has_sm90_policy);
  EXPECT_EQ(CubBuildFor("2.4.0", "none")->offset_bytes, 8);
  EXPECT_FALSE(CubBuildFor("two", "none").ok());
}

// The CS336 snapshot (A100) holds a 138,751 B CUB block for sorting its
// 8,192 int64 ids on 14 bits: onesweep, two passes, 64-bit offsets.
TEST(IndexPutSort, RadixSortStorageMatchesTheSnapshot) {
  const DeviceSpec a100 = Device("a100-sxm-80gb");
  EXPECT_EQ(*CubRadixSortPairsTempBytes(8192, 8, 8, 14, a100, kCub2), Bytes(138751));
  // bins 2x256x4 + lookback 3x256x4 + 2 x 65,536 + counters, each to 256, + 255.
  EXPECT_EQ(*CubRadixSortPairsTempBytes(8192, 8, 8, 14, a100, kCub1), Bytes(136703));
  // One pass needs no extra key and value buffers.
  EXPECT_EQ(*CubRadixSortPairsTempBytes(8192, 8, 8, 8, a100, kCub2), Bytes(2048 + 3072 + 256 + 255));
  // A single tile (256 threads x 9 items of 8 bytes) asks for 1 byte.
  EXPECT_EQ(*CubRadixSortPairsTempBytes(2304, 8, 8, 14, a100, kCub2), Bytes(1));
  EXPECT_GT(*CubRadixSortPairsTempBytes(2305, 8, 8, 14, a100, kCub2), Bytes(2 * 2305 * 8));
  // sm_90's tile is 384 x 12: two lookback blocks instead of three.
  const DeviceSpec h100 = Device("h100-sxm-80gb");
  EXPECT_EQ(*CubRadixSortPairsTempBytes(8192, 8, 8, 14, h100, kCub2), Bytes(4096 + 2048 + 131072 + 256 + 255));
  EXPECT_EQ(*CubRadixSortPairsTempBytes(8192, 8, 8, 14, h100, kCub1), Bytes(136703));  // no Policy900
  DeviceSpec old = a100;
  old.cc_major = 6;
  EXPECT_NE(CubRadixSortPairsTempBytes(8192, 8, 8, 14, old, kCub2).status().message().find("from sm_70"),
            std::string::npos);
  EXPECT_FALSE(CubRadixSortPairsTempBytes(8192, 2, 8, 14, a100, kCub2).ok());
  EXPECT_FALSE(CubRadixSortPairsTempBytes(int64_t{1} << 50, 8, 8, 14, a100, kCub2).ok());
}

std::vector<std::string> Steps(const OpTemporaries& t) {
  std::vector<std::string> out;
  for (const auto* part : {&t.before, &t.after}) {
    for (const TempStep& s : *part) {
      out.push_back(s.alloc ? absl::StrCat("alloc ", s.slot, " ", s.size.value(), " ", s.what)
                            : absl::StrCat("free ", s.slot));
    }
    if (part == &t.before) out.push_back("kernel");
  }
  return out;
}

// The snapshot's embedding backward, buffer by buffer (events 5139-5155).
TEST(IndexPutSort, BackwardOfWeightIdsInTheSnapshotsOrder) {
  const std::vector<int64_t> cs336 = {8192, 1, 0, 768, 1, 9999, 1, 1, 0, 0, 1, 0};
  absl::StatusOr<OpTemporaries> t = IndexPutTemporaries(cs336, false, "2.15.0", kCub2, Device("a100-sxm-80gb"));
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(Steps(*t), (std::vector<std::string>{
                           "alloc 0 65536 index remainder", "alloc 1 65536 linear index", "free 0",
                           "alloc 2 65536 sorted_indices", "alloc 3 65536 orig_indices", "alloc 4 65536 range",
                           "alloc 5 138751 CUB radix sort storage", "free 5", "kernel", "free 4", "free 3",
                           "free 2", "free 1"}));
}

TEST(IndexPutSort, CopiesRangeChecksAndWhenCudaSorts) {
  const DeviceSpec a100 = Device("a100-sxm-80gb");
  // Without accumulate CUDA sorts only under deterministic algorithms.
  std::vector<int64_t> f = {8192, 1, 0, 768, 1, 9999, 1, 0, 0, 0, 1, 0};
  EXPECT_TRUE(IndexPutTemporaries(f, false, "2.15.0", kCub2, a100)->before.empty());
  EXPECT_FALSE(IndexPutTemporaries(f, true, "2.15.0", kCub2, a100)->before.empty());
  // A user's index_put_(accumulate=True) checks the range (2.x: aminmax), an
  // int32 index is copied to int64, a broadcast value is made contiguous.
  f = {100, 1, 1, 16, 1, 99, 0, 1, 0, 6400, 1, 0};
  absl::StatusOr<OpTemporaries> t = IndexPutTemporaries(f, false, "2.15.0", kCub2, a100);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(Steps(*t), (std::vector<std::string>{
                           "alloc 0 800 int64 copy of an int32 index", "alloc 1 8 index aminmax min",
                           "alloc 2 8 index aminmax max", "free 2", "free 1", "alloc 3 800 index remainder",
                           "alloc 4 800 linear index", "free 3", "free 0", "alloc 5 6400 expanded contiguous value",
                           "alloc 6 800 sorted_indices", "alloc 7 800 orig_indices", "alloc 8 800 range",
                           "alloc 9 1 CUB radix sort storage", "free 9", "kernel", "free 8", "free 7", "free 6",
                           "free 5", "free 4"}));
  t = IndexPutTemporaries(f, false, "1.13.0", kCub1, a100);  // max() and min(), each .item()'d
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->before[1].what, "index max");
  EXPECT_FALSE(t->before[2].alloc);
  EXPECT_EQ(t->before[3].what, "index min");
  // Two index tensors: the second product is added into the first and freed.
  f = {64, 2, 0, 8, 1, 99, 1, 1, 4096, 0, 1, 0};
  t = IndexPutTemporaries(f, false, "2.15.0", kCub2, a100);
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->before[0].what, "contiguous self");
  EXPECT_EQ(t->before[4].what, "index remainder");
  EXPECT_EQ(t->before[5].what, "index times stride");
  EXPECT_EQ(t->after.back().slot, 0);  // self_ dies last
}

TEST(IndexPutSort, NamesWhatItDoesNotSizeAndRefusesBadFacts) {
  const DeviceSpec a100 = Device("a100-sxm-80gb");
  EXPECT_NE(IndexPutTemporaries({32, 1}, false, "2.15.0", kCub2, a100)->not_modelled.find("re-record"),
            std::string::npos);
  EXPECT_NE(IndexPutTemporaries({32, 1, 0, 16, 1, 99, 1, 1, 0, 0, 0, 0}, false, "2.15.0", kCub2, a100)
                ->not_modelled.find("non-adjacent"),
            std::string::npos);
  EXPECT_NE(IndexPutTemporaries({32, 1, 0, 16, 1, 99, 1, 1, 0, 0, 1, 1}, false, "2.15.0", kCub2, a100)
                ->not_modelled.find("mask"),
            std::string::npos);
  EXPECT_FALSE(IndexPutTemporaries({32, 1, 0}, false, "2.15.0", kCub2, a100).ok());
  EXPECT_FALSE(IndexPutTemporaries({-1, 1, 0, 16, 1, 99, 1, 1, 0, 0, 1, 0}, false, "2.15.0", kCub2, a100).ok());
  EXPECT_FALSE(
      IndexPutTemporaries({32, 1, 0, 16, 1, int64_t{1} << 62, 1, 1, 0, 0, 1, 0}, false, "2.15.0", kCub2, a100).ok());
}

// Note [Embedding backward temporaries] for a GPT-2 embedding: 8 x 1,024
// int64 tokens into 50,257 x 768 f32 rows.
TEST(EmbeddingBackward, SortAndSegmentBuffersInOrder) {
  const DeviceSpec a100 = Device("a100-sxm-80gb");
  absl::StatusOr<OpTemporaries> t =
      EmbeddingBackwardTemporaries({8192, 50257, 768, 8, 4, 0, 0, 0}, kCub2, a100);
  ASSERT_TRUE(t.ok()) << t.status();
  // The radix sort runs on all 64 bits: 8 passes of bins.
  EXPECT_EQ(*CubRadixSortPairsTempBytes(8192, 8, 8, 64, a100, kCub2), Bytes(16384 + 3072 + 131072 + 256 + 255));
  EXPECT_EQ(Steps(*t), (std::vector<std::string>{
                           "alloc 0 65536 sorted_indices", "alloc 1 65536 orig_indices", "alloc 2 65536 range",
                           "alloc 3 151039 CUB radix sort storage", "free 3", "free 2", "alloc 4 65536 segment_offsets",
                           "alloc 5 8 segment count", "alloc 6 65536 partials_per_segment",
                           "alloc 7 65536 partials_per_segment_offset", "alloc 8 8 partial segment count",
                           // 8,192 / 10 + min(8,192, 50,257) = 9,011 partial segments
                           "alloc 9 72088 partial_segment_offset", "alloc 10 27681792 grad_weight_per_segment",
                           "kernel", "free 10", "free 9", "free 8", "free 7", "free 6", "free 5", "free 4", "free 1",
                           "free 0"}));
  EXPECT_NE(t->not_modelled.find("unique_by_key and exclusive_sum storage"), std::string::npos);
  // bf16 gradients sum partial segments in float; fewer rows than tokens cap the segments.
  t = EmbeddingBackwardTemporaries({8192, 100, 64, 8, 2, 0, 0, 0}, kCub2, a100);
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->before.back().size, Bytes((819 + 100) * 64 * 4));
  // Up to 3,072 indices: only the contiguous copies.
  t = EmbeddingBackwardTemporaries({3072, 50257, 768, 8, 4, 0, 4096, 0}, kCub2, a100);
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(Steps(*t), (std::vector<std::string>{"alloc 0 4096 contiguous grad", "kernel", "free 0"}));
  EXPECT_TRUE(t->not_modelled.empty());
  // CUDA 11's thrust path, scale_grad_by_freq and old files are named, not sized.
  t = EmbeddingBackwardTemporaries({8192, 50257, 768, 8, 4, 0, 0, 0}, kCub1, a100);
  ASSERT_TRUE(t.ok());
  EXPECT_TRUE(t->before.empty());
  EXPECT_NE(t->not_modelled.find("distinct indices"), std::string::npos);
  EXPECT_NE(EmbeddingBackwardTemporaries({8192, 50257, 768, 8, 4, 1, 0, 0}, kCub2, a100)->not_modelled.find(
                "scale_grad_by_freq"),
            std::string::npos);
  EXPECT_NE(EmbeddingBackwardTemporaries({8192, 50257, 768, 8, 4, 0}, kCub2, a100)->not_modelled.find("re-record"),
            std::string::npos);
  EXPECT_FALSE(EmbeddingBackwardTemporaries({8192, 50257, 768, 3, 4, 0, 0, 0}, kCub2, a100).ok());
  EXPECT_FALSE(EmbeddingBackwardTemporaries({8192, 50257}, kCub2, a100).ok());
}

}  // namespace
}  // namespace gpusim::device_memory_sort_test
