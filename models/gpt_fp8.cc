// fp8 training of a Megatron-LM launch line (--fp8-format e4m3|hybrid) with
// Transformer Engine's recipes: what it adds to and changes in the gpt
// builder's step. See gpt_builder.h.
//
// Note [Megatron fp8]
// Sources: NVIDIA/TransformerEngine transformer_engine/pytorch/ (v2.x):
// fp8.py FP8GlobalStateManager (fp8 autocast, the amax reduction),
// module/base.py TransformerEngineBaseModule (init_fp8_meta_tensors,
// get_weight_workspace, _fp8_workspaces), module/linear.py and
// module/layernorm_linear.py (_Linear / _LayerNormLinear forward and
// backward); Megatron-LM megatron/core/fp8_utils.py and
// megatron/core/extensions/transformer_engine.py (TE linear layers, the
// is_first_microbatch flag), megatron/training/arguments.py for defaults.
// Only the decoder layers' four TE linear layers (QKV, attention output,
// fc1, fc2) run in fp8; the output layer, attention core and the
// elementwise ops stay in bf16 (no --fp8-dot-product-attention).
//
// Per GEMM (X [tokens, k] · W [k, n]), on each rank:
//  - Input: X (bf16) is cast to fp8 once as the GEMM's row-wise operand and
//    once as the column-wise (transposed) copy that the backward's wgrad
//    reads: `ln1_f8` (read by the fprop GEMM, freed after it) and `ln1_f8t`
//    (saved for backward instead of the bf16 X: linear.py saves the
//    quantized input, update_usage(rowwise_usage=False)). Saved GEMM inputs
//    thus cost 1 B an element instead of 2. Under sequence parallelism the
//    fp8 shard is all-gathered (gather_along_first_dim of the quantized
//    input), and the backward re-gathers the saved fp8 shard. TE runs one
//    cast-transpose kernel; we emit two casts (the transpose read from the
//    row-wise copy), 1 B an element more traffic than TE's kernel.
//  - Weight: a fp8 copy and its transpose (Hopper's fp8 GEMMs take TN
//    operands only), cast at the layer's first forward of the step
//    (is_first_microbatch=True) and kept across micro-batches and steps in
//    the module's _fp8_workspaces: 2 B per GEMM parameter, persistent.
//    --fp8-param-gather holds the parameter itself in fp8 (fp8_model_init;
//    the distributed optimizer's fp32 master shard is unchanged, its param
//    all-gather moves 1 B an element) and keeps only the transpose.
//  - Backward: dY is cast to fp8 (e4m3, or e5m2 under hybrid: both 1 B),
//    row-wise for dgrad (dX = dY · Wᵀ, reading the weight's transpose) and
//    transposed for wgrad (dW = Xᵀ · dY, reading the saved X copy); both
//    GEMMs run in fp8 (Megatron's default fp8_wgrad) at flops.fp8.
//  - Scaling state (module/base.py init_fp8_meta_tensors): delayed scaling
//    keeps, per GEMM, an fp32 amax history of --fp8-amax-history-len rows for
//    its 3 forward tensors (input, weight, output) and 2 backward ones
//    (grad output, grad input), plus an fp32 scale and scale_inv per tensor:
//    (3 + 2) x (len + 2) x 4 B. Current (tensorwise) scaling keeps no
//    history (scale and scale_inv only) and computes each tensor's amax
//    before its cast: one more read of the cast's input.
// Not modelled (a few hundred bytes and a microsecond a layer): the amax
// all-reduce FP8GlobalStateManager runs over the amax reduction group. The
// fp8 GEMMs' achievable share of flops.fp8 is the device's efficiency.matmul,
// fitted on bf16 GEMMs: no fp8 measurement calibrates it yet.
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "models/gpt_builder.h"

namespace gpusim {
namespace gpt_internal {
namespace {

constexpr const char* kGemmWeights[] = {"w_qkv", "w_proj", "w_fc1", "w_fc2"};

bool IsGemmWeight(const std::string& name) {
  for (const char* w : kGemmWeights) {
    if (name == w || absl::EndsWith(name, std::string(".") + w)) return true;
  }
  return false;
}

// Tensors TE quantizes per GEMM (module/base.py: 3 forward, 2 backward).
constexpr int64_t kFp8TensorsPerGemm = 5;

}  // namespace

DType GptBuilder::ParamDType(const std::string& name) const {
  return Fp8() && g_.fp8_param_gather && IsGemmWeight(name) ? DType::kF8 : m_.weight_dtype;
}

void GptBuilder::Fp8Graph(LayerGraph* graph) const {
  std::vector<LayerValue> out;
  for (LayerValue v : graph->values) {
    if (v.kind != OpKind::kMatmul || v.param().empty()) {
      out.push_back(std::move(v));
      continue;
    }
    const std::string src = v.needs[0];  // the saved (under SP, sharded) input
    std::vector<int64_t> shape = {Ssp(), B_, H_};
    size_t at = out.size();
    for (size_t i = 0; i < out.size(); ++i) {
      if (out[i].name == src) shape = out[i].shape;
      if (out[i].name == v.inputs[0] && v.inputs[0] != src) at = i;  // the SP gather: cast before it
    }
    double elems = 1;
    for (int64_t d : shape) elems *= static_cast<double>(d);
    LayerValue row{src + "_f8", shape, DType::kF8, OpKind::kConvert, {src}, elems, "", false, false, {}};
    LayerValue col{src + "_f8t", shape, DType::kF8, OpKind::kConvert, {row.name}, elems, "", false, false, {}};
    if (at < out.size()) {
      out[at].inputs = {row.name};
      out[at].dtype = DType::kF8;
    } else {
      v.inputs[0] = row.name;
    }
    v.needs[0] = col.name;
    out.insert(out.begin() + static_cast<std::ptrdiff_t>(at), {row, col});
    out.push_back(std::move(v));
  }
  graph->values = std::move(out);
}

void GptBuilder::DeclareFp8State() {
  int64_t gemms = 0;
  for (const std::string& p : param_order_) {
    if (!IsGemmWeight(p)) continue;
    ++gemms;
    const Tensor w = b_.tensor(params_.at(p));  // a copy: AddArgument may reallocate
    TensorId row = w.id;
    if (!g_.fp8_param_gather) {
      row = b_.AddArgument("fp8.weight." + p, w.shape, DType::kF8, Role::kWorkspace, false,
                           "fp8 copy of " + p + " (TE weight workspace, kept across micro-batches)");
    }
    const std::vector<int64_t> t_shape = {w.shape[1], w.shape[0]};
    const TensorId t = b_.AddArgument("fp8.weight_t." + p, t_shape, DType::kF8, Role::kWorkspace, false,
                                      "fp8 transpose of " + p + " (TE weight workspace, for dgrad)");
    fp8_weights_[p] = {row, t};
  }
  if (gemms == 0) return;
  // (len + 2) rows: the amax history, scale and scale_inv; current scaling: 2.
  const int64_t rows = (g_.fp8_recipe == "delayed" ? g_.fp8_amax_history_len : 0) + 2;
  b_.AddArgument("fp8.scaling", {gemms, kFp8TensorsPerGemm, rows}, DType::kF32, Role::kScalar, false,
                 absl::StrCat("fp8 scaling state of ", gemms, " GEMMs (", g_.fp8_recipe,
                              g_.fp8_recipe == "delayed" ? absl::StrCat(", amax history ", g_.fp8_amax_history_len)
                                                         : std::string(),
                              ")"));
}

void GptBuilder::CastFp8Weights(int l) {
  if (!fp8_cast_.insert(l).second) return;
  for (const char* w : kGemmWeights) {
    const std::string p = absl::StrCat("layer", l, ".", w);
    auto it = fp8_weights_.find(p);
    if (it == fp8_weights_.end()) continue;
    const auto [row, t] = it->second;
    const TensorId param = params_.at(p);
    std::vector<TensorId> ins = {param, t};
    if (row != param) ins.push_back(row);
    const Tensor pt = b_.tensor(param);
    Op& op = b_.AddOp(absl::StrCat("layer", l, ".fp8_cast.", w), OpKind::kConvert, ins, {},
                      static_cast<double>(pt.elements()));
    op.bytes_read = pt.bytes();
    op.bytes_written = Bytes(pt.elements() * (row != param ? 2 : 1));
    if (g_.fp8_recipe == "tensorwise" && row != param) op.bytes_read = op.bytes_read + pt.bytes();  // the amax pass
  }
}

TensorId GptBuilder::GemmWeight(int l, const std::string& w, bool transposed) {
  const auto& [row, t] = fp8_weights_.at(absl::StrCat("layer", l, ".", w));
  return transposed ? t : row;
}

void GptBuilder::Fp8Op(Op& op, const LayerValue& v) const {
  if (Fp8Gemm(v)) op.dtype = DType::kF8;
  // Current scaling: the amax of a bf16 input is read before its cast.
  if (v.kind == OpKind::kConvert && g_.fp8_recipe == "tensorwise" && !absl::EndsWith(v.name, "_f8t")) {
    op.bytes_read = op.bytes_read + op.bytes_read;
  }
}

std::pair<TensorId, TensorId> GptBuilder::CastGradFp8(const std::string& pre, const LayerValue& n, TensorId dout) {
  const Tensor d = b_.tensor(dout);  // a copy: AddTensor may reallocate
  const std::string fmt = g_.fp8_format == "hybrid" ? "e5m2" : "e4m3";
  const TensorId row = b_.AddTensor(pre + n.name + ".dy_f8", d.shape, DType::kF8, Role::kTemporary,
                                    "gradient of " + n.name + " cast to fp8 (" + fmt + ") for dgrad");
  const TensorId t = b_.AddTensor(pre + n.name + ".dy_f8t", d.shape, DType::kF8, Role::kTemporary,
                                  "gradient of " + n.name + " cast to fp8 (" + fmt + "), transposed, for wgrad");
  Op& op = b_.AddOp(pre + n.name + ".dy_fp8_cast", OpKind::kConvert, {dout}, {row, t},
                    static_cast<double>(d.elements()));
  if (g_.fp8_recipe == "tensorwise") op.bytes_read = op.bytes_read + d.bytes();  // the amax pass
  return {row, t};
}

}  // namespace gpt_internal
}  // namespace gpusim
