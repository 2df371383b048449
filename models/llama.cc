// The llama family's entry points (models/llama.h) and the step's
// structure; the builder's other parts are in llama_layer.cc, llama_scan.cc
// and llama_state.cc (see llama_builder.h).
#include "models/llama.h"

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "models/llama_builder.h"
#include "models/rolled_loop.h"
#include "sim/base/status.h"

namespace gpusim {
namespace llama_internal {

LlamaBuilder::LlamaBuilder(const RunSpec& s, const RematPlan& plan)
    : s_(s), m_(s.model), plan_(plan), b_(absl::StrCat(s.model.name, "-train-step")) {
  B_ = s.batch.per_device;
  S_ = s.batch.seq_len;
  T_ = B_ * S_;
  D_ = m_.d_model;
  H_ = m_.n_heads;
  K_ = m_.n_kv_heads;
  Dh_ = m_.head_dim;
  M_ = m_.mlp_dim;
  V_ = m_.vocab;
  L_ = m_.n_layers;
  E_ = m_.experts;
  Ek_ = m_.experts_per_token;
  N_ = s.parallelism.fsdp;
  cdt_ = m_.compute_dtype;
  wdt_ = m_.weight_dtype;
  gdt_ = s.parallelism.gather_dtype == "weight" ? wdt_ : cdt_;
  // Note [Llama tensor parallelism]: per-rank widths.
  t_ = s.parallelism.tensor;
  sp_ = s.parallelism.sequence_parallel && t_ > 1;
  sem_ = LoweringSemanticsOf(s);
  maxtext_tp_ = sem_.tensor_parallel == TensorParallelRules::kMaxTextLogicalAxes;
  embed_sharded_ = maxtext_tp_ && t_ > 1 && !sp_;
  Ht_ = H_ / t_;
  Kt_ = K_ / t_;
  Mt_ = M_ / t_;
  Vt_ = V_ / t_;
  // Scan structure is the XLA lowering's (Note [Framework semantics],
  // sim/lower/semantics.h): an eager step's layers are a module list with
  // their own parameters, whatever the scan settings say (the capability
  // check refuses them written, sim/step/capabilities.cc).
  scan_ = sem_.scans_layers && m_.scan_layers;
  scan_axis_ = sem_.scans_layers ? m_.param_scan_axis : 0;
  // A scanned layer stack with trip count 1 is inlined (XLA
  // WhileLoopSimplifier), which is the unrolled form.
  rolled_ = scan_ && s.loop.mode == "rolled" && L_ > 1;
  graph_ = MakeLayerGraph();
}

absl::StatusOr<Program> LlamaBuilder::Build() {
  RETURN_IF_ERROR(CheckLlamaParallelism(s_));
  DeclareState();
  PlanZeroStacks();
  b_.set_phase(Phase::kForward);
  TensorId x = Embedding();
  PrepareScanSources();
  if (rolled_) AllocResidualStacks();
  std::vector<TensorId> layer_inputs(static_cast<size_t>(L_), kNoTensor);
  std::vector<std::map<std::string, TensorId>> saved(static_cast<size_t>(L_));
  // Note [Rolled loop built once] (sim/lower/lower.h): every iteration of
  // the while body is the same computation (its slices of the stacks are at
  // the loop counter), so past RolledBuiltOnceAbove() layers one steady
  // iteration stands for all but the edges (models/rolled_loop.h).
  const std::vector<LoopIteration> forward = LoopIterations(L_, rolled_, /*descending=*/false);
  b_.BeginRegion("forward_scan", "loop", rolled_);
  // Weights are all-gathered one layer ahead (XLA's latency-hiding
  // scheduler / --xla_gpu_enable_pipelined_all_gather; PyTorch FSDP
  // forward_prefetch): two layers' gathered weights are live at a time.
  // Without FSDP there is no gather to hide: each layer's weight casts are
  // made in its own iteration (XLA fuses nothing across a while body's
  // iterations), one layer's at a time.
  const bool prefetch = N_ > 1;
  std::map<std::string, TensorId> next = prefetch ? GatherLayer(0, "forward") : std::map<std::string, TensorId>{};
  for (size_t it = 0; it < forward.size(); ++it) {
    const int l = static_cast<int>(forward[it].index);
    layer_inputs[static_cast<size_t>(l)] = x;
    b_.set_layer(l);
    b_.BeginRegion(absl::StrCat("layer", l, ".forward"), "layer");
    b_.set_region_repeat(forward[it].repeat);
    std::map<std::string, TensorId> weights = prefetch ? std::move(next) : GatherLayer(l, "forward");
    if (prefetch && it + 1 < forward.size()) next = GatherLayer(static_cast<int>(forward[it + 1].index), "forward");
    auto vals = EmitLayerForward(l, x, weights, /*recompute=*/false, {});
    if (rolled_) StoreResiduals(l, vals);
    OffloadResiduals(l, vals);
    b_.EndRegion();
    x = vals.at("y");
    saved[static_cast<size_t>(l)] = std::move(vals);
  }
  b_.EndRegion();
  b_.set_layer(-1);
  const OpId head_first = b_.next_op();
  HeadResult head = HeadAndLoss(x);
  // The forward loop ends when its last iteration's copies are done.
  for (OpId op = head_first; op < b_.next_op() && !pending_wait_.empty(); ++op) {
    if (IsComputeKind(b_.op(op).kind)) WaitForPending(b_.op(op));
  }

  b_.set_phase(Phase::kBackward);
  TensorId dx = HeadBackward(head);
  if (rolled_) AllocGradStacks();
  const std::vector<LoopIteration> backward = LoopIterations(L_, rolled_, /*descending=*/true);
  b_.BeginRegion("backward_scan", "loop", rolled_);
  if (prefetch) next = GatherLayer(static_cast<int>(backward.front().index), "backward");
  for (size_t it = 0; it < backward.size(); ++it) {
    const int l = static_cast<int>(backward[it].index);
    b_.set_layer(l);
    b_.BeginRegion(absl::StrCat("layer", l, ".backward"), "layer");
    b_.set_region_repeat(backward[it].repeat);
    std::map<std::string, TensorId> weights = prefetch ? std::move(next) : GatherLayer(l, "backward");
    std::map<std::string, TensorId> reloaded = ReloadResiduals(l);
    if (prefetch && it + 1 < backward.size()) next = GatherLayer(static_cast<int>(backward[it + 1].index), "backward");
    std::map<std::string, TensorId> fwd = rolled_ ? LoadResiduals(l) : saved[static_cast<size_t>(l)];
    for (const auto& [name, t] : reloaded) fwd[name] = t;
    TensorId xin = rolled_ ? fwd.at("x") : layer_inputs[static_cast<size_t>(l)];
    dx = EmitLayerBackward(l, xin, fwd, weights, dx);
    b_.EndRegion();
  }
  b_.EndRegion();
  b_.set_layer(-1);
  FinishStackedGrads();
  EmbeddingBackward(dx);

  b_.set_phase(Phase::kOptimizer);
  Optimizer(head.loss);
  // A jitted train step returns its outputs as one tuple (Note [Entry
  // result tuple], sim/lower/xla/entry_tuple.h).
  b_.set_entry_result_tuple(sem_.entry_result_tuple);
  return b_.Finish();
}

}  // namespace llama_internal

using llama_internal::LlamaBuilder;


// Note [Llama tensor parallelism]: what the split needs.
absl::Status CheckLlamaParallelism(const RunSpec& s) {
  auto at = [&](const std::string& path) {
    auto it = s.written.find(path);
    return it == s.written.end() || it->second.empty() ? std::string() : it->second + ": ";
  };
  const ModelSpec& m = s.model;
  const int64_t t = s.parallelism.tensor;
  if (s.parallelism.sequence_parallel && t == 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(at("parallelism.sequence_parallel"),
                     "parallelism.sequence_parallel: true needs parallelism.tensor > 1 (it shards the "
                     "tensor-parallel group's activations; Megatron-LM turns it off at tensor 1)"));
  }
  // MaxText's rules also shard the residual stream's embed axis.
  const bool jax = LoweringSemanticsOf(s).tensor_parallel == TensorParallelRules::kMaxTextLogicalAxes;
  const bool sp = s.parallelism.sequence_parallel;
  if (m.experts > 1 && t > 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        at("parallelism.tensor"), "parallelism.tensor: ", t, " with model.experts ", m.experts,
        ": tensor parallelism of mixture-of-experts layers is not modelled (Note [MaxText MoE dense matmul], "
        "models/llama_moe.cc); shard by parallelism.fsdp"));
  }
  if (t < 1 || m.n_heads % t != 0 || m.n_kv_heads % t != 0 || m.mlp_dim % t != 0 || m.vocab % t != 0 ||
      (jax && m.d_model % t != 0) || (sp && s.batch.seq_len % t != 0)) {
    return absl::InvalidArgumentError(absl::StrCat(
        at("parallelism.tensor"), "parallelism.tensor: ", t, " must divide model.n_heads (", m.n_heads,
        "), model.n_kv_heads (", m.n_kv_heads, "), model.mlp_dim (", m.mlp_dim, "), model.vocab (", m.vocab, ")",
        jax ? absl::StrCat(", model.d_model (", m.d_model, ")") : "",
        sp ? absl::StrCat(" and batch.seq_len (", s.batch.seq_len, ") with sequence_parallel") : ""));
  }
  return absl::OkStatus();
}

int64_t LlamaLayerParamCount(const ModelSpec& m) {
  const int64_t q = m.n_heads * m.head_dim, kv = m.n_kv_heads * m.head_dim;
  // Note [MaxText MoE dense matmul]: E experts' wi_0, wi_1, wo and the gate.
  const int64_t mlp = m.experts > 1 ? 3 * m.experts * m.d_model * m.mlp_dim + m.d_model * m.experts
                                    : 3 * m.d_model * m.mlp_dim;
  return m.d_model * q * 2 + m.d_model * kv * 2 + mlp + 2 * m.d_model;
}

int64_t LlamaParamCount(const ModelSpec& m) {
  const int64_t emb = m.vocab * m.d_model;
  return m.n_layers * LlamaLayerParamCount(m) + emb + (m.tied_embeddings ? 0 : emb) + m.d_model;
}

namespace {

absl::Status CheckLlamaFamily(const RunSpec& spec) {
  if (spec.model.family == "llama") return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("model.family: '", spec.model.family, "' has no builder yet (expected llama)"));
}

}  // namespace

absl::StatusOr<LayerGraph> LlamaLayerGraph(const RunSpec& spec) {
  RETURN_IF_ERROR(CheckLlamaFamily(spec));
  RETURN_IF_ERROR(CheckLlamaParallelism(spec));
  const RematPlan unused;
  return LlamaBuilder(spec, unused).graph();
}

absl::StatusOr<Program> BuildLlamaTrainStep(const RunSpec& spec, const RematPlan& plan) {
  RETURN_IF_ERROR(CheckLlamaFamily(spec));
  LlamaBuilder b(spec, plan);
  return b.Build();
}

}  // namespace gpusim
