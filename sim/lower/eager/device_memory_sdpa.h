// The transient workspaces of PyTorch's fused attention kernels
// (F.scaled_dot_product_attention recorded as the fused aten op the CUDA
// build dispatches to), which a recorder on the meta device cannot see:
// sized per backend from the op's recorded facts (traces/FORMAT.md *Op
// facts*, the SDPA table) and inserted by AddEagerDeviceMemory
// (device_memory.h) around the op's compute event.
//
// Note [Fused attention workspaces]
// B batch, Hq query heads, Hkv key/value heads, Sq, Skv sequence lengths,
// Dqk, Dv head dims, E element size of q. What each backend allocates
// through the caching allocator beside the op's results (the recorder's
// alloc events), in the order it allocates and frees them:
//
// cuDNN (aten/src/ATen/native/cudnn/MHA.cpp run_cudnn_SDP_fprop /
// run_cudnn_SDP_bprop: one at::empty of the graph's get_workspace_size()
// bytes around the graph's execute). The graph's workspace is the
// frontend's own tensors (cudnn-frontend include/cudnn_frontend/node/
// scaled_dot_product_flash_attention.h, CompositeSDPABackwardNode::
// get_fe_workspace_size_node) plus the backend engine's:
//   forward: 256 B, none when Sq = 1. The frontend's forward node keeps
//     nothing of its own for a dense, unmasked-by-ALiBi graph; the 256 B
//     are the engine's and measured only (H200, cuDNN 9.19: every probe
//     but the Sq = 1 one).
//   backward: dQ_accum B*Hq*Sq*Dqk*4 (float, BHSD) + softmax_sum B*Hq*Sq*4
//     (the dO.O row sums, float) [frontend] + 256 B [engine, measured]
//     + for GQA/MQA (Hq != Hkv) B*Hq*Skv*(Dqk+Dv)*E: dK_fullhead and
//     dV_fullhead, shaped {B, Hq, Skv, D} in q's dtype by the frontend and
//     left virtual there, so sized by the engine; the probes (bf16,
//     Sq = Skv, Dqk = Dv) measure exactly this term but cannot tell it from
//     B*Hq*Sq*Dqk*4 + 0 (E = 2 there) — the shape is the frontend's, the
//     size measured. With cuDNN <= 9.15 (fact [16] <= 91500) and
//     Skv % 128 != 0 the frontend adds its padding-mask workaround,
//     B*2*4 B (pre_validate_node, has_workaround_padding_mask).
//
// Flash (aten/src/ATen/native/transformers/cuda/flash_attn/flash_api.cpp):
//   forward (mha_fwd): with dropout the first rng_state ({2} uint64,
//     16 B) is replaced by a second before the kernel: 16 B allocated and
//     freed. Its results (out, softmax_lse, rng_state, an unused 8 B) are
//     the recorder's.
//   backward (mha_bwd, loop = true): softmax_d B*Hq*round_up(Sq,128)*4;
//     dq_accum B*round_up(Sq,128)*Hq*Dr*4, Dr = round_up(round_up(Dqk,8),
//     Dqk <= 128 ? 32 : 64), times nsplits = ceil(SMs / (B*Hq)) under
//     deterministic algorithms (at::zeros); for GQA/MQA dk_expanded and
//     dv_expanded B*Skv*Hq*round_up(Dqk,8)*E each. Freed when mha_bwd
//     returns (softmax_d, returned, when _flash_attention_backward drops
//     it), in reverse order.
//   Not the kernel's and not modelled: _flash_attention_backward's
//     grad_out.contiguous() and out.contiguous() copies (attention_backward
//     .cu), which happen only when q's [B,S,H,D] transpose is not
//     contiguous (the probes' q,k,v were made [B,H,S,D]-contiguous: the two
//     B*Sq*Hq*Dv*E transients the probe shows); a model's projections give
//     [B,S,H,D] storage and no copy. The recorder does not write layouts.
//
// Memory-efficient (aten/src/ATen/native/transformers/cuda/
// attention_backward.cu _efficient_attention_backward, attention.cu
// _efficient_attention_forward; mem_eff_attention/kernel_backward.h,
// kernel_forward.h, kernels/cutlassB.h): the kernel is the first of
// dispatch_cutlassB's list (sm80 and later: 64x64 k32, 64x64 k64,
// [sm86/89: 128x64 k96], 128x128 k128 [f32: 128x64 k128], 64x64 k128,
// 128x64 k65536; sm70/75: 64x64 kK) whose kMaxK covers max(Dqk, Dv) and
// whose shared memory fits; the 128-row k128 kernels are taken not to fit
// the ~100 KB of sm86/89/12.x (an assumption from their tile sizes).
//   forward: output_accum B*Sq*Hq*Dv*4 when the kernel does not keep the
//     output in one value iteration (max(Dqk,Dv) > 128) and q is not
//     float (kNeedsOutputAccumulatorBuffer).
//   backward: delta B*Hq*Sq*4 when the kernel computes it (kIsHalf and
//     kOutputInRF or sm != 70: kKernelComputesDelta); otherwise delta is
//     (grad_out.float() * out.float()).sum(-1).transpose().contiguous():
//     for float q the product B*Sq*Hq*Dv*4 and the row sums B*Sq*Hq*4 are
//     allocated and freed before it (both conversions copy too for half q
//     on sm70). Then the workspace of Params::workspace_size():
//     B*Hq*align_up(gk + gv + gq, 4)*4, gq = ceil(Sq/kBI) * ceil(Dqk/kBJ) *
//     (kBI*kBJ + 4) (GradQTempStorage: lock, counter, pad and a kBI x kBJ
//     float tile), gk = splits*kBJ*align_up(Dqk,kBI) and gv likewise with
//     Dv when the kernel accumulates dK/dV outside registers (half q and
//     kMaxK > kBI), splits = ceil(Skv/kBJ) (1 when B*Hq >= 256 and
//     Skv <= 2*kBJ; at most 200/(B*Hq) when gk/gv are needed; 1 under
//     deterministic algorithms). Freed in the order delta, workspace.
//   Measured (H200, torch 2.11): 1,049,600 B for B=2 H=8 S=256 D=64 bf16
//   and fp32, 8,390,656 B for S=1000 D=128, 25,169,920 B for D=512.
//
// Re-targeting (Note [Which backend a replay runs]): the recorder writes
// the backend sdp_utils.cpp select_sdp_backend picks for each compute-
// capability class (facts [12..15]); the replay device's class picks one.
#ifndef GPUSIM_SIM_LOWER_EAGER_DEVICE_MEMORY_SDPA_H_
#define GPUSIM_SIM_LOWER_EAGER_DEVICE_MEMORY_SDPA_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "sim/config/spec.h"
#include "sim/lower/eager/device_memory_sort.h"
#include "sim/trace/sdpa_op.h"

namespace gpusim {

// Which of facts [12..15] the device's compute capability reads: 7.x -> 0,
// 8.x -> 1, 9.x -> 2, 10.x and 12.x -> 3. InvalidArgument naming the device
// otherwise (none given, or a class the recorder does not write).
absl::StatusOr<int> SdpaCapabilityClass(const DeviceSpec& device);

// Note [Which backend a replay runs]: the recorded op names the backend
// sdp_utils.cpp chose for the recording's target. A replay runs
//   forced (--sdpa-backend flash|efficient|cudnn): that backend;
//   otherwise the backend facts [12..15] give for the device's class: the
//     recorded one ("recorded choice"), or another fused one ("re-targeted":
//     its workspaces, the op's results and saved tensors taken as recorded).
//   A forced or re-targeted event is renamed to the fused op of the backend
//   that runs (op _scaled_dot_product_<backend>_attention[_backward]), whose
//   kernels the kernel model then times (sim/device/impl/attention.h).
// InvalidArgument when the device's class chooses math or no kernel (the
// recording holds no math decomposition: record for that device), or when
// math is forced (record with --sdpa-backend math).
struct SdpaChoice {
  SdpaBackend backend = SdpaBackend::kNone;
  std::string why;
};
absl::StatusOr<SdpaChoice> ChooseSdpaBackend(const SdpaOp& op, std::string_view op_name, const SdpaFacts& facts,
                                             const DeviceSpec& device, std::optional<SdpaBackend> forced);

// Note [Fused attention workspaces]: the transients `backend`'s kernel for
// the forward or backward (`backward`) of `facts` allocates on `device`, as
// steps before and after its compute event. `deterministic`: meta
// deterministic_algorithms. REQUIRES: backend is flash, efficient or cudnn.
OpTemporaries SdpaWorkspaces(const SdpaFacts& facts, bool backward, SdpaBackend backend, const DeviceSpec& device,
                             bool deterministic);

}  // namespace gpusim

#endif  // GPUSIM_SIM_LOWER_EAGER_DEVICE_MEMORY_SDPA_H_
