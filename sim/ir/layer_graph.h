// LayerGraph: a framework-neutral description of one decoder layer's forward
// values, declared once by a transformer family (models/llama_layer.cc,
// models/gpt_layer.cc: each keeps its own table) and read by everything that
// must not know the family: the remat decision (sim/remat/apply.h walks it
// and returns a RematPlan, sim/ir/remat_plan.h) and the builders' forward,
// recompute and backward emission.
//
// Names: a value's `inputs` are other values of the graph, the layer input
// (LayerGraph::input), or a layer parameter written "W:NAME" (kParamPrefix).
// `needs` are the values the value's backward rule reads (what autograd
// saves for it, what JAX's partial eval makes residual); the layer input
// may appear there too.
//
// Note [A second output of a kernel]
// One kernel can write two values the backward reads: TE's flash attention
// (transformer_engine FusedAttnFunc) writes the output and the fp32
// softmax statistics (log-sum-exp, one per query row and head). A table
// lists the statistics as a value of their own with `kernel_of` naming the
// output, so a remat policy can keep one and drop the other. Dropping it
// cannot recompute it alone: the backward reruns the whole kernel, from
// that kernel's inputs (sim/remat/apply.cc puts them in the recompute
// closure), at that kernel's FLOPs, and the rerun writes a second copy of
// the output too, which nothing reads (models/gpt_layer.cc Forward). This
// is Megatron-LM's selective recompute under flash attention.
#ifndef GPUSIM_SIM_IR_LAYER_GRAPH_H_
#define GPUSIM_SIM_IR_LAYER_GRAPH_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "sim/ir/dtype.h"
#include "sim/ir/program.h"

namespace gpusim {

inline constexpr std::string_view kParamPrefix = "W:";

// True for an input naming a layer parameter ("W:wq").
inline bool IsParamInput(std::string_view name) { return name.substr(0, kParamPrefix.size()) == kParamPrefix; }
// "W:wq" -> "wq". REQUIRES: IsParamInput(name).
inline std::string ParamOfInput(std::string_view name) { return std::string(name.substr(kParamPrefix.size())); }

// One forward value of the layer and the op that produces it.
struct LayerValue {
  std::string name;
  std::vector<int64_t> shape;
  DType dtype = DType::kBF16;
  OpKind kind = OpKind::kElementwise;
  std::vector<std::string> inputs;  // values, the layer input, "W:param" (emitted in this order)
  double flops = 0;
  std::string tag;               // the checkpoint_name a remat policy sees; empty: untagged
  bool is_dot = false;           // produced by dot_general (a matmul)
  bool dot_batch_dims = false;   // a dot_general with batch dimensions (QK^T, AV)
  std::vector<std::string> needs = {};  // values the backward rule reads
  int64_t m = 0, n = 0, k = 0, batch = 1;  // GEMM dimensions, for the kernel model
  int64_t group = 0;             // collective: its group size; 0: the tensor-parallel group
  double comm_scale = 1;         // collective: bytes moved / output bytes (e.g. a CP ring)
  double bwd_scale = 1;          // backward FLOPs / forward FLOPs where one op's backward is one op
  // Note [A second output of a kernel]: non-empty when this value is another
  // output of `kernel_of`'s kernel (flash attention's softmax statistics):
  // recomputing it reruns that kernel, from that kernel's inputs.
  std::string kernel_of = {};

  // The first "W:" input's parameter name; empty when the op reads none.
  std::string param() const;
};

// How a layer checkpointed whole (remat.policy `full`) is recomputed:
//  - kValues: jax.checkpoint / nn.remat with nothing_saveable: partial
//    evaluation recomputes only what the backward rules read, from the
//    saved input (jax/_src/ad_checkpoint.py remat_partial_eval).
//  - kLayerGroups: torch.utils.checkpoint around groups of whole layers
//    (Megatron-LM --recompute-granularity full, grouped by
//    --recompute-method / --recompute-num-layers, megatron/core/transformer/
//    transformer_block.py TransformerBlock._checkpointed_forward): each
//    checkpointed group saves its first layer's input and reruns its whole
//    forward before its layers' backward passes.
enum class CheckpointUnit { kValues, kLayerGroups };

struct LayerGraph {
  std::string input = "x";        // the layer input (always saved)
  std::vector<LayerValue> values;  // in forward order
  int64_t n_layers = 1;           // layers of the model (the group rules count them)
  CheckpointUnit checkpoint_unit = CheckpointUnit::kValues;
  // The model's other kinds of decoder layer, when its layers differ (a
  // Megatron launch line's --moe-layer-freq: the dense layers beside the MoE
  // ones); each is planned on its own (ApplyRematPolicy: RematPlan::kinds,
  // in this order) and the front-end says which layer is of which kind.
  // Empty: every layer is this graph. A kind has no kinds of its own.
  std::vector<LayerGraph> kinds;

  // The value named `name`; nullptr for the layer input, parameters and
  // unknown names.
  const LayerValue* Find(std::string_view name) const;
  // Every name is unique, every input names an earlier value, the layer
  // input or a parameter, every need names a value or the layer input, and
  // every kernel_of names a value that is no second output itself;
  // otherwise an internal error naming the value (a front-end's table is
  // wrong: a misspelt need would silently drop a residual).
  absl::Status Validate() const;
};

}  // namespace gpusim

#endif  // GPUSIM_SIM_IR_LAYER_GRAPH_H_
