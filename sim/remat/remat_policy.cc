#include "sim/remat/remat_policy.h"

#include <algorithm>
#include <functional>
#include <map>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "sim/base/names.h"
#include "sim/base/status.h"

namespace gpusim {
namespace {

bool Contains(const std::vector<std::string>& v, std::string_view s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

using Predicate = std::function<SaveDecision(const SaveCandidate&)>;

class PredicatePolicy : public RematPolicy {
 public:
  PredicatePolicy(std::string name, Predicate p, bool no_remat)
      : name_(std::move(name)), pred_(std::move(p)), no_remat_(no_remat) {}
  std::string_view name() const override { return name_; }
  bool no_remat() const override { return no_remat_; }
  SaveDecision Decide(const SaveCandidate& c) const override { return pred_(c); }

 private:
  std::string name_;
  Predicate pred_;
  bool no_remat_;
};

SaveDecision SaveIf(bool b) { return b ? SaveDecision::kSave : SaveDecision::kRecompute; }

Predicate SaveNames(std::vector<std::string> names) {
  return [names = std::move(names)](const SaveCandidate& c) {
    return SaveIf(!c.name.empty() && Contains(names, c.name));
  };
}

struct Entry {
  std::string doc;
  std::string parameters;
  std::function<Predicate(const RematSpec&)> make;
  bool no_remat = false;
  // Returns pe.Offloadable for some values (not a boolean policy).
  bool offloads = false;
};

const std::map<std::string, Entry>& Registry();

// jax.checkpoint_policies.save_and_offload_only_these_names: the two name
// sets must be disjoint (ad_checkpoint.py raises ValueError otherwise).
absl::Status CheckDisjoint(const std::vector<std::string>& save, const std::vector<std::string>& offload,
                           const char* save_key, const char* offload_key) {
  for (const std::string& n : save) {
    if (Contains(offload, n)) {
      return absl::InvalidArgumentError(absl::StrCat("remat: '", n, "' is in both ", save_key, " and ", offload_key,
                                                     "; the names to save and to offload must not intersect"));
    }
  }
  return absl::OkStatus();
}

Predicate SaveAndOffloadNames(std::vector<std::string> save, std::vector<std::string> offload) {
  return [save = std::move(save), offload = std::move(offload)](const SaveCandidate& c) {
    if (c.name.empty()) return SaveDecision::kRecompute;
    if (Contains(save, c.name)) return SaveDecision::kSave;
    if (Contains(offload, c.name)) return SaveDecision::kOffload;
    return SaveDecision::kRecompute;
  };
}

// MaxText tag names of a Llama decoder layer (layers/llama2.py, attentions.py,
// linears.py at commit 4bf3beaa).
const std::vector<std::string> kMaxTextDots = {"query_proj", "key_proj", "value_proj",
                                               "out_proj",   "mlpwi_0",  "mlpwi_1",
                                               "mlpwo"};

const std::map<std::string, Entry>& Registry() {
  static const auto* kRegistry = new std::map<std::string, Entry>{
      // --- JAX policies (jax/_src/ad_checkpoint.py) ---
      {"everything_saveable",
       {"save every residual (same saved set as no remat)", "",
        [](const RematSpec&) { return Predicate([](const SaveCandidate&) { return SaveDecision::kSave; }); }}},
      {"nothing_saveable",
       {"save nothing but the scope's inputs; recompute the rest", "",
        [](const RematSpec&) { return Predicate([](const SaveCandidate&) { return SaveDecision::kRecompute; }); }}},
      {"dots_saveable",
       {"save outputs of every dot_general (checkpoint_dots)", "",
        [](const RematSpec&) { return Predicate([](const SaveCandidate& c) { return SaveIf(c.is_dot); }); }}},
      {"dots_with_no_batch_dims_saveable",
       {"save dot_general outputs without batch dimensions (weight matmuls)", "",
        [](const RematSpec&) {
          return Predicate([](const SaveCandidate& c) { return SaveIf(c.is_dot && !c.dot_has_batch_dims); });
        }}},
      {"save_only_these_names",
       {"save only values tagged with checkpoint_name in remat.names", "remat.names",
        [](const RematSpec& s) { return SaveNames(s.names); }}},
      {"save_any_names_but_these",
       {"save every named value except those in remat.names", "remat.names",
        [](const RematSpec& s) {
          return Predicate([names = s.names](const SaveCandidate& c) {
            return SaveIf(!c.name.empty() && !Contains(names, c.name));
          });
        }}},
      {"save_and_offload_only_these_names",
       {"save remat.names on device, offload remat.offload_names to pinned host", "remat.names, remat.offload_names",
        [](const RematSpec& s) { return SaveAndOffloadNames(s.names, s.offload_names); }, false, true}},
      {"offload_dot_with_no_batch_dims",
       {"offload dot_general outputs without batch dims to pinned host", "",
        [](const RematSpec&) {
          return Predicate([](const SaveCandidate& c) {
            return c.is_dot && !c.dot_has_batch_dims ? SaveDecision::kOffload : SaveDecision::kRecompute;
          });
        },
        false, true}},
      {"save_from_both_policies",
       {"save what either of the two boolean policies in remat.policies saves", "remat.policies",
        [](const RematSpec& s) {
          // Checked in MakeRematPolicy: two registered, non-offloading policies.
          std::vector<Predicate> parts;
          for (const std::string& name : s.policies) {
            RematSpec sub = s;
            sub.policy = name;
            sub.policies.clear();
            parts.push_back(Registry().at(name).make(sub));
          }
          return Predicate([parts](const SaveCandidate& c) {
            for (const Predicate& p : parts) {
              if (p(c) == SaveDecision::kSave) return SaveDecision::kSave;
            }
            return SaveDecision::kRecompute;
          });
        }}},
      // --- MaxText names (Decoder.get_remat_policy) ---
      {"none", {"MaxText: no remat; every residual AD keeps is saved", "",
                [](const RematSpec&) { return Predicate([](const SaveCandidate&) { return SaveDecision::kSave; }); },
                true}},
      {"full", {"MaxText / Megatron full: only the layer input is saved; gpt: remat.method uniform|block|sequential|sqrt, remat.num_layers", "",
                [](const RematSpec&) { return Predicate([](const SaveCandidate&) { return SaveDecision::kRecompute; }); }}},
      {"minimal", {"MaxText: checkpoint_dots_with_no_batch_dims (q,k,v,out,wi_0,wi_1,wo)", "",
                   [](const RematSpec&) {
                     return Predicate([](const SaveCandidate& c) { return SaveIf(c.is_dot && !c.dot_has_batch_dims); });
                   }}},
      {"save_dot_except_mlpwi", {"MaxText: save q,k,v,out_proj,mlpwo", "",
                                 [](const RematSpec&) {
                                   return SaveNames({"query_proj", "key_proj", "value_proj", "out_proj", "mlpwo"});
                                 }}},
      {"save_dot_except_mlp", {"MaxText: save q,k,v,out_proj", "",
                               [](const RematSpec&) {
                                 return SaveNames({"query_proj", "key_proj", "value_proj", "out_proj"});
                               }}},
      {"save_qkv_proj", {"MaxText: save q,k,v projections", "",
                         [](const RematSpec&) { return SaveNames({"query_proj", "key_proj", "value_proj"}); }}},
      {"save_dot_with_context_except_mlp", {"MaxText: save q,k,v,context,out_proj", "",
                                            [](const RematSpec&) {
                                              return SaveNames(
                                                  {"query_proj", "key_proj", "value_proj", "context", "out_proj"});
                                            }}},
      {"minimal_flash", {"MaxText: save_from_both_policies(checkpoint_dots_with_no_batch_dims, names context)", "",
                         [](const RematSpec&) {
                           return Predicate([](const SaveCandidate& c) {
                             return SaveIf((c.is_dot && !c.dot_has_batch_dims) || c.name == "context");
                           });
                         }}},
      {"custom", {"MaxText: save remat.names (tensors_on_device), offload remat.offload_names (tensors_to_offload)",
                  "remat.names, remat.offload_names",
                  [](const RematSpec& s) { return SaveAndOffloadNames(s.names, s.offload_names); }, false, true}},
      {"save_out_proj", {"MaxText: save the attention output projection", "",
                         [](const RematSpec&) { return SaveNames({"out_proj"}); }}},
      // --- Megatron-LM (--recompute-granularity; Korthikanti et al. 2022) ---
      {"selective",
       {"Megatron: recompute the attention core (QK^T, softmax, dropout; under flash attention the flash kernel), "
        "save the rest",
        "",
        [](const RematSpec&) {
          // megatron/core/transformer/attention.py: checkpoint_core_attention
          // (recompute_granularity 'selective') wraps core_attention in
          // tensor_parallel.checkpoint whatever its backend, so under TE's
          // flash kernel its softmax statistics are dropped and the kernel
          // reruns in the backward (Note [A second output of a kernel]),
          // with its context-parallel K/V ring (TE AttnFuncWithCPAndKVP2P
          // runs inside core_attention).
          return Predicate([](const SaveCandidate& c) {
            return SaveIf(c.name != "attn_probs" && c.name != "attn_dropout_mask" && c.name != "attn_dropped" &&
                          c.name != "attn_scores" && c.name != "attn_lse" && c.name != "attn_kv_ring");
          });
        }}},
      {"qkv_proj_offloaded", {"MaxText: offload q,k,v projections to pinned host", "",
                              [](const RematSpec&) {
                                return SaveAndOffloadNames({}, {"query_proj", "key_proj", "value_proj"});
                              },
                              false, true}},
      {"minimal_offloaded", {"MaxText: offload_dot_with_no_batch_dims (every weight matmul output to pinned host)", "",
                             [](const RematSpec&) {
                               return Predicate([](const SaveCandidate& c) {
                                 return c.is_dot && !c.dot_has_batch_dims ? SaveDecision::kOffload
                                                                          : SaveDecision::kRecompute;
                               });
                             },
                             false, true}},
  };
  return *kRegistry;
}

}  // namespace

absl::StatusOr<std::unique_ptr<RematPolicy>> MakeRematPolicy(const RematSpec& spec) {
  const auto& reg = Registry();
  auto it = reg.find(spec.policy);
  if (it == reg.end()) {
    return absl::InvalidArgumentError(absl::StrCat(spec.policy_at.empty() ? "" : spec.policy_at + ": ",
                                                   UnknownEntryMessage("remat.policy", "policy", spec.policy,
                                                                       ListRematPolicies())));
  }
  if (spec.policy == "save_and_offload_only_these_names" || spec.policy == "custom") {
    RETURN_IF_ERROR(CheckDisjoint(spec.names, spec.offload_names, "remat.names", "remat.offload_names"));
  }
  if (spec.policy == "save_from_both_policies") {
    if (spec.policies.size() != 2) {
      return absl::InvalidArgumentError(absl::StrCat("remat.policies: save_from_both_policies takes two policies, got ",
                                                     spec.policies.size()));
    }
    for (const std::string& name : spec.policies) {
      auto sub = reg.find(name);
      if (sub == reg.end() || name == "save_from_both_policies") {
        return absl::InvalidArgumentError(
            absl::StrCat("remat.policies: '", name, "' is not a policy save_from_both_policies can combine"));
      }
      // ad_checkpoint.py save_from_both_policies: "The return value of the
      // policies should be a boolean".
      if (sub->second.offloads || sub->second.no_remat) {
        return absl::InvalidArgumentError(absl::StrCat("remat.policies: '", name,
                                                       "' is not a boolean policy (it offloads or disables remat); "
                                                       "save_from_both_policies combines boolean policies only"));
      }
    }
  }
  return std::unique_ptr<RematPolicy>(
      new PredicatePolicy(it->first, it->second.make(spec), it->second.no_remat));
}

namespace {

// The settings name-based policies read, typed for `gpusim list remat`.
std::vector<ParamDoc> ParamsOf(const std::string& names) {
  static const auto* kParams = new std::vector<ParamDoc>{
      {"remat.names", "list", "", "[]", "checkpoint_name tags",
       "the named values the policy keeps on the device (MaxText tensors_on_device)"},
      {"remat.offload_names", "list", "", "[]", "checkpoint_name tags, disjoint from remat.names",
       "the named values offloaded to pinned host (MaxText tensors_to_offload)"},
      {"remat.policies", "list", "", "[]", "two boolean policies", "the policies whose saved sets are combined"},
  };
  std::vector<ParamDoc> out;
  for (const ParamDoc& p : *kParams) {
    if (absl::StrContains(names, p.name)) out.push_back(p);
  }
  return out;
}

}  // namespace

std::vector<RematPolicyInfo> ListRematPolicies() {
  std::vector<RematPolicyInfo> out;
  for (const auto& [n, e] : Registry()) out.push_back({n, e.doc, ParamsOf(e.parameters), {}});
  return out;
}

std::string FoldRematPolicyName(const std::string& name) { return FoldRegistryName(name, Registry()); }

}  // namespace gpusim
