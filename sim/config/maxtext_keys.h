// MaxText's base.yml keys and model shapes as data (sim/config/maxtext.h
// lowers a `maxtext:` block with them). Internal to sim/config.
#ifndef GPUSIM_SIM_CONFIG_MAXTEXT_KEYS_H_
#define GPUSIM_SIM_CONFIG_MAXTEXT_KEYS_H_

#include <utility>
#include <vector>

namespace gpusim {
namespace internal {

enum class MaxTextKeyKind {
  kModelled,     // sets a gpusim setting (sim/config/maxtext.cc reads it)
  kNoEffect,     // accepted with any value; does not change the device step
  kDefaultOnly,  // modelled at its base.yml default; any other value is refused
};

struct MaxTextKey {
  const char* key;
  const char* default_value;  // as base.yml writes it (lists as [a, b])
  MaxTextKeyKind kind;
  int reason;  // kNoEffect: index into MaxTextNoEffectReasons(); else -1
};

// Every key of MaxText/configs/base.yml at kMaxTextCommit, in file order.
const std::vector<MaxTextKey>& MaxTextKeyTable();
// Why a kNoEffect key does not affect the device step's memory or time.
const std::vector<const char*>& MaxTextNoEffectReasons();

// MaxText/configs/models/NAME.yml at kMaxTextCommit: the keys a model_name
// sets (logical_axis_rules left out: sharding rules, see maxtext.cc).
struct MaxTextModel {
  const char* name;
  std::vector<std::pair<const char*, const char*>> keys;
};
const std::vector<MaxTextModel>& MaxTextModels();
// The model names MaxText's pyconfig.validate_model_name accepts.
const std::vector<const char*>& MaxTextKnownModelNames();

}  // namespace internal
}  // namespace gpusim

#endif  // GPUSIM_SIM_CONFIG_MAXTEXT_KEYS_H_
