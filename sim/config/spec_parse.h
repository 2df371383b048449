// Typed parse: a resolved ConfigNode tree (names and `from:` already replaced
// by file contents, `--set` applied, keys validated) into the spec structs.
// Strict: every value is checked for type and range, defaults come from
// spec.h, required keys must be present. Used by loader.cc only.
//
// Error formats (LOC is FILE:LINE:COL of the offending node, or the
// "--set PATH=VALUE" text for command-line values; PATH is the key path in
// the run config, e.g. "device.memory.cuda_total"):
//   LOC: PATH: expected an integer, got 'abc'
//   LOC: PATH: expected an integer >= 1, got '0'
//   LOC: PATH: expected one of rolled|unrolled, got 'x'
//   LOC: PATH: expected true or false, got 'x'
//   LOC: PATH: expected a dtype (f32, bf16, f16, f8, i32, i64, u8, pred), got 'x'
//   LOC: PATH: expected a byte size such as 80GiB, ...; got 'x'
//   LOC: PATH: missing required key      (LOC: the enclosing mapping)
#ifndef GPUSIM_SIM_CONFIG_SPEC_PARSE_H_
#define GPUSIM_SIM_CONFIG_SPEC_PARSE_H_

#include <string>

#include "absl/status/statusor.h"
#include "sim/config/node.h"
#include "sim/config/spec.h"

namespace gpusim {
namespace internal {

// `path` is the node's key path in the run config: "device"/"model" inside
// a run, "" for a file loaded on its own.
absl::StatusOr<DeviceSpec> ParseDeviceNode(const ConfigNode& node,
                                           const std::string& path);
absl::StatusOr<ModelSpec> ParseModelNode(const ConfigNode& node,
                                         const std::string& path);
// REQUIRES: `device` and `model`, when present, are resolved mappings.
absl::StatusOr<RunSpec> ParseRunNode(const ConfigNode& root);

}  // namespace internal
}  // namespace gpusim

#endif  // GPUSIM_SIM_CONFIG_SPEC_PARSE_H_
