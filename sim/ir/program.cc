#include "sim/ir/program.h"

#include <array>

namespace gpusim {
namespace {

constexpr std::array<std::string_view, kNumRoles> kRoleNames = {
    "parameter", "optimizer_state", "gradient", "activation", "residual",
    "temporary", "workspace",       "input_batch", "loop_state", "scalar"};

constexpr std::array<std::string_view, kNumOpKinds> kOpKindNames = {
    "matmul",        "attention",      "elementwise",    "reduce",
    "transpose",     "copy",           "convert",        "gather",
    "scatter",       "dynamic_slice",  "dynamic_update_slice",
    "all_gather",    "reduce_scatter", "all_reduce",     "host_to_device",
    "device_to_host"};

}  // namespace

std::string_view RoleName(Role r) { return kRoleNames[static_cast<size_t>(r)]; }

bool ParseRole(std::string_view s, Role* out) {
  for (size_t i = 0; i < kRoleNames.size(); ++i) {
    if (kRoleNames[i] == s) {
      *out = static_cast<Role>(i);
      return true;
    }
  }
  return false;
}

std::string_view PhaseName(Phase p) {
  switch (p) {
    case Phase::kForward: return "forward";
    case Phase::kBackward: return "backward";
    case Phase::kOptimizer: return "optimizer";
    case Phase::kOther: return "other";
  }
  return "?";
}

std::string_view OpKindName(OpKind k) { return kOpKindNames[static_cast<size_t>(k)]; }

bool ParseOpKind(std::string_view s, OpKind* out) {
  for (size_t i = 0; i < kOpKindNames.size(); ++i) {
    if (kOpKindNames[i] == s) {
      *out = static_cast<OpKind>(i);
      return true;
    }
  }
  return false;
}

bool IsCollective(OpKind k) {
  return k == OpKind::kAllGather || k == OpKind::kReduceScatter || k == OpKind::kAllReduce;
}

int64_t Tensor::elements() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

}  // namespace gpusim
