#include "sim/lower/eager/device_memory.h"

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"

#include "sim/lower/eager/test_device.h"

namespace gpusim::device_memory_test {
namespace {

TEST(EagerDeviceMemory, CublasWorkspaceByVersionDeviceAndConfig) {
  const DeviceSpec a100 = Device("a100-sxm-80gb");
  const DeviceSpec h100 = Device("h100-sxm-80gb");
  EXPECT_EQ(*CublasWorkspaceBytes("2.15.0+cu132", a100, ""), Bytes(8519680));
  EXPECT_EQ(*CublasWorkspaceBytes("2.15.0+cu132", h100, ""), Bytes(33554432));
  EXPECT_EQ(*CublasWorkspaceBytes("2.0.1", h100, ""), Bytes(8519680));  // before the Hopper rule
  EXPECT_EQ(*CublasWorkspaceBytes("1.13.0a0", h100, ""), Bytes(8519680));
  EXPECT_EQ(*CublasWorkspaceBytes("2.15.0", h100, ":4096:8"), Bytes(33554432));
  EXPECT_EQ(*CublasWorkspaceBytes("2.15.0", h100, ":16:8"), Bytes(16 * 1024 * 8));
  DeviceSpec blackwell = h100;
  blackwell.cc_major = 10;
  EXPECT_EQ(*CublasWorkspaceBytes("2.6.0", blackwell, ""), Bytes(8519680));
  EXPECT_EQ(*CublasWorkspaceBytes("2.7.0", blackwell, ""), Bytes(33554432));
  DeviceSpec unknown = h100;
  unknown.cc_major = 0;
  EXPECT_NE(CublasWorkspaceBytes("2.15.0", unknown, "").status().message().find("gives no compute_capability"),
            std::string::npos);
  EXPECT_FALSE(CublasWorkspaceBytes("two", h100, "").ok());
  EXPECT_FALSE(CublasWorkspaceBytes("2.15.0", h100, ":9223372036854775807:9223372036854775807").ok());
  EXPECT_EQ(*CublasWorkspaceBytes("2.15.0", h100, "junk"), Bytes(33554432));  // unparsable: the default
}

// The RMSNorm weight gradient of the CS336 LM: sum of a (32, 256, 768) f32
// over dims 0 and 1. On an A100 (108 SMs) the recorded snapshot holds a
// 50,331,648 B staging buffer and 24 B of semaphores for it.
TEST(EagerDeviceMemory, ReduceStagingMatchesTheRecordedSnapshot) {
  const DeviceSpec a100 = Device("a100-sxm-80gb");
  absl::StatusOr<ReduceStaging> r = ReduceConfigFor({768, 8192, 0, 1, 2, 1, 4, 4, 4}, a100);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->global);
  EXPECT_EQ(r->ctas_per_output, 128);
  EXPECT_EQ(r->buffer, Bytes(50331648));
  EXPECT_EQ(r->semaphores, Bytes(24));
  // A row reduction over the last dimension (softmax-like sums) stays in
  // one block per output: no staging.
  r = ReduceConfigFor({98304, 256, 1, 1, 2, 1, 1, 4, 4}, a100);
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->global);
  EXPECT_EQ(r->buffer, Bytes(0));
  // A full reduction of 2^24 floats: split across blocks, block_x reduced.
  r = ReduceConfigFor({1, 1 << 24, 1, 1, 1, 1, 1, 4, 4}, a100);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->global);
  EXPECT_EQ(r->semaphores, Bytes(4));
  EXPECT_EQ(r->buffer, Bytes(4 * r->ctas_per_output));
  // The SM count matters: more SMs, more blocks per output.
  const DeviceSpec h100 = Device("h100-sxm-80gb");
  absl::StatusOr<ReduceStaging> h = ReduceConfigFor({768, 8192, 0, 1, 2, 1, 4, 4, 4}, h100);
  ASSERT_TRUE(h.ok());
  EXPECT_EQ(h->ctas_per_output, 128);  // capped by values per thread / 16
  EXPECT_FALSE(ReduceConfigFor({768, 8192}, a100).ok());
  EXPECT_FALSE(ReduceConfigFor({0, 8192, 0, 1, 2, 1, 4, 4, 4}, a100).ok());
  // Hostile sizes are refused, never overflowed.
  EXPECT_FALSE(ReduceConfigFor({int64_t{1} << 62, int64_t{1} << 62, 0, 1, 2, 1, 4, 4, 4}, a100).ok());
}

TraceEvent Compute(std::string name, std::string op, Phase phase, std::vector<int64_t> dims = {}) {
  TraceEvent e;
  e.type = EventType::kCompute;
  e.name = std::move(name);
  e.op = std::move(op);
  e.phase = phase;
  e.dims = std::move(dims);
  return e;
}

TraceEvent Marker(std::string name) {
  TraceEvent e;
  e.type = EventType::kMarker;
  e.name = std::move(name);
  return e;
}

TEST(EagerDeviceMemory, InsertsWorkspacesAndStagingIntoAPyTorchRecording) {
  Trace t;
  t.meta = {{"framework", "pytorch"}, {"torch_version", "2.15.0"}, {"warmup_steps", "0"}};
  TraceEvent a;
  a.type = EventType::kAlloc;
  a.buffer = 4;
  a.size = Bytes(3072);
  t.events = {Marker("start_state"), Marker("step"), Compute("fc:mm", "mm", Phase::kForward),
              Compute("fc:mm", "mm", Phase::kForward), a,
              Compute("ln:sum", "sum", Phase::kBackward, {768, 8192, 0, 1, 2, 1, 4, 4, 4}),
              Compute("fc:mm", "mm", Phase::kBackward), Compute("conv", "convolution", Phase::kForward)};
  EagerDeviceMemory report;
  absl::StatusOr<Trace> out = AddEagerDeviceMemory(t, Device("a100-sxm-80gb"), &report);
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_TRUE(report.applied);
  std::vector<std::string> seen;
  for (const TraceEvent& e : out->events) {
    if (e.type == EventType::kAlloc) seen.push_back(absl::StrCat("alloc ", e.buffer, " ", e.size.value(), " ", e.name));
    if (e.type == EventType::kFree) seen.push_back(absl::StrCat("free ", e.buffer));
    if (e.type == EventType::kCompute) seen.push_back(e.name);
  }
  EXPECT_EQ(seen, (std::vector<std::string>{
                      "alloc 5 8519680 cublas_workspace (main thread, stream 0)", "fc:mm", "fc:mm",
                      "alloc 4 3072 ", "alloc 6 50331648 ln:sum reduction staging",
                      "alloc 7 24 ln:sum reduction semaphores", "ln:sum", "free 7", "free 6",
                      "alloc 8 8519680 cublas_workspace (autograd thread, stream 0)", "fc:mm", "conv"}));
  for (const TraceEvent& e : out->events) {
    if (e.type == EventType::kAlloc && e.buffer != 4) {
      EXPECT_EQ(e.role, Role::kWorkspace);
    }
  }
  ASSERT_EQ(report.added.size(), 3u);
  EXPECT_EQ(report.added[0].what, "cuBLAS workspace");
  EXPECT_EQ(report.added[0].count, 2);
  EXPECT_TRUE(report.added[0].kept);
  EXPECT_TRUE(report.not_modelled.empty());
  ASSERT_EQ(report.assumptions.size(), 1u);
  EXPECT_NE(report.assumptions[0].find("cuDNN convolution workspaces (1 convolution ops): ASSUMED NONE"),
            std::string::npos);

  // After a warm-up step both workspaces are in the start state.
  t.meta[2].second = "2";
  out = AddEagerDeviceMemory(t, Device("h100-sxm-80gb"), &report);
  ASSERT_TRUE(out.ok());
  ASSERT_GE(out->events.size(), 4u);
  EXPECT_EQ(out->events[1].type, EventType::kAlloc);
  EXPECT_EQ(out->events[1].size, Bytes(33554432));
  EXPECT_EQ(out->events[1].phase, Phase::kOther);
  EXPECT_EQ(out->events[2].name, "cublas_workspace (autograd thread, stream 0)");
  EXPECT_EQ(out->events[3].name, "step");
}

std::vector<std::string> Seen(const Trace& t) {
  std::vector<std::string> seen;
  for (const TraceEvent& e : t.events) {
    if (e.type == EventType::kAlloc) seen.push_back(absl::StrCat("alloc ", e.buffer, " ", e.size.value(), " ", e.name));
    if (e.type == EventType::kFree) seen.push_back(absl::StrCat("free ", e.buffer));
    if (e.type == EventType::kCompute) seen.push_back(e.name);
  }
  return seen;
}

// Note [cuBLASLt workspace]: per call up to torch 2.6, one kept block per
// (thread, stream) from 2.7 unless TORCH_CUBLASLT_UNIFIED_WORKSPACE is on.
TEST(EagerDeviceMemory, CublasLtWorkspacePerCallByVersion) {
  Trace t;
  t.meta = {{"framework", "pytorch"}, {"torch_version", "2.2.0"}, {"torch_cuda", "12.1"}};
  t.events = {Compute("fc:addmm", "addmm", Phase::kForward, {1, 1}), Compute("fc:addmm", "addmm", Phase::kForward, {0, 0})};
  EagerDeviceMemory report;
  absl::StatusOr<Trace> out = AddEagerDeviceMemory(t, Device("a100-sxm-80gb"), &report);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(Seen(*out), (std::vector<std::string>{"alloc 0 8519680 cublas_workspace (main thread, stream 0)",
                                                  "alloc 1 1048576 fc:addmm cublasLt workspace", "fc:addmm",
                                                  "free 1", "fc:addmm"}));
  t.meta.emplace_back("CUBLASLT_WORKSPACE_SIZE", "4096");
  out = AddEagerDeviceMemory(t, Device("a100-sxm-80gb"), &report);
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(out->events[1].size, Bytes(4 << 20));
  // CUDA 11.4-12.0 has the stricter rule (the second fact).
  t.meta = {{"framework", "pytorch"}, {"torch_version", "1.13.1"}, {"torch_cuda", "11.7"}};
  t.events = {Compute("fc:addmm", "addmm", Phase::kForward, {1, 0})};
  out = AddEagerDeviceMemory(t, Device("a100-sxm-80gb"), &report);
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(out->events.size(), 2u);  // the cuBLAS workspace and the addmm only
  // From 2.7: one kept block per (thread, stream), as measured on torch 2.11.
  t.meta[1].second = "2.7.0";
  t.meta[2].second = "12.6";
  t.events.push_back(t.events[0]);
  out = AddEagerDeviceMemory(t, Device("a100-sxm-80gb"), &report);
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(Seen(*out), (std::vector<std::string>{"alloc 0 8519680 cublas_workspace (main thread, stream 0)",
                                                  "alloc 1 1048576 cublaslt_workspace (main thread, stream 0)",
                                                  "fc:addmm", "fc:addmm"}));
  EXPECT_TRUE(report.added[1].kept);
  // TORCH_CUBLASLT_UNIFIED_WORKSPACE=1: the cuBLAS workspace serves cublasLt.
  t.meta.emplace_back("TORCH_CUBLASLT_UNIFIED_WORKSPACE", "1");
  out = AddEagerDeviceMemory(t, Device("a100-sxm-80gb"), &report);
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(out->events.size(), 3u);
}

// The CS336 embedding backward: Indexing.cu's temporaries around the op.
TEST(EagerDeviceMemory, InsertsIndexPutSortTemporaries) {
  Trace t;
  t.meta = {{"framework", "pytorch"}, {"torch_version", "2.15.0+cu132"}, {"torch_cuda", "13.2"}};
  TraceEvent c = Compute("embed:index_put", "_index_put_impl_", Phase::kBackward,
                         {8192, 1, 0, 768, 1, 9999, 1, 1, 0, 0, 1, 0});
  c.uses = {7};
  TraceEvent grad;
  grad.type = EventType::kAlloc;
  grad.buffer = 7;
  grad.size = Bytes(25165824);
  t.events = {grad, c};
  EagerDeviceMemory report;
  absl::StatusOr<Trace> out = AddEagerDeviceMemory(t, Device("a100-sxm-80gb"), &report);
  ASSERT_TRUE(out.ok()) << out.status();
  const std::string n = "embed:index_put ";
  EXPECT_EQ(Seen(*out), (std::vector<std::string>{
                            "alloc 7 25165824 ", "alloc 8 65536 " + n + "index remainder",
                            "alloc 9 65536 " + n + "linear index", "free 8", "alloc 10 65536 " + n + "sorted_indices",
                            "alloc 11 65536 " + n + "orig_indices", "alloc 12 65536 " + n + "range",
                            "alloc 13 138751 " + n + "CUB radix sort storage", "free 13", "embed:index_put", "free 12",
                            "free 11", "free 10", "free 9"}));
  EXPECT_EQ(out->events[9].uses, (std::vector<BufferId>{7, 9, 10, 11, 12}));
  ASSERT_EQ(report.added.size(), 2u);
  EXPECT_EQ(report.added[0].what, "CUB radix-sort storage");
  EXPECT_EQ(report.added[1].what, "index_put index buffers");
  EXPECT_EQ(report.added[1].count, 5);
  EXPECT_TRUE(report.not_modelled.empty());
  // Facts from an older collector are named, not sized.
  t.events[1].dims = {8192, 1};
  out = AddEagerDeviceMemory(t, Device("a100-sxm-80gb"), &report);
  ASSERT_TRUE(out.ok());
  ASSERT_EQ(report.not_modelled.size(), 1u);
  EXPECT_NE(report.not_modelled[0].find("re-record"), std::string::npos);
  t.events[1].dims = {8192, 1, 0};
  EXPECT_FALSE(AddEagerDeviceMemory(t, Device("a100-sxm-80gb"), &report).ok());
}

TEST(EagerDeviceMemory, LeavesOtherTracesAloneAndNamesBadFacts) {
  Trace t;
  t.events = {Compute("x:sum", "sum", Phase::kForward, {1})};
  EagerDeviceMemory report;
  absl::StatusOr<Trace> out = AddEagerDeviceMemory(t, Device("h100-sxm-80gb"), &report);
  ASSERT_TRUE(out.ok());
  EXPECT_FALSE(report.applied);
  EXPECT_EQ(out->events.size(), 1u);
  t.meta = {{"framework", "pytorch"}, {"torch_version", "2.15.0"}};
  out = AddEagerDeviceMemory(t, Device("h100-sxm-80gb"), &report);
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().message(), "event 0 (compute x:sum, op=sum): dims=1: expected 9 reduction facts, got 1");
  t.meta = {{"framework", "pytorch"}};
  EXPECT_FALSE(AddEagerDeviceMemory(t, Device("h100-sxm-80gb"), &report).ok());
}

WarmupOp HistoryOp(WarmupOp::Kind kind, BufferId id, int64_t size = 0) {
  WarmupOp w;
  w.kind = kind;
  w.buffer = id;
  w.size = Bytes(size);
  return w;
}

WarmupOp HistoryCompute(std::string op, Phase phase, std::vector<int64_t> dims) {
  WarmupOp w;
  w.kind = WarmupOp::Kind::kCompute;
  w.op = std::move(op);
  w.phase = phase;
  w.dims = std::move(dims);
  return w;
}

std::vector<std::string> SeenHistory(const Trace& t) {
  std::vector<std::string> seen;
  for (const WarmupOp& w : t.warmup) {
    if (w.kind == WarmupOp::Kind::kAlloc) seen.push_back(absl::StrCat("alloc ", w.buffer, " ", w.size.value()));
    if (w.kind == WarmupOp::Kind::kFree) seen.push_back(absl::StrCat("free ", w.buffer));
    if (w.kind == WarmupOp::Kind::kCompute) seen.push_back(w.op);
  }
  return seen;
}

// Note [Transient workspaces in the warm-up history]: a history op with
// device facts gets the transients its window twin gets, in the history;
// the report counts the window's only.
TEST(EagerDeviceMemory, TransientWorkspacesOfTheWarmupHistory) {
  const std::vector<int64_t> sum = {768, 8192, 0, 1, 2, 1, 4, 4, 4};
  Trace t;
  t.meta = {{"framework", "pytorch"}, {"torch_version", "2.15.0"}, {"warmup_steps", "1"}};
  t.warmup = {HistoryOp(WarmupOp::Kind::kAlloc, 1, 4096), HistoryCompute("sum", Phase::kBackward, sum),
              HistoryOp(WarmupOp::Kind::kFree, 1), HistoryCompute("relu", Phase::kForward, {})};
  t.events = {Marker("start_state"), Marker("step"), Compute("ln:sum", "sum", Phase::kBackward, sum)};
  EagerDeviceMemory report;
  absl::StatusOr<Trace> out = AddEagerDeviceMemory(t, Device("a100-sxm-80gb"), &report);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(SeenHistory(*out), (std::vector<std::string>{"alloc 1 4096", "sum", "alloc 2 50331648", "alloc 3 24",
                                                         "free 3", "free 2", "free 1", "relu"}));
  EXPECT_EQ(Seen(*out), (std::vector<std::string>{"alloc 4 50331648 ln:sum reduction staging",
                                                  "alloc 5 24 ln:sum reduction semaphores", "ln:sum", "free 5",
                                                  "free 4"}));
  ASSERT_EQ(report.added.size(), 2u);
  EXPECT_EQ(report.added[0].what, "reduction semaphores");
  EXPECT_EQ(report.added[0].count, 1);
  EXPECT_EQ(report.added[1].count, 1);

  // Malformed facts in the history are refused, saying where.
  t.warmup[1].dims = {768};
  out = AddEagerDeviceMemory(t, Device("a100-sxm-80gb"), &report);
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("warm-up history, event 1 (compute warm-up history, op=sum): dims=768"),
            std::string::npos)
      << out.status();

  // A cold recording (no warm-up step) has no history to lower.
  t.warmup[1].dims = sum;
  t.meta[2].second = "0";
  out = AddEagerDeviceMemory(t, Device("a100-sxm-80gb"), &report);
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(out->warmup.size(), 4u);
}

}  // namespace
}  // namespace gpusim::device_memory_test
