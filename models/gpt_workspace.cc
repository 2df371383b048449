// The GEMM libraries' workspaces a Megatron-LM rank keeps: Transformer
// Engine's cuBLAS workspaces and PyTorch's per (handle, stream). See
// gpt_builder.h.
#include <algorithm>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "models/gpt_builder.h"
#include "sim/base/status.h"
#include "sim/config/cublas_workspace.h"

namespace gpusim {
namespace gpt_internal {
namespace {

// The torch release the cuBLAS workspace default is read at: Megatron-LM's
// CI image at 57a02672 is nvcr.io/nvidia/pytorch:26.04 (docker/
// Dockerfile.ci.dev), later than the torch 2.7 the rule changes at.
constexpr char kMegatronTorch[] = "2.7";
// TE's multi-stream GEMM streams (transformer_engine/common: num_streams 4,
// tex.get_num_cublas_streams()).
constexpr int kTeGemmStreams = 4;

}  // namespace

// Note [Megatron GEMM workspaces]: what a rank's GEMM libraries allocate
// through the caching allocator on their first GEMM and keep, so that they
// are in every iteration's memory_allocated (the functional tests' goldens
// log them from step 1 on):
//  - Transformer Engine (NVIDIA/TransformerEngine transformer_engine/
//    pytorch/module/base.py get_workspace, get_cublas_workspace_size_bytes):
//    one cuBLAS workspace for all its GEMMs, 32 MiB on compute capability 9
//    and later, 4 MiB before (sim/config/cublas_workspace.h
//    TeCublasWorkspaceBytes). TE's GroupedLinear (--moe-grouped-gemm) runs
//    its GEMMs on tex.get_num_cublas_streams() = 4 streams, each with a
//    workspace of that size (get_multi_stream_cublas_workspace).
//  - PyTorch (aten/src/ATen/cuda/CublasHandlePool.cpp, Note [What the device
//    adds to a recorded PyTorch step], sim/lower/eager/device_memory.cc): one
//    workspace per (cuBLAS handle, stream) the rank's torch GEMMs use. Those
//    are Megatron's own linears: the output layer (megatron/core/
//    tensor_parallel/layers.py ColumnParallelLinear, torch.matmul forward,
//    matmul / wgrad backward) on the last stage, every linear under
//    --transformer-impl local, and TE's unfused attention's baddbmm / bmm
//    (--attention-backend unfused). Forward runs on the main thread and
//    backward on the autograd engine's device thread, each with its own
//    handle on the default stream: two workspaces, sized by the launcher's
//    CUBLAS_WORKSPACE_CONFIG (Megatron-LM's CI sets ":4096:8" in most tests'
//    ENV_VARS) or PyTorch's default for the device at torch >= 2.7.
// The functional tests check it: on a distributed-optimizer rank with no
// other persistent extra, the state between iterations exceeded the model's
// by 68.0 MiB on A100 (2 x 32 + 4) and 96.0 MiB on H100 (2 x 32 + 32).
absl::Status GptBuilder::DeclareGemmWorkspaces() {
  const bool te = g_.transformer_impl == "transformer_engine";
  auto add = [&](const std::string& name, Bytes size, const std::string& what) {
    b_.AddArgument(name, {size.value()}, DType::kU8, Role::kWorkspace, false, what);
  };
  if (te) {
    const Bytes ws = TeCublasWorkspaceBytes(s_.device);
    add("te.cublas_workspace", ws, "Transformer Engine's cuBLAS workspace (module/base.py get_workspace)");
    if (Moe() && g_.moe.grouped_gemm) {
      for (int i = 0; i < kTeGemmStreams; ++i) {
        add(absl::StrCat("te.cublas_workspace.stream", i), ws,
            "Transformer Engine's grouped-GEMM stream workspace (get_multi_stream_cublas_workspace)");
      }
    }
  }
  if (g_.gradient_accumulation_fusion) RETURN_IF_ERROR(DeclareTeDummyWgrads());
  DeclareGlobalMemoryBuffer();
  const bool torch_gemms = last_stage_ || !te || g_.attention == "unfused";
  if (!torch_gemms) return absl::OkStatus();
  ASSIGN_OR_RETURN(const Bytes ws, CublasWorkspaceBytes(kMegatronTorch, s_.device, g_.cublas_workspace_config));
  add("cublas_workspace.forward", ws, "PyTorch's cuBLAS workspace (main thread, default stream)");
  add("cublas_workspace.backward", ws, "PyTorch's cuBLAS workspace (autograd thread, default stream)");
  return absl::OkStatus();
}

// Note [Transformer Engine dummy wgrads]: with fuse_wgrad_accumulation
// (Megatron's gradient accumulation fusion, the default) a Transformer Engine
// linear's backward accumulates the weight gradient into main_grad and hands
// autograd a stand-in from get_dummy_wgrad(main_grad.shape, weight.dtype)
// (NVIDIA/TransformerEngine v2.11 pytorch/module/base.py; linear.py,
// layernorm_linear.py, grouped_linear.py _Linear.backward and kin; since TE
// v2.3): one tensor per (shape, dtype), created at the first backward, kept
// in the module-level _dummy_wgrads and never freed. A rank of Megatron-Core's
// TE layers (w_qkv, w_proj: TELayerNormColumnParallelLinear,
// TERowParallelLinear; w_fc1, w_fc2 likewise) keeps one per distinct weight
// shape: one layer's four linear weights in the parameter dtype, between
// iterations too, and the experts' likewise. SimuMax's B200 runs (validation/
// simumax_b200.json) show it: on the first pipeline stage, which holds no
// loss, the measured peak exceeds gpusim's by one layer's four weights in
// bf16 to within 3 MB (70B and 405B).
//
// Megatron's own linears draw from the same cache. megatron/core/
// tensor_parallel/layers.py LinearWithGradAccumulationAndAsyncCommunication
// .backward (NVIDIA/Megatron-LM 57a02672 and 23e00ed, since e7c55de99e,
// 2025-08): under gradient accumulation fusion, for a weight DDP tagged
// grad_added_to_main_grad (every trainable parameter, distributed_data_
// parallel.py __init__), it hands autograd get_dummy_wgrad(main_grad.shape,
// input.dtype) when Transformer Engine imports (HAVE_TE, true in the NGC
// images Megatron runs in) -- the output layer's [vocab/TP, h] in the
// compute dtype, on the stage that holds it, whatever the layers' impl.
// SimuMax's B200 rows show it: every one-stage row read short by that
// tensor (1.96 GiB at 70B TP 1, 0.98 GiB at TP 2; 3.92 / 1.96 GiB at 405B).
absl::Status GptBuilder::DeclareTeDummyWgrads() {
  std::set<std::pair<std::vector<int64_t>, DType>> seen;
  auto keep = [&](const std::string& label, const std::vector<int64_t>& shape, DType dtype, const std::string& what) {
    if (!seen.insert({shape, dtype}).second) return;
    b_.AddArgument(absl::StrCat("te.dummy_wgrad.", label), shape, dtype, Role::kWorkspace, false, what);
  };
  // The layers' linears: TE's under transformer_engine, Megatron's own
  // (ColumnParallelLinear, RowParallelLinear) under local; the experts'
  // (TE v2.11 grouped_linear.py _GroupedLinear.backward
  // handle_custom_ddp_from_mcore: one get_dummy_wgrad per expert weight, all
  // of one shape; or one TE linear per expert) and the shared experts'. The
  // cache is keyed by torch's [out, in]: gpusim's weights are [in, out], a
  // grouped one [experts, in, out].
  for (const std::string& name : param_order_) {
    const std::string label = name.substr(name.rfind('.') + 1);
    const bool dense = label == "w_qkv" || label == "w_proj" || label == "w_fc1" || label == "w_fc2" ||
                       label == "w_q_down" || label == "w_q_up" || label == "w_q_proj" || label == "w_kv_down" ||
                       label == "w_kv_up";  // MLA's TE linears (gpt_mla.cc)
    const bool experts = absl::StartsWith(label, "w_exp") || absl::StartsWith(label, "w_sh_");
    if (!dense && !experts) continue;
    const Tensor& w = b_.tensor(params_.at(name));
    const size_t n = w.shape.size();
    if (n < 2) return absl::InternalError(absl::StrCat("weight ", name, " is not a matrix"));
    // An fp8 parameter (--fp8-param-gather) is a Float8Tensor whose dtype
    // is its nominal one, the compute dtype (TE pytorch/tensor/
    // float8_tensor.py).
    keep(label, {w.shape[n - 1], w.shape[n - 2]}, w.dtype == DType::kF8 ? cdt_ : w.dtype,
         "Transformer Engine's stand-in weight gradient (module/base.py get_dummy_wgrad), kept");
  }
  if (last_stage_) {
    keep("output", b_.tensor(OutputWeight()).shape, cdt_,
         "the output layer's stand-in weight gradient (Megatron layers.py via TE's get_dummy_wgrad), kept");
  }
  return absl::OkStatus();
}

// Note [Megatron global memory buffer]: megatron/core/utils.py
// GlobalMemoryBuffer.get_tensor (NVIDIA/Megatron-LM 57a02672) keeps one
// buffer per (name, dtype), reallocated when a larger one is asked for and
// never freed; parallel_state.get_global_memory_buffer() is one per process.
// Under the name "mpu" in the compute dtype it serves
//  - megatron/core/transformer/dot_product_attention.py DotProductAttention
//    (--transformer-impl local): baddbmm's input [b x np, sq, sk], with
//    beta = 0, so the scores are a new tensor beside it;
//  - megatron/core/tensor_parallel/layers.py
//    LinearWithGradAccumulationAndAsyncCommunication under
//    --sequence-parallel: the all-gathered input [s, b, h] of Megatron's own
//    column-parallel linears (every one under local, the output layer on
//    the last stage under TE, whose linears gather by themselves).
// The buffer holds the largest of those requests, between iterations too.
void GptBuilder::DeclareGlobalMemoryBuffer() {
  const bool local = g_.transformer_impl == "local";
  int64_t elements = 0;
  if (local) elements = std::max(elements, B_ * (A_ / t_) * S_ * S_);
  if (sp_ && (local || last_stage_)) elements = std::max(elements, S_ * B_ * H_);
  if (elements == 0) return;
  b_.AddArgument("megatron.global_memory_buffer.mpu", {elements}, cdt_, Role::kWorkspace, false,
                 "Megatron's global memory buffer 'mpu' (core/utils.py GlobalMemoryBuffer)");
}

}  // namespace gpt_internal
}  // namespace gpusim
