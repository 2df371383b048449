// The gpusim Python extension (pybind11): the gpusim command line run in
// this process (tools/cli.h RunCli under a CliCapture, Note [Where the CLI
// writes]), so that every function of the package (python/gpusim/_api.py)
// gets what `gpusim ... --format json` prints, with the CLI's exit code and
// error messages, its name resolution (Note [Run config names]) and its
// checks of every argument. A dict config is run config text (Note [Run
// configs given as text], sim/config/loader.h). The GIL is released while a
// command runs.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <optional>
#include <string>
#include <vector>

#include "sim/base/data_dir.h"
#include "sim/config/loader.h"
#include "tools/cli.h"

namespace py = pybind11;

namespace gpusim {
namespace {

// UTF-8 text as str; a byte that is not UTF-8 (a file name) becomes U+FFFD.
py::str Text(const std::string& s) {
  return py::reinterpret_steal<py::str>(PyUnicode_DecodeUTF8(s.data(), static_cast<Py_ssize_t>(s.size()), "replace"));
}

// `gpusim ARGS...` in process: (exit code, stdout, stderr, timeline SVG of
// the step `run` simulated when `timeline_svg`, else ""). With
// `config_text`, `config_label` (an argument in ARGS) stands for that YAML.
py::tuple Cli(const std::vector<std::string>& args, const std::string& config_label,
              const std::optional<std::string>& config_text, bool timeline_svg) {
  int rc = 0;
  std::string out, err, svg;
  {
    py::gil_scoped_release release;
    std::optional<ScopedRunConfigText> text;
    if (config_text.has_value()) text.emplace(config_label, *config_text);
    CliCapture capture(timeline_svg);
    std::vector<std::string> words = {"gpusim"};
    words.insert(words.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (std::string& w : words) argv.push_back(w.data());
    argv.push_back(nullptr);
    rc = RunCli(static_cast<int>(words.size()), argv.data());
    out = capture.out();
    err = capture.err();
    svg = capture.timeline_svg();
  }
  return py::make_tuple(rc, Text(out), Text(err), Text(svg));
}

// Note [Run config names]: the file a config argument names, or Error's
// message as ValueError.
std::string Resolve(const std::string& arg) {
  absl::StatusOr<std::string> r = ResolveRunConfig(arg);
  if (!r.ok()) throw py::value_error(std::string(r.status().message()));
  return *r;
}

}  // namespace
}  // namespace gpusim

PYBIND11_MODULE(_gpusim, m) {
  m.doc() = "gpusim's C++ core; use the gpusim package, not this module";
  m.def("set_data_dir", &gpusim::SetDataDir, "Where device/model configs and the snapshot converter are");
  m.def("data_dir", &gpusim::DataDir);
  m.def("cli", &gpusim::Cli, py::arg("args"), py::arg("config_label") = "", py::arg("config_text") = py::none(),
        py::arg("timeline_svg") = false);
  m.def("resolve_config", &gpusim::Resolve, py::arg("arg"));
  m.def("bundled_configs", &gpusim::ListRunConfigNames);
#ifdef GPUSIM_VERSION
  m.attr("__version__") = GPUSIM_VERSION;
#endif
}
