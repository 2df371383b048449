// Loading run, device and model configs from YAML into the typed specs of
// spec.h. This is the only entry point to sim/config for the rest of gpusim.
//
// A run config names its device and model in one of three ways:
//   device: h100-sxm-80gb                 # a NAME: devices/NAME.yaml
//   device: ../my/gpu.yaml                # a PATH (has '/' or ends in .yaml),
//                                         # relative to the including file
//   device: {from: h100-sxm-80gb, memory: {context_reserve: 2GiB}}
//                                         # a file plus overrides (deep merge)
// A NAME is looked up in, first to last: <dir of the including file>/devices/,
// <dir of the including file>/../configs/devices/, and the source tree's
// configs/devices/ (models likewise under models/). Device and model files
// may themselves start from another file with a top-level `from:`.
//
// Instead of `model:`, a run config may describe a small JAX program in a
// `program:` section (spec.h ProgramSpec; exactly one of the two). Its
// `inputs` and scan `carry`/`xs`/`carry_out` keys are the user's names, so
// any key is accepted there; `--set program.inputs.w1.donate=false` works,
// and `scan.body` (a sequence) can only be set whole.
//
// Overrides (`--set PATH=VALUE`, in order, after the merge): VALUE is parsed
// as YAML (a scalar or a flow sequence such as [a,b]); PATH must exist in the
// schema (it need not be written in the file). `device=NAME` / `model=NAME`
// replace the whole subtree with the named file (names are looked up from the
// run config's directory; paths are relative to the working directory).
//
// Error formats (all InvalidArgument except a missing top-level file, which is
// NotFound "FILE: cannot open file"); LOC is FILE:LINE:COL where the offending
// node was written, or "--set PATH=VALUE" for command-line values:
//   LOC: <yaml-cpp message>                       YAML syntax
//   LOC: PATH: unknown key 'x' (did you mean 'y'?)  suggestion when close
//   LOC: PATH: expected an integer, got 'abc'     wrong type (see spec_parse.h)
//   LOC: PATH: missing required key               LOC = the enclosing mapping
//   FILE:1:1: expected exactly one of 'model', 'program' or 'program_hlo'
//   LOC: program.scan.body[1].in: ...             program checks (spec_parse.h)
//   LOC: device: unknown device 'x'; available: a, b (searched D1, D2, D3)
//   LOC: device: no such file 'dir/x.yaml'
//   --set TEXT: expected PATH=VALUE such as --set model.n_layers=2
//   --set TEXT: PATH: unknown key 'x' (did you mean 'y'?)
#ifndef GPUSIM_SIM_CONFIG_LOADER_H_
#define GPUSIM_SIM_CONFIG_LOADER_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "sim/config/spec.h"

namespace gpusim {

// Reads the run config at `path`, resolves device/model, applies `overrides`
// ("PATH=VALUE" strings from repeated --set) and parses strictly.
absl::StatusOr<RunSpec> LoadRunSpec(const std::string& path,
                                    const std::vector<std::string>& overrides);

// As LoadRunSpec, for a run config already in memory: `path` names it in
// errors and its directory is where device/model references are resolved
// ("" = none: names from the source tree, paths from the working directory).
absl::StatusOr<RunSpec> ParseRunSpec(absl::string_view yaml, const std::string& path,
                                     const std::vector<std::string>& overrides = {});

class ConfigNode;

// A run config read and resolved once (device and model files included);
// Spec() derives the typed spec for a set of overrides without reading the
// files again (the advisor's grid points). Cheap to copy; thread-safe.
class RunConfig {
 public:
  static absl::StatusOr<RunConfig> Read(const std::string& path);
  // As LoadRunSpec(path, overrides).
  absl::StatusOr<RunSpec> Spec(const std::vector<std::string>& overrides) const;
  const std::string& path() const { return path_; }

 private:
  friend class GridBase;  // sim/config/grid.h: grid points from the resolved tree

  std::shared_ptr<const ConfigNode> root_;  // resolved, before overrides
  std::string path_;
};

// A device or model by NAME or PATH. `base_dir` plays the part of the
// including file's directory: names are searched under it as above and
// relative paths resolved against it; when empty, names are searched in the
// source tree only and paths are relative to the working directory. Error key
// paths are relative to the file ("memory.cuda_total").
absl::StatusOr<DeviceSpec> LoadDeviceSpec(const std::string& name_or_path,
                                          const std::string& base_dir = "");
absl::StatusOr<ModelSpec> LoadModelSpec(const std::string& name_or_path,
                                        const std::string& base_dir = "");

// NAMEs of the files in the source tree's configs/devices (configs/models),
// sorted.
std::vector<std::string> ListDeviceNames();
std::vector<std::string> ListModelNames();

}  // namespace gpusim

#endif  // GPUSIM_SIM_CONFIG_LOADER_H_
