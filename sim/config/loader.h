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

// Note [Run config names]
// The one rule that turns a command's config argument into a file, for the
// CLI (tools/cli.cc, before any command reads it) and the Python package
// alike (which calls the CLI in process): an argument that is an existing
// file, or registered text (below), is itself; a NAME -- letters, digits,
// '_' and '-' only, no '/' and no '.' -- that is no file names a bundled run
// config, DataDir()/configs/NAME.yaml (the source tree's configs/, an
// install's share/gpusim/configs, or the Python package's gpusim/data/
// configs): `gpusim run llama7b` anywhere. A NAME with no such file is
// NotFound, listing the bundled names. Anything else is returned unchanged
// for the command's own "cannot open" error.
absl::StatusOr<std::string> ResolveRunConfig(const std::string& arg);
// NAMEs of the bundled run configs (DataDir()/configs/*.yaml), sorted.
std::vector<std::string> ListRunConfigNames();

// Note [Run configs given as text]
// A run config can be YAML text instead of a file (the Python package's dict
// configs): while a ScopedRunConfigText lives, its `label` (e.g. "<dict>")
// stands for `yaml` on the calling thread wherever a run config path is read
// (LoadRunSpec, RunConfig::Read, ReadRunConfigBytes, the CLI's commands):
// errors cite "<dict>:3:14: batch.per_devise: unknown key ...", device and
// model NAMEs resolve from the bundled configs and relative paths from the
// working directory, as for ParseRunSpec(yaml, ""). Thread-local: the
// readers all run on the thread that took the command (the advisor's
// workers use the tree read once).
class ScopedRunConfigText {
 public:
  ScopedRunConfigText(std::string label, std::string yaml);
  ~ScopedRunConfigText();
  ScopedRunConfigText(const ScopedRunConfigText&) = delete;
  ScopedRunConfigText& operator=(const ScopedRunConfigText&) = delete;

  // The innermost text registered on this thread under `label`, or null.
  static const ScopedRunConfigText* Find(const std::string& label);
  const std::string& yaml() const { return yaml_; }

 private:
  const ScopedRunConfigText* previous_;
  std::string label_, yaml_;
};
// Whether `path` is the label of registered text on this thread.
bool IsRunConfigText(const std::string& path);
// The run config's bytes: the registered text, else the file's.
absl::StatusOr<std::string> ReadRunConfigBytes(const std::string& path);

}  // namespace gpusim

#endif  // GPUSIM_SIM_CONFIG_LOADER_H_
