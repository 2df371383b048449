// Rematerialisation policies: inside a remat scope (jax.checkpoint /
// nn.remat, Megatron activation checkpointing) a policy decides which forward
// values are saved for the backward pass; everything else is recomputed there
// (or offloaded to host). One interface, strategies picked by name from a
// registry that can list itself.
//
// Sources: jax/_src/ad_checkpoint.py (the JAX policies and their predicates);
// MaxText layers/decoders.py `get_remat_policy` (the MaxText names), see
// ../shared/reference/maxtext.md.
#ifndef GPUSIM_SIM_REMAT_REMAT_POLICY_H_
#define GPUSIM_SIM_REMAT_REMAT_POLICY_H_

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "sim/base/registry.h"
#include "sim/config/spec.h"

namespace gpusim {

// A forward value a policy may save: JAX calls the policy with the primitive
// that produced it and its checkpoint_name, if any.
struct SaveCandidate {
  std::string_view name;          // checkpoint_name tag; empty when untagged
  bool is_dot = false;            // produced by dot_general
  bool dot_has_batch_dims = false;// dot_general with batch dimensions
};

enum class SaveDecision { kRecompute, kSave, kOffload };

class RematPolicy {
 public:
  virtual ~RematPolicy() = default;
  virtual std::string_view name() const = 0;
  // True when the scope is not checkpointed at all (every residual AD keeps is
  // saved, e.g. MaxText `none`, Megatron without recompute).
  virtual bool no_remat() const { return false; }
  virtual SaveDecision Decide(const SaveCandidate& c) const = 0;
};

// A registry entry (sim/base/registry.h): name, doc, the settings a policy
// reads (remat.names, remat.offload_names, remat.policies).
using RematPolicyInfo = RegistryEntry;

// REQUIRES: spec.policy names a registered policy; name-based policies read
// spec.names / spec.offload_names.
absl::StatusOr<std::unique_ptr<RematPolicy>> MakeRematPolicy(const RematSpec& spec);
std::vector<RematPolicyInfo> ListRematPolicies();
// Note [Registry names fold case] (sim/base/names.h): `name` as
// registered when it differs from exactly one policy only by case.
std::string FoldRematPolicyName(const std::string& name);

}  // namespace gpusim

#endif  // GPUSIM_SIM_REMAT_REMAT_POLICY_H_
