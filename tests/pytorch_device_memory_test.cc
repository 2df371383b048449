// What the device adds to a PyTorch recording (sim/lower/eager/
// device_memory.h), through the gpusim binary: replay, compare, explain, viz
// and advise see the same trace.
#include <fstream>
#include <iterator>
#include <string>

#include "gtest/gtest.h"
#include "tests/cli_support.h"

namespace gpusim {
namespace {

// A recorded step as python/gpusim_torch writes it (format 1.2): a matmul in
// forward and in backward (two cuBLAS handles), and the column sum of a
// (8192, 768) f32 gradient that Reduce.cuh splits across blocks.
constexpr char kStep[] =
    "gpusim-trace 1.2\n"
    "name step\n"
    "meta framework pytorch\n"
    "meta torch_version 2.15.0+cu132\n"
    "meta warmup_steps 0\n"
    "meta step_file /src/step.py\n"
    "stream 0 compute\n"
    "marker start_state phase=other\n"
    "alloc 0 4194304 role=parameter name=w phase=other\n"
    "marker step\n"
    "alloc 1 25165824 role=activation name=fc:mm\n"
    "compute fc:mm kind=matmul flops=8 uses=0,1 op=mm\n"
    "marker backward phase=backward\n"
    "alloc 2 3072 role=gradient name=ln.weight.grad phase=backward\n"
    "compute ln:sum kind=reduce phase=backward uses=1,2 op=sum dims=768,8192,0,1,2,1,4,4,4\n"
    "compute fc:mm kind=matmul phase=backward flops=8 uses=0,1 op=mm\n"
    "free 1 phase=backward\n"
    "end 10\n";

TEST(PyTorchDeviceMemory, ReplayAddsWorkspacesAndStaging) {
  const std::string path = Write("pt_step.gpusim", kStep);
  Result r = GpusimStdout("replay " + path + " --device a100-sxm-80gb --format json");
  ASSERT_EQ(r.code, 0) << r.out;
  // At the sum: parameter 4,194,304 + activation 25,165,824 + gradient 3,072
  // + the main thread's 8,519,680 B cuBLAS workspace + the 50,331,648 B
  // staging buffer and 24 B of semaphores (the autograd thread's workspace
  // comes at the backward matmul, after the staging is freed).
  EXPECT_NE(r.out.find("\"peak_live_bytes\": 88214552"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\"what\": \"cuBLAS workspace\""), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\"largest_bytes\": 50331648"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\"context_reserve_bytes\": 536870912"), std::string::npos) << r.out;
  // On an H100 (compute capability 9.0, torch >= 2.1) the workspaces are 32 MiB.
  r = GpusimStdout("replay " + path + " --device h100-sxm-80gb --format json");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("\"peak_live_bytes\": " + std::to_string(88214552 - 8519680 + 33554432)), std::string::npos)
      << r.out;
  r = Gpusim("replay " + path + " --device a100-sxm-80gb");
  EXPECT_NE(r.out.find("what the device adds (torch 2.15.0+cu132 on a100-sxm-80gb"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("cublas_workspace (main thread, stream 0)"), std::string::npos) << r.out;
}

TEST(PyTorchDeviceMemory, ExplainAndCompareSeeTheSameTrace) {
  const std::string path = Write("pt_step2.gpusim", kStep);
  Result r = Gpusim("explain " + path + " --device a100-sxm-80gb");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("ln:sum reduction staging"), std::string::npos) << r.out;
  r = GpusimStdout("compare " + path + " --allocators ideal --device a100-sxm-80gb --format json");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("88214552"), std::string::npos) << r.out;
  const std::string out = ::testing::TempDir() + "/pt_viz";
  r = Gpusim("viz " + path + " --device a100-sxm-80gb --out " + out);
  ASSERT_EQ(r.code, 0) << r.out;
  std::ifstream svg(out + "/memory_map.svg");
  const std::string text((std::istreambuf_iterator<char>(svg)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("cublas_workspace (main thread, stream 0)"), std::string::npos);
}

TEST(PyTorchDeviceMemory, BadFactsAndGridsAreRefusedByName) {
  std::string bad = kStep;
  bad.replace(bad.find("dims=768,8192,0,1,2,1,4,4,4"), 27, "dims=768,8192");
  const std::string path = Write("pt_bad.gpusim", bad);
  Result r = Gpusim("replay " + path);
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("event 7 (compute ln:sum, op=sum): dims=768,8192: expected 9 reduction facts, got 2"),
            std::string::npos)
      << r.out;
  // Index-put facts out of range are refused, never sized.
  std::string huge = kStep;
  huge.replace(huge.find("op=sum dims=768,8192,0,1,2,1,4,4,4"), 34,
               "op=_index_put_impl_ dims=8192,1,0,768,1,4611686018427387904,1,1,0,0,1,0");
  r = Gpusim("replay " + Write("pt_bad2.gpusim", huge));
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("event 7 (compute ln:sum, op=_index_put_impl_): dims=8192,1,0,768,1,4611686018427387904,"
                       "1,1,0,0,1,0: index_put facts out of range"),
            std::string::npos)
      << r.out;
  const std::string good = Write("pt_step3.gpusim", kStep);
  r = Gpusim("advise " + good + " --vary batch.per_device=1,2");
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("a recorded step has the shapes it was recorded with"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("python3 -m gpusim_torch sweep STEP.py"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("recorded from /src/step.py at its own batch"), std::string::npos) << r.out;
  r = Gpusim("compare " + good + " --vary batch.per_device=1,2");
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("compare --vary " + good + ": a recorded step"), std::string::npos) << r.out;
}

// A recorded 3x3 convolution of 256 channels at 14x14 (batch 32, float),
// forward and both backward directions: the V100 ResNet-50 trace's
// 47,185,920 B Winograd-nonfused workspace under that assumption.
constexpr char kConvStep[] =
    "gpusim-trace 1.2\n"
    "name conv\n"
    "meta framework pytorch\n"
    "meta torch_version 1.13.0a0\n"
    "meta warmup_steps 1\n"
    "meta cudnn_benchmark 1\n"
    "stream 0 compute\n"
    "marker start_state phase=other\n"
    "alloc 0 2359296 role=parameter name=w phase=other\n"
    "marker step\n"
    "alloc 1 6422528 role=activation name=x\n"
    "alloc 2 6422528 role=activation name=conv:convolution\n"
    "compute conv:convolution kind=matmul flops=8 uses=0,1,2 op=convolution "
    "dims=32,256,14,14,256,256,3,3,1,1,1,1,1,1,1,0,4\n"
    "marker backward phase=backward\n"
    "alloc 3 6422528 role=gradient name=x.grad phase=backward\n"
    "alloc 4 2359296 role=gradient name=w.grad phase=backward\n"
    "compute conv:convolution_backward kind=matmul phase=backward flops=8 uses=0,1,2,3,4 op=convolution_backward "
    "dims=32,256,14,14,256,256,3,3,1,1,1,1,1,1,1,0,4,1,1,0\n"
    "free 2 phase=backward\n"
    "end 11\n";

TEST(PyTorchDeviceMemory, CudnnWorkspaceAssumptionThroughReplay) {
  const std::string path = Write("pt_conv.gpusim", kConvStep);
  Result r = GpusimStdout("replay " + path + " --device a100-sxm-80gb --format json");
  ASSERT_EQ(r.code, 0) << r.out;
  // The default is none, and says so; the rise is the recording's own.
  EXPECT_NE(r.out.find("ASSUMED NONE (--cudnn-workspace none, the default)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\"step_rise_bytes\": " + std::to_string(6422528 * 3 + 2359296)), std::string::npos) << r.out;
  r = GpusimStdout("replay " + path + " --device a100-sxm-80gb --format json --cudnn-workspace winograd_nonfused");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("\"what\": \"cuDNN workspace (assumed winograd_nonfused)\""), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\"largest_bytes\": 47185920"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("timed in the warm-up step"), std::string::npos) << r.out;
  // At the backward: x, y, both gradients and the 47,185,920 B workspace.
  EXPECT_NE(r.out.find("\"step_rise_bytes\": " + std::to_string(6422528 * 3 + 2359296 + 47185920)),
            std::string::npos)
      << r.out;
}

TEST(PyTorchDeviceMemory, CudnnWorkspaceRefusedWhereItDoesNotApply) {
  const std::string conv = Write("pt_conv2.gpusim", kConvStep);
  Result r = Gpusim("replay " + conv + " --cudnn-workspace fft");
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("--cudnn-workspace 'fft': expected none, gemm, winograd_nonfused or bound"), std::string::npos)
      << r.out;
  r = Gpusim("replay " + Write("pt_noconv.gpusim", kStep) + " --cudnn-workspace bound");
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("--cudnn-workspace bound: the step has no convolutions"), std::string::npos) << r.out;
  std::string jax = kStep;
  jax.replace(jax.find("framework pytorch"), 17, "framework jax");
  r = Gpusim("replay " + Write("pt_jax.gpusim", jax) + " --cudnn-workspace none");
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("applies to a step recorded from PyTorch"), std::string::npos) << r.out;
  const std::string kineto =
      GPUSIM_SOURCE_DIR "/traces/recorded/tracelens_mi300x_rocm_normalization_coldstart.pt.trace.json.gz";
  r = Gpusim("replay " + kineto + " --cudnn-workspace bound");
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("is not a step recorded from PyTorch by python/gpusim_torch"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace gpusim
