// Kernel classification, op sizing from recorded shapes, and the grouping of
// kernels into per-op measurements (kernel_measurements.h).
#include "sim/calibrate/kernel_measurements.h"

#include "gtest/gtest.h"

namespace gpusim::kernel_measurements_test {
namespace {

TEST(ClassifyKernelTest, RealKernelNames) {
  // Names from the H100 Kineto traces in traces/recorded/ and NCCL.
  EXPECT_EQ(ClassifyKernel("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_"
                           "execute_segment_k_off_kernel__5x_cublas"),
            KernelClass::kGemm);
  EXPECT_EQ(ClassifyKernel("void cutlass::Kernel2<cutlass_80_wmma_tensorop_bf16_s161616gemm_bf16_32x32_128x2_tn_"
                           "align8>(cutlass_80_wmma_tensorop_bf16_s161616gemm_bf16_32x32_128x2_tn_align8::Params)"),
            KernelClass::kGemm);
  EXPECT_EQ(ClassifyKernel("void pytorch_flash::flash_fwd_kernel<pytorch_flash::Flash_fwd_kernel_traits<64, 128>>"),
            KernelClass::kAttention);
  EXPECT_EQ(ClassifyKernel("fmha_cutlassF_bf16_aligned_64x64_rf_sm80"), KernelClass::kAttention);
  EXPECT_EQ(ClassifyKernel("ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)"),
            KernelClass::kCollective);
  EXPECT_EQ(ClassifyKernel("ncclKernel_AllReduce_RING_LL_Sum_bfloat16(ncclWorkElem)"), KernelClass::kCollective);
  EXPECT_EQ(ClassifyKernel("void at::native::vectorized_elementwise_kernel<4, at::native::GeluCUDAKernelImpl>"),
            KernelClass::kMemory);
  EXPECT_EQ(ClassifyKernel("void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<c10::BFloat16>"),
            KernelClass::kMemory);
  EXPECT_EQ(ClassifyKernel("void at::native::(anonymous namespace)::cunn_SoftMaxForward<8, c10::BFloat16>"),
            KernelClass::kMemory);
  EXPECT_EQ(ClassifyKernel("triton_poi_fused_add_mul_0"), KernelClass::kMemory);
  EXPECT_EQ(ClassifyKernel("void cudnn::cnn::conv2d_grouped_direct_kernel<false>"), KernelClass::kOther);
  EXPECT_EQ(ClassifyKernel("void at::native::(anonymous namespace)::distribution_elementwise_grid_stride_kernel"),
            KernelClass::kMemory);
}

RecordedOp CpuOp(std::string name, std::vector<std::vector<int64_t>> dims, std::vector<std::string> types,
                 std::vector<std::string> concrete = {}) {
  RecordedOp op;
  op.kind = RecordedOpKind::kCpuOp;
  op.name = std::move(name);
  op.has_shapes = true;
  op.input_dims = std::move(dims);
  op.input_types = std::move(types);
  op.concrete_inputs = std::move(concrete);
  return op;
}

const std::string kBf16 = "c10::BFloat16";

TEST(SizeAtenOpTest, MatmulFlopsAndShapes) {
  SizedOp mm = SizeAtenOp(CpuOp("aten::mm", {{128, 256}, {256, 512}}, {kBf16, kBf16}));
  ASSERT_TRUE(mm.event.has_value()) << mm.skip_reason;
  EXPECT_EQ(mm.event->kind, OpKind::kMatmul);
  EXPECT_DOUBLE_EQ(mm.event->flops, 2.0 * 128 * 256 * 512);
  EXPECT_EQ(mm.event->m, 128);
  EXPECT_EQ(mm.event->k, 256);
  EXPECT_EQ(mm.event->n, 512);
  EXPECT_EQ(mm.event->batch, 1);
  EXPECT_EQ(mm.event->dtype, DType::kBF16);
  EXPECT_EQ(mm.event->bytes_read.value(), 2 * (128 * 256 + 256 * 512));
  EXPECT_EQ(mm.event->bytes_written.value(), 2 * 128 * 512);

  // addmm(bias[n], A[m,k], B[k,n], beta, alpha), as in the bert-small trace.
  SizedOp addmm = SizeAtenOp(
      CpuOp("aten::addmm", {{512}, {141, 512}, {512, 2048}, {}, {}}, {kBf16, kBf16, kBf16, "Scalar", "Scalar"}));
  ASSERT_TRUE(addmm.event.has_value()) << addmm.skip_reason;
  EXPECT_DOUBLE_EQ(addmm.event->flops, 2.0 * 141 * 512 * 2048);
  EXPECT_EQ(addmm.event->m, 141);
  EXPECT_EQ(addmm.event->n, 2048);
  EXPECT_EQ(addmm.event->bytes_read.value(), 2 * (512 + 141 * 512 + 512 * 2048));

  SizedOp bmm = SizeAtenOp(CpuOp("aten::bmm", {{16, 5185, 64}, {16, 64, 5185}}, {kBf16, kBf16}));
  ASSERT_TRUE(bmm.event.has_value()) << bmm.skip_reason;
  EXPECT_DOUBLE_EQ(bmm.event->flops, 2.0 * 16 * 5185 * 64 * 5185);
  EXPECT_EQ(bmm.event->batch, 16);
  EXPECT_EQ(bmm.event->k, 64);
  EXPECT_EQ(bmm.event->bytes_written.value(), int64_t{2} * 16 * 5185 * 5185);

  // linear(X[2, 10, 64], W[32, 64], b[32]): m = 20.
  SizedOp linear = SizeAtenOp(CpuOp("aten::linear", {{2, 10, 64}, {32, 64}, {32}}, {"float", "float", "float"}));
  ASSERT_TRUE(linear.event.has_value()) << linear.skip_reason;
  EXPECT_DOUBLE_EQ(linear.event->flops, 2.0 * 20 * 64 * 32);
  EXPECT_EQ(linear.event->m, 20);
  EXPECT_EQ(linear.event->n, 32);
  EXPECT_EQ(linear.event->dtype, DType::kF32);
  EXPECT_EQ(linear.event->bytes_read.value(), 4 * (20 * 64 + 32 * 64 + 32));

  // Mismatched inner dimensions are refused, not guessed.
  SizedOp bad = SizeAtenOp(CpuOp("aten::mm", {{128, 256}, {255, 512}}, {kBf16, kBf16}));
  EXPECT_FALSE(bad.event.has_value());
  EXPECT_EQ(bad.skip_reason, "unexpected shapes: aten::mm");
}

TEST(SizeAtenOpTest, AttentionFlopsNeedCausality) {
  // _flash_attention_forward(q, k, v [b, s, h, d], ..., is_causal at 8).
  std::vector<std::string> concrete(15, "");
  concrete[8] = "False";
  SizedOp full = SizeAtenOp(CpuOp("aten::_flash_attention_forward", {{1, 141, 8, 64}, {1, 141, 8, 64},
                                                                      {1, 141, 8, 64}},
                                  {kBf16, kBf16, kBf16}, concrete));
  ASSERT_TRUE(full.event.has_value()) << full.skip_reason;
  EXPECT_EQ(full.event->kind, OpKind::kAttention);
  EXPECT_DOUBLE_EQ(full.event->flops, 4.0 * 1 * 8 * 141 * 141 * 64);
  concrete[8] = "True";
  SizedOp causal = SizeAtenOp(CpuOp("aten::_flash_attention_forward", {{1, 141, 8, 64}, {1, 141, 8, 64},
                                                                        {1, 141, 8, 64}},
                                    {kBf16, kBf16, kBf16}, concrete));
  ASSERT_TRUE(causal.event.has_value());
  EXPECT_DOUBLE_EQ(causal.event->flops, full.event->flops / 2);
  SizedOp unknown = SizeAtenOp(CpuOp("aten::_flash_attention_forward", {{1, 141, 8, 64}, {1, 141, 8, 64},
                                                                         {1, 141, 8, 64}},
                                     {kBf16, kBf16, kBf16}));
  EXPECT_FALSE(unknown.event.has_value());
  EXPECT_EQ(unknown.skip_reason, "causality not recorded: aten::_flash_attention_forward");
}

TEST(SizeAtenOpTest, MemoryOpsBytes) {
  // Broadcast add: reads both, writes the larger shape.
  SizedOp add = SizeAtenOp(CpuOp("aten::add", {{4, 1024}, {1024}, {}}, {kBf16, kBf16, "Scalar"}));
  ASSERT_TRUE(add.event.has_value());
  EXPECT_EQ(add.event->kind, OpKind::kElementwise);
  EXPECT_EQ(add.event->flops, 0);
  EXPECT_EQ(add.event->bytes_read.value(), 2 * (4096 + 1024));
  EXPECT_EQ(add.event->bytes_written.value(), 2 * 4096);
  // A 0-d tensor operand ("double", dims []) is one element.
  SizedOp mul = SizeAtenOp(CpuOp("aten::mul", {{1, 5185, 4096}, {}}, {kBf16, "float"}));
  ASSERT_TRUE(mul.event.has_value());
  EXPECT_EQ(mul.event->bytes_read.value(), 2 * 5185 * 4096 + 4);
  SizedOp copy = SizeAtenOp(CpuOp("aten::copy_", {{8, 8}, {8, 8}, {}}, {"float", kBf16, "Scalar"}));
  ASSERT_TRUE(copy.event.has_value());
  EXPECT_EQ(copy.event->bytes_read.value(), 2 * 64);
  EXPECT_EQ(copy.event->bytes_written.value(), 4 * 64);
  SizedOp softmax = SizeAtenOp(CpuOp("aten::_softmax", {{16, 100, 100}, {}, {}}, {kBf16, "Scalar", "Scalar"}));
  ASSERT_TRUE(softmax.event.has_value());
  EXPECT_EQ(softmax.event->kind, OpKind::kReduce);
  EXPECT_EQ(softmax.event->bytes_read.value(), 2 * 160000);
  EXPECT_EQ(softmax.event->bytes_written.value(), 2 * 160000);
  SizedOp norm = SizeAtenOp(CpuOp("aten::native_layer_norm", {{1, 5185, 1024}, {}, {1024}, {1024}, {}},
                                  {kBf16, "ScalarList", kBf16, kBf16, "Scalar"}));
  ASSERT_TRUE(norm.event.has_value());
  EXPECT_EQ(norm.event->kind, OpKind::kReduce);  // as the recorder writes it
  EXPECT_EQ(norm.event->bytes_read.value(), 2 * 5185 * 1024);

  EXPECT_EQ(SizeAtenOp(CpuOp("aten::index_select", {{10, 4}, {}, {3}}, {kBf16, "Scalar", "long int"})).skip_reason,
            "op not sized: aten::index_select");
  RecordedOp no_shapes;
  no_shapes.name = "aten::mm";
  EXPECT_EQ(SizeAtenOp(no_shapes).skip_reason, "no recorded shapes (record_shapes off)");
}

// Note [ATen softmax passes]: the kernel SoftMax.cu host_softmax picks.
TEST(SizeAtenOpTest, SoftmaxInputPassesFollowTheKernel) {
  auto read_passes = [](std::vector<int64_t> shape, std::string type, std::string dim) {
    const int64_t width = type == "float" ? 4 : 2;
    int64_t elements = 1;
    for (int64_t d : shape) elements *= d;
    SizedOp s = SizeAtenOp(CpuOp("aten::_softmax", {shape, {}, {}}, {type, "Scalar", "Scalar"}, {"", dim, "False"}));
    EXPECT_TRUE(s.event.has_value()) << s.skip_reason;
    return s.event.has_value() ? s.event->bytes_read.value() / (width * elements) : -1;
  };
  // OWLv2's attention: dim 5185 (odd) -> cunn_SoftMaxForward, three reads.
  EXPECT_EQ(read_passes({16, 5185, 5185}, kBf16, "-1"), 3);
  // dim <= 1024 and <= 4096 bytes -> the persistent warp softmax.
  EXPECT_EQ(read_passes({12, 5, 5}, kBf16, "-1"), 1);
  EXPECT_EQ(read_passes({4, 1024}, "float", "-1"), 1);
  // 1025 fp32 (4100 bytes, not a multiple of ILP 4) -> cunn_SoftMaxForward.
  EXPECT_EQ(read_passes({4, 1025}, "float", "-1"), 3);
  // A multiple of ILP that fits 48 KiB of shared memory -> the Smem kernel.
  EXPECT_EQ(read_passes({4, 5184}, kBf16, "-1"), 1);
  EXPECT_EQ(read_passes({4, 5184}, kBf16, "1"), 1);  // dim 1 is the last
  // Too long for shared memory: 24,576 bf16 = 48 KiB.
  EXPECT_EQ(read_passes({4, 24576}, kBf16, "-1"), 3);
  // Not the last dim -> the spatial kernel's three loops.
  EXPECT_EQ(read_passes({4, 5184, 8}, kBf16, "1"), 3);
  // half_to_float: an fp32 output.
  SizedOp h = SizeAtenOp(CpuOp("aten::_softmax", {{4, 8}, {}, {}}, {"c10::Half", "Scalar", "Scalar"}, {"", "-1", "True"}));
  ASSERT_TRUE(h.event.has_value());
  EXPECT_EQ(h.event->bytes_written.value(), 4 * 32);
}

TEST(ExtractKernelMeasurementsTest, GroupsKernelsByExternalIdAndCountsSkips) {
  RecordedTrace t;
  RecordedOp mm = CpuOp("aten::mm", {{64, 64}, {64, 64}}, {kBf16, kBf16});
  mm.external_id = 7;
  RecordedOp sel = CpuOp("aten::index_select", {{10, 4}, {}, {3}}, {kBf16, "Scalar", "long int"});
  sel.external_id = 8;
  t.ops = {mm, sel};
  auto kernel = [](std::string name, int64_t ext, int64_t ns) {
    RecordedOp k;
    k.kind = RecordedOpKind::kKernel;
    k.name = std::move(name);
    k.external_id = ext;
    k.duration = SimTime(ns);
    return k;
  };
  // A split-K GEMM: the GEMM and its reduction belong to one op.
  t.ops.push_back(kernel("sm90_xmma_gemm_bf16bf16_splitk", 7, 3000));
  t.ops.push_back(kernel("void cublasLt::splitKreduce_kernel", 7, 1000));
  t.ops.push_back(kernel("indexSelectLargeIndex", 8, 500));
  t.ops.push_back(kernel("vectorized_elementwise_kernel", 99, 700));  // no cpu_op 99
  KernelMeasurements m = ExtractKernelMeasurements(t);
  EXPECT_EQ(m.kernels, 4);
  ASSERT_EQ(m.ops.size(), 1u);
  EXPECT_EQ(m.ops[0].op, "aten::mm");
  EXPECT_EQ(m.ops[0].kernels, 2);
  EXPECT_EQ(m.ops[0].measured.ns(), 4000);
  EXPECT_EQ(m.ops[0].kernel_class, KernelClass::kGemm);
  EXPECT_EQ(m.skipped_kernels, 2);
  EXPECT_EQ(m.skipped.at("op not sized: aten::index_select"), 1);
  EXPECT_EQ(m.skipped.at("no cpu_op with the kernel's External id"), 1);
  EXPECT_EQ(m.classes[static_cast<size_t>(KernelClass::kGemm)].kernels, 2);
  EXPECT_EQ(m.classes[static_cast<size_t>(KernelClass::kGemm)].sized_kernels, 2);
  EXPECT_EQ(m.classes[static_cast<size_t>(KernelClass::kMemory)].kernels, 2);
  EXPECT_EQ(m.classes[static_cast<size_t>(KernelClass::kMemory)].sized_kernels, 0);
}

}  // namespace
}  // namespace gpusim::kernel_measurements_test
