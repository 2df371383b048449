// The fused attention workspaces of a PyTorch recording (sim/lower/eager/
// device_memory_sdpa.h) through the gpusim binary: the report names each
// call class's backend and why, --sdpa-backend forces one on every command
// that replays a recorded step, and is refused by name elsewhere.
#include <string>

#include "gtest/gtest.h"
#include "tests/cli_support.h"

namespace gpusim::pytorch_sdpa_test {
namespace {

// One cuDNN SDPA call (B=2, H=8, S=256, D=64 bf16) forward and backward, as
// python/gpusim_torch records it for an H100: its results as allocs, the
// choices per class efficient (7.x), flash (8.0), cudnn (9.0, 10.0).
constexpr char kSdpaStep[] =
    "gpusim-trace 1.2\n"
    "name sdpa\n"
    "meta framework pytorch\n"
    "meta torch_version 2.11.0+cu130\n"
    "meta warmup_steps 1\n"
    "stream 0 compute\n"
    "marker start_state phase=other\n"
    "alloc 0 1572864 role=activation name=qkv phase=other\n"
    "marker step\n"
    "alloc 1 524288 role=activation name=attn:out\n"
    "alloc 2 16384 role=activation name=attn:lse\n"
    "compute attn:sdpa kind=attention flops=8 uses=0,1,2 op=_scaled_dot_product_cudnn_attention "
    "dims=2,8,8,256,256,64,64,2,1,0,1,0,2,1,3,3,91900\n"
    "marker backward phase=backward\n"
    "alloc 3 1572864 role=gradient name=attn:grads phase=backward\n"
    "compute attn:sdpa_backward kind=attention flops=8 phase=backward uses=0,1,2,3 "
    "op=_scaled_dot_product_cudnn_attention_backward dims=2,8,8,256,256,64,64,2,1,0,1,0,2,1,3,3,91900\n"
    "free 1 phase=backward\n"
    "free 2 phase=backward\n"
    "end 11\n";

TEST(PyTorchSdpa, ReportNamesTheBackendPerCallClass) {
  const std::string path = Write("pt_sdpa.gpusim", kSdpaStep);
  Result r = GpusimStdout("replay " + path + " --device h100-sxm-80gb");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("SDPA backend: 1 x _scaled_dot_product_cudnn_attention_backward ran cudnn: recorded choice "
                       "(sdp_utils.cpp select_sdp_backend)"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("cuDNN SDPA backward workspace"), std::string::npos) << r.out;
  r = GpusimStdout("replay " + path + " --device a100-sxm-80gb --format json");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("\"backend\": \"flash\""), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("re-targeted: recorded as cudnn for the recording's target; on a100-sxm-80gb"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("\"largest_bytes\": 1048576"), std::string::npos) << r.out;  // flash dq_accum
  // run TRACE is replay's report.
  EXPECT_EQ(GpusimStdout("run " + path + " --device a100-sxm-80gb --format json").out, r.out);
}

TEST(PyTorchSdpa, ForcedOnEveryCommandThatReplaysAStep) {
  const std::string path = Write("pt_sdpa2.gpusim", kSdpaStep);
  const std::string f = " --device h100-sxm-80gb --sdpa-backend efficient";
  Result r = GpusimStdout("replay " + path + f + " --format json");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("forced (--sdpa-backend efficient; recorded as cudnn)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\"largest_bytes\": 1049600"), std::string::npos) << r.out;
  EXPECT_EQ(GpusimStdout("run " + path + f + " --format json").out, r.out);
  Result ex = GpusimStdout("explain " + path + f + " --format json");
  ASSERT_EQ(ex.code, 0) << ex.out;
  EXPECT_NE(ex.out.find("1049600"), std::string::npos) << ex.out;
  const std::string dir = ::testing::TempDir() + "/pt_sdpa_viz";
  Result viz = GpusimStdout("viz " + path + f + " --out " + dir + " --format json");
  ASSERT_EQ(viz.code, 0) << viz.out;
  Result cmp = GpusimStdout("compare " + path + f + " --allocators pytorch_caching --format json");
  ASSERT_EQ(cmp.code, 0) << cmp.out;
  // math: no decomposition in the recording.
  r = Gpusim("replay " + path + " --sdpa-backend math");
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("record with `python3 -m gpusim_torch record STEP.py --sdpa-backend math`"),
            std::string::npos)
      << r.out;
}

TEST(PyTorchSdpa, RefusedWhereItDoesNotApply) {
  std::string plain = kSdpaStep;
  for (const char* op : {" op=_scaled_dot_product_cudnn_attention_backward", " op=_scaled_dot_product_cudnn_attention"}) {
    plain.replace(plain.find(op), std::string(op).size(), "");
  }
  Result r = Gpusim("replay " + Write("pt_nosdpa.gpusim", plain) + " --sdpa-backend flash");
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("--sdpa-backend flash: the step has no fused SDPA events"), std::string::npos) << r.out;
  ExpectRefusedOnRunConfigs("--sdpa-backend cudnn", "--sdpa-backend cudnn: applies to a step recorded from PyTorch");
  const std::string kineto =
      GPUSIM_SOURCE_DIR "/traces/recorded/tracelens_mi300x_rocm_normalization_coldstart.pt.trace.json.gz";
  r = Gpusim("replay " + kineto + " --sdpa-backend flash");
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("--sdpa-backend flash: "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("is not a step recorded from PyTorch by python/gpusim_torch"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace gpusim::pytorch_sdpa_test
