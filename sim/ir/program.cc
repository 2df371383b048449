#include "sim/ir/program.h"

#include <array>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "sim/base/checked.h"

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
    "device_to_host", "broadcast"};

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
  return k == OpKind::kAllGather || k == OpKind::kReduceScatter || k == OpKind::kAllReduce ||
         k == OpKind::kBroadcast;
}

absl::Status CheckTensorSizes(const Program& p) {
  int64_t total = 0;
  for (const Tensor& t : p.tensors) {
    int64_t bytes = DTypeSize(t.dtype);
    bool ok = true;
    for (int64_t d : t.shape) {
      if (d < 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("tensor `", t.name, "` has a negative dimension: [", absl::StrJoin(t.shape, ", "), "]"));
      }
      ok = ok && CheckedMul(bytes, d, &bytes);
    }
    if (!ok) {
      return absl::InvalidArgumentError(absl::StrCat("tensor `", t.name, "` of shape [", absl::StrJoin(t.shape, ", "),
                                                     "] x ", DTypeSize(t.dtype), " bytes exceeds 2^63 - 1 bytes"));
    }
    if (!CheckedAdd(total, bytes, &total)) {
      return absl::InvalidArgumentError(absl::StrCat("the program's tensors total more than 2^63 - 1 bytes (at `",
                                                     t.name, "`, ", bytes, " bytes)"));
    }
  }
  return absl::OkStatus();
}

int64_t Tensor::elements() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

}  // namespace gpusim
