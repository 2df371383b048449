// Grid points as typed specs (advise and compare --vary, sim/advise/advise.h).
// A GridBase is a run config with the grid's base --set overrides, parsed
// once. Each grid value "PATH=VALUE" is parsed and range-checked once, by
// the loader's own override and section code (the same messages as --set
// PATH=VALUE), into a GridSetting; a point is a copy of the base spec with
// its settings applied, no YAML read per point (Note [Typed grid points] in
// grid.cc).
//
// What a grid may vary, and how each is applied:
//   framework, optimizer.*, loop.*, remat.*, parallelism.*, batch.*, xla.*,
//   allocator.impl: the settings table's setter (settings.h `copy`);
//   allocator.<option>: that option (typed by the allocator's registry
//   entry when the step builds its allocator);
//   device, device.*, model, model.*, program.*: the section as a whole,
//   re-parsed with the point's settings of that section once per distinct
//   combination (a device's defaults span keys, as a model's do).
//   maxtext.* (a maxtext config): the whole run, its block lowered with
//   the point's maxtext settings, once per distinct combination.
//   megatron.world_size, megatron.gpus_per_node, megatron.args.NAME (a
//   launch line): the whole run, parsed from the block with those keys set
//   (SetMegatronKey, sim/config/megatron_args.h), once per combination.
// Any other path, on a maxtext config any path its block sets, and beside a
// megatron block anything but megatron.*, device and allocator, is
// refused by name: the error --set PATH=VALUE gives, else
//   --vary PATH: not a setting a grid can vary (...)
#ifndef GPUSIM_SIM_CONFIG_GRID_H_
#define GPUSIM_SIM_CONFIG_GRID_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "sim/config/loader.h"
#include "sim/config/spec.h"

namespace gpusim {

struct SettingInfo;

// One grid value, parsed against a GridBase.
struct GridSetting {
  enum class Kind { kField, kOption, kSection };
  std::string text;  // "path=value"
  std::string path;
  Kind kind = Kind::kField;
  const SettingInfo* setting = nullptr;  // kField: its table entry
  std::string key;                       // kOption: the option; kSection: device, model, program or maxtext
  // kField, kOption: a default spec holding the parsed value and where it
  // was written ("--set PATH=VALUE"). kSection: the tree with only this
  // override applied (for the section's re-parse).
  std::shared_ptr<const RunSpec> parsed;
  std::shared_ptr<const ConfigNode> tree;
};

class GridBase {
 public:
  // The config with `base_sets` applied, parsed as LoadRunSpec does.
  static absl::StatusOr<GridBase> Make(const RunConfig& config, const std::vector<std::string>& base_sets);

  const RunSpec& spec() const;
  // Errors: as --set TEXT gives them, or the refusal above.
  absl::StatusOr<GridSetting> Parse(const std::string& text) const;
  // The base spec with `settings` applied in order: equal to LoadRunSpec
  // with the base sets and these as --set overrides. Thread-safe.
  absl::StatusOr<RunSpec> Point(const std::vector<const GridSetting*>& settings) const;

 private:
  struct State;
  std::shared_ptr<State> state_;
};

}  // namespace gpusim

#endif  // GPUSIM_SIM_CONFIG_GRID_H_
