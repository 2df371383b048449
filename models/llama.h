// Llama-family training step as Program IR: what one device computes in one
// step of a MaxText-style (JAX) or FSDP (PyTorch) training loop.
//
//   embedding → L × decoder layer → final RMSNorm → logits (fp32) → softmax
//   cross-entropy → backward (reverse, with remat recompute) → grad-norm
//   clipping → AdamW update (in place into the donated train state)
//
// Sources: MaxText layers/llama2.py, attentions.py, linears.py, train.py at
// commit 4bf3beaa (../shared/reference/maxtext.md); Llama 2 paper (arXiv
// 2307.09288) for shapes; optax transform.py for the AdamW state.
#ifndef GPUSIM_MODELS_LLAMA_H_
#define GPUSIM_MODELS_LLAMA_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "sim/config/spec.h"
#include "sim/ir/layer_graph.h"
#include "sim/ir/program.h"
#include "sim/ir/remat_plan.h"

namespace gpusim {

// Parameters of the whole (unsharded) model.
int64_t LlamaParamCount(const ModelSpec& m);
// Parameters of one decoder layer: 2·D·H·Dh + 2·D·K·Dh + 3·D·M + 2·D;
// with E = model.experts > 1 the MLP is 3·E·D·M + D·E (the experts and the
// router's gate).
int64_t LlamaLayerParamCount(const ModelSpec& m);

// The settings the split by parallelism.tensor needs: sequence parallelism
// only with tensor > 1; tensor divides the heads, KV heads, MLP width and
// vocabulary (jax: d_model; with SP: seq_len). Errors name where the
// setting was written.
absl::Status CheckLlamaParallelism(const RunSpec& spec);

// The per-device training-step Program for `spec` (model, batch, FSDP,
// tensor and sequence parallelism, optimizer, remat policy). Unrolled, every
// layer is built; a rolled scan of more than RolledBuiltOnceAbove() layers
// is built with its first and last kRolledEdgeIterations iterations and one
// steady iteration standing for the others (models/rolled_loop.h, Note
// [Rolled loop built once] in sim/lower/lower.h), so its cost does not grow
// with the depth.
// One decoder layer of this rank (the graph the remat policy is applied to,
// sim/remat/apply.h); refuses a tensor split CheckLlamaParallelism refuses.
absl::StatusOr<LayerGraph> LlamaLayerGraph(const RunSpec& spec);
// The step, its layers saved, recomputed and offloaded as `plan` (made by
// ApplyRematPolicy on LlamaLayerGraph(spec)) says.
absl::StatusOr<Program> BuildLlamaTrainStep(const RunSpec& spec, const RematPlan& plan);


}  // namespace gpusim

#endif  // GPUSIM_MODELS_LLAMA_H_
