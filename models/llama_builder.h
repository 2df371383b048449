// Internal to the llama family (models/llama.h): the builder that emits one
// training step as Program IR, split over four files along its seams:
//   llama.cc        the step's structure (Build) and the public entry points
//   llama_layer.cc  the decoder layer table, its forward/backward emission,
//                   tensor and sequence parallelism
//   llama_scan.cc   residual and gradient stacks of the plan's saved set, host
//                   offload, param_scan_axis transposes (scan structure)
//   llama_state.cc  parameters and their sharding, weight gathers and
//                   gradient reduction, embedding, head and loss, optimizer
// Nothing outside models/llama*.cc includes this header.
#ifndef GPUSIM_MODELS_LLAMA_BUILDER_H_
#define GPUSIM_MODELS_LLAMA_BUILDER_H_

#include <algorithm>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "sim/config/spec.h"
#include "sim/ir/builder.h"
#include "sim/ir/layer_graph.h"
#include "sim/ir/program.h"
#include "sim/ir/remat_plan.h"
#include "sim/lower/semantics.h"

namespace gpusim {
namespace llama_internal {

inline int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

// One trainable parameter (or a stack of L of them when layers are scanned).
struct Param {
  std::string name;
  std::vector<int64_t> full;   // unsharded shape of one layer's (or the global) weight
  int shard_axis = 0;          // the embed axis FSDP shards
  int tp_axis = -1;            // the axis tensor parallelism splits; -1: replicated over the group
  bool per_layer = false;
  TensorId value = kNoTensor, mu = kNoTensor, nu = kNoTensor;  // arguments
  std::vector<TensorId> grads;  // fp32 sharded gradient(s), one per layer when per_layer
  TensorId scan_source = kNoTensor;  // what layer slices are read from: value, or its transpose
  TensorId grad_stack = kNoTensor;   // rolled: the [L, ...] gradient ys of the backward loop
  TensorId residual_stack = kNoTensor;  // rolled: the saved per-layer slices, stacked [L, ...]
};

// One device's training step for a RunSpec of the llama family. Build()
// checks CheckLlamaParallelism first; a builder is used once.
class LlamaBuilder {
 public:
  LlamaBuilder(const RunSpec& s, const RematPlan& plan);

  absl::StatusOr<Program> Build();

  // One decoder layer at this rank's widths (the graph the step pipeline
  // applies the remat policy to, sim/remat/apply.h).
  const LayerGraph& graph() const { return graph_; }

 private:

  // --- scan structure (../shared/reference/xla_semantics.md §3-§5) -------------

  // The plan's per-layer saved set (values of graph_, the layer input).
  const std::set<std::string>& saved_names() const { return plan_.saved; }

  void PrepareScanSources();

  std::vector<int64_t> Stacked0(std::vector<int64_t> shape) const {
    shape.insert(shape.begin(), L_);
    return shape;
  }

  // Note [Stack initialisation and CSE], Note [Copy fusion of stack inits]
  // (llama_scan.cc).
  using StackKey = std::pair<std::vector<int64_t>, DType>;

  void PlanZeroStacks();

  TensorId ZeroStack(const std::string& name, std::vector<int64_t> shape, DType dt, Role role,
                     const Origin& origin);

  std::optional<DType> ParamResidualDType(const Param& p) const;

  std::pair<std::vector<int64_t>, DType> ResidualShape(const std::string& r) const;

  void AllocResidualStacks();

  static int64_t Elements(const std::vector<int64_t>& s) {
    int64_t n = 1;
    for (int64_t d : s) n *= d;
    return n;
  }

  void StoreResiduals(int l, const std::map<std::string, TensorId>& vals);

  // Note [Host offload] (llama_scan.cc).
  static bool IsComputeKind(OpKind k) {
    return !IsCollective(k) && k != OpKind::kHostToDevice && k != OpKind::kDeviceToHost;
  }

  void WaitForPending(Op& op);

  void OffloadResiduals(int l, const std::map<std::string, TensorId>& vals);

  std::map<std::string, TensorId> ReloadResiduals(int l);

  std::map<std::string, TensorId> LoadResiduals(int);

  void AllocGradStacks();

  void FinishStackedGrads();

  std::vector<int64_t> Local(const Param& p) const;
  std::vector<int64_t> Shard(const Param& p) const;
  // MaxText rules with sequence parallelism: a norm scale is sharded over
  // tensor_sequence but applied to full-embed activations, so it is
  // all-gathered for use (Note [Llama tensor parallelism]).
  bool GatheredOverTp(const Param& p) const { return maxtext_tp_ && sp_ && p.tp_axis >= 0 && p.full.size() == 1; }
  // Stacked shape: the layer axis inserted at model.param_scan_axis.
  std::vector<int64_t> Stacked(std::vector<int64_t> shard) const {
    size_t axis = std::min<size_t>(static_cast<size_t>(scan_axis_), shard.size());
    shard.insert(shard.begin() + static_cast<std::ptrdiff_t>(axis), L_);
    return shard;
  }

  void AddParam(std::string name, std::vector<int64_t> full, int shard_axis, bool per_layer, int tp_axis);

  void DeclareState();

  Param& P(const std::string& name) { return params_[param_index_.at(name)]; }

  TensorId Gather(const std::string& name, int layer, const std::string& why);

  void ReduceGrad(const std::string& name, int layer, TensorId full_grad);

  // --- tensor parallelism (Note [Llama tensor parallelism], llama_layer.cc) --

  // The residual stream of one rank: x, the norm outputs, x1, y.
  std::vector<int64_t> Rs() const { return {B_, sp_ ? S_ / t_ : S_, embed_sharded_ ? D_ / t_ : D_}; }
  bool ResidualSharded() const { return sp_ || embed_sharded_; }
  int64_t RsElements() const { return Elements(Rs()); }

  TensorId TpCollective(const std::string& name, OpKind kind, TensorId in, std::vector<int64_t> shape,
                        DType dt, const std::string& origin);
  TensorId GatherResidual(const std::string& name, TensorId in);
  TensorId ReducePartial(const std::string& name, TensorId partial);
  TensorId NormStatistic(const std::string& name, std::vector<TensorId> ins);

  // --- decoder layer ---------------------------------------------------------

  // The layer's weights, in gather order (the MoE MLP's with experts > 1).
  std::vector<std::string> LayerWeights() const;

  std::map<std::string, TensorId> GatherLayer(int l, const char* why);

  // The part of the causal S x S score matrix the attention kernels compute.
  double CausalFraction() const { return m_.attention == "flash" ? 0.5 : 1.0; }

  // The decoder layer's table (sim/ir/layer_graph.h), for this rank's
  // widths; built once, in the constructor.
  LayerGraph MakeLayerGraph() const;

  std::map<std::string, TensorId> EmitLayerForward(int l, TensorId x,
                                                   const std::map<std::string, TensorId>& known,
                                                   bool recompute, const std::set<std::string>& only);

  TensorId EmitLayerBackward(int l, TensorId x, const std::map<std::string, TensorId>& fwd,
                             const std::map<std::string, TensorId>& weights, TensorId dy);

  void MaterialiseResidualSlices(int l, std::map<std::string, TensorId>& v);

  // --- mixture-of-experts MLP (Note [MaxText MoE dense matmul], llama_moe.cc)

  // Appends the MoE MLP's values, from the norm output `h2` to moe_out.
  void AppendMoeMlp(std::vector<LayerValue>& n, const std::string& h2) const;
  TensorId MoeMlpBackward(int l, std::map<std::string, TensorId>& v, TensorId dy);
  TensorId BatchedMatmul(const std::string& name, std::vector<TensorId> ins, std::vector<int64_t> shape, int64_t m,
                         int64_t n, int64_t k, int64_t batch);

  TensorId Grad(const std::string& name, std::vector<int64_t> shape, DType dt = DType::kBF16);

  TensorId MatmulOp(const std::string& name, TensorId a, TensorId w, std::vector<int64_t> shape, int64_t m,
                    int64_t n, int64_t k);

  TensorId DenseBackward(int l, const std::string& w, TensorId x_in, TensorId dy, TensorId wt, int64_t kdim,
                         int64_t ndim, std::vector<int64_t> x_shape);

  TensorId Elementwise(const std::string& name, std::vector<TensorId> ins, std::vector<int64_t> shape,
                       double flops, DType dt);

  TensorId NormBackward(int l, const std::string& w, TensorId x_in, TensorId d_out, TensorId scale);

  TensorId LayerBackwardOps(int l, TensorId x, std::map<std::string, TensorId>& v, TensorId dy);

  // --- embedding, head, loss ---------------------------------------------------

  TensorId Embedding();

  struct HeadResult {
    TensorId h_final, h_full, logits_f32, onehot, exp_shifted, log_softmax, loss, w_out;
  };

  TensorId VocabStatistic(const std::string& name, TensorId logits);

  HeadResult HeadAndLoss(TensorId x);

  TensorId HeadBackward(const HeadResult& r);

  void EmbeddingBackward(TensorId dx);

  // --- optimizer -------------------------------------------------------------

  void Optimizer(TensorId loss);

  const RunSpec& s_;
  const ModelSpec& m_;
  const RematPlan& plan_;                       // the remat decision for graph_
  ProgramBuilder b_;
  int64_t B_, S_, T_, D_, H_, K_, Dh_, M_, V_, L_, N_;
  int64_t E_ = 1, Ek_ = 1;  // experts per MoE MLP (1: dense) and the router's top-k
  // Tensor parallelism (Note [Llama tensor parallelism]): the group size, the
  // per-rank query heads, KV heads, MLP width and vocabulary.
  int64_t t_ = 1, Ht_ = 0, Kt_ = 0, Mt_ = 0, Vt_ = 0;
  bool sp_ = false;             // sequence parallelism (t_ > 1)
  LoweringSemantics sem_;       // the run's framework (Note [Framework semantics])
  bool maxtext_tp_ = true;      // MaxText logical-axis rules, else Megatron-LM's
  bool scan_ = true;            // layers as one XLA scan over stacked params
  int scan_axis_ = 0;           // layer axis of stacked params (0 unless XLA scans)
  bool embed_sharded_ = false;  // jax, t_ > 1, no SP: the residual stream is sharded on embed
  DType cdt_, wdt_, gdt_;
  bool rolled_ = true;
  LayerGraph graph_;                            // one decoder layer (MakeLayerGraph)
  std::map<std::string, TensorId> host_stacks_; // rolled: [L, ...] host-memory residual stacks
  std::map<std::pair<int, std::string>, TensorId> host_values_;  // unrolled: per layer
  std::vector<OpId> pending_wait_;              // copies the next iteration waits for
  std::map<std::string, TensorId> stacks_;      // rolled: residual stacks by name
  std::map<StackKey, std::vector<TensorId>> zero_init_;  // Note [Copy fusion of stack inits]
  std::map<StackKey, int> zero_uses_;           // requests planned, per shape
  std::map<StackKey, int> zero_handed_;         // requests served so far, per shape
  std::vector<Param> params_;
  std::map<std::string, size_t> param_index_;
  std::map<std::string, TensorId> batch_;
  TensorId step_ = kNoTensor, adam_count_ = kNoTensor, sched_count_ = kNoTensor;
};

}  // namespace llama_internal
}  // namespace gpusim

#endif  // GPUSIM_MODELS_LLAMA_BUILDER_H_
