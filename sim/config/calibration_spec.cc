// Calibration file parsing; see calibration_spec.h.
#include "sim/config/calibration_spec.h"

#include <charconv>
#include <cmath>
#include <filesystem>
#include <set>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "sim/base/status.h"
#include "sim/config/loader.h"
#include "sim/config/schema.h"
#include "sim/config/units_parse.h"

namespace gpusim {
namespace {

namespace fs = std::filesystem;

constexpr std::string_view kMetricNames[] = {"none", "memory_analysis_temp", "max_memory_allocated",
                                             "max_memory_reserved", "nvidia_smi"};

SchemaField L(std::string key) { return {std::move(key), Schema::Leaf()}; }
Schema Strict(std::vector<SchemaField> f) { return Schema::Map(Schema::Kind::kMap, std::move(f)); }

const Schema& CalibrationSchema() {
  static const Schema* s = new Schema(Strict(
      {L("name"), L("description"),
       {"parameters", Schema::FreeMap(Strict({L("min"), L("max")}))},
       L("prior_weight"),
       {"cases", Schema::List(Strict({L("name"), L("config"), L("kineto"), L("device"), L("set"),
                                      {"measured", Strict({L("step_time_s"), L("iteration_time_ms"), L("peak_bytes"), L("metric")})},
                                      L("module_calls"), L("hardware"), L("software"), L("source"), L("fit")}))}}));
  return *s;
}

absl::Status Error(const SourceLocation& loc, absl::string_view path, absl::string_view msg) {
  return absl::InvalidArgumentError(
      absl::StrCat(loc.ToString(), ": ", path.empty() ? "" : absl::StrCat(path, ": "), msg));
}

bool ParseNumber(const std::string& s, double* out) {
  const char* b = s.data();
  const char* e = s.data() + s.size();
  if (b != e && *b == '+') ++b;
  if (b == e) return false;
  auto [p, ec] = std::from_chars(b, e, *out);
  return ec == std::errc() && p == e && std::isfinite(*out);
}

// Typed reads of one mapping's keys; errors carry the node's location.
class Fields {
 public:
  Fields(const ConfigNode* map, std::string path, SourceLocation anchor)
      : map_(map), path_(std::move(path)), anchor_(std::move(anchor)) {}

  const ConfigNode* Get(absl::string_view key) const {
    return map_ == nullptr ? nullptr : map_->Find(key);
  }
  std::string Path(absl::string_view key) const { return internal::JoinPath(path_, key); }

  absl::StatusOr<const ConfigNode*> Scalar(absl::string_view key, bool required, absl::string_view what) const {
    const ConfigNode* n = Get(key);
    if (n == nullptr) {
      if (required) return Error(anchor_, Path(key), "missing required key");
      return nullptr;
    }
    if (!n->is_scalar()) {
      return Error(n->location(), Path(key), absl::StrCat("expected ", what, ", got ", n->Describe()));
    }
    return n;
  }

  absl::Status String(absl::string_view key, std::string* out, bool required) const {
    ASSIGN_OR_RETURN(const ConfigNode* n, Scalar(key, required, "a string"));
    if (n == nullptr) return absl::OkStatus();
    if (n->scalar().empty()) return Error(n->location(), Path(key), "expected a non-empty string, got ''");
    *out = n->scalar();
    return absl::OkStatus();
  }

  // A number in [min, max] (exclusive at min when `open_min`).
  absl::Status Number(absl::string_view key, double* out, bool required, double min, double max,
                      bool open_min) const {
    const std::string what = absl::StrCat("a number ", open_min ? "> " : ">= ", min,
                                          std::isinf(max) ? "" : absl::StrCat(" and <= ", max));
    ASSIGN_OR_RETURN(const ConfigNode* n, Scalar(key, required, what));
    if (n == nullptr) return absl::OkStatus();
    double v = 0;
    if (!ParseNumber(n->scalar(), &v) || (open_min ? v <= min : v < min) || v > max) {
      return Error(n->location(), Path(key), absl::StrCat("expected ", what, ", got ", n->Describe()));
    }
    *out = v;
    return absl::OkStatus();
  }

  absl::Status Bool(absl::string_view key, bool* out) const {
    ASSIGN_OR_RETURN(const ConfigNode* n, Scalar(key, false, "true or false"));
    if (n == nullptr) return absl::OkStatus();
    const std::string& s = n->scalar();
    if (s == "true" || s == "True") {
      *out = true;
    } else if (s == "false" || s == "False") {
      *out = false;
    } else {
      return Error(n->location(), Path(key), absl::StrCat("expected true or false, got ", n->Describe()));
    }
    return absl::OkStatus();
  }

  // A sub-mapping (absent or null: an empty reader anchored here).
  absl::StatusOr<Fields> Map(absl::string_view key) const {
    const ConfigNode* n = Get(key);
    if (n == nullptr || n->is_null()) return Fields(nullptr, Path(key), n ? n->location() : anchor_);
    if (!n->is_map()) {
      return Error(n->location(), Path(key), absl::StrCat("expected a mapping, got ", n->Describe()));
    }
    return Fields(n, Path(key), n->location());
  }

  const ConfigNode* node() const { return map_; }

 private:
  const ConfigNode* map_;
  std::string path_;
  SourceLocation anchor_;
};

absl::Status ParseParameters(const Fields& top, CalibrationSpec* spec) {
  ASSIGN_OR_RETURN(Fields params, top.Map("parameters"));
  if (params.node() == nullptr) {
    for (std::string_view name : {"efficiency.matmul", "efficiency.attention", "efficiency.memory",
                                  "efficiency.collective"}) {
      const DeviceParameter* p = FindDeviceParameter(name);
      spec->parameters.push_back({std::string(name), p->default_min, p->default_max});
    }
    return absl::OkStatus();
  }
  std::vector<std::string> known;
  for (const DeviceParameter& p : DeviceParameters()) known.emplace_back(p.name);
  for (const ConfigEntry& e : params.node()->entries()) {
    const DeviceParameter* p = FindDeviceParameter(e.key);
    if (p == nullptr) {
      std::string msg = absl::StrCat("unknown device parameter '", e.key, "'");
      std::string near = internal::NearestKey(e.key, known);
      if (!near.empty()) absl::StrAppend(&msg, " (did you mean '", near, "'?)");
      absl::StrAppend(&msg, "; fittable: ", absl::StrJoin(known, ", "));
      return Error(e.key_location, "parameters", msg);
    }
    FitParameter f{e.key, p->default_min, p->default_max};
    ASSIGN_OR_RETURN(Fields b, params.Map(e.key));
    RETURN_IF_ERROR(b.Number("min", &f.min, false, 0, p->default_max, /*open_min=*/true));
    RETURN_IF_ERROR(b.Number("max", &f.max, false, 0, p->default_max, /*open_min=*/true));
    if (f.min > f.max) {
      return Error(e.value.location(), params.Path(e.key),
                   absl::StrCat("expected min <= max, got min ", f.min, " and max ", f.max));
    }
    spec->parameters.push_back(std::move(f));
  }
  if (spec->parameters.empty()) {
    return Error(params.node()->location(), "parameters", "expected at least one parameter");
  }
  return absl::OkStatus();
}

absl::StatusOr<CalibrationCase> ParseCase(const ConfigNode& node, const std::string& path,
                                          const std::string& dir) {
  if (!node.is_map()) {
    return Error(node.location(), path, absl::StrCat("expected a mapping, got ", node.Describe()));
  }
  Fields f(&node, path, node.location());
  CalibrationCase c;
  c.location = node.location();
  RETURN_IF_ERROR(f.String("name", &c.name, true));
  const bool has_config = f.Get("config") != nullptr, has_kineto = f.Get("kineto") != nullptr;
  if (has_config == has_kineto) {
    return Error(c.location, path,
                 has_config ? "expected one of 'config' (a measured run) or 'kineto' (a recorded trace), got both"
                            : "missing required key 'config' (a measured run) or 'kineto' (a recorded trace)");
  }
  auto resolve = [&](absl::string_view key, std::string* out) -> absl::Status {
    std::string rel;
    RETURN_IF_ERROR(f.String(key, &rel, true));
    *out = fs::path(rel).is_absolute() ? rel : (fs::path(dir) / rel).lexically_normal().string();
    std::error_code ec;
    if (!fs::is_regular_file(*out, ec)) {
      return Error(f.Get(key)->location(), f.Path(key), absl::StrCat("no such file '", *out, "'"));
    }
    return absl::OkStatus();
  };
  if (has_kineto) {
    RETURN_IF_ERROR(resolve("kineto", &c.kineto_path));
    if (const ConfigNode* n = f.Get("set"); n != nullptr) {
      return Error(n->location(), f.Path("set"),
                   "not allowed in a kineto case (its measurements are the trace's kernel and CPU-op durations)");
    }
    // Note [Host phase spans from Kineto] (sim/calibrate/host_measurements.h):
    // the step's unprofiled time removes the profiler's overhead from the
    // host spans; nothing else of `measured` applies to a trace.
    ASSIGN_OR_RETURN(Fields m, f.Map("measured"));
    for (absl::string_view key : {"iteration_time_ms", "peak_bytes", "metric"}) {
      if (const ConfigNode* n = m.Get(key); n != nullptr) {
        return Error(n->location(), m.Path(key),
                     "not allowed in a kineto case (only step_time_s, the step's unprofiled time)");
      }
    }
    RETURN_IF_ERROR(m.Number("step_time_s", &c.measured.step_time_s, false, 0, INFINITY, /*open_min=*/true));
    double modules = -1;
    RETURN_IF_ERROR(f.Number("module_calls", &modules, false, 0, 1e12, /*open_min=*/false));
    if (modules >= 0 && modules != static_cast<double>(static_cast<int64_t>(modules))) {
      return Error(f.Get("module_calls")->location(), f.Path("module_calls"), "expected a whole number of calls");
    }
    c.module_calls = static_cast<int64_t>(modules);
    std::string device;
    RETURN_IF_ERROR(f.String("device", &device, true));
    absl::StatusOr<DeviceSpec> d = LoadDeviceSpec(device, dir);
    if (!d.ok()) {
      return absl::Status(d.status().code(), absl::StrCat(f.Get("device")->location().ToString(), ": ",
                                                          f.Path("device"), ": ", d.status().message()));
    }
    c.run.device = *std::move(d);
    RETURN_IF_ERROR(f.String("hardware", &c.hardware, false));
    RETURN_IF_ERROR(f.String("software", &c.software, false));
    RETURN_IF_ERROR(f.String("source", &c.source, true));
    RETURN_IF_ERROR(f.Bool("fit", &c.fit));
    return c;
  }
  if (const ConfigNode* n = f.Get("module_calls"); n != nullptr) {
    return Error(n->location(), f.Path("module_calls"),
                 "not allowed in a config case (it counts a kineto case's nn.Module calls)");
  }
  if (const ConfigNode* n = f.Get("device"); n != nullptr) {
    return Error(n->location(), f.Path("device"),
                 "not allowed in a config case (the device comes from its run config); kineto cases name one");
  }
  RETURN_IF_ERROR(resolve("config", &c.config_path));
  if (const ConfigNode* set = f.Get("set"); set != nullptr && !set->is_null()) {
    bool good = set->is_sequence();
    if (good) {
      for (const ConfigNode& item : set->items()) good &= item.is_scalar();
    }
    if (!good) {
      return Error(set->location(), f.Path("set"),
                   absl::StrCat("expected a sequence of PATH=VALUE such as [model.n_layers=2], got ",
                                set->Describe()));
    }
    for (const ConfigNode& item : set->items()) c.overrides.push_back(item.scalar());
  }
  ASSIGN_OR_RETURN(Fields m, f.Map("measured"));
  RETURN_IF_ERROR(m.Number("step_time_s", &c.measured.step_time_s, false, 0, INFINITY, /*open_min=*/true));
  // Megatron-LM's training log: "elapsed time per iteration (ms): X"
  // (megatron/training/training.py training_log), one iteration being the
  // whole global batch: the step the case's megatron: launch line simulates.
  RETURN_IF_ERROR(
      m.Number("iteration_time_ms", &c.measured.iteration_time_ms, false, 0, INFINITY, /*open_min=*/true));
  if (c.measured.iteration_time_ms > 0) {
    if (c.measured.step_time_s > 0) {
      return Error(m.Get("iteration_time_ms")->location(), m.Path("iteration_time_ms"),
                   "expected one of step_time_s or iteration_time_ms, got both");
    }
    c.measured.step_time_s = c.measured.iteration_time_ms / 1e3;
  }
  if (const ConfigNode* pb = m.Get("peak_bytes"); pb != nullptr) {
    ASSIGN_OR_RETURN(const ConfigNode* n, m.Scalar("peak_bytes", false, "a byte size such as 25GiB"));
    absl::StatusOr<Bytes> b = ParseBytes(n->scalar());
    if (!b.ok()) return Error(n->location(), m.Path("peak_bytes"), b.status().message());
    c.measured.peak_bytes = *b;
  }
  if (const ConfigNode* mt = m.Get("metric"); mt != nullptr) {
    ASSIGN_OR_RETURN(const ConfigNode* n, m.Scalar("metric", false, "a metric name"));
    bool found = false;
    for (size_t i = 1; i < std::size(kMetricNames); ++i) {
      if (n->scalar() == kMetricNames[i]) {
        c.measured.metric = static_cast<MemoryMetric>(i);
        found = true;
      }
    }
    if (!found) {
      return Error(n->location(), m.Path("metric"),
                   absl::StrCat("expected one of memory_analysis_temp|max_memory_allocated|"
                                "max_memory_reserved|nvidia_smi, got ",
                                n->Describe()));
    }
  }
  const bool has_bytes = c.measured.peak_bytes.value() >= 0;
  const bool has_metric = c.measured.metric != MemoryMetric::kNone;
  if (has_bytes != has_metric) {
    const SourceLocation& at = m.node() != nullptr ? m.node()->location() : c.location;
    return Error(at, m.Path(has_bytes ? "metric" : "peak_bytes"),
                 has_bytes ? "missing required key (peak_bytes needs its metric)"
                           : "missing required key (metric names what peak_bytes measured)");
  }
  RETURN_IF_ERROR(f.String("hardware", &c.hardware, false));
  RETURN_IF_ERROR(f.String("software", &c.software, false));
  RETURN_IF_ERROR(f.String("source", &c.source, true));
  RETURN_IF_ERROR(f.Bool("fit", &c.fit));
  if (c.fit && c.measured.step_time_s <= 0) {
    const SourceLocation& at = m.node() != nullptr ? m.node()->location() : c.location;
    return Error(at, m.Path("step_time_s"),
                 "missing required key (a fit: true case needs a step time, or iteration_time_ms)");
  }
  absl::StatusOr<RunSpec> run = LoadRunSpec(c.config_path, c.overrides);
  if (!run.ok()) {
    return absl::Status(run.status().code(),
                        absl::StrCat(c.location.ToString(), ": ", path, ": ", run.status().message()));
  }
  c.run = *std::move(run);
  return c;
}

}  // namespace

std::string_view MemoryMetricName(MemoryMetric m) { return kMetricNames[static_cast<size_t>(m)]; }

const std::vector<DeviceParameter>& DeviceParameters() {
  static const std::vector<DeviceParameter>* p = new std::vector<DeviceParameter>{
      {"efficiency.matmul", "achieved / peak tensor FLOP/s of a perfectly tiled GEMM", 0.05, 1,
       [](const DeviceSpec& d) { return d.matmul_efficiency; },
       [](DeviceSpec& d, double v) { d.matmul_efficiency = v; }},
      {"efficiency.attention", "achieved / peak tensor FLOP/s of fused (flash) attention", 0.05, 1,
       [](const DeviceSpec& d) { return d.attention_efficiency; },
       [](DeviceSpec& d, double v) { d.attention_efficiency = v; }},
      {"efficiency.fused_attention", "share of the tile model's ideal a fused SDPA kernel reaches (attention.h)", 0.05, 1,
       [](const DeviceSpec& d) { return d.fused_attention_efficiency; },
       [](DeviceSpec& d, double v) { d.fused_attention_efficiency = v; }},
      {"efficiency.memory", "achieved / peak HBM bandwidth of streaming ops", 0.05, 1,
       [](const DeviceSpec& d) { return d.memory_efficiency; },
       [](DeviceSpec& d, double v) { d.memory_efficiency = v; }},
      {"efficiency.collective", "NCCL bus bandwidth / link peak", 0.05, 1,
       [](const DeviceSpec& d) { return d.collective_efficiency; },
       [](DeviceSpec& d, double v) { d.collective_efficiency = v; }},
      {"launch_overhead", "seconds per kernel launch", 1e-7, 1e-4,
       [](const DeviceSpec& d) { return d.launch_overhead.seconds(); },
       [](DeviceSpec& d, double v) { d.launch_overhead = SimTime::FromSeconds(v); }},
      {"host.op", "host seconds to issue one kernel (eager dispatch + launch call)", 1e-7, 1e-3,
       [](const DeviceSpec& d) { return d.host_op_cost.seconds(); },
       [](DeviceSpec& d, double v) { d.host_op_cost = SimTime::FromSeconds(v); }},
      {"host.module", "host seconds per Python module call", 1e-7, 1e-3,
       [](const DeviceSpec& d) { return d.host_module_cost.seconds(); },
       [](DeviceSpec& d, double v) { d.host_module_cost = SimTime::FromSeconds(v); }},
      {"host.megatron_op", "host seconds to issue one kernel of a Megatron-LM iteration", 1e-7, 1e-3,
       [](const DeviceSpec& d) { return (d.host_megatron_op_cost >= SimTime(0) ? d.host_megatron_op_cost
                                                                                : d.host_op_cost).seconds(); },
       [](DeviceSpec& d, double v) { d.host_megatron_op_cost = SimTime::FromSeconds(v); }},
      {"host.megatron_module", "host seconds per Python module call of a Megatron-LM iteration", 1e-7, 1e-3,
       [](const DeviceSpec& d) { return (d.host_megatron_module_cost >= SimTime(0) ? d.host_megatron_module_cost
                                                                                    : d.host_module_cost).seconds(); },
       [](DeviceSpec& d, double v) { d.host_megatron_module_cost = SimTime::FromSeconds(v); }},
      {"host.dispatch", "host seconds per aten op a recorded step dispatched from Python", 1e-7, 1e-3,
       [](const DeviceSpec& d) { return d.host_dispatch_cost.seconds(); },
       [](DeviceSpec& d, double v) { d.host_dispatch_cost = SimTime::FromSeconds(v); }},
      {"host.node", "host seconds per autograd node a recorded step's backward ran", 1e-7, 1e-3,
       [](const DeviceSpec& d) { return d.host_node_cost.seconds(); },
       [](DeviceSpec& d, double v) { d.host_node_cost = SimTime::FromSeconds(v); }},
      {"host.python_module", "host seconds per nn.Module call of a recorded step", 1e-7, 1e-3,
       [](const DeviceSpec& d) { return d.host_python_module_cost.seconds(); },
       [](DeviceSpec& d, double v) { d.host_python_module_cost = SimTime::FromSeconds(v); }},
      {"links.latency", "seconds per intra-node ring step", 1e-7, 1e-4,
       [](const DeviceSpec& d) { return d.link_latency.seconds(); },
       [](DeviceSpec& d, double v) { d.link_latency = SimTime::FromSeconds(v); }},
  };
  return *p;
}

const DeviceParameter* FindDeviceParameter(std::string_view name) {
  for (const DeviceParameter& p : DeviceParameters()) {
    if (p.name == name) return &p;
  }
  return nullptr;
}

absl::StatusOr<CalibrationSpec> LoadCalibrationSpec(const std::string& path) {
  ASSIGN_OR_RETURN(ConfigNode root, ParseYamlFile(path));
  if (!root.is_map()) {
    return Error(root.location(), "",
                 absl::StrCat("expected a mapping of calibration keys at the top of the file, got ",
                              root.Describe()));
  }
  RETURN_IF_ERROR(ValidateKeys(root, CalibrationSchema(), ""));
  CalibrationSpec spec;
  spec.source_file = path;
  Fields top(&root, "", root.location());
  RETURN_IF_ERROR(top.String("name", &spec.name, false));
  RETURN_IF_ERROR(top.String("description", &spec.description, false));
  RETURN_IF_ERROR(ParseParameters(top, &spec));
  RETURN_IF_ERROR(top.Number("prior_weight", &spec.prior_weight, false, 0, INFINITY, /*open_min=*/false));
  const ConfigNode* cases = root.Find("cases");
  if (cases == nullptr) return Error(root.location(), "cases", "missing required key");
  if (!cases->is_sequence() || cases->items().empty()) {
    return Error(cases->location(), "cases",
                 absl::StrCat("expected a non-empty sequence of cases, got ", cases->Describe()));
  }
  const std::string dir = fs::path(path).parent_path().string();
  std::set<std::string> names;
  for (size_t i = 0; i < cases->items().size(); ++i) {
    const std::string item_path = absl::StrCat("cases[", i, "]");
    ASSIGN_OR_RETURN(CalibrationCase c, ParseCase(cases->items()[i], item_path, dir));
    if (!names.insert(c.name).second) {
      return Error(cases->items()[i].Find("name")->location(), item_path + ".name",
                   absl::StrCat("duplicate case name '", c.name, "'"));
    }
    if (!spec.cases.empty() && c.run.device.name != spec.cases[0].run.device.name) {
      return Error(c.location, item_path,
                   absl::StrCat("simulates device '", c.run.device.name, "' but cases[0] simulates '",
                                spec.cases[0].run.device.name, "'; one calibration fits one device"));
    }
    spec.cases.push_back(std::move(c));
  }
  return spec;
}

}  // namespace gpusim
