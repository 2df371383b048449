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
//   FILE:1:1: expected exactly one of 'model', 'program' or 'program_hlo'
// The `program:` section (PATH such as program.inputs.w1.shape or
// program.scan.body[2].in; LOC the offending name where one is written):
//   LOC: PATH: expected a dim (an integer >= 1 or trip_count), got '0'
//   LOC: PATH: expected an input name (w1, w2, X) or zero, got 'y'
//   LOC: PATH: expected an input whose shape starts with trip_count, got
//              'w1' (shape [1, 1024])
//   LOC: PATH: expected a carry, xs or earlier out name (w1, x, h), got 'y'
//   LOC: PATH: 'h' is already the out of body[0]   ('w1' shadows a carry
//              name, 'x' shadows an xs name, 'x' is already a carry name)
//   LOC: PATH: matmul takes 2 inputs, got 1
//   LOC: program.scan.carry_out: expected the carry names (w1, loss) as
//              keys, got 'y'                       (missing carry 'loss')
//   LOC: PATH: expected a body out or carry name (h, w1), got 'y'
//   LOC: program.loss: expected a carry name (w1, loss), got 'y'
//   LOC: program.grad: expected an input name (w1, X), got 'y'
//   LOC: PATH: expected at least one input|carry|op|input name
#ifndef GPUSIM_SIM_CONFIG_SPEC_PARSE_H_
#define GPUSIM_SIM_CONFIG_SPEC_PARSE_H_

#include <map>
#include <set>
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
// Exactly one of `model` and `program` must be written; with `program`,
// loop.trip_count (>= 1) is required and `model` stays default.
absl::StatusOr<RunSpec> ParseRunNode(const ConfigNode& root);

// The run-level settings written in `root` (framework and the optimizer,
// loop, remat, parallelism, batch, xla and allocator sections; nothing
// else is read) into *run, with the same reads, checks and messages as
// ParseRunNode, and where each was written into run->written. A grid
// setting's value is parsed with it (sim/config/grid.h).
absl::Status ParseRunSettings(const ConfigNode& root, RunSpec* run);
// The `program:` section of `root` alone, as ParseRunNode reads it.
absl::StatusOr<ProgramSpec> ParseProgramNode(const ConfigNode& root);
// Where every leaf under `node` (a mapping at key path `path`) was
// written, as RunSpec::written records it.
void RecordWrittenLeaves(const ConfigNode& node, const std::string& path,
                         std::map<std::string, std::string>* out);

// The leaves under `node` that a file other than `run_file` gave (a model
// file a `model:` NAME or `from:` merged in), as RunSpec::from_model_file
// records them; --set values carry a label, not a file.
void RecordModelFileLeaves(const ConfigNode& node, const std::string& path, const std::string& run_file,
                           std::set<std::string>* out);

// The deepest model a family builds (Note [Magnitude checks]): unrolled
// layers, every one built (the temp heap packer's cost grows with layers x
// buffers, sim/alloc/heap_planner.h), and layers scanned as a rolled loop
// (model.scan_layers with loop.mode rolled), built once past 1,024 (Note
// [Rolled loop built once], sim/lower/lower.h): its cost no longer grows
// with the depth, and the cap bounds the per-layer report (one row per
// layer).
inline constexpr int64_t kMaxLayers = 512;
inline constexpr int64_t kMaxRolledLayers = 100000;
// Refuses a model whose sizes would overflow int64 (naming the keys and the
// product) or whose depth exceeds its cap; messages start at the key.
absl::Status CheckModelMagnitudes(const RunSpec& run);

}  // namespace internal
}  // namespace gpusim

#endif  // GPUSIM_SIM_CONFIG_SPEC_PARSE_H_
