// The families models/ builds; see family.h.
#include "models/family.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "sim/base/status.h"
#include "models/gpt.h"
#include "models/jax_program.h"
#include "models/llama.h"
#include "sim/lower/semantics.h"

namespace gpusim {
namespace {

using Settings = std::vector<std::string>;

Settings Join(std::initializer_list<Settings> parts) {
  Settings out;
  for (const Settings& p : parts) out.insert(out.end(), p.begin(), p.end());
  return out;
}

// What every transformer family reads.
const Settings kTransformerCore = {
    "framework", "model.d_model", "model.n_layers", "model.n_heads", "model.mlp_dim", "model.vocab",
    "model.weight_dtype", "model.compute_dtype", "optimizer.moment_dtype", "remat.policy", "remat.names",
    "remat.offload_names", "remat.policies", "batch.per_device", "batch.seq_len"};

// The gpt family models sequence parallelism only inside a tensor-parallel
// group (models/gpt.cc shards the group's activations); at tensor 1 the
// setting would have no effect, so it is refused rather than ignored, as
// for llama. (A Megatron launch line follows Megatron-LM instead:
// arguments.py turns --sequence-parallel off at tensor size 1.)
absl::Status CheckGptParallelism(const RunSpec& s) {
  if (!s.parallelism.sequence_parallel || s.parallelism.tensor > 1) return absl::OkStatus();
  auto it = s.written.find("parallelism.sequence_parallel");
  const std::string at = it == s.written.end() || it->second.empty() ? std::string() : it->second + ": ";
  return absl::InvalidArgumentError(
      absl::StrCat(at, "parallelism.sequence_parallel: true needs parallelism.tensor > 1 for model family 'gpt' (it "
                       "shards the tensor-parallel group's activations; Megatron-LM turns it off at tensor 1)"));
}

// The layered families' build functions: the pipeline always passes the
// plan it decided on their layer_graph (sim/step/model_program.h).
absl::StatusOr<Program> BuildLlama(const RunSpec& s, const RematPlan* plan) {
  GPUSIM_CHECK(plan != nullptr);
  return BuildLlamaTrainStep(s, *plan);
}
absl::StatusOr<Program> BuildGpt(const RunSpec& s, const RematPlan* plan) {
  GPUSIM_CHECK(plan != nullptr);
  return BuildGptTrainStep(s, *plan);
}

std::vector<ModelFamily>* MakeFamilies() {
  auto* f = new std::vector<ModelFamily>;
  // models/llama.h: MaxText layers/llama2.py (jax), FSDP Llama (pytorch).
  const Settings llama = Join({kTransformerCore,
                               {"model.n_kv_heads", "model.head_dim", "model.tied_embeddings", "model.logits_dtype",
                                "model.attention", "model.param_scan_axis", "model.scan_layers", "optimizer.kind",
                                "optimizer.clip_grad_norm", "loop.mode", "parallelism.fsdp",
                                "parallelism.gather_dtype", "parallelism.tensor", "parallelism.sequence_parallel"}});
  // An eager llama is a module list: the scan settings are the XLA
  // lowering's (Note [Framework semantics], sim/lower/semantics.h).
  Settings llama_eager;
  for (const std::string& path : llama) {
    const auto& xla = XlaOnlySettings();
    if (std::none_of(xla.begin(), xla.end(), [&](const XlaOnlySetting& x) { return path == x.path; })) {
      llama_eager.push_back(path);
    }
  }
  f->push_back({"llama",
                "Llama decoder (RMSNorm, RoPE, GQA, SwiGLU) as MaxText layers/llama2.py builds it; FSDP; tensor and "
                "sequence parallelism (jax: MaxText logical-axis rules, pytorch: Megatron-LM); scanned or unrolled "
                "layers; MaxText remat policies",
                Join({llama, {"xla.dynamic_slice_fusion", "model.experts", "model.experts_per_token"}}),
                llama_eager,
                {},
                BuildLlama,
                LlamaParamCount,
                CheckLlamaParallelism,
                LlamaLayerGraph});
  // models/gpt.h: Megatron-LM GPT as Korthikanti et al. 2022 count it.
  const Settings gpt = Join({kTransformerCore,
                             {"model.n_kv_heads", "model.head_dim", "model.tied_embeddings", "model.attention",
                              "optimizer.clip_grad_norm", "remat.method", "remat.num_layers", "parallelism.tensor",
                              "parallelism.sequence_parallel"}});
  f->push_back({"gpt",
                "Megatron-LM GPT (LayerNorm, fused QKV with grouped-query heads, tied or untied output layer, "
                "explicit softmax attention with dropout by default or flash attention, GeLU MLP), tensor and "
                "sequence parallelism, Megatron recompute (Korthikanti et al. 2022, arXiv 2205.05198)",
                gpt,
                gpt,
                {{"model.attention", "explicit"}, {"model.scan_layers", "false"}, {"loop.mode", "unrolled"}},
                BuildGpt,
                GptParamCount,
                CheckGptParallelism,
                GptLayerGraph});
  // gpt's settings but the attention kernel, which a launch line's
  // --attention-backend / --use-flash-attn / --transformer-impl decide.
  Settings megatron;
  for (const std::string& path : gpt) {
    if (path != "model.attention") megatron.push_back(path);
  }
  // A Megatron-LM launch line (sim/config/megatron_args.h): the gpt layers
  // of one pipeline rank under Megatron's schedule, main_grad buffers and
  // optimizer (models/gpt.h, models/megatron_schedule.h). The launch line
  // writes these settings; sim/step/megatron_step.h runs every rank.
  f->push_back({"megatron",
                "a Megatron-LM launch line (megatron: block, gpusim run --megatron-args): GPT/Llama-style layers "
                "(GQA, SwiGLU, RMSNorm, RoPE or learned positions, biases, flash or unfused attention), TP/SP, 1F1B "
                "and interleaved PP, CP, DP with main_grad buckets, the distributed optimizer, recompute",
                {},
                megatron,
                {{"model.scan_layers", "false"}, {"loop.mode", "unrolled"}},
                BuildGpt,
                nullptr,
                nullptr,
                GptLayerGraph});
  // models/jax_program.h: a program file's lax.scan under jax.grad.
  f->push_back({"program",
                "a run config's program: section: one lax.scan under jax.grad with donation (models/jax_program.h)",
                {"framework", "loop.mode", "loop.trip_count", "xla.dynamic_slice_fusion"},
                {"framework", "loop.mode", "loop.trip_count"},
                {},
                [](const RunSpec& s, const RematPlan*) { return BuildJaxProgram(s); },
                nullptr});
  return f;
}

}  // namespace

const std::vector<ModelFamily>& ModelFamilies() {
  static const std::vector<ModelFamily>* const kFamilies = MakeFamilies();
  return *kFamilies;
}

}  // namespace gpusim
