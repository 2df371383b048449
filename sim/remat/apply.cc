#include "sim/remat/apply.h"

#include <algorithm>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "sim/base/status.h"
#include "sim/remat/remat_policy.h"

namespace gpusim {
namespace {

// Note [Saved set] (apply.h): Megatron's layer groups.
absl::Status PlanLayerGroups(const LayerGraph& graph, const RematSpec& spec, bool full, RematPlan* plan) {
  const int64_t n = graph.n_layers, k = spec.num_layers;
  if (k < 1 || (spec.method == "sequential" && k > n)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "remat.num_layers: ", k, " must be >= 1",
        spec.method == "sequential" ? absl::StrCat(" and <= model.n_layers (", n, ") for method sequential")
                                    : std::string()));
  }
  if (spec.method == "block") {
    plan->group_size = 1;
    plan->checkpointed_layers = k;
  } else if (spec.method == "sequential") {
    plan->group_size = std::max<int64_t>(1, n / k);
    plan->checkpointed_layers = plan->group_size * (k - 1);
  } else if (spec.method == "sqrt") {
    int64_t g = 1;
    while (g * g < n) ++g;
    plan->group_size = g;
    plan->checkpointed_layers = kAllLayers;
  } else {  // uniform
    plan->group_size = k;
    plan->checkpointed_layers = kAllLayers;
  }
  plan->layer_groups = full;
  return absl::OkStatus();
}

absl::StatusOr<RematPlan> PlanOneKind(const LayerGraph& graph, const RematSpec& spec) {
  RETURN_IF_ERROR(graph.Validate());
  ASSIGN_OR_RETURN(std::unique_ptr<RematPolicy> policy, MakeRematPolicy(spec));
  RematPlan plan;
  plan.policy = spec.policy;
  plan.no_remat = policy->no_remat();
  plan.input = graph.input;
  if (graph.checkpoint_unit == CheckpointUnit::kLayerGroups) {
    RETURN_IF_ERROR(PlanLayerGroups(graph, spec, !plan.no_remat && policy->name() == "full", &plan));
  }
  // Layers outside the checkpointed groups run without checkpoint.
  const bool save_all = plan.no_remat || plan.layer_groups;
  plan.saved.insert(graph.input);
  std::vector<std::string> work;
  for (const LayerValue& v : graph.values) work.insert(work.end(), v.needs.begin(), v.needs.end());
  while (!work.empty()) {
    const std::string name = work.back();
    work.pop_back();
    const LayerValue* v = graph.Find(name);
    // The layer input and parameters are inputs of the checkpoint, never
    // recomputed.
    if (v == nullptr || plan.saved.count(name) || plan.recompute.count(name)) continue;
    const SaveDecision d = save_all ? SaveDecision::kSave : policy->Decide({v->tag, v->is_dot, v->dot_batch_dims});
    if (d == SaveDecision::kOffload) {
      plan.offload.insert(name);
    } else if (d == SaveDecision::kSave) {
      plan.saved.insert(name);
    } else {
      plan.recompute.insert(name);
      // Note [A second output of a kernel]: rerunning its kernel reads
      // that kernel's inputs.
      const LayerValue* kernel = v->kernel_of.empty() ? v : graph.Find(v->kernel_of);
      for (const std::string& in : kernel->inputs) work.push_back(in);
    }
  }
  return plan;
}

}  // namespace

absl::StatusOr<RematPlan> ApplyRematPolicy(const LayerGraph& graph, const RematSpec& spec) {
  ASSIGN_OR_RETURN(RematPlan plan, PlanOneKind(graph, spec));
  for (const LayerGraph& kind : graph.kinds) {
    if (!kind.kinds.empty()) return absl::InternalError("layer graph: a kind of layer has kinds of its own");
    ASSIGN_OR_RETURN(RematPlan p, PlanOneKind(kind, spec));
    plan.kinds.push_back(std::move(p));
  }
  return plan;
}

}  // namespace gpusim
