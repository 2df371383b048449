// The gpt builder's multi-latent attention (Megatron launch lines with
// --multi-latent-attention): the layer values from the input norm's output
// to the output projection, and their parameters. See gpt_builder.h.
//
// Note [Megatron multi-latent attention]: DeepSeek-V2's MLA (arXiv
// 2405.04434) as NVIDIA/Megatron-LM 23e00ed runs it under Transformer Engine
// v2.11 (megatron/core/transformer/multi_latent_attention.py MLASelfAttention,
// gpt_layer_specs.py get_gpt_layer_with_transformer_engine_spec with
// multi_latent_attention): n = heads / TP per rank, d_qk = qk_head_dim +
// qk_pos_emb_head_dim, d_v = v_head_dim.
//  - input_layernorm is a TENorm of its own (not fused into a linear); its
//    output feeds both down projections, one tensor both save.
//  - linear_q_down_proj [h -> q_lora_rank] and linear_kv_down_proj
//    [h -> kv_lora_rank + d_rope] are TELinear(parallel_mode='duplicated'):
//    every TP rank holds the whole weight and runs them on its sequence
//    shard under SP (no collective).
//  - --qk-layernorm makes linear_q_up_proj and linear_kv_up_proj
//    TELayerNormColumnParallelLinear: the RMSNorm of the q latent and of the
//    kv latent runs inside them (q_layernorm / kv_layernorm stay IdentityOp);
//    each saves its input, the normed output (all-gathered again for dgrad
//    and wgrad under SP) and fp32 statistics; without it they are
//    TEColumnParallelLinear. Without --q-lora-rank the query is one
//    column-parallel linear_q_proj from h.
//  - The kv latent is a split view of the down projection's output; TE's
//    prepare_forward makes it contiguous: a [T, kv_lora_rank] copy, the one
//    linear_kv_up_proj saves.
//  - RoPE (yarn by default, fused: fusions/fused_mla_yarn_rope_apply.py):
//    fused_apply_mla_rope_for_q rotates the query's rope part in place
//    (attention reads the up projection's output itself);
//    fused_apply_mla_rope_for_kv writes new key [s, b, n, d_qk] (the rope
//    key broadcast over the heads inside the kernel) and value
//    [s, b, n, d_v] tensors. Both save only cos/sin. Unfused (--rope-type
//    rope or --no-rope-fusion) torch.cat builds a new query too.
//  - Core attention: TEDotProductAttention with k_channels d_qk and
//    v_channels d_v; the q/k and v head widths differ, so FlashAttention-2
//    is ruled out and TE picks cuDNN fused attention (attention/
//    dot_product_attention/utils.py get_attention_backend), which keeps q,
//    k, v, its output and fp32 softmax statistics [b, n, s, 1], as the
//    flash kernels do (Note [Megatron flash attention]). Causal: half of QK^T
//    (d_qk) and PV (d_v); the backward recomputes QK^T and forms dV, dP, dQ
//    and dK: (3 d_qk + 2 d_v) / (d_qk + d_v) times the forward.
//  - linear_proj: TERowParallelLinear [n x d_v -> h].
// Not modelled: the rope kernels' cos/sin caches (bf16 [s, 1, 1, d_rope]
// per layer, KiB), the in-place query rope's time (one pass over the
// query's rope part), the duplicated weights' gradient all-reduce under SP.
#include <string>
#include <utility>
#include <vector>

#include "models/gpt_builder.h"

namespace gpusim {
namespace gpt_internal {

void GptBuilder::AddMlaValues(std::vector<LayerValue>* out) const {
  const MegatronMlaSpec& m = g_.mla;
  const int64_t n = A_ / t_, dqk = m.qk_head_dim + m.qk_pos_dim, dv = m.v_head_dim;
  const int64_t rq = m.q_lora_rank, rkv = m.kv_lora_rank, Tsp = Ssp() * B_, T = S_ * B_;
  const double tsp = static_cast<double>(Tsp), tt = static_cast<double>(T);
  auto add = [&](LayerValue v) { out->push_back(std::move(v)); };
  auto gemm = [&](const std::string& name, std::vector<int64_t> shape, const std::string& in,
                  const std::string& weight, const std::string& saved, int64_t rows, int64_t k, int64_t cols) {
    LayerValue v{name, std::move(shape), cdt_, OpKind::kMatmul, {in, "W:" + weight},
                 2.0 * static_cast<double>(rows) * static_cast<double>(k) * static_cast<double>(cols), name, true,
                 false, {saved}};
    v.m = rows; v.n = cols; v.k = k;
    add(v);
  };
  // A latent's fused norm (--qk-layernorm), then under SP its all-gather
  // before the column-parallel up projection. Returns {saved, GEMM input}.
  auto latent = [&](const std::string& in, const std::string& norm, int64_t width) {
    std::string saved = in;
    if (g_.qk_layernorm) {
      add({norm, {Ssp(), B_, width}, cdt_, OpKind::kElementwise, {in, "W:" + norm},
           8 * tsp * static_cast<double>(width), "", false, false, {in}});
      saved = norm;
    }
    std::string gemm_in = saved;
    if (sp_) {
      gemm_in = saved + "_full";
      add({gemm_in, {S_, B_, width}, cdt_, OpKind::kAllGather, {saved}, 0, "", false, false, {}});
    }
    return std::make_pair(saved, gemm_in);
  };
  std::string q = "q_up";
  if (rq > 0) {
    gemm("q_down", {Ssp(), B_, rq}, "ln1", "w_q_down", "ln1", Tsp, H_, rq);
    const auto [saved, in] = latent("q_down", "q_ln", rq);
    gemm("q_up", {S_, B_, n * dqk}, in, "w_q_up", saved, T, rq, n * dqk);
  } else {
    std::string in = "ln1";
    if (sp_) {
      add({"ln1_full", {S_, B_, H_}, cdt_, OpKind::kAllGather, {"ln1"}, 0, "", false, false, {}});
      in = "ln1_full";
    }
    q = "q_proj";
    gemm("q_proj", {S_, B_, n * dqk}, in, "w_q_proj", "ln1", T, H_, n * dqk);
  }
  gemm("kv_down", {Ssp(), B_, rkv + m.qk_pos_dim}, "ln1", "w_kv_down", "ln1", Tsp, H_, rkv + m.qk_pos_dim);
  add({"kv_latent", {Ssp(), B_, rkv}, cdt_, OpKind::kElementwise, {"kv_down"}, tsp * static_cast<double>(rkv), "",
       false, false, {}});
  const auto [kv_saved, kv_in] = latent("kv_latent", "kv_ln", rkv);
  gemm("kv_up", {S_, B_, n * (m.qk_head_dim + dv)}, kv_in, "w_kv_up", kv_saved, T, rkv, n * (m.qk_head_dim + dv));
  std::string pe = "kv_down";
  if (sp_) {  // k_pos_emb gathered from the sequence-parallel region
    add({"k_pe_full", {S_, B_, m.qk_pos_dim}, cdt_, OpKind::kAllGather, {"kv_down"}, 0, "", false, false, {}});
    pe = "k_pe_full";
  }
  if (!m.rope_fusion) {  // torch.cat of the query's two parts: a new tensor
    add({"mla_q", {S_, B_, n * dqk}, cdt_, OpKind::kElementwise, {q}, 4 * tt * static_cast<double>(n * dqk), "",
         false, false, {}});
    q = "mla_q";
  }
  add({"mla_k", {S_, B_, n * dqk}, cdt_, OpKind::kElementwise, {"kv_up", pe}, 4 * tt * static_cast<double>(n * dqk),
       "", false, false, {}});
  add({"mla_v", {S_, B_, n * dv}, cdt_, OpKind::kElementwise, {"kv_up"}, tt * static_cast<double>(n * dv), "", false,
       false, {}});
  const double s = static_cast<double>(S_), b = static_cast<double>(B_), heads = static_cast<double>(n);
  LayerValue lse{"attn_lse", {B_, n, S_}, DType::kF32, OpKind::kElementwise, {q}, b * heads * s, "attn_lse", false,
                 false, {}};
  lse.kernel_of = "context";  // Note [A second output of a kernel]
  add(lse);
  LayerValue fa{"context", {S_, B_, n * dv}, cdt_, OpKind::kAttention, {q, "mla_k", "mla_v"},
                b * heads * s * s * static_cast<double>(dqk + dv), "context", false, true,
                {q, "mla_k", "mla_v", "context", "attn_lse"}};
  fa.bwd_scale = static_cast<double>(3 * dqk + 2 * dv) / static_cast<double>(dqk + dv);
  add(fa);
  gemm("proj_partial", {S_, B_, H_}, "context", "w_proj", "context", T, n * dv, H_);
  out->back().tag = "out_proj";
}

// The attention parameters of an MLA layer (Note [Megatron multi-latent
// attention]): [in, out], the up projections and linear_proj split over TP.
std::vector<std::pair<std::string, std::vector<int64_t>>> GptBuilder::MlaParamShapes() const {
  const MegatronMlaSpec& m = g_.mla;
  const int64_t n = A_ / t_, dqk = m.qk_head_dim + m.qk_pos_dim, norm_rows = g_.rms_norm ? 1 : 2;
  std::vector<std::pair<std::string, std::vector<int64_t>>> out;
  if (m.q_lora_rank > 0) {
    out.push_back({"w_q_down", {H_, m.q_lora_rank}});
    if (g_.qk_layernorm) out.push_back({"q_ln", {norm_rows, m.q_lora_rank}});
    out.push_back({"w_q_up", {m.q_lora_rank, n * dqk}});
  } else {
    out.push_back({"w_q_proj", {H_, n * dqk}});
  }
  out.push_back({"w_kv_down", {H_, m.kv_lora_rank + m.qk_pos_dim}});
  if (g_.qk_layernorm) out.push_back({"kv_ln", {norm_rows, m.kv_lora_rank}});
  out.push_back({"w_kv_up", {m.kv_lora_rank, n * (m.qk_head_dim + m.v_head_dim)}});
  out.push_back({"w_proj", {n * m.v_head_dim, H_}});
  return out;
}

}  // namespace gpt_internal
}  // namespace gpusim
