// The figures behind the device files' allocator_cost estimates
// (configs/devices/h100-sxm-80gb.yaml): the 2 MiB segment hipMallocs of the
// shipped MI300X cold-start Kineto trace, read back with the importer.
#include <algorithm>
#include <filesystem>
#include <vector>

#include "gtest/gtest.h"
#include "sim/config/loader.h"
#include "sim/import/kineto.h"

namespace gpusim::allocator_cost_source_test {
namespace {

TEST(AllocatorCostSourceTest, ColdStartTraceSegmentMallocs) {
  const std::string path =
      GPUSIM_SOURCE_DIR "/traces/recorded/tracelens_mi300x_rocm_normalization_coldstart.pt.trace.json.gz";
  if (!std::filesystem::exists(path)) GTEST_SKIP() << "not shipped: " << path;
  KinetoImportOptions o;
  o.keep_runtime = true;
  o.keep_cpu_ops = false;
  o.keep_gpu_ops = false;
  absl::StatusOr<RecordedTrace> t = ImportKinetoTrace(path, o);
  ASSERT_TRUE(t.ok()) << t.status();
  std::vector<int64_t> segment_mallocs;  // ns, the 2 MiB small-pool segments
  for (const RecordedOp& op : t->ops) {
    if (op.name == "hipMalloc" && op.bytes.value() == 2 << 20) segment_mallocs.push_back(op.duration.ns());
  }
  std::sort(segment_mallocs.begin(), segment_mallocs.end());
  ASSERT_EQ(segment_mallocs, (std::vector<int64_t>{41022, 47451, 95242}));
  // The device files' estimate: about the median.
  absl::StatusOr<DeviceSpec> d = LoadDeviceSpec("h100-sxm-80gb");
  ASSERT_TRUE(d.ok());
  EXPECT_NEAR(static_cast<double>(d->malloc_cost.ns()), static_cast<double>(segment_mallocs[1]), 5000);
}

}  // namespace
}  // namespace gpusim::allocator_cost_source_test
