#include "sim/lower/eager/device_memory_conv.h"

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "sim/config/loader.h"
#include "sim/lower/eager/device_memory.h"

namespace gpusim::device_memory_conv_test {
namespace {

// [N, C, H, W, K, C/g, R, S, stride, stride, pad, pad, dil, dil, groups,
// transposed, element size] of a 3x3 float convolution, padding 1.
std::vector<int64_t> Conv3x3(int64_t n, int64_t c, int64_t hw, int64_t k, int64_t stride) {
  return {n, c, hw, hw, k, c, 3, 3, stride, stride, 1, 1, 1, 1, 1, 0, 4};
}

ConvGeometry Geometry(std::vector<int64_t> dims, bool backward = false) {
  absl::StatusOr<ConvGeometry> g = ParseConvFacts(dims, backward);
  EXPECT_TRUE(g.ok()) << g.status();
  return *g;
}

// The V100 ResNet-50 Kineto trace's workspaces (allocated and freed inside
// aten::cudnn_convolution*, batch 32, cudnn.benchmark=True) where the
// algorithm it timed fastest is one gpusim sizes.
TEST(CudnnWorkspace, SizesMatchTheV100ResNet50Trace) {
  EXPECT_EQ(WinogradNonfusedBytes(Geometry(Conv3x3(32, 64, 56, 64, 1))), 116195328);  // backward filter
  EXPECT_EQ(WinogradNonfusedBytes(Geometry(Conv3x3(32, 256, 14, 256, 1))), 47185920);  // all three directions
  EXPECT_EQ(WinogradNonfusedBytes(Geometry(Conv3x3(32, 512, 7, 512, 1))), 56623104);   // all three directions
  // The trace's one explicit GEMM (im2col4d_kernel, explicit_convolve_sgemm):
  // the stride-2 3x3 conv of 512 channels at 14x14 (output 7x7).
  const ConvGeometry s2 = Geometry(Conv3x3(32, 512, 14, 512, 2));
  EXPECT_EQ(s2.p, 7);
  EXPECT_EQ(GemmForwardBytes(s2), 28901376);
  EXPECT_EQ(WinogradNonfusedBytes(s2), -1);  // stride 2: not Winograd's
  // 1x1, grouped, transposed and half convolutions are not Winograd-nonfused's.
  EXPECT_EQ(WinogradNonfusedBytes(Geometry({32, 64, 56, 56, 256, 64, 1, 1, 1, 1, 0, 0, 1, 1, 1, 0, 4})), -1);
  EXPECT_EQ(WinogradNonfusedBytes(Geometry({32, 64, 56, 56, 64, 32, 3, 3, 1, 1, 1, 1, 1, 1, 2, 0, 4})), -1);
  EXPECT_EQ(WinogradNonfusedBytes(Geometry({32, 64, 56, 56, 64, 64, 3, 3, 1, 1, 1, 1, 1, 1, 1, 0, 2})), -1);
  EXPECT_EQ(GemmForwardBytes(Geometry({32, 64, 56, 56, 64, 64, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 4})), -1);
  // bound: per direction the larger of the two.
  const ConvGeometry g = Geometry(Conv3x3(32, 256, 14, 256, 1));
  EXPECT_EQ(AssumedWorkspace(CudnnAssumption::kBound, ConvDirection::kForward, g).bytes,
            std::max<int64_t>(GemmForwardBytes(g), 47185920));
  EXPECT_EQ(AssumedWorkspace(CudnnAssumption::kBound, ConvDirection::kBackwardData, g).bytes, 47185920);
  const ConvWorkspace none = AssumedWorkspace(CudnnAssumption::kGemm, ConvDirection::kBackwardData, g);
  EXPECT_FALSE(none.sized);  // GEMM is a forward algorithm
  EXPECT_EQ(none.bytes, 0);
}

TEST(CudnnWorkspace, MalformedFactsAndNamesAreRefused) {
  EXPECT_FALSE(ParseConvFacts({32, 64}, false).ok());
  EXPECT_FALSE(ParseConvFacts(Conv3x3(32, 64, 56, 64, 1), true).ok());  // backward needs the mask
  EXPECT_FALSE(ParseConvFacts(Conv3x3(32, 64, 56, 64, 0), false).ok());  // stride 0
  EXPECT_FALSE(ParseConvFacts({1, 1, 1, 1, 1, 1, 5, 5, 1, 1, 0, 0, 1, 1, 1, 0, 4}, false).ok());  // empty output
  EXPECT_FALSE(ParseConvFacts(Conv3x3(int64_t{1} << 40, 64, 56, 64, 1), false).ok());
  // Each fact in range, their products past any device: refused, never overflowed.
  const int64_t big = int64_t{1} << 24;
  absl::StatusOr<ConvGeometry> huge =
      ParseConvFacts({big, big, big, big, big, big, 3, 3, 1, 1, 1, 1, 1, 1, 1, 0, 4}, false);
  ASSERT_FALSE(huge.ok());
  EXPECT_NE(huge.status().message().find("above 2^50 bytes"), std::string::npos);
  absl::StatusOr<CudnnAssumption> bad = ParseCudnnAssumption("fft");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("none, gemm, winograd_nonfused or bound"), std::string::npos);
}

TraceEvent Event(EventType type, std::string name, std::string op = "", std::vector<int64_t> dims = {}) {
  TraceEvent e;
  e.type = type;
  e.name = std::move(name);
  e.op = std::move(op);
  e.dims = std::move(dims);
  e.phase = op == "convolution_backward" ? Phase::kBackward : Phase::kForward;
  return e;
}

Trace ConvStep(const std::string& benchmark, const std::string& warmup) {
  Trace t;
  t.meta = {{"framework", "pytorch"}, {"torch_version", "1.13.0"}, {"warmup_steps", warmup},
            {"cudnn_benchmark", benchmark}, {"cudnn_deterministic", "0"}};
  std::vector<int64_t> back = Conv3x3(32, 256, 14, 256, 1);
  back.insert(back.end(), {1, 1, 0});
  t.events = {Event(EventType::kMarker, "start_state"), Event(EventType::kMarker, "step"),
              Event(EventType::kCompute, "a:convolution", "convolution", Conv3x3(32, 256, 14, 256, 1)),
              Event(EventType::kCompute, "b:convolution", "convolution", Conv3x3(32, 256, 14, 256, 1)),
              Event(EventType::kCompute, "a:convolution_backward", "convolution_backward", back)};
  return t;
}

std::vector<std::string> Seen(const Trace& t) {
  std::vector<std::string> seen;
  for (const TraceEvent& e : t.events) {
    if (e.type == EventType::kAlloc) seen.push_back(absl::StrCat("alloc ", e.size.value(), " ", e.name));
    if (e.type == EventType::kFree) seen.push_back("free");
    if (e.type == EventType::kCompute) seen.push_back(e.name);
  }
  return seen;
}

TEST(CudnnWorkspace, InsertedUnderTheNamedAssumption) {
  absl::StatusOr<DeviceSpec> a100 = LoadDeviceSpec("a100-sxm-80gb", "");
  ASSERT_TRUE(a100.ok());
  EagerDeviceMemory report;
  // The default: none, said to be an assumption.
  absl::StatusOr<Trace> out = AddEagerDeviceMemory(ConvStep("0", "1"), *a100, &report);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(Seen(*out), (std::vector<std::string>{"a:convolution", "b:convolution", "a:convolution_backward"}));
  EXPECT_TRUE(report.not_modelled.empty());
  // ... and the memory format these 17-fact (pre-1.7) convolutions lack.
  ASSERT_EQ(report.assumptions.size(), 2u);
  EXPECT_NE(report.assumptions[0].find("ASSUMED NONE (--cudnn-workspace none, the default)"), std::string::npos);
  EXPECT_NE(report.assumptions[1].find("3 of 3 convolution ops recorded without it"), std::string::npos)
      << report.assumptions[1];

  out = AddEagerDeviceMemory(ConvStep("0", "1"), *a100, &report, {"winograd_nonfused"});
  ASSERT_TRUE(out.ok()) << out.status();
  const std::string w = "alloc 47185920 ";
  EXPECT_EQ(Seen(*out), (std::vector<std::string>{
                            w + "a:convolution cuDNN forward workspace (winograd_nonfused)", "a:convolution", "free",
                            w + "b:convolution cuDNN forward workspace (winograd_nonfused)", "b:convolution", "free",
                            w + "a:convolution_backward cuDNN backward data workspace (winograd_nonfused)",
                            "a:convolution_backward", "free",
                            w + "a:convolution_backward cuDNN backward filter workspace (winograd_nonfused)",
                            "free"}));
  ASSERT_EQ(report.added.size(), 1u);
  EXPECT_EQ(report.added[0].what, "cuDNN workspace (assumed winograd_nonfused)");
  EXPECT_EQ(report.added[0].count, 4);
  EXPECT_NE(report.assumptions[0].find("4 of 4 convolution directions sized"), std::string::npos);
  // The step's rise is the largest workspace (no other allocation here).
  ASSERT_TRUE(report.has_step);
  EXPECT_EQ(report.step_start_live, Bytes(0));
  EXPECT_EQ(report.step_peak_live, Bytes(47185920));

  // gemm sizes only the forward.
  out = AddEagerDeviceMemory(ConvStep("0", "1"), *a100, &report, {"gemm"});
  ASSERT_TRUE(out.ok());
  EXPECT_NE(report.assumptions[0].find("2 of 4 convolution directions sized"), std::string::npos);

  // A convolution recorded without facts (not 2-D) is counted, not sized.
  Trace conv1d = ConvStep("0", "1");
  conv1d.events.push_back(Event(EventType::kCompute, "c:convolution", "convolution"));
  out = AddEagerDeviceMemory(conv1d, *a100, &report, {"winograd_nonfused"});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_NE(report.assumptions[0].find("4 of 5 convolution directions sized"), std::string::npos)
      << report.assumptions[0];
  EXPECT_EQ(out->events.back().name, "c:convolution");

  // cudnn.benchmark without a warm-up step: the first call of each parameter
  // set and direction times in a scratch workspace first (two forward convs
  // of one shape: one search).
  out = AddEagerDeviceMemory(ConvStep("1", "0"), *a100, &report, {"winograd_nonfused"});
  ASSERT_TRUE(out.ok());
  int finds = 0;
  for (const TraceEvent& e : out->events) {
    finds += e.type == EventType::kAlloc && e.name.ends_with("benchmark workspace") ? 1 : 0;
  }
  EXPECT_EQ(finds, 3);
  // After a warm-up step the searches are behind it (cache hits).
  out = AddEagerDeviceMemory(ConvStep("1", "1"), *a100, &report, {"bound"});
  ASSERT_TRUE(out.ok());
  for (const TraceEvent& e : out->events) EXPECT_FALSE(e.name.ends_with("benchmark workspace")) << e.name;
  EXPECT_NE(report.assumptions[0].find("timed in the warm-up step"), std::string::npos);
}

TEST(CudnnWorkspace, AnOptionThatDoesNotApplyIsRefusedByName) {
  absl::StatusOr<DeviceSpec> a100 = LoadDeviceSpec("a100-sxm-80gb", "");
  ASSERT_TRUE(a100.ok());
  EagerDeviceMemory report;
  Trace no_conv = ConvStep("0", "1");
  no_conv.events.resize(2);
  absl::StatusOr<Trace> out = AddEagerDeviceMemory(no_conv, *a100, &report, {"bound"});
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("--cudnn-workspace bound: the step has no convolutions"), std::string::npos);
  Trace other = ConvStep("0", "1");
  other.meta[0].second = "jax";
  out = AddEagerDeviceMemory(other, *a100, &report, {"none"});
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("not one"), std::string::npos);
  out = AddEagerDeviceMemory(ConvStep("0", "1"), *a100, &report, {"fft"});
  EXPECT_FALSE(out.ok());
  // cudnn.deterministic without benchmark runs only the default algorithms.
  Trace det = ConvStep("0", "1");
  det.meta[4].second = "1";
  out = AddEagerDeviceMemory(det, *a100, &report, {"winograd_nonfused"});
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("onlyDefaultAlgorithm"), std::string::npos);
  // Malformed facts name the event.
  Trace bad = ConvStep("0", "1");
  bad.events[2].dims.resize(5);
  out = AddEagerDeviceMemory(bad, *a100, &report, {"bound"});
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("event 2 (compute a:convolution"), std::string::npos);
}

}  // namespace
}  // namespace gpusim::device_memory_conv_test
