// The `--set PATH=VALUE` step of the loader (loader.h), for the config
// layer's own use: the loader applies overrides with it, and grid settings
// (grid.h) parse each value with it, so both give the same errors.
#ifndef GPUSIM_SIM_CONFIG_OVERRIDES_H_
#define GPUSIM_SIM_CONFIG_OVERRIDES_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "sim/config/node.h"

namespace gpusim {
namespace internal {

// Applies "PATH=VALUE" to the resolved run tree `root`: the path is checked
// against the run schema (an unknown key gets a did-you-mean), VALUE is
// parsed as YAML with the location "--set PATH=VALUE", and device=NAME /
// model=NAME are resolved from `config_dir`. Errors as loader.h lists.
absl::Status ApplyOverride(ConfigNode& root, const std::string& text, const std::string& config_dir);

// Sets `value` at the key path `keys` under `root`, making the mappings on
// the way (at `loc`) where they are missing or not mappings.
void SetPath(ConfigNode& root, const std::vector<std::string>& keys, const SourceLocation& loc, ConfigNode value);

}  // namespace internal
}  // namespace gpusim

#endif  // GPUSIM_SIM_CONFIG_OVERRIDES_H_
