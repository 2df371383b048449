// Multi-latent attention in a Megatron-LM launch line: its widths and the
// checks Megatron makes, and what gpusim runs it under. See
// megatron_args_internal.h; the layer is built by models/gpt_mla.cc.
//
// Note [Megatron MLA arguments]: NVIDIA/Megatron-LM 23e00ed
// megatron/training/arguments.py (_add_mla_args: --q-lora-rank None,
// --kv-lora-rank 32, --qk-head-dim 128, --qk-pos-emb-head-dim 64,
// --v-head-dim 128; --rope-type default None, which MLA takes as yarn,
// transformer_config.py MLATransformerConfig.rope_type; --no-rope-fusion
// turns apply_rope_fusion off). multi_latent_attention.py
// MLASelfAttention.get_query_key_value_tensors with yarn and rope fusion
// calls fused_apply_mla_rope_for_q / _kv (fusions/fused_mla_yarn_rope_apply.py),
// decorated @experimental_fn: without --enable-experimental
// (global_vars.py set_experimental_flag) they raise
// ExperimentalNotEnabledError, so such a line does not train. MLA asserts
// no grouped-query attention (training.py num_floating_point_operations
// asserts it; the module has no query groups).
#include <string>

#include "absl/strings/str_cat.h"
#include "sim/base/status.h"
#include "sim/config/megatron_args_internal.h"

namespace gpusim {
namespace megatron_internal {

absl::Status ApplyMlaArgs(const Args& g, RunSpec* run) {
  MegatronMlaSpec& mla = run->megatron.mla;
  RETURN_IF_ERROR(g.Flag("multi-latent-attention", &mla.present));
  const char* const kWidths[] = {"q-lora-rank", "kv-lora-rank", "qk-head-dim", "qk-pos-emb-head-dim", "v-head-dim",
                                 "rope-type"};
  if (!mla.present) {
    for (const char* w : kWidths) {
      if (g.Has(w)) return g.Error(w, "needs --multi-latent-attention (only MLA reads it)");
    }
    if (g.Has("enable-experimental")) {
      for (auto& [name, how] : run->megatron.args) {
        if (name == "enable-experimental") {
          how = "no effect on memory or time: no experimental function runs in this line (MLA's fused rope, the "
                "flex dispatcher and fp8 router padding are its only users)";
        }
      }
      run->megatron.no_effect.push_back("enable-experimental");
    }
    return absl::OkStatus();
  }
  RETURN_IF_ERROR(g.Int("q-lora-rank", &mla.q_lora_rank));
  RETURN_IF_ERROR(g.Int("kv-lora-rank", &mla.kv_lora_rank));
  RETURN_IF_ERROR(g.Int("qk-head-dim", &mla.qk_head_dim));
  RETURN_IF_ERROR(g.Int("qk-pos-emb-head-dim", &mla.qk_pos_dim));
  RETURN_IF_ERROR(g.Int("v-head-dim", &mla.v_head_dim));
  std::string rope = "yarn";
  RETURN_IF_ERROR(g.Choice("rope-type", &rope, {"rope", "yarn"}));
  bool no_fusion = false;
  RETURN_IF_ERROR(g.Flag("no-rope-fusion", &no_fusion));
  mla.rope_fusion = rope == "yarn" && !no_fusion;
  bool experimental = false;
  RETURN_IF_ERROR(g.Flag("enable-experimental", &experimental));
  if (mla.rope_fusion && !experimental) {
    return g.Error("multi-latent-attention",
                   "with yarn RoPE and rope fusion (the defaults) needs --enable-experimental: Megatron's "
                   "fused_apply_mla_rope_for_q is an experimental function and raises without it (or give "
                   "--no-rope-fusion)");
  }
  const MegatronSpec& mg = run->megatron;
  if (run->model.n_kv_heads != run->model.n_heads) {
    return g.Error("multi-latent-attention", "has no query groups: drop --group-query-attention");
  }
  if (mg.transformer_impl != "transformer_engine") {
    return g.Error("multi-latent-attention", "modelled under --transformer-impl transformer_engine only");
  }
  if (mg.attention != "flash") {
    return g.Error("multi-latent-attention", "modelled with TE's fused or flash attention only (not unfused)");
  }
  if (mg.context > 1) {
    return g.Error("multi-latent-attention", "with --context-parallel-size > 1 is not modelled");
  }
  if (!mg.fp8_format.empty()) return g.Error("multi-latent-attention", "under fp8 training is not modelled");
  if (mg.qkv_bias || mg.bias_linear) {
    return g.Error("multi-latent-attention", "with biased linears is not modelled: give --disable-bias-linear");
  }
  const int64_t tp = run->parallelism.tensor;
  if (run->model.n_heads % tp != 0) return g.Error("num-attention-heads", "must be a multiple of TP");
  // The per-head width Megatron's other code reads (kv_channels) is the
  // value head's; gpusim's attention widths come from the MLA spec.
  run->model.head_dim = mla.v_head_dim;
  return absl::OkStatus();
}

}  // namespace megatron_internal
}  // namespace gpusim
