// Lowering a `maxtext:` block into gpusim's keys; see maxtext.h. Each rule
// names the MaxText source it follows (AI-Hypercomputer/maxtext at 4bf3beaa).
#include "sim/config/maxtext.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <map>
#include <set>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/match.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/str_replace.h"
#include "sim/base/status.h"
#include "sim/config/maxtext_keys.h"

namespace gpusim {

std::vector<std::string> MaxTextKeys() {
  std::vector<std::string> keys;
  for (const internal::MaxTextKey& k : internal::MaxTextKeyTable()) keys.emplace_back(k.key);
  return keys;
}

namespace internal {
namespace {

// "[a, [b, c]]" for a sequence, the text for a scalar (the table's format).
std::string FlatText(const ConfigNode& n) {
  if (n.is_scalar()) return n.scalar();
  if (n.is_null()) return "null";
  if (n.is_map()) return "a mapping";
  std::vector<std::string> parts;
  for (const ConfigNode& item : n.items()) parts.push_back(FlatText(item));
  return absl::StrCat("[", absl::StrJoin(parts, ", "), "]");
}

bool ParseBoolText(const std::string& s, bool* out) {
  const std::string l = absl::AsciiStrToLower(s);
  if (l == "true") return *out = true, true;
  if (l == "false") return *out = false, true;
  return false;
}

// YAML 1.1 numbers as base.yml writes them: 10_000, 1.e-5, 12.0.
bool ParseNumberText(const std::string& s, double* out) {
  std::string t = absl::StrReplaceAll(s, {{"_", ""}});
  if (!t.empty() && t[0] == '+') t.erase(0, 1);
  if (t.empty()) return false;
  auto [ptr, ec] = std::from_chars(t.data(), t.data() + t.size(), *out);
  return ec == std::errc() && ptr == t.data() + t.size() && std::isfinite(*out);
}

// Equal as MaxText would read them: booleans and numbers by value.
bool SameValue(const std::string& a, const std::string& b) {
  bool ba, bb;
  if (ParseBoolText(a, &ba) && ParseBoolText(b, &bb)) return ba == bb;
  double da, db;
  if (ParseNumberText(a, &da) && ParseNumberText(b, &db)) return da == db;
  auto unquote = [](std::string s) { return absl::StrReplaceAll(s, {{"'", ""}, {"\"", ""}}); };
  return unquote(a) == unquote(b);
}

// Why a base.yml key is modelled only at its default, where the table's
// generic message is not enough.
const std::map<std::string, std::string>& DefaultOnlyReasons() {
  static const auto* const kReasons = new std::map<std::string, std::string>{
      {"gradient_accumulation_steps", "gradient accumulation (micro-batches scanned inside the step)"},
      {"quantization", "quantized training (AQT/fp8 dots)"},
      {"optimizer_memory_host_offload", "optimizer state offloaded to pinned host"},
      {"use_dpo", "DPO (a reference model's forward pass in the step)"},
      {"use_iota_embed", "the iota (one-hot matmul) embedding lookup"},
      {"fused_qkv", "the fused QKV projection (one kernel, tag qkv_proj)"},
      {"fused_mlp", "the fused MLP input projection (tag mlpwi)"},
      {"attention_type", "attention other than global causal (local_sliding, mla)"},
      {"mesh_axes", "custom mesh axes"},
      {"logical_axis_rules", "custom sharding rules"},
      {"data_sharding", "custom data sharding"},
      {"custom_mesh", "custom device meshes"},
      {"activations_in_float32", "fp32 activations before the nonlinearity"},
      {"logits_dot_in_fp32", "an fp32 logits matmul"},
      {"matmul_precision", "a non-default matmul precision"},
      {"routed_score_func", "a score function on MoeBlock's gate logits (layers/linears.py:884-895 score_func)"},
      {"routed_bias", "a bias on MoeBlock's gate (layers/linears.py:884-895 use_bias)"},
  };
  return *kReasons;
}

// One key's effective value: base.yml's default, the model file's value, or
// what the block wrote.
struct Value {
  enum Source { kDefault, kModel, kWritten };
  Source source = kDefault;
  std::string text;                   // scalar text, or FlatText of a list
  std::vector<std::string> items;     // a flat list's items
  const ConfigNode* node = nullptr;   // kWritten: the value written
};

// A value from the table's text: a flat list "[a, b]" also as items.
void SetText(Value& v, const std::string& text) {
  v.text = text;
  v.items.clear();
  if (text.size() >= 2 && text.front() == '[' && text.find('[', 1) == std::string::npos) {
    for (absl::string_view item : absl::StrSplit(text.substr(1, text.size() - 2), ", ")) v.items.emplace_back(item);
  }
}

class Lowerer {
 public:
  Lowerer(const ConfigNode& root, const ConfigNode& block) : root_(root), block_(block) {}

  absl::StatusOr<MaxTextLowering> Run();

 private:
  // "FILE:L:C (maxtext.KEY)" where the value was written, else the block's
  // position with the value's origin; generated gpusim nodes carry it.
  SourceLocation Where(const std::string& key) const {
    const Value& v = values_.at(key);
    SourceLocation loc = v.node != nullptr ? v.node->location() : block_.location();
    std::string origin = v.source == Value::kWritten ? ""
                         : v.source == Value::kModel ? absl::StrCat(", set by model_name ", model_name_)
                                                     : ", base.yml default";
    loc.label = absl::StrCat(loc.ToString(), " (maxtext.", key, origin, ")");
    return loc;
  }
  void Fail(const std::string& key, const std::string& msg) {
    if (!status_.ok()) return;
    const Value& v = values_.at(key);
    const SourceLocation loc = v.node != nullptr ? v.node->location() : block_.location();
    std::string origin = v.source == Value::kModel ? absl::StrCat(" (set by model_name ", model_name_,
                                                                  ", MaxText/configs/models/", model_name_, ".yml)")
                         : v.source == Value::kDefault ? " (base.yml default)"
                                                       : "";
    status_ = absl::InvalidArgumentError(
        absl::StrCat(loc.ToString(), ": maxtext.", key, ": ", msg, origin));
  }

  bool Bool(const std::string& key) {
    bool b = false;
    if (!ParseBoolText(values_.at(key).text, &b)) {
      Fail(key, absl::StrCat("expected true or false, got '", values_.at(key).text, "'"));
    }
    return b;
  }
  double Number(const std::string& key) {
    double d = 0;
    if (!ParseNumberText(values_.at(key).text, &d)) {
      Fail(key, absl::StrCat("expected a number, got '", values_.at(key).text, "'"));
    }
    return d;
  }
  int64_t Int(const std::string& key, int64_t min) {
    const double d = Number(key);
    if (!status_.ok()) return min;
    if (d != std::floor(d) || d < static_cast<double>(min) || d > 1e15) {
      Fail(key, absl::StrCat("expected an integer >= ", min, ", got '", values_.at(key).text, "'"));
      return min;
    }
    return static_cast<int64_t>(d);
  }
  std::string Str(const std::string& key) {
    return absl::StrReplaceAll(values_.at(key).text, {{"'", ""}, {"\"", ""}});
  }

  absl::Status CheckBeside();
  absl::Status Collect();
  void CheckDefaultOnly();
  void ReadModel();
  void ReadMoe(const std::string& block);
  void ReadStep();
  void ReadRemat();
  void ComputeFlops();
  ConfigNode Scalar(const std::string& text, const std::string& key) const {
    return ConfigNode::Scalar(text, Where(key));
  }
  void Put(ConfigNode* map, const std::string& gpusim_key, const std::string& text, const std::string& key) const {
    map->Set(gpusim_key, Where(key), Scalar(text, key));
  }

  const ConfigNode& root_;
  const ConfigNode& block_;
  absl::Status status_;
  std::map<std::string, Value> values_;
  std::string model_name_;
  MaxTextSpec spec_;
  // What the lowering writes (gpusim keys).
  ConfigNode model_ = ConfigNode::Map({});
  ConfigNode optimizer_ = ConfigNode::Map({});
  ConfigNode loop_ = ConfigNode::Map({});
  ConfigNode remat_ = ConfigNode::Map({});
  ConfigNode batch_ = ConfigNode::Map({});
  int64_t fsdp_ = 1, tensor_ = 1;
  bool tensor_sequence_ = false;
  // For the formula (MaxText's derived config keys).
  int64_t emb_ = 0, heads_ = 0, kv_heads_ = 0, mlp_ = 0, layers_ = 0, head_dim_ = 0, vocab_ = 0, seq_ = 0;
  int64_t activations_ = 0;
  int64_t experts_ = 1, experts_per_token_ = 1;  // num_experts, num_experts_per_tok
  double per_device_batch_ = 0;
};

// gpusim keys a run config may write beside `maxtext:`; the rest the block sets.
absl::Status Lowerer::CheckBeside() {
  for (const ConfigEntry& e : root_.entries()) {
    const std::string loc = e.key_location.ToString();
    if (e.key == "maxtext" || e.key == "device" || e.key == "allocator" || e.key == "xla") continue;
    if (e.key == "framework") {
      if (!e.value.is_scalar() || e.value.scalar() != "jax") {
        return absl::InvalidArgumentError(absl::StrCat(
            e.value.location().ToString(), ": framework: a maxtext config runs under jax, got ", e.value.Describe()));
      }
      continue;
    }
    if (e.key == "parallelism" && e.value.is_map()) {
      for (const ConfigEntry& p : e.value.entries()) {
        if (p.key == "gather_dtype") continue;
        return absl::InvalidArgumentError(absl::StrCat(
            p.key_location.ToString(), ": parallelism.", p.key,
            ": set by the maxtext block (ici_fsdp_parallelism and the other ici_*/dcn_* keys); beside maxtext "
            "only parallelism.gather_dtype may be written"));
      }
      continue;
    }
    static const auto* const kInstead = new std::map<std::string, std::string>{
        {"model", "model_name, or base_emb_dim, base_num_decoder_layers, ... with model_name: default"},
        {"optimizer", "opt_type, weight_dtype, gradient_clipping_threshold"},
        {"loop", "scan_layers"},
        {"remat", "remat_policy (and decoder_layer_input ... out_proj with remat_policy: custom)"},
        {"batch", "per_device_batch_size, max_target_length"},
        {"parallelism", "ici_fsdp_parallelism"},
        {"program", "a maxtext block describes the model itself"},
        {"program_hlo", "a maxtext block describes the model itself"},
    };
    auto it = kInstead->find(e.key);
    return absl::InvalidArgumentError(absl::StrCat(
        loc, ": ", e.key, ": set by the maxtext block; write ",
        it == kInstead->end() ? "it as a MaxText key" : it->second, " in maxtext: instead"));
  }
  return absl::OkStatus();
}

absl::Status Lowerer::Collect() {
  for (const MaxTextKey& k : MaxTextKeyTable()) SetText(values_[k.key], k.default_value);
  // The block as written (the schema has refused keys base.yml lacks).
  for (const ConfigEntry& e : block_.entries()) {
    auto it = values_.find(e.key);
    if (it == values_.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat(e.key_location.ToString(), ": maxtext: unknown key '", e.key, "'"));
    }
    Value& v = it->second;
    v.source = Value::kWritten;
    v.node = &e.value;
    v.text = FlatText(e.value);
    if (e.value.is_map() || e.value.is_null()) {
      return absl::InvalidArgumentError(absl::StrCat(e.value.location().ToString(), ": maxtext.", e.key,
                                                     ": expected a scalar or a sequence, got ", e.value.Describe()));
    }
    for (const ConfigNode& item : e.value.items()) v.items.push_back(FlatText(item));
  }
  // model_name: MaxText/configs/models/NAME.yml overrides base.yml; a key the
  // block also writes is an error (pyconfig.validate_no_keys_overwritten_twice).
  model_name_ = Str("model_name");
  const auto& known = MaxTextKnownModelNames();
  if (std::find(known.begin(), known.end(), model_name_) == known.end()) {
    Fail("model_name", absl::StrCat("expected one of MaxText's model names (", absl::StrJoin(known, ", "),
                                    "), got '", model_name_, "'"));
    return status_;
  }
  if (model_name_ == "default") return absl::OkStatus();
  const MaxTextModel* model = nullptr;
  for (const MaxTextModel& m : MaxTextModels()) {
    if (model_name_ == m.name) model = &m;
  }
  if (model == nullptr) {
    Fail("model_name", absl::StrCat("'", model_name_,
                                    "': its decoder block is not modelled (gpusim models MaxText's llama2 and mistral "
                                    "decoder blocks: llama2-*, llama3*, mistral-7b, as the llama family)"));
    return status_;
  }
  for (const auto& [key, text] : model->keys) {
    Value& v = values_.at(key);
    if (v.source == Value::kWritten) {
      Fail(key, absl::StrCat("also set by model_name ", model_name_, " (MaxText/configs/models/", model_name_,
                             ".yml: ", text, "); MaxText refuses a key set by both the model and the command line "
                             "(pyconfig.validate_no_keys_overwritten_twice): use model_name: default"));
      return status_;
    }
    v.source = Value::kModel;
    SetText(v, text);
  }
  return absl::OkStatus();
}

void Lowerer::CheckDefaultOnly() {
  for (const MaxTextKey& k : MaxTextKeyTable()) {
    const Value& v = values_.at(k.key);
    if (v.source == Value::kDefault) continue;
    if (k.kind == MaxTextKeyKind::kNoEffect && v.source == Value::kWritten) spec_.no_effect.push_back(k.key);
    if (k.kind != MaxTextKeyKind::kDefaultOnly || SameValue(v.text, k.default_value)) continue;
    if (absl::StrContains(k.key, "_parallelism")) {
      Fail(k.key, absl::StrCat("'", v.text, "' is not modelled: the llama family shards by FSDP "
                               "(ici_fsdp_parallelism) and tensor parallelism (ici_tensor_parallelism or "
                               "ici_tensor_sequence_parallelism); data, sequence, context, pipeline and expert "
                               "parallelism and the dcn_* axes are not modelled"));
      return;
    }
    auto reason = DefaultOnlyReasons().find(k.key);
    Fail(k.key, absl::StrCat("'", v.text, "' is not modelled",
                             reason == DefaultOnlyReasons().end() ? "" : absl::StrCat(" (", reason->second, ")"),
                             "; gpusim models it at base.yml's default '", k.default_value, "'"));
    return;
  }
}

std::string DTypeOf(const std::string& maxtext) {
  if (maxtext == "bfloat16") return "bf16";
  if (maxtext == "float32") return "f32";
  if (maxtext == "float16") return "f16";
  return "";
}

void Lowerer::ReadModel() {
  // hardware: the device is `device:`; MaxText's layers read jax.devices().
  if (values_.at("hardware").source == Value::kWritten) {
    const std::string hw = Str("hardware");
    if (hw != "gpu" && hw != "gpu_multiprocess") {
      Fail("hardware", absl::StrCat("expected gpu or gpu_multiprocess (gpusim simulates the GPU named by device:), "
                                    "got '", hw, "'"));
    }
  }
  const std::string block = Str("decoder_block");
  if (block != "llama2" && block != "mistral") {
    Fail("decoder_block", absl::StrCat("'", block, "' is not modelled (the llama family is MaxText's llama2 decoder "
                                       "block; mistral's dense layer is the same: layers/mistral.py)"));
  }
  ReadMoe(block);
  // pyconfig.get_individual_scales: a power of 2, doubling heads and MLP,
  // embedding, layers in turn.
  const int64_t scale = Int("global_parameter_scale", 1);
  if (!status_.ok()) return;
  const int log2 = static_cast<int>(std::floor(std::log2(static_cast<double>(scale))));
  if ((int64_t{1} << log2) != scale || log2 > 30) {
    Fail("global_parameter_scale",
         absl::StrCat("expected a power of 2 (pyconfig.get_individual_scales) of at most 2^30, got ", scale));
    return;
  }
  const int base = log2 / 3, rem = log2 % 3;
  const int head_scale = base + (rem > 0), emb_scale = base + (rem > 1), layer_scale = base;
  emb_ = (int64_t{1} << emb_scale) * Int("base_emb_dim", 1);
  heads_ = (int64_t{1} << head_scale) * Int("base_num_query_heads", 1);
  kv_heads_ = (int64_t{1} << head_scale) * Int("base_num_kv_heads", 1);
  mlp_ = (int64_t{1} << head_scale) * Int("base_mlp_dim", 1);
  layers_ = (int64_t{1} << layer_scale) * Int("base_num_decoder_layers", 1);
  head_dim_ = Int("head_dim", 1);
  vocab_ = Int("vocab_size", 1);
  const Value& act = values_.at("mlp_activations");
  activations_ = static_cast<int64_t>(act.items.size());
  std::vector<std::string> acts;
  for (const std::string& a : act.items) acts.push_back(absl::StrReplaceAll(a, {{"'", ""}, {"\"", ""}}));
  if (acts != std::vector<std::string>{"silu", "linear"}) {
    Fail("mlp_activations", absl::StrCat("'", act.text, "' is not modelled (the llama family's MLP is SwiGLU: "
                                                         "[silu, linear])"));
  }
  const std::string dtype = DTypeOf(Str("dtype")), weight_dtype = DTypeOf(Str("weight_dtype"));
  if (dtype.empty()) Fail("dtype", absl::StrCat("expected bfloat16, float32 or float16, got '", Str("dtype"), "'"));
  if (weight_dtype.empty()) {
    Fail("weight_dtype", absl::StrCat("expected float32, bfloat16 or float16, got '", Str("weight_dtype"), "'"));
  }
  if (Bool("enable_dropout") && Number("dropout_rate") > 0) {
    Fail("dropout_rate", absl::StrCat(values_.at("dropout_rate").text,
                                      " with enable_dropout: dropout masks are not modelled for the llama family"));
  }
  const bool scan = Bool("scan_layers");
  const int64_t axis = Int("param_scan_axis", 0);
  // layers/attentions.py AttentionOp.apply_attention: dot_product is the
  // explicit softmax; cudnn_flash_te is TransformerEngine's fused attention,
  // whose output is tagged `context`; flash and autoselected (at length
  // >= 128) run the Pallas kernel gpu_pallas_attention.mha, whose output
  // carries no name and which repeats K/V to the query heads.
  seq_ = Int("max_target_length", 1);
  std::string attention = Str("attention");
  std::string family_attention;
  if (attention == "dot_product" || (attention == "autoselected" && seq_ < 128)) {
    family_attention = "explicit";
  } else if (attention == "cudnn_flash_te") {
    family_attention = "flash";
  } else if (attention == "flash" || attention == "autoselected") {
    Fail("attention", absl::StrCat("'", attention, "' runs MaxText's Pallas GPU flash kernel (gpu_pallas_attention.mha) "
                                   "at max_target_length >= 128: not modelled (its output carries no `context` name "
                                   "and K/V are repeated to the query heads); write cudnn_flash_te or dot_product"));
  } else {
    Fail("attention", absl::StrCat("'", attention, "' is not modelled for training (expected cudnn_flash_te, "
                                   "dot_product, or autoselected below length 128)"));
  }
  if (!status_.ok()) return;
  Put(&model_, "name", model_name_, "model_name");
  Put(&model_, "family", "llama", "decoder_block");
  Put(&model_, "d_model", absl::StrCat(emb_), "base_emb_dim");
  Put(&model_, "n_layers", absl::StrCat(layers_), "base_num_decoder_layers");
  Put(&model_, "n_heads", absl::StrCat(heads_), "base_num_query_heads");
  Put(&model_, "n_kv_heads", absl::StrCat(kv_heads_), "base_num_kv_heads");
  Put(&model_, "head_dim", absl::StrCat(head_dim_), "head_dim");
  Put(&model_, "mlp_dim", absl::StrCat(mlp_), "base_mlp_dim");
  Put(&model_, "vocab", absl::StrCat(vocab_), "vocab_size");
  Put(&model_, "tied_embeddings", Bool("logits_via_embedding") ? "true" : "false", "logits_via_embedding");
  Put(&model_, "weight_dtype", weight_dtype, "weight_dtype");
  Put(&model_, "compute_dtype", dtype, "dtype");
  // cast_logits_to_fp32 (layers/models.py Decoder): the logits in fp32.
  Put(&model_, "logits_dtype", Bool("cast_logits_to_fp32") ? "f32" : dtype, "cast_logits_to_fp32");
  Put(&model_, "attention", family_attention, "attention");
  Put(&model_, "param_scan_axis", absl::StrCat(axis), "param_scan_axis");
  Put(&model_, "scan_layers", scan ? "true" : "false", "scan_layers");
  if (experts_ > 1) {
    Put(&model_, "experts", absl::StrCat(experts_), "num_experts");
    Put(&model_, "experts_per_token", absl::StrCat(experts_per_token_), "num_experts_per_tok");
  }
  Put(&loop_, "mode", scan ? "rolled" : "unrolled", "scan_layers");
}

// Note [MaxText MoE paths]: which MoeBlock path a config runs
// (MaxText/layers/linears.py at 4bf3beaa: MoeBlock.__call__ :898 picks
// sparse_matmul, its gmm :442 megablox, dense_matmul :732 the capacity
// branch):
//  - sparse_matmul true, megablox true (base.yml's defaults): `gmm` calls
//    kernels/megablox/gmm.py, a Pallas TPU kernel (pltpu.
//    PrefetchScalarGridSpec, pltpu.VMEM; gmm.py:28,561,573): refused;
//  - sparse_matmul true, megablox false: jax.lax.ragged_dot (:456), whose
//    GPU lowering in JAX <= 0.6 (lax.py _ragged_dot_impl, v0.5.2
//    :5399-5427) is a dense masked expansion, E x the dropless FLOPs with an
//    [E, M, K] masked operand per GEMM, and capacity_factor is ignored:
//    refused (not modelled);
//  - sparse_matmul false, capacity_factor > 0: dense_matmul's capacity
//    branch (:732-830), dispatch / combine masks [B,S,E,C] and the
//    load-balance loss: refused (not modelled);
//  - sparse_matmul false, capacity_factor <= 0 (configs/models/gpu/
//    mixtral_8x1b.yml, mixtral_8x2b.yml): dense_matmul's no-capacity
//    branch, modelled (Note [MaxText MoE dense matmul], models/
//    llama_moe.cc) as model.experts / model.experts_per_token.
// The MoeBlock is built by the mistral decoder block only (layers/
// mistral.py:139); llama2's ignores num_experts (layers/llama2.py).
// With num_experts 1 no MoeBlock exists: the MoE keys, written, are listed
// as having no effect.
void Lowerer::ReadMoe(const std::string& block) {
  // (load_balance_loss_weight is a no-effect key of the table.)
  static const char* const kMoeKeys[] = {"num_experts_per_tok", "megablox", "sparse_matmul", "capacity_factor",
                                         "routed_bias", "routed_score_func"};
  experts_ = Int("num_experts", 1);
  if (!status_.ok()) return;
  if (experts_ == 1) {
    for (const char* key : kMoeKeys) {
      if (values_.at(key).source == Value::kWritten) spec_.no_effect.push_back(key);
    }
    return;
  }
  const std::string gpu_settings =
      "MaxText's GPU configs (configs/models/gpu/mixtral_8x1b.yml) set megablox: false and sparse_matmul: false, "
      "MoeBlock.dense_matmul without capacity (every token through all experts), which gpusim models";
  if (block != "mistral") {
    Fail("num_experts", absl::StrCat(experts_, " with decoder_block '", block, "': MaxText's ", block,
                                     " layer has no MoeBlock (only layers/mistral.py builds one); mixture of "
                                     "experts is modelled with decoder_block mistral (model_name mixtral-8x7b)"));
    return;
  }
  experts_per_token_ = Int("num_experts_per_tok", 1);
  if (status_.ok() && experts_per_token_ > experts_) {
    Fail("num_experts_per_tok", absl::StrCat("expected at most num_experts (", experts_, "), got ",
                                             experts_per_token_));
  }
  const bool sparse = Bool("sparse_matmul"), megablox = Bool("megablox");
  const double capacity = Number("capacity_factor");
  if (!status_.ok()) return;
  if (sparse && megablox) {
    Fail("megablox", absl::StrCat("true with sparse_matmul true runs MoeBlock.sparse_matmul's megablox gmm "
                                  "(MaxText/kernels/megablox/gmm.py), a Pallas TPU kernel that does not run on GPU; ",
                                  gpu_settings));
  } else if (sparse) {
    Fail("sparse_matmul", absl::StrCat("true with megablox false runs jax.lax.ragged_dot (layers/linears.py:456), "
                                       "which JAX <= 0.6 lowers on GPU as a dense masked expansion (E x the GEMM "
                                       "FLOPs, an [E, tokens x k, K] masked operand): not modelled; ",
                                       gpu_settings));
  } else if (capacity > 0) {
    Fail("capacity_factor", absl::StrCat(values_.at("capacity_factor").text,
                                         " runs dense_matmul's capacity branch (layers/linears.py:732-830: "
                                         "dispatch and combine masks [B,S,E,C], the load-balance loss): not "
                                         "modelled; gpusim models capacity_factor <= 0 (base.yml's -1.0), every "
                                         "token through all experts"));
  }
}

void Lowerer::ReadStep() {
  // per_device_batch_size is a float in MaxText (a global batch smaller
  // than the device count); gpusim simulates whole sequences per device.
  per_device_batch_ = Number("per_device_batch_size");
  if (status_.ok() && (per_device_batch_ < 1 || per_device_batch_ != std::floor(per_device_batch_) ||
                       per_device_batch_ > 1e15)) {
    Fail("per_device_batch_size", absl::StrCat("expected a whole number of sequences >= 1 per device (a fractional "
                                               "batch is not modelled), got '",
                                               values_.at("per_device_batch_size").text, "'"));
  }
  if (!status_.ok()) return;
  // Note [MaxText tensor parallelism]: the mesh axes `tensor` and
  // `tensor_sequence` (base.yml mesh_axes; ici_tensor_parallelism,
  // ici_tensor_sequence_parallelism) are the llama family's tensor group
  // under MaxText's logical-axis rules (Note [Llama tensor parallelism] in
  // models/llama_layer.cc): ici_tensor_parallelism = t is
  // parallelism.tensor = t, ici_tensor_sequence_parallelism = t is that
  // with sequence_parallel (activation_norm_length -> tensor_sequence). Both
  // above 1 would be two tensor axes of one mesh: refused. The t devices of
  // a group hold one model replica and see the same batch, so the
  // replica's batch (batch.per_device) is per_device_batch_size x t
  // (MaxText's global batch is per_device_batch_size x devices:
  // pyconfig.py calculate_global_batch_sizes).
  const int64_t ici_tensor = Int("ici_tensor_parallelism", 1);
  const int64_t ici_tensor_sequence = Int("ici_tensor_sequence_parallelism", 1);
  if (!status_.ok()) return;
  if (experts_ > 1 && std::max(ici_tensor, ici_tensor_sequence) > 1) {
    const char* key = ici_tensor > 1 ? "ici_tensor_parallelism" : "ici_tensor_sequence_parallelism";
    Fail(key, absl::StrCat("'", values_.at(key).text, "' with num_experts ", experts_,
                           ": tensor parallelism of MoeBlock is not modelled; shard by ici_fsdp_parallelism"));
    return;
  }
  if (ici_tensor > 1 && ici_tensor_sequence > 1) {
    Fail("ici_tensor_sequence_parallelism",
         absl::StrCat("'", ici_tensor_sequence, "' beside ici_tensor_parallelism '", ici_tensor,
                      "' is not modelled (two tensor axes of one mesh); set one of them"));
    return;
  }
  tensor_ = std::max(ici_tensor, ici_tensor_sequence);
  tensor_sequence_ = ici_tensor_sequence > 1;
  Put(&batch_, "per_device", absl::StrCat(static_cast<int64_t>(per_device_batch_) * tensor_),
      "per_device_batch_size");
  Put(&batch_, "seq_len", absl::StrCat(seq_), "max_target_length");
  // The mesh (max_utils.create_device_mesh): FSDP over ici_fsdp_parallelism
  // devices; -1 is "every device", a count a config does not hold.
  if (Str("ici_fsdp_parallelism") == "-1") {
    Fail("ici_fsdp_parallelism", "-1 (FSDP over every device) needs the number of devices, which the config does not "
                                 "hold: write it, e.g. 8");
    return;
  }
  fsdp_ = Int("ici_fsdp_parallelism", 1);
  for (const char* key : {"dcn_data_parallelism", "num_slices"}) {
    const double n = Number(key);
    if (status_.ok() && n != -1 && n != 1) {
      Fail(key, absl::StrCat("'", values_.at(key).text, "' is not modelled (one slice: multi-slice data parallelism "
                                                        "is not modelled)"));
    }
  }
  // optimizers.get_optimizer: adamw = optax.adamw, its moments in the
  // params' dtype; train.py clips by global norm when the threshold is > 0.
  const std::string opt = Str("opt_type");
  if (opt != "adamw") {
    Fail("opt_type", absl::StrCat("'", opt, "' is not modelled (expected adamw)"));
  }
  const double clip = Number("gradient_clipping_threshold");
  if (!status_.ok()) return;
  Put(&optimizer_, "kind", "adamw", "opt_type");
  Put(&optimizer_, "moment_dtype", DTypeOf(Str("weight_dtype")), "weight_dtype");
  Put(&optimizer_, "clip_grad_norm", clip > 0 ? "true" : "false", "gradient_clipping_threshold");
}

// layers/models.py Decoder.get_remat_policy; the custom policy's tags from
// pyconfig (tensors_on_device / tensors_to_offload).
void Lowerer::ReadRemat() {
  static const auto* const kPolicies = new std::set<std::string>{
      "none", "minimal", "save_dot_with_context_except_mlp", "save_dot_except_mlpwi", "save_dot_except_mlp",
      "save_qkv_proj", "qkv_proj_offloaded", "minimal_offloaded", "custom", "minimal_flash", "save_out_proj", "full"};
  const std::string policy = Str("remat_policy");
  if (kPolicies->count(policy) == 0) {
    Fail("remat_policy", absl::StrCat("expected a MaxText remat policy (", absl::StrJoin(*kPolicies, ", "), "), got '",
                                      policy, "'"));
    return;
  }
  std::vector<std::string> on_device, offload;
  for (const char* tag : {"decoder_layer_input", "context", "mlpwi", "mlpwi_0", "mlpwi_1", "mlpwo", "query_proj",
                          "key_proj", "value_proj", "out_proj"}) {
    const std::string where = Str(tag);
    if (where != "remat" && where != "device" && where != "offload") {
      Fail(tag, absl::StrCat("expected remat, device or offload, got '", where, "'"));
      return;
    }
    if (std::string(tag) == "decoder_layer_input") {
      // pyconfig asserts it is not rematerialised; the scan carry is kept.
      if (where == "remat") Fail(tag, "cannot be remat: it is the scan carry (pyconfig)");
      if (where == "offload") Fail(tag, "offload: offloading the layer input (the scan carry) is not modelled");
      continue;
    }
    if (where == "device") on_device.push_back(tag);
    if (where == "offload") offload.push_back(tag);
  }
  if (!status_.ok()) return;
  Put(&remat_, "policy", policy, "remat_policy");
  if (policy == "custom") {
    auto list = [&](const std::vector<std::string>& names) {
      ConfigNode seq = ConfigNode::Sequence(Where("remat_policy"));
      for (const std::string& n : names) seq.Append(ConfigNode::Scalar(n, Where(n)));
      return seq;
    };
    remat_.Set("names", Where("remat_policy"), list(on_device));
    remat_.Set("offload_names", Where("remat_policy"), list(offload));
  }
}

// MaxText/maxtext_utils.py calculate_tflops_training_per_device at
// 4bf3beaa, dense decoder (num_experts 1, attention_type global, not gemma2
// or deepseek): FFN 2·B·S·M·D·(activations + 1); QKV 2·B·S·D·(H + 2K)·Dh;
// attention 4·B·S²·H·Dh (causality not discounted: "megatron tflops
// calculation does not account for causality"); projection 2·B·S·D·H·Dh;
// embedding 2·B·S·D·V; learnable = (layers × (FFN + QKV + projection) +
// embedding) × 3, attention × layers × 3; both × gradient_accumulation_steps.
// With num_experts > 1 (not deepseek, :186-194): FFN is the gate
// 2·B·S·D·E plus k times the dense FFN ("calculation based on dropless
// implementation"), whatever path runs (Note [MaxText MoE dense matmul]:
// the no-capacity path computes E/k times that).
void Lowerer::ComputeFlops() {
  const double b = per_device_batch_, s = static_cast<double>(seq_), d = static_cast<double>(emb_);
  const double h = static_cast<double>(heads_), k = static_cast<double>(kv_heads_), dh = static_cast<double>(head_dim_);
  const double m = static_cast<double>(mlp_), v = static_cast<double>(vocab_), l = static_cast<double>(layers_);
  double ffn = 2 * b * s * m * d * static_cast<double>(activations_) + 2 * b * s * m * d;
  if (experts_ > 1) {
    ffn = 2 * b * s * d * static_cast<double>(experts_) + ffn * static_cast<double>(experts_per_token_);
  }
  const double qkv = 2 * b * s * d * (h + 2 * k) * dh;
  const double attention = 4 * b * s * s * h * dh;
  const double projection = 2 * b * s * d * h * dh;
  const double embedding = 2 * b * s * d * v;
  spec_.learnable_weight_tflops = ((ffn + qkv + projection) * l + embedding) * 3 / 1e12;
  spec_.attention_tflops = attention * l * 3 / 1e12;
  spec_.tflops_per_device_step = spec_.learnable_weight_tflops + spec_.attention_tflops;
  spec_.tokens_per_device_step = s * b;
  spec_.experts = experts_;
  spec_.experts_per_token = experts_per_token_;
}

absl::StatusOr<MaxTextLowering> Lowerer::Run() {
  RETURN_IF_ERROR(CheckBeside());
  RETURN_IF_ERROR(Collect());
  CheckDefaultOnly();
  if (status_.ok()) ReadModel();
  if (status_.ok()) ReadStep();
  if (status_.ok()) ReadRemat();
  RETURN_IF_ERROR(status_);
  ComputeFlops();
  spec_.present = true;
  spec_.model_name = model_name_;
  spec_.commit = kMaxTextCommit;

  MaxTextLowering out;
  out.root = root_;
  out.root.Erase("maxtext");
  if (out.root.Find("framework") == nullptr) {
    out.root.Set("framework", block_.location(), ConfigNode::Scalar("jax", block_.location()));
  }
  out.root.Set("model", block_.location(), model_);
  out.root.Set("optimizer", block_.location(), optimizer_);
  out.root.Set("loop", block_.location(), loop_);
  out.root.Set("remat", block_.location(), remat_);
  out.root.Set("batch", block_.location(), batch_);
  ConfigNode par = root_.Find("parallelism") != nullptr && root_.Find("parallelism")->is_map()
                       ? *root_.Find("parallelism")
                       : ConfigNode::Map(block_.location());
  par.Set("fsdp", Where("ici_fsdp_parallelism"), Scalar(absl::StrCat(fsdp_), "ici_fsdp_parallelism"));
  if (tensor_ > 1) {
    const char* key = tensor_sequence_ ? "ici_tensor_sequence_parallelism" : "ici_tensor_parallelism";
    par.Set("tensor", Where(key), Scalar(absl::StrCat(tensor_), key));
    par.Set("sequence_parallel", Where(key), Scalar(tensor_sequence_ ? "true" : "false", key));
  }
  out.root.Set("parallelism", block_.location(), par);
  out.spec = std::move(spec_);
  return out;
}

}  // namespace

absl::StatusOr<MaxTextLowering> LowerMaxTextRun(const ConfigNode& root) {
  const ConfigNode* block = root.Find("maxtext");
  if (block == nullptr || !block->is_map()) {
    return absl::InvalidArgumentError(
        absl::StrCat(block == nullptr ? root.location().ToString() : block->location().ToString(),
                     ": maxtext: expected a mapping of MaxText base.yml keys, got ",
                     block == nullptr ? "nothing" : block->Describe()));
  }
  return Lowerer(root, *block).Run();
}

}  // namespace internal
}  // namespace gpusim
