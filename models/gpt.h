// GPT layers as Megatron-LM runs them and Korthikanti et al. 2022 ("Reducing
// Activation Recomputation in Large Transformer Models", arXiv 2205.05198)
// count them: pre-LayerNorm, fused QKV, causal softmax attention with a
// 1-byte dropout mask, GeLU MLP of width 4h, tensor parallelism t with the
// f/g conjugate collectives, optional sequence parallelism, and Megatron's
// recompute granularities (none, selective: the attention core, full:
// uniform groups or a block of layers). Eager (PyTorch) semantics: every
// value autograd saves lives until its backward op.
#ifndef GPUSIM_MODELS_GPT_H_
#define GPUSIM_MODELS_GPT_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "sim/config/spec.h"
#include "sim/ir/layer_graph.h"
#include "sim/ir/program.h"
#include "sim/ir/remat_plan.h"

namespace gpusim {

// One decoder layer of this rank (the graph the remat policy is applied to,
// sim/remat/apply.h; Megatron's full recompute by layer groups).
absl::StatusOr<LayerGraph> GptLayerGraph(const RunSpec& spec);
// The step (or a Megatron launch line's pipeline rank), its layers saved,
// recomputed and offloaded as `plan` (ApplyRematPolicy on GptLayerGraph) says.
absl::StatusOr<Program> BuildGptTrainStep(const RunSpec& spec, const RematPlan& plan);
int64_t GptParamCount(const ModelSpec& m);

// Bytes autograd keeps for the backward pass of decoder layer `layer` (the
// tensors the builder marks as residuals of that layer), from a built Program.
Bytes GptLayerActivationBytes(const Program& p, int layer);

}  // namespace gpusim

#endif  // GPUSIM_MODELS_GPT_H_
