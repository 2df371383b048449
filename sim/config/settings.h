// The settings of a run config as a table: each key path a run config may
// give (outside `device:` and `program:`), its one-line doc and its value
// read back from a RunSpec as text. The capability check
// (sim/step/capabilities.h) walks this table to find settings given a value
// the chosen model family, framework and allocator do not model; a grid
// point (sim/config/grid.h) sets each through its `copy`.
#ifndef GPUSIM_SIM_CONFIG_SETTINGS_H_
#define GPUSIM_SIM_CONFIG_SETTINGS_H_

#include <string>
#include <vector>

#include "sim/config/spec.h"

namespace gpusim {

struct SettingInfo {
  std::string path;  // "parallelism.tensor"
  std::string doc;
  // The value in `s`, as text ("2", "true", "[a, b]").
  std::string (*value)(const RunSpec& s);
  // The value a run has when the setting is not written (some defaults
  // depend on other settings: n_kv_heads defaults to n_heads).
  std::string (*default_value)(const RunSpec& s);
  // The setter of a grid point (sim/config/grid.h): copies this setting's
  // value from `from` (where a grid value was parsed) into `to`. nullptr
  // for model.* settings, which a grid applies to the model as a whole
  // (its defaults and checks span keys: n_kv_heads defaults to n_heads).
  void (*copy)(const RunSpec& from, RunSpec& to);
};

// Every setting, in schema order.
const std::vector<SettingInfo>& RunSettings();
// The entry for `path`, or nullptr.
const SettingInfo* FindSetting(const std::string& path);

}  // namespace gpusim

#endif  // GPUSIM_SIM_CONFIG_SETTINGS_H_
