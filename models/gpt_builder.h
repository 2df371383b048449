// Internal to the gpt family (models/gpt.h): the builder that emits one
// training step (or one Megatron-LM pipeline rank's) as Program IR, split
// over four files along its seams:
//   gpt.cc            the step's structure (Build, the pipeline slots), the
//                     head and loss, and the public entry points
//   gpt_layer.cc      the decoder layer's table (its LayerGraph), its
//                     forward, recompute and backward emission, host offload
//   gpt_megatron.cc   Megatron launch lines: parameters and main_grad
//                     buffers, gradient buckets and their reduction, the
//                     (distributed) optimizer step, parameter all-gathers
//   gpt_optimizer.cc  the plain family's parameters, gradient clipping and
//                     AdamW
// The remat decision is the plan's (sim/ir/remat_plan.h), made by the step
// pipeline on MakeLayerGraph()'s graph. Nothing outside models/gpt*.cc
// includes this header.
#ifndef GPUSIM_MODELS_GPT_BUILDER_H_
#define GPUSIM_MODELS_GPT_BUILDER_H_

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "models/megatron_ranks.h"
#include "models/megatron_schedule.h"
#include "sim/config/spec.h"
#include "sim/ir/builder.h"
#include "sim/ir/layer_graph.h"
#include "sim/ir/program.h"
#include "sim/ir/remat_plan.h"

namespace gpusim {
namespace gpt_internal {

// An MoE layer's token counts per rank (Note [MoE routing cases],
// gpt_moe.cc): sent by the all-to-all dispatcher, received over EP, and
// through the experts (x ETP).
struct MoeTokens {
  int64_t sent = 0, received = 0, expert = 0;
};
// Whether a parameter's full name ("layerN.w_exp_fc1") is an expert's.
bool IsExpertParam(const std::string& name);

// One device's training step for a RunSpec of the gpt family or a Megatron
// launch line's rank (RunSpec::megatron). A builder is used once; `plan`
// must outlive it.
class GptBuilder {
 public:
  GptBuilder(const RunSpec& s, const RematPlan& plan);

  // The tensor-parallel split must divide the layer's widths.
  absl::Status CheckSplit() const;
  // One decoder layer (CheckSplit first), for the remat decision.
  absl::StatusOr<LayerGraph> Graph() const;
  absl::StatusOr<Program> Build();

 private:
  // Megatron launch lines (RunSpec::megatron): a gradient bucket, and the
  // head's values of one micro-batch between its forward and backward.
  struct Bucket {
    std::vector<TensorId> grads;
    std::set<std::string> units;  // "head", "layerN", "embed": all done -> ready
    int64_t elements = 0;
    bool emitted = false;
  };
  struct HeadState {
    TensorId xf = kNoTensor, logits = kNoTensor, dlogits = kNoTensor;
  };

  // --- step structure, head and loss (gpt.cc) -------------------------------

  // Transformer layers of virtual stage k (even when the launch line's
  // parser left no per-stage list, as a hand-built spec may).
  int64_t StageLayers(int64_t k) const {
    if (!g_.stage_layers.empty()) return g_.stage_layers[static_cast<size_t>(k)];
    return L_ / (g_.pipeline * g_.virtual_stages);
  }
  // Names of micro-batch k's values: "mbK." (none with a single micro-batch).
  std::string MbPrefix(int64_t mb) const {
    return mg_ && g_.microbatches > 1 ? absl::StrCat("mb", mb, ".") : std::string();
  }
  // One forward / backward pass of (micro-batch, chunk).
  void ForwardSlot(const PipelineSlot& slot);
  void BackwardSlot(const PipelineSlot& slot);
  // Layer index within its model chunk (recompute groups count from there:
  // transformer_block.py _checkpointed_forward loops over the chunk's layers).
  int64_t Local(int l) const { return l - chunk_first_; }
  // The residual stream's sequence length on this rank (SP shards it).
  int64_t Ssp() const { return sp_ ? S_ / t_ : S_; }
  void HeadForward(int64_t mb, TensorId x);
  TensorId HeadBackward(int64_t mb);
  // --cross-entropy-loss-fusion (gpt_cross_entropy.cc, Note [Megatron fused
  // cross entropy]): the loss from the compute-dtype logits, filling
  // h->logits; the compute-dtype gradient of the logits.
  TensorId FusedCrossEntropyForward(TensorId l16, HeadState* h);
  TensorId FusedCrossEntropyBackward(const HeadState& h);
  // --cross-entropy-fusion-impl te (Note [Transformer Engine cross entropy]):
  // the loss, the gradient written into the logits in place.
  TensorId TeCrossEntropyForward(TensorId l16, HeadState* h);
  TensorId TeCrossEntropyBackward(const HeadState& h);
  TensorId OutputWeight() const {
    return params_.at(params_.count("output") ? "output" : "embedding");
  }
  // Under SP, `x` all-gathered along the sequence; else `x`.
  TensorId Gathered(TensorId x, const std::string& name);
  // Makes `op` a collective over `size` ranks of Megatron's `kind` group,
  // with the nodes that group spans (Note [Megatron rank order]); outside a
  // launch line the nodes stay unknown (consecutive ranks).
  void SetGroup(Op& op, int64_t size, MegatronGroup kind) const;

  // --- decoder layer (gpt_layer.cc) -------------------------------------------

  // The decoder layer's graph, with the dense layer's as its kind when
  // --moe-layer-freq mixes dense and MoE layers.
  LayerGraph MakeLayerGraph() const;
  // One kind of decoder layer: its MLP the MoE layer's or the dense one.
  LayerGraph MakeLayerGraphOf(bool moe_mlp) const;
  // Whether layer l is an MoE layer (Note [Megatron MoE layer pattern]).
  bool MoeLayer(int l) const {
    return Moe() && (g_.moe.layer_pattern.empty() || g_.moe.layer_pattern[static_cast<size_t>(l)] == 1);
  }
  // Points lg_ and lp_ at layer l's kind of graph and its plan.
  void UseLayer(int l);
  // Attention's values after ln1 (the last one "proj_partial"): standard
  // (grouped-query) attention, or multi-latent attention (gpt_mla.cc).
  void AddAttentionValues(std::vector<LayerValue>* out) const;
  void AddMlaValues(std::vector<LayerValue>* out) const;
  // An MLA layer's attention parameters (gpt_mla.cc).
  std::vector<std::pair<std::string, std::vector<int64_t>>> MlaParamShapes() const;
  // The dense MLP's values after ln2 (the last one "fc2").
  void AddDenseMlp(std::vector<LayerValue>* out) const;
  // Note [MoE dispatch syncs] (gpt_moe.cc): the host syncs after this MoE
  // layer value's forward op.
  bool MoeSyncsAfter(const std::string& value) const;
  // REQUIRES: `name` is a value of graph_.
  const LayerValue& NodeOf(const std::string& name) const;
  // Megatron's full recompute (Note [Saved set], sim/remat/apply.h): the
  // plan's layer groups count from the layer's index within its chunk.
  bool Checkpointed(int l) const { return plan_.Checkpointed(Local(l)); }
  TensorId Param(int l, const std::string& w) { return params_.at(absl::StrCat("layer", l, ".", w)); }
  // Emits the values in `only` (all when empty) not yet `known`.
  std::map<std::string, TensorId> Forward(int l, std::map<std::string, TensorId> known, bool recompute,
                                          const std::set<std::string>& only);
  // Marks the plan's saved values (or a checkpointed group's input) residual.
  void MarkSaved(int l, const std::map<std::string, TensorId>& v);
  // Copies the plan's offloaded values to pinned host and back.
  void Offload(int l, const std::map<std::string, TensorId>& v);
  void Reload(int l, std::map<std::string, TensorId>* v);
  // d(name) += contribution.
  void AddGrad(std::map<std::string, TensorId>& g, const std::string& name, TensorId contribution);
  // The layer's backward from its saved (or `recomputed`) values; returns dx.
  TensorId Backward(int l, const std::map<std::string, TensorId>& fwd,
                    const std::map<std::string, TensorId>* recomputed, TensorId dy);

  // --- Megatron launch lines (gpt_megatron.cc) ------------------------------

  void DeclareMegatronParams();
  // A weight gradient into its main_grad (Note [Megatron main_grad]).
  void WeightGrad(const std::string& param, std::vector<TensorId> reads, OpKind kind, double flops, int64_t m,
                  int64_t n, int64_t k, DType dtype = DType::kBF16);
  void BuildBuckets();
  void EmitReduce(Bucket& bk);
  // `unit`'s gradients are all written; launches the buckets that are ready.
  void UnitDone(const std::string& unit);
  void ReduceGradients(bool /*at_end*/);
  void MegatronOptimizer();
  // This rank's elements of the distributed optimizer's state (Note
  // [Megatron expert optimizer shards]).
  int64_t OptimizerShardElements();
  void EmitParamGathers();

  // --- the rest of a Megatron iteration (gpt_megatron_host.cc, Note
  // [Megatron iteration on the host]) ------------------------------------------

  // p2p calls between pass i - 1 and pass i of the 1F1B schedule.
  int64_t P2pCallsBefore(size_t i) const;
  // Charges them: a sync ending the pass before `first`, Python calls
  // before the op `first` (or the next op emitted, when the pass is empty).
  void PipelineHostCalls(size_t i, OpId first);
  // `n` dependent kernels on a scalar; returns the last one's output.
  TensorId SmallKernels(const std::string& name, int64_t n, std::vector<TensorId> reads, DType dtype);
  // isnan and isinf of `value`, each a host sync (check_for_nan only).
  TensorId SyncedCheck(const std::string& name, TensorId value, bool nan_only = false);
  void GetBatch();
  void LossFunc(TensorId loss);
  void CheckBucketGrads(const Bucket& bk);
  int64_t TorchParams() const;
  void ReduceOverModelParallel(const std::string& name, TensorId x);
  void ClipGrads(TensorId norm, const std::vector<TensorId>& grads, int64_t local);
  void CountZeros();
  void ModelParallelStat(const std::string& name);
  // train_step's reductions and syncs, --log-params-norm, training_log.
  void IterationTail();

  // --- fp8 training under a launch line (gpt_fp8.cc, Note [Megatron fp8]) ----

  bool Fp8() const { return mg_ && !g_.fp8_format.empty(); }
  // A GEMM of a TE linear layer (a matmul reading a weight) that runs in fp8.
  bool Fp8Gemm(const LayerValue& v) const { return Fp8() && v.kind == OpKind::kMatmul && !v.param().empty(); }
  // The dtype a layer parameter is held in (fp8 for GEMM weights under
  // --fp8-param-gather).
  DType ParamDType(const std::string& name) const;
  // The fp8 casts of each GEMM's input inserted into the layer's graph.
  void Fp8Graph(LayerGraph* graph) const;
  // This rank's fp8 weight caches, transposes and scaling state.
  void DeclareFp8State();
  // --- GEMM library workspaces (gpt_workspace.cc) -----------------------------
  // Note [Megatron GEMM workspaces]; InvalidArgument when the device has no
  // compute capability to size them by.
  absl::Status DeclareGemmWorkspaces();
  // Note [Megatron global memory buffer].
  void DeclareGlobalMemoryBuffer();
  absl::Status DeclareTeDummyWgrads();  // Note [Transformer Engine dummy wgrads], gpt_workspace.cc
  // The weight casts of layer l, at its first forward of the step.
  void CastFp8Weights(int l);
  // The tensor a GEMM reads for weight `w` of layer l: the fp8 copy (or its
  // transpose, for dgrad) under fp8, else the parameter.
  TensorId GemmWeight(int l, const std::string& w, bool transposed);
  // Sets an emitted op's fp8 facts: GEMM dtype, current scaling's amax pass.
  void Fp8Op(Op& op, const LayerValue& v) const;
  // dY of an fp8 GEMM cast to fp8: {rowwise for dgrad, transpose for wgrad}.
  std::pair<TensorId, TensorId> CastGradFp8(const std::string& pre, const LayerValue& n, TensorId dout);
  // --- mixture of experts (gpt_moe.cc) ---------------------------------------

  // The MoE MLP's values after ln2 (Note [Megatron MoE layer]).
  void AddMoeValues(std::vector<LayerValue>* out) const;
  // `probs`: the routing weights the activation is scaled by.
  void AddExperts(std::vector<LayerValue>* out, const std::string& in, int64_t n_tok, const std::string& probs) const;
  void AddSharedExperts(std::vector<LayerValue>* out, const std::string& routed) const;
  // Note [Megatron fp32 router]: the router GEMM's backward under
  // --moe-router-dtype fp32; dx of its input added into `g`.
  void RouterFp32Backward(const std::string& pre, int l, const LayerValue& n, TensorId dout, TensorId xin,
                          std::map<std::string, TensorId>* g);
  // Tokens of the routing case g_.moe.routing (Note [MoE routing cases]).
  MoeTokens MoeTokenCounts() const;
  // A collective layer value's group: size and kind.
  std::pair<int64_t, MegatronGroup> GroupOf(const LayerValue& v) const;
  // An MoE layer's MLP parameters (router, experts, shared experts).
  std::vector<std::pair<std::string, std::vector<int64_t>>> MoeParamShapes() const;
  bool Moe() const { return mg_ && g_.moe.experts > 0; }

  // --- plain family's parameters and optimizer (gpt_optimizer.cc) ------------

  void DeclareParams();
  TensorId GradNorm();
  void Optimizer();

  const RunSpec& s_;
  const ModelSpec& m_;
  const RematPlan& plan_;
  ProgramBuilder b_;
  int64_t S_, B_, H_, A_, F_, V_, L_, t_, K_ = 0, Dh_ = 0;
  bool sp_;
  DType cdt_;
  LayerGraph graph_;  // one decoder layer (MakeLayerGraph)
  // The graph and plan of the layer being emitted (UseLayer).
  const LayerGraph* lg_ = &graph_;
  const RematPlan* lp_ = nullptr;
  std::map<std::pair<std::string, std::string>, TensorId> host_;  // offloaded values in pinned host memory
  std::map<std::string, TensorId> params_, grads_;
  std::map<std::string, std::pair<TensorId, TensorId>> moments_;
  TensorId tokens_ = kNoTensor;
  // Megatron launch lines (RunSpec::megatron): this pipeline rank's chunks
  // and schedule, main_grad buffers, optimizer state, gradient buckets.
  const MegatronSpec& g_;
  bool mg_;
  int64_t cp_ = 1, dp_ = 1, Sfull_ = 0;
  std::map<MegatronGroup, int64_t> group_nodes_;  // this stage's groups (launch lines only)
  bool first_stage_ = true, last_stage_ = true;
  std::vector<std::vector<int>> chunks_;
  std::vector<PipelineSlot> schedule_;
  std::string mbp_;    // name prefix of the current micro-batch
  int chunk_first_ = 0;  // first layer of the current chunk
  std::map<std::pair<int64_t, int64_t>, std::vector<std::map<std::string, TensorId>>> fwd_;
  std::map<int64_t, HeadState> head_;
  std::map<std::string, TensorId> main_grad_;
  std::map<std::string, std::vector<TensorId>> states_;
  std::vector<TensorId> shard_states_;
  std::vector<std::string> param_order_;
  std::vector<Bucket> buckets_;
  std::set<std::string> done_;
  std::vector<OpId> reduce_ops_;
  std::map<int64_t, OpId> param_gather_;
  int64_t pending_host_calls_ = 0;  // p2p calls after the last pass, for the next op
  int64_t expert_bias_layers_ = 0;  // MoE layers of this rank with an expert bias (Note [Megatron MoE router])
  int64_t checked_buckets_ = 0;
  // fp8 (gpt_fp8.cc): each GEMM weight's fp8 copy and transpose; layers whose
  // weights this step has cast.
  std::map<std::string, std::pair<TensorId, TensorId>> fp8_weights_;
  std::set<int> fp8_cast_;
};

}  // namespace gpt_internal
}  // namespace gpusim

#endif  // GPUSIM_MODELS_GPT_BUILDER_H_
