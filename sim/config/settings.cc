// The settings table; see settings.h.
#include "sim/config/settings.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace gpusim {
namespace {

std::string I(int64_t v) { return absl::StrCat(v); }
std::string B(bool v) { return v ? "true" : "false"; }
std::string D(DType t) { return std::string(DTypeName(t)); }
std::string L(const std::vector<std::string>& v) { return absl::StrCat("[", absl::StrJoin(v, ", "), "]"); }
const RunSpec& Defaults() {
  static const RunSpec* const kDefaults = new RunSpec();
  return *kDefaults;
}

// The model.* settings (ModelSpec), in the order RunSettings lists them.
std::vector<SettingInfo> ModelSettings() {
  return {
      {"model.d_model", "hidden size",
       [](const RunSpec& s) { return I(s.model.d_model); },
       [](const RunSpec&) { return I(Defaults().model.d_model); },
       nullptr},
      {"model.n_layers", "decoder layers",
       [](const RunSpec& s) { return I(s.model.n_layers); },
       [](const RunSpec&) { return I(Defaults().model.n_layers); },
       nullptr},
      {"model.n_heads", "query heads",
       [](const RunSpec& s) { return I(s.model.n_heads); },
       [](const RunSpec&) { return I(Defaults().model.n_heads); },
       nullptr},
      {"model.n_kv_heads", "key/value heads (GQA when < n_heads)",
       [](const RunSpec& s) { return I(s.model.n_kv_heads); },
       [](const RunSpec& s) { return I(s.model.n_heads); },
       nullptr},
      {"model.head_dim", "per-head width",
       [](const RunSpec& s) { return I(s.model.head_dim); },
       [](const RunSpec& s) { return I(s.model.n_heads > 0 ? s.model.d_model / s.model.n_heads : 0); },
       nullptr},
      {"model.mlp_dim", "MLP width",
       [](const RunSpec& s) { return I(s.model.mlp_dim); },
       [](const RunSpec&) { return I(Defaults().model.mlp_dim); },
       nullptr},
      {"model.vocab", "vocabulary",
       [](const RunSpec& s) { return I(s.model.vocab); },
       [](const RunSpec&) { return I(Defaults().model.vocab); },
       nullptr},
      {"model.tied_embeddings", "output projection shares the embedding",
       [](const RunSpec& s) { return B(s.model.tied_embeddings); },
       [](const RunSpec&) { return B(Defaults().model.tied_embeddings); },
       nullptr},
      {"model.weight_dtype", "dtype of stored weights",
       [](const RunSpec& s) { return D(s.model.weight_dtype); },
       [](const RunSpec&) { return D(Defaults().model.weight_dtype); },
       nullptr},
      {"model.compute_dtype", "dtype of activations and matmuls",
       [](const RunSpec& s) { return D(s.model.compute_dtype); },
       [](const RunSpec&) { return D(Defaults().model.compute_dtype); },
       nullptr},
      {"model.logits_dtype", "dtype of the logits",
       [](const RunSpec& s) { return D(s.model.logits_dtype); },
       [](const RunSpec&) { return D(Defaults().model.logits_dtype); },
       nullptr},
      {"model.attention", "flash | explicit",
       [](const RunSpec& s) { return s.model.attention; },
       [](const RunSpec&) { return Defaults().model.attention; },
       nullptr},
      {"model.param_scan_axis", "layer axis of stacked params",
       [](const RunSpec& s) { return I(s.model.param_scan_axis); },
       [](const RunSpec&) { return I(Defaults().model.param_scan_axis); },
       nullptr},
      {"model.scan_layers", "layers as one scanned loop",
       [](const RunSpec& s) { return B(s.model.scan_layers); },
       [](const RunSpec&) { return B(Defaults().model.scan_layers); },
       nullptr},
      {"model.experts", "experts of each MoE MLP (1: a dense MLP)",
       [](const RunSpec& s) { return I(s.model.experts); },
       [](const RunSpec&) { return I(Defaults().model.experts); },
       nullptr},
      {"model.experts_per_token", "experts each token is routed to (top-k)",
       [](const RunSpec& s) { return I(s.model.experts_per_token); },
       [](const RunSpec&) { return I(Defaults().model.experts_per_token); },
       nullptr},
  };
}

}  // namespace

const std::vector<SettingInfo>& RunSettings() {
  static const std::vector<SettingInfo>* const kSettings = [] {
    std::vector<SettingInfo> framework = {
      {"framework", "jax (XLA static) | pytorch (eager)",
       [](const RunSpec& s) { return s.framework; },
       [](const RunSpec&) { return std::string("jax"); },
       [](const RunSpec& f, RunSpec& t) { t.framework = f.framework; }},
    };
    std::vector<SettingInfo> rest = {
      {"optimizer.kind", "adamw | sgd",
       [](const RunSpec& s) { return s.optimizer.kind; },
       [](const RunSpec&) { return Defaults().optimizer.kind; },
       [](const RunSpec& f, RunSpec& t) { t.optimizer.kind = f.optimizer.kind; }},
      {"optimizer.moment_dtype", "dtype of the Adam moments",
       [](const RunSpec& s) { return D(s.optimizer.moment_dtype); },
       [](const RunSpec&) { return D(Defaults().optimizer.moment_dtype); },
       [](const RunSpec& f, RunSpec& t) { t.optimizer.moment_dtype = f.optimizer.moment_dtype; }},
      {"optimizer.clip_grad_norm", "global gradient-norm clipping",
       [](const RunSpec& s) { return B(s.optimizer.clip_grad_norm); },
       [](const RunSpec&) { return B(Defaults().optimizer.clip_grad_norm); },
       [](const RunSpec& f, RunSpec& t) { t.optimizer.clip_grad_norm = f.optimizer.clip_grad_norm; }},
      {"loop.mode", "rolled | unrolled",
       [](const RunSpec& s) { return s.loop.mode; },
       [](const RunSpec&) { return Defaults().loop.mode; },
       [](const RunSpec& f, RunSpec& t) { t.loop.mode = f.loop.mode; }},
      {"loop.trip_count", "trips of the loop (0: from the model)",
       [](const RunSpec& s) { return I(s.loop.trip_count); },
       [](const RunSpec&) { return I(Defaults().loop.trip_count); },
       [](const RunSpec& f, RunSpec& t) { t.loop.trip_count = f.loop.trip_count; }},
      {"loop.unroll", "bodies per trip when rolled",
       [](const RunSpec& s) { return I(s.loop.unroll); },
       [](const RunSpec&) { return I(Defaults().loop.unroll); },
       [](const RunSpec& f, RunSpec& t) { t.loop.unroll = f.loop.unroll; }},
      {"xla.dynamic_slice_fusion", "XLA --xla_gpu_enable_dynamic_slice_fusion (library calls read loop slices in place)",
       [](const RunSpec& s) { return B(s.xla.dynamic_slice_fusion); },
       [](const RunSpec&) { return B(Defaults().xla.dynamic_slice_fusion); },
       [](const RunSpec& f, RunSpec& t) { t.xla.dynamic_slice_fusion = f.xla.dynamic_slice_fusion; }},
      {"remat.policy", "rematerialisation policy (gpusim list remat)",
       [](const RunSpec& s) { return s.remat.policy; },
       [](const RunSpec&) { return Defaults().remat.policy; },
       [](const RunSpec& f, RunSpec& t) {
         t.remat.policy = f.remat.policy;
         t.remat.policy_at = f.remat.policy_at;
       }},
      {"remat.names", "names the policy saves",
       [](const RunSpec& s) { return L(s.remat.names); },
       [](const RunSpec&) { return L(Defaults().remat.names); },
       [](const RunSpec& f, RunSpec& t) { t.remat.names = f.remat.names; }},
      {"remat.offload_names", "names the policy offloads to host",
       [](const RunSpec& s) { return L(s.remat.offload_names); },
       [](const RunSpec&) { return L(Defaults().remat.offload_names); },
       [](const RunSpec& f, RunSpec& t) { t.remat.offload_names = f.remat.offload_names; }},
      {"remat.policies", "the two policies save_from_both_policies joins",
       [](const RunSpec& s) { return L(s.remat.policies); },
       [](const RunSpec&) { return L(Defaults().remat.policies); },
       [](const RunSpec& f, RunSpec& t) { t.remat.policies = f.remat.policies; }},
      {"remat.method", "full recompute grouping: uniform | block | sequential | sqrt",
       [](const RunSpec& s) { return s.remat.method; },
       [](const RunSpec&) { return Defaults().remat.method; },
       [](const RunSpec& f, RunSpec& t) { t.remat.method = f.remat.method; }},
      {"remat.num_layers", "layers per full-recompute group",
       [](const RunSpec& s) { return I(s.remat.num_layers); },
       [](const RunSpec&) { return I(Defaults().remat.num_layers); },
       [](const RunSpec& f, RunSpec& t) { t.remat.num_layers = f.remat.num_layers; }},
      {"parallelism.fsdp", "devices the state is sharded over",
       [](const RunSpec& s) { return I(s.parallelism.fsdp); },
       [](const RunSpec&) { return I(Defaults().parallelism.fsdp); },
       [](const RunSpec& f, RunSpec& t) { t.parallelism.fsdp = f.parallelism.fsdp; }},
      {"parallelism.tensor", "tensor-parallel group size",
       [](const RunSpec& s) { return I(s.parallelism.tensor); },
       [](const RunSpec&) { return I(Defaults().parallelism.tensor); },
       [](const RunSpec& f, RunSpec& t) { t.parallelism.tensor = f.parallelism.tensor; }},
      {"parallelism.sequence_parallel", "Megatron sequence parallelism",
       [](const RunSpec& s) { return B(s.parallelism.sequence_parallel); },
       [](const RunSpec&) { return B(Defaults().parallelism.sequence_parallel); },
       [](const RunSpec& f, RunSpec& t) { t.parallelism.sequence_parallel = f.parallelism.sequence_parallel; }},
      {"parallelism.gather_dtype", "dtype FSDP gathers weights in: compute | weight",
       [](const RunSpec& s) { return s.parallelism.gather_dtype; },
       [](const RunSpec&) { return Defaults().parallelism.gather_dtype; },
       [](const RunSpec& f, RunSpec& t) { t.parallelism.gather_dtype = f.parallelism.gather_dtype; }},
      {"batch.per_device", "sequences per device (per tensor-parallel group when parallelism.tensor > 1)",
       [](const RunSpec& s) { return I(s.batch.per_device); },
       [](const RunSpec&) { return I(Defaults().batch.per_device); },
       [](const RunSpec& f, RunSpec& t) { t.batch.per_device = f.batch.per_device; }},
      {"batch.seq_len", "tokens per sequence",
       [](const RunSpec& s) { return I(s.batch.seq_len); },
       [](const RunSpec&) { return I(Defaults().batch.seq_len); },
       [](const RunSpec& f, RunSpec& t) { t.batch.seq_len = f.batch.seq_len; }},
      {"allocator.impl", "allocator strategy (gpusim list allocators)",
       [](const RunSpec& s) { return s.allocator.impl; },
       [](const RunSpec&) { return Defaults().allocator.impl; },
       [](const RunSpec& f, RunSpec& t) { t.allocator.impl = f.allocator.impl; }},
    };
    auto* all = new std::vector<SettingInfo>(std::move(framework));
    for (SettingInfo& m : ModelSettings()) all->push_back(std::move(m));
    for (SettingInfo& r : rest) all->push_back(std::move(r));
    return all;
  }();
  return *kSettings;
}

const SettingInfo* FindSetting(const std::string& path) {
  for (const SettingInfo& s : RunSettings()) {
    if (s.path == path) return &s;
  }
  return nullptr;
}

}  // namespace gpusim
