// Megatron-LM launch lines: a run config's `megatron:` block
//
//   megatron: {world_size: 8, gpus_per_node: 8,
//              args: {num-layers: 32, hidden-size: 4096, ...}}   # or
//              args: "--num-layers 32 --hidden-size 4096 ..."     # pasted
//
// and `gpusim run --megatron-args "..." --world-size N --device D`.
// Argument names are megatron/training/arguments.py's (dashes or
// underscores); a flag without a value is true. Every argument is modelled,
// accepted as not affecting memory or time (logging, checkpointing, data
// paths, learning-rate schedule: listed in MegatronSpec::no_effect),
// accepted as costing time gpusim does not count (per-iteration logging
// that computes: MegatronSpec::args says "not modelled", the report names
// them), or refused by name with the reason. Defaults and derived values are
// Megatron's own (arguments.py validate_args, core_transformer_config_from_args).
#ifndef GPUSIM_SIM_CONFIG_MEGATRON_ARGS_H_
#define GPUSIM_SIM_CONFIG_MEGATRON_ARGS_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "sim/config/node.h"
#include "sim/config/spec.h"

namespace gpusim {

// One argument of a launch line: its name with dashes, without the leading
// "--"; its value ("true" for a bare flag); where it was written.
struct MegatronArg {
  std::string name;
  std::string value;
  std::string where;  // "FILE:LINE:COL" (or "--megatron-args")
};

// Splits a pasted launch line. Everything up to a `*.py` script (python,
// torchrun and its own options) is dropped but a CUBLAS_WORKSPACE_CONFIG=V
// assignment, returned as the argument CUBLAS_WORKSPACE_CONFIG (also when it
// leads a line without a script); `\` line continuations and
// quotes are honoured. `where` is the location of the string; `column`
// gives each argument's own column when the string is on one line (-1: not).
absl::StatusOr<std::vector<MegatronArg>> SplitMegatronArgs(absl::string_view line, const SourceLocation& where);

// The classification of one argument name: "modelled", "no_effect",
// "not_modelled" (accepted; costs time gpusim does not count), "refused"
// or "unknown"; `why` says what it means or why it is refused.
std::string ClassifyMegatronArg(const std::string& name, std::string* why);

// Reads the arguments into `run`: model sizes, tensor/sequence parallelism,
// recompute, micro-batch and sequence into RunSpec's own fields; pipeline,
// context and data parallelism, optimizer sharding, layer options into
// run->megatron. Errors name the argument and where it was written.
absl::Status ApplyMegatronArgs(const std::vector<MegatronArg>& args, RunSpec* run);

// The `megatron:` block at `node` (path "megatron").
absl::Status ParseMegatronNode(const ConfigNode& node, RunSpec* run);

// The megatron: block `node` with one key set, for a grid point
// (sim/config/grid.h): `key` is world_size, gpus_per_node or args.NAME (an
// argument, dashes or underscores, without "--"), `value` its value written
// at `where`. A launch-line string becomes the mapping of its arguments
// first, each keeping where it was written. Errors: a key the block has not.
absl::StatusOr<ConfigNode> SetMegatronKey(const ConfigNode& node, const std::string& key, const std::string& value,
                                          const SourceLocation& where);

}  // namespace gpusim

#endif  // GPUSIM_SIM_CONFIG_MEGATRON_ARGS_H_
