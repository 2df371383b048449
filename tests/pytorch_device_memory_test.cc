// What the device adds to a PyTorch recording (sim/lower/eager/
// device_memory.h), through the gpusim binary: replay, compare, explain, viz
// and advise see the same trace.
#include <fstream>
#include <iterator>
#include <string>

#include "gtest/gtest.h"
#include "tests/cli_support.h"

namespace gpusim::pytorch_device_memory_test {
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
  // An elementwise op's one fact is its loop (Note [ATen elementwise loops]).
  std::string loop = kStep;
  loop.replace(loop.find("compute ln:sum kind=reduce phase=backward uses=1,2 op=sum dims=768,8192,0,1,2,1,4,4,4"), 85,
               "compute ln:add kind=elementwise phase=backward uses=1,2 op=add dims=4");
  r = Gpusim("replay " + Write("pt_bad3.gpusim", loop));
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("event 7 (compute ln:add, op=add): dims=4: an elementwise op's facts are its "
                       "TensorIterator loop, one of 0 (vectorised), 1 (unrolled with casts), 2 (legacy strided) or 3"),
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

TEST(PyTorchDeviceMemory, CudnnWorkspaceOnEveryCommandThatReplaysAStep) {
  const std::string conv = Write("pt_conv3.gpusim", kConvStep);
  const std::string w = " --device a100-sxm-80gb --cudnn-workspace winograd_nonfused";
  // run TRACE is replay's report.
  Result run = GpusimStdout("run " + conv + w + " --format json");
  ASSERT_EQ(run.code, 0) << run.out;
  EXPECT_NE(run.out.find("\"largest_bytes\": 47185920"), std::string::npos) << run.out;
  EXPECT_EQ(run.out, GpusimStdout("replay " + conv + w + " --format json").out);
  // explain lists the workspace among the blocks at the peak.
  Result ex = GpusimStdout("explain " + conv + w + " --format json");
  ASSERT_EQ(ex.code, 0) << ex.out;
  EXPECT_NE(ex.out.find("47185920"), std::string::npos) << ex.out;
  EXPECT_EQ(GpusimStdout("explain " + conv + " --device a100-sxm-80gb --format json").out.find("47185920"),
            std::string::npos);
  // viz and compare replay the trace with it: a higher peak than without.
  const std::string dir = ::testing::TempDir() + "/pt_conv_viz";
  Result viz = GpusimStdout("viz " + conv + w + " --out " + dir + " --format json");
  ASSERT_EQ(viz.code, 0) << viz.out;
  Result viz0 = GpusimStdout("viz " + conv + " --device a100-sxm-80gb --out " + dir + " --format json");
  ASSERT_EQ(viz0.code, 0) << viz0.out;
  EXPECT_NE(viz.out, viz0.out);
  Result cmp = GpusimStdout("compare " + conv + w + " --allocators pytorch_caching --format json");
  ASSERT_EQ(cmp.code, 0) << cmp.out;
  EXPECT_NE(cmp.out, GpusimStdout("compare " + conv + " --device a100-sxm-80gb --allocators pytorch_caching "
                                  "--format json").out);
  // Refused by name where it does not apply: a bad name, run configs, a
  // Kineto recording.
  Result r = Gpusim("viz " + conv + " --out " + dir + " --cudnn-workspace fft");
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("--cudnn-workspace 'fft': expected none, gemm, winograd_nonfused or bound"), std::string::npos)
      << r.out;
  ExpectRefusedOnRunConfigs("--cudnn-workspace gemm", "--cudnn-workspace gemm: applies to a step recorded from PyTorch");
  const std::string kineto =
      GPUSIM_SOURCE_DIR "/traces/recorded/tracelens_mi300x_rocm_normalization_coldstart.pt.trace.json.gz";
  for (const std::string& cmd : {"explain " + kineto, "viz " + kineto + " --out " + dir, "compare " + kineto}) {
    r = Gpusim(cmd + " --cudnn-workspace bound");
    EXPECT_EQ(r.code, 1) << cmd << ": " << r.out;
    EXPECT_NE(r.out.find("is not a step recorded from PyTorch by python/gpusim_torch"), std::string::npos)
        << cmd << ": " << r.out;
  }
  r = Gpusim("run " + conv + " --out " + dir);
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("gpusim viz TRACE --out DIR"), std::string::npos) << r.out;
}

// Rank 0 of 2 under DDP (format 1.3): a bucket all-reduced on the collective
// stream after the gradient, the copy back waiting for it; and a block that
// fits an H100's 84,508,606,464 usable bytes but not once NCCL's 384 MiB are
// off them.
constexpr char kDdpStep[] =
    "gpusim-trace 1.3\n"
    "name ddp\n"
    "meta framework pytorch\n"
    "meta torch_version 2.15.0+cu132\n"
    "meta warmup_steps 2\n"
    "meta world_size 2\n"
    "meta rank 0\n"
    "meta comm.0 0%2C1\n"
    "stream 0 compute\n"
    "stream 1 collective\n"
    "marker start_state phase=other\n"
    "alloc 0 1048576 role=gradient name=bucket phase=other\n"
    "marker step\n"
    "compute mul kind=elementwise phase=backward read=1048576 write=1048576 uses=0\n"
    "collective allreduce_ kind=all_reduce stream=1 phase=backward dtype=f32 read=1048576 write=1048576 "
    "group=2 after=3 uses=0\n"
    "compute copy_ kind=copy phase=backward read=1048576 write=1048576 after=4 uses=0\n"
    "alloc 1 BIG role=activation name=big\n"
    "free 1\n"
    "end 8\n";

std::string DdpStep(int64_t big) {
  std::string s = kDdpStep;
  s.replace(s.find("BIG"), 3, std::to_string(big));
  return s;
}

TEST(PyTorchDeviceMemory, DistributedStepCountsNcclOutsideTheAllocator) {
  const std::string fits = Write("pt_ddp.gpusim", DdpStep(int64_t{1} << 30));
  Result r = GpusimStdout("replay " + fits + " --format json");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("\"nccl\": {"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\"total_bytes\": 402653184"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("NCCL channels per communicator ASSUMED 32"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\"collective_events\": 1,"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("\"collective_s\": 0,"), std::string::npos) << r.out;
  r = Gpusim("replay " + fits);
  EXPECT_NE(r.out.find("collectives 1 on the collective stream"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("outside the allocator: NCCL buffers 402,653,184 B (0.38 GiB) (rank 0 of 2; communicator 0 "
                       "of 2 ranks: 32 channels x 12,582,912 B (0.01 GiB)"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("less NCCL buffers 402,653,184 B (0.38 GiB)"), std::string::npos) << r.out;
  // 84,508,606,464 - 300 MiB fits the device, not the device less NCCL.
  const std::string tight = Write("pt_ddp2.gpusim", DdpStep(int64_t{84508606464} - (300 << 20)));
  r = GpusimStdout("replay " + tight + " --format json");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("\"oom\": {"), std::string::npos) << r.out;
  std::string single = DdpStep(int64_t{84508606464} - (300 << 20));
  single.replace(single.find("meta comm.0 0%2C1\n"), 18, "");
  single.replace(single.find("group=2"), 7, "group=1");
  single.replace(single.find("world_size 2"), 12, "world_size 1");
  r = GpusimStdout("replay " + Write("pt_ddp3.gpusim", single) + " --format json");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("\"total_bytes\": 0"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("\"oom\": {"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace gpusim::pytorch_device_memory_test
