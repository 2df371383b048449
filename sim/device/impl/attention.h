// Fused attention kernels (PyTorch's SDPA backends) timed by the kernel that
// runs: its tile shape, the causal tiles it skips, wave quantisation over the
// SMs, the softmax exponentials on the SFU, dropout's Philox and the
// backward's helper kernels. Used by the tiled kernel model (tiled.h).
//
// Note [Fused attention time]
// The recorder writes each fused SDPA op with its facts (traces/FORMAT.md
// *Op facts*, the SDPA table): B, Hq, Hkv, Sq, Skv, Dqk, Dv, causal,
// dropout, mask; the op's name is the backend that ran
// (_scaled_dot_product_{cudnn,flash,efficient}_attention[_backward]).
//
// Tiles (BM query rows x BN key columns, one CTA per BM rows forward, per
// BN columns backward), bf16/fp16 on sm80/sm90:
//   cuDNN: the sm90 engine's kernels in the H200 Kineto traces
//     (validation/h200_2026-12-04/kineto, cuDNN 9.19):
//     cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_knob_7_
//     64x128x64 and ..._bprop_wgmma_f16_knob_26_64x64x64: forward 64x128,
//     backward 64x64, the head dim in steps of 64.
//   Flash (FlashAttention-2 in PyTorch, aten/src/ATen/native/transformers/
//     cuda/flash_attn/flash_fwd_launch_template.h run_mha_fwd_hdim*, the
//     A100/H100 branches): forward hdim <= 32: 128x128; <= 64: 128x128
//     (128x64 with dropout); <= 96: 128x64; <= 128: 128x64 (128x32 with
//     dropout); <= 160: 128x32; <= 192: 128x64 (64x64 with dropout);
//     <= 224: 128x64; <= 256: 64x64 on sm90 (228 KB of shared memory per
//     SM), 128x64 below. flash_bwd_launch_template.h run_mha_bwd_hdim*:
//     hdim <= 64: 128x128; <= 128: 64x128; larger: 64x64. Head dim in steps
//     of 32 (the instantiated hdim32 ... hdim256). The sm86/89 branches
//     (smaller tiles for their 100 KB of shared memory) are not modelled:
//     those devices take the A100 tiles.
//   Memory-efficient (CUTLASS; aten/src/ATen/native/transformers/cuda/
//     attention.cu DISPATCH_BLOCKSIZE over mem_eff_attention/kernel_forward.h:
//     kIs64x64 = Dv <= 64: 64x64, else 32x128; backward, kernels/cutlassB.h
//     dispatch_cutlassB as Note [Fused attention workspaces] reads it: 64x64
//     for D <= 64, 128x128 for D <= 128 (128x64 for fp32), 128x64 above).
//     Head dim in steps of 32.
// Sequences are padded to whole tiles, head dims to the kernel's step.
//
// Tile iterations (one BM x BN block of S = QKᵀ): forward, CTA i walks the
// key tiles j; causal (PyTorch's is_causal: query r sees keys <= r, top-
// left aligned) it stops at the tile holding key r_last = min(Sq, (i+1)BM)-1,
// so tiles wholly above the diagonal are skipped. Backward (FlashAttention-2
// Algorithm 2, parallel over key tiles) CTA j walks the query tiles from the
// one holding row j·BN. Each CTA adds one iteration of pipeline fill and
// epilogue (loading Q / K,V before the first MMA, writing O or dK,dV after
// the last): an assumption of this model, not a measured count.
//
// One iteration on one SM, at the rates of the CUDA C++ Programming Guide
// (Arithmetic Instructions, throughput per clock per SM, cc 8.0 / 9.0):
//   MMA: 2·BM·BN·(Dqk + Dv) FLOP forward, 2·BM·BN·(3·Dqk + 2·Dv) backward
//     (S, dP, dV, dK, dQ: FlashAttention-2 Algorithm 2; 2.5x the forward
//     when Dqk = Dv), at the device's tensor peak / SMs;
//   exp: BM·BN exponentials (the forward's P, the backward's recomputed P)
//     on the SFU, 16 ex2 per clock per SM;
//   FP32: per element, forward 4 (row max, scale-and-subtract FFMA, row sum,
//     the bf16 pack), backward 6 (FFMA before exp, dP - D, · P, scale, two
//     packs), plus 1 (the add) with a mask; 64 (cc 7.x, 8.0) or 128 (8.6,
//     8.9, 9.x, 10.x, 12.x) FP32 lanes per SM;
//   dropout (p > 0): the keep mask regenerated per element, forward and
//     backward, by Philox4x32-10 (Salmon et al., SC'11; PyTorch
//     at::cuda::philox / curand_philox4x32_x.h): 10 rounds of 2 mulhi +
//     2 mullo + 2 LOP3 give 4 words, 15 integer ops per element, at 64
//     integer multiply-adds per clock per SM.
// The units are issued by the same warps one after another in these
// kernels (the softmax sits between the two MMAs of an iteration), so the
// iteration takes their sum; divided by efficiency.fused_attention, the share of
// that ideal a perfectly tiled kernel reaches. The SM clock is taken as
// flops.fp32 / (2 · FP32 lanes · SMs).
// The kernel: iterations · t_iter / SMs, over the wave utilisation
// (CTAs / SMs) / ceil(CTAs / SMs), and never under its bytes at the HBM
// roofline.
//
// Helper kernels of the backward, each bytes at the HBM roofline + launch:
//   cuDNN (kernel names in the traces above): compute_dot_do_o (reads dO
//     and O, writes the float row sums), convert_dq_to_16bits (float dQ
//     accumulator to q's dtype), and with Hq != Hkv two fmha_reduce_head
//     (dK and dV summed from Hq to Hkv heads).
//   Flash (flash_bwd_launch_template.h run_flash_bwd_seqk_parallel):
//     flash_bwd_dot_do_o_kernel, flash_bwd_convert_dq_kernel.
//   Memory-efficient: none (the kernel computes delta, kKernelComputesDelta
//     in kernel_backward.h, and accumulates dQ in its workspace).
// Not modelled: the forward's unpack_cudnn Philox-offset kernel (under a
// microsecond), sliding windows, nested/jagged inputs.
//
// Fit (h200-sxm-141gb, efficiency.fused_attention): the share of each case's
// recorded fwd + bwd main-kernel time the ideal above takes (tools/collect/
// kineto_classes.py attention_share, Note [Attention efficiency fit]), the
// mean over the gpu-size cases, 0.78, with leave-one-out in docs/
// validation_step_time.md; also the default of every other device (sim/
// config/spec_parse.cc, Note [Fused attention efficiency]). 0 turns this
// model off (the roofline at efficiency.attention times the op).
#ifndef GPUSIM_SIM_DEVICE_IMPL_ATTENTION_H_
#define GPUSIM_SIM_DEVICE_IMPL_ATTENTION_H_

#include <cstdint>
#include <optional>

#include "sim/config/spec.h"
#include "sim/trace/trace.h"

namespace gpusim {

enum class AttentionBackend { kCudnn, kFlash, kEfficient };

// One fused attention op, from its name and recorded facts.
struct AttentionShape {
  AttentionBackend backend = AttentionBackend::kCudnn;
  bool backward = false;
  int64_t b = 0, hq = 0, hkv = 0, sq = 0, skv = 0, dqk = 0, dv = 0, elem = 2;
  bool causal = false, mask = false;
  double dropout = 0;
};

// The shape of `e` when it is a fused SDPA op (op _scaled_dot_product_
// {cudnn,flash,efficient}_attention[_backward], SdpaOpOf) whose 17 SDPA
// facts ParseSdpaFacts accepts (sim/trace/sdpa_op.h); nullopt otherwise
// (timed by the roofline).
std::optional<AttentionShape> FusedAttentionShape(const TraceEvent& e);

struct AttentionTile {
  int64_t m = 0, n = 0;     // BM query rows, BN key columns
  int64_t head_step = 0;    // head dims are padded to a multiple of this
};
// The tile of the kernel `s`'s backend runs (Note [Fused attention time]).
AttentionTile ChooseAttentionTile(const AttentionShape& s, const DeviceSpec& d);

// Per (batch, head): the CTAs and the tile iterations they run, the one
// iteration of fill and epilogue per CTA included.
struct AttentionWork {
  int64_t ctas = 0;
  int64_t iterations = 0;
};
AttentionWork CountAttentionTiles(int64_t sq, int64_t skv, const AttentionTile& t, bool causal, bool backward);

// The seconds of one tile iteration on one SM at efficiency 1.
double AttentionIterationSeconds(const AttentionShape& s, const AttentionTile& t, const DeviceSpec& d);

// The main kernel's seconds at `efficiency`, without launch or the HBM floor.
double FusedAttentionKernelSeconds(const AttentionShape& s, const DeviceSpec& d, double efficiency);

// The whole op: the main kernel (at d.fused_attention_efficiency, never under
// `bytes` at the HBM roofline) and the helper kernels, each with its launch.
SimTime FusedAttentionTime(const AttentionShape& s, double bytes, const DeviceSpec& d);

}  // namespace gpusim

#endif  // GPUSIM_SIM_DEVICE_IMPL_ATTENTION_H_
