// See cublas_workspace.h.
#include "sim/config/cublas_workspace.h"

#include <charconv>
#include <optional>
#include <system_error>
#include <utility>

#include "absl/strings/str_cat.h"

namespace gpusim {

std::optional<std::pair<int, int>> VersionMajorMinor(std::string_view v) {
  int major = 0, minor = 0;
  auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), major);
  if (ec != std::errc() || p == v.data() + v.size() || *p != '.') return std::nullopt;
  ++p;
  auto [q, ec2] = std::from_chars(p, v.data() + v.size(), minor);
  if (ec2 != std::errc() || q == p) return std::nullopt;
  return std::make_pair(major, minor);
}

absl::StatusOr<Bytes> CublasWorkspaceBytes(const std::string& torch_version, const DeviceSpec& device,
                                           const std::string& config) {
  if (!config.empty()) {
    // ":SIZE:COUNT" pairs (the regex ":([0-9]+):([0-9]+)"), SIZE KiB each.
    int64_t total = 0;
    bool any = false;
    for (size_t i = 0; i < config.size(); ++i) {
      if (config[i] != ':') continue;
      int64_t size = 0, count = 0;
      const char* b = config.data() + i + 1;
      const char* e = config.data() + config.size();
      auto [p, ec] = std::from_chars(b, e, size);
      if (ec != std::errc() || p == b || p == e || *p != ':') continue;
      auto [q, ec2] = std::from_chars(p + 1, e, count);
      if (ec2 != std::errc() || q == p + 1) continue;
      if (size > (int64_t{1} << 30) || count > (int64_t{1} << 16) || total > (int64_t{1} << 50)) {
        return absl::InvalidArgumentError(absl::StrCat(
            "meta CUBLAS_WORKSPACE_CONFIG '", config, "': a workspace above 2^46 bytes is not a device's"));
      }
      total += size * 1024 * count;
      any = true;
      i = static_cast<size_t>(q - config.data()) - 1;
    }
    if (any) return Bytes(total);
    // PyTorch warns "Could not parse CUBLAS_WORKSPACE_CONFIG" and uses the default.
  }
  if (device.cc_major == 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "device '", device.name, "' (", device.source_file,
        ") gives no compute_capability; the cuBLAS workspace of a PyTorch step depends on it "
        "(CublasHandlePool.cpp parseChosenWorkspaceSize)"));
  }
  const std::optional<std::pair<int, int>> v = VersionMajorMinor(torch_version);
  if (!v.has_value()) {
    return absl::InvalidArgumentError(
        absl::StrCat("meta torch_version: expected MAJOR.MINOR..., got '", torch_version, "'"));
  }
  const bool hopper = device.cc_major == 9 && device.cc_minor == 0 && *v >= std::make_pair(2, 1);
  const bool newer = (device.cc_major == 9 || device.cc_major == 10 || device.cc_major == 12) &&
                     *v >= std::make_pair(2, 7);
  if (hopper || newer) return Bytes(int64_t{4096} * 8 * 1024);
  return Bytes(int64_t{4096} * 1024 * 2 + 16 * 1024 * 8);
}

Bytes TeCublasWorkspaceBytes(const DeviceSpec& device) {
  return Bytes(device.cc_major >= 9 ? int64_t{33554432} : int64_t{4194304});
}

}  // namespace gpusim
