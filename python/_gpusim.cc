// The gpusim Python extension (pybind11): the library's entry points behind
// the CLI's subcommands, returning the same JSON documents `--format json`
// prints (python/gpusim/__init__.py turns them into dicts). The GIL is
// released while a step is simulated or replayed; a failing Status raises
// gpusim.Error with the message the CLI prints after "gpusim: error: ".
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "sim/advise/advise.h"
#include "sim/base/data_dir.h"
#include "sim/config/loader.h"
#include "sim/config/units_parse.h"
#include "sim/replay/replay.h"
#include "sim/report/render.h"
#include "sim/step/step.h"
#include "tools/replay_options.h"
#include "viz/viz.h"

namespace py = pybind11;

namespace gpusim {
namespace {

struct Error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

void Check(const absl::Status& st) {
  if (!st.ok()) throw Error(std::string(st.message()));
}
template <typename T>
T Take(absl::StatusOr<T> v) {
  Check(v.status());
  return *std::move(v);
}

// (JSON of `gpusim run --format json`, the timeline SVG).
std::pair<std::string, std::string> Run(const std::string& config, const std::vector<std::string>& sets) {
  py::gil_scoped_release release;
  RunSpec spec = Take(LoadRunSpec(config, sets));
  StepReport r = Take(SimulateStep(spec));
  return {RenderJson(r), TimelineSvg(r)};
}

// As `gpusim replay` (tools/cli_replay.cc CmdReplay) with --format json.
std::string Replay(const std::string& trace, const std::vector<std::string>& sets, const std::string& device,
                   int device_index, bool check_addresses, bool cold_start) {
  py::gil_scoped_release release;
  ReplayOptions o;
  o.allocator.impl = "pytorch_caching";
  o.check_addresses = check_addresses;
  o.infer_warm_start = !cold_start;
  if (device_index >= 0) o.device = device_index;
  Check(ApplyAllocatorSets(sets, &o.allocator));
  Check(ResolveReplayCapacity(device, &o));
  return ReplayReportJson(Take(ReplayForReport(trace, device, o)));
}

std::string AdviseJson(const std::string& config, const std::vector<std::string>& sets,
                       const std::vector<std::string>& vary, const std::string& budget, int jobs) {
  py::gil_scoped_release release;
  AdviseOptions o;
  o.config = config;
  o.base_sets = sets;
  o.jobs = jobs;
  for (const std::string& v : vary) o.axes.push_back(Take(ParseAxis(v)));
  if (!budget.empty()) {
    auto b = ParseBytes(budget);
    if (!b.ok()) throw Error(absl::StrCat("--budget: ", b.status().message()));
    o.budget = *b;
  }
  return RenderAdviceJson(Take(Advise(o)));
}

}  // namespace
}  // namespace gpusim

PYBIND11_MODULE(_gpusim, m) {
  m.doc() = "gpusim's C++ core; use the gpusim package, not this module";
  py::register_exception<gpusim::Error>(m, "Error");
  m.def("set_data_dir", &gpusim::SetDataDir, "Where device/model configs and the snapshot converter are");
  m.def("run", &gpusim::Run, py::arg("config"), py::arg("sets"));
  m.def("replay", &gpusim::Replay, py::arg("trace"), py::arg("sets"), py::arg("device"), py::arg("device_index"),
        py::arg("check_addresses"), py::arg("cold_start"));
  m.def("advise", &gpusim::AdviseJson, py::arg("config"), py::arg("sets"), py::arg("vary"), py::arg("budget"),
        py::arg("jobs"));
#ifdef GPUSIM_VERSION
  m.attr("__version__") = GPUSIM_VERSION;
#endif
}
