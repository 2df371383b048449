#include "tools/cli.h"

#include <sys/stat.h>

#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include <unistd.h>

#include "sim/advise/advise.h"
#include "sim/calibrate/calibrate.h"
#include "sim/alloc/allocator.h"
#include "sim/base/json_writer.h"
#include "sim/base/names.h"
#include "sim/base/registry.h"
#include "sim/device/kernel_model.h"
#include "sim/step/families.h"
#include "sim/config/units_parse.h"
#include "sim/base/file_util.h"
#include "sim/base/output_dir.h"
#include "sim/base/status.h"
#include "sim/config/loader.h"
#include "sim/config/spec_parse.h"
#include "sim/remat/remat_policy.h"
#include "sim/report/compare.h"
#include "sim/report/diff.h"
#include "sim/report/explain.h"
#include "sim/report/megatron_render.h"
#include "sim/report/render.h"
#include "sim/step/megatron_step.h"
#include "sim/step/step.h"
#include "sim/step/suggest.h"
#include "sim/trace/trace_io.h"
#include "sim/trace/validate.h"
#include "sim/import/import.h"
#include "sim/import/recorded_trace.h"
#include "sim/lower/eager/device_memory.h"
#include "tools/replay_options.h"
#include "viz/viz.h"

namespace gpusim {

namespace {
thread_local CliCapture* active_capture = nullptr;
}  // namespace

std::ostream& CliOut() { return active_capture != nullptr ? active_capture->out_stream() : std::cout; }
std::ostream& CliErr() { return active_capture != nullptr ? active_capture->err_stream() : std::cerr; }

CliCapture::CliCapture(bool want_timeline_svg) : want_timeline_svg_(want_timeline_svg), previous_(active_capture) {
  active_capture = this;
}
CliCapture::~CliCapture() { active_capture = previous_; }
CliCapture* CliCapture::Active() { return active_capture; }

namespace {

// Note [Every command's inputs] (tools/cli.h): the kinds each command takes.
bool Takes(const std::string& command, InputKind kind) {
  if (command == "run" || command == "viz" || command == "explain" || command == "validate") return true;
  if (command == "replay") return IsTraceKind(kind);
  if (command == "compare") return kind != InputKind::kHloModule;
  if (command == "diff") return kind == InputKind::kRunConfig || kind == InputKind::kHloModule;
  return kind == InputKind::kRunConfig;  // advise
}

// What `command` takes, in words (the refusal's second half).
const char* TakesWords(const std::string& command) {
  if (command == "replay") return "a trace (native, Kineto, memory snapshot or memory timeline)";
  if (command == "compare") return "a run config (with --vary) or a trace (with --allocators)";
  if (command == "diff") return "a run config or an HLO module";
  return "a run config";
}

}  // namespace

absl::Status CheckCommandInput(const std::string& command, const Input& in) {
  if (Takes(command, in.kind)) return absl::OkStatus();
  // One message per kind refused, whatever the command.
  return absl::InvalidArgumentError(absl::StrCat(
      command, " ", in.path, ": ", InputKindWords(in.kind), "; ", command, " takes ", TakesWords(command),
      IsTraceKind(in.kind) ? "; `gpusim replay " : "; `gpusim run ", in.path,
      IsTraceKind(in.kind) ? "` replays it" : "` simulates it"));
}

absl::StatusOr<Input> SniffCommandInput(const std::string& command, const std::string& path) {
  ASSIGN_OR_RETURN(Input in, SniffInput(path));
  RETURN_IF_ERROR(CheckCommandInput(command, in));
  return in;
}

namespace {

// Note [Exit codes] (README "Hardening", `gpusim --help`): 0 ok; 1 bad
// input (config, trace, command line, an input too large to model); 3
// environment (I/O error, disk full, a target that exists and cannot be
// replaced); 2 only for a bug. Status codes map onto them here: input
// errors are InvalidArgument / NotFound / OutOfRange / Unimplemented /
// FailedPrecondition / AlreadyExists / ResourceExhausted / DataLoss (a
// truncated or corrupt file), environment errors Unavailable (I/O) and
// PermissionDenied (a target that may not be replaced).
int ExitCodeFor(absl::StatusCode code) {
  switch (code) {
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kNotFound:
    case absl::StatusCode::kOutOfRange:
    case absl::StatusCode::kUnimplemented:
    case absl::StatusCode::kFailedPrecondition:
    case absl::StatusCode::kAlreadyExists:
    case absl::StatusCode::kResourceExhausted:
    case absl::StatusCode::kDataLoss:
      return 1;
    case absl::StatusCode::kUnavailable:
    case absl::StatusCode::kPermissionDenied:
      return 3;
    default:
      return 2;
  }
}

int Fail(const absl::Status& st) {
  CliErr() << "gpusim: error: " << st.message() << "\n";
  return ExitCodeFor(st.code());
}

// Writes `write(dir)` into a temporary directory beside `target` and moves
// it into place as a whole (sim/base/output_dir.h).
template <typename WriteFn>
absl::Status WriteOutputDir(const std::string& target, const std::string& flag, WriteFn write) {
  ASSIGN_OR_RETURN(std::unique_ptr<OutputDir> out, OutputDir::Begin(target, flag));
  RETURN_IF_ERROR(write(out->path()));
  return out->Commit();
}

struct RunOptions {
  std::string config;
  std::string device;  // for an .hlo module
  std::vector<std::string> sets;
  std::string format = "text";
  std::string out_dir;
  std::string charts_dir;
  std::string timeline;
  std::string snapshot;  // --snapshot FILE.pickle
  std::string megatron_args;  // --megatron-args "LAUNCH LINE"
  int64_t world_size = 0;     // --world-size (with --megatron-args)
  int64_t gpus_per_node = 8;  // --gpus-per-node (with --megatron-args)
  std::string cudnn_workspace;  // --cudnn-workspace (a recorded PyTorch step)
  std::string sdpa_backend;     // --sdpa-backend (a recorded PyTorch step)
  std::string compiled;         // --compiled STEP.opt.hlo (with an unoptimised STEP.hlo)
  EagerDeviceOptions device_options() const { return {cudnn_workspace, sdpa_backend}; }
};

// --cudnn-workspace or --sdpa-backend given for a run config (YAML or HLO):
// refused by name.
absl::Status RefuseCudnnForConfig(const std::string& command, const RunOptions& o) {
  const bool cudnn = !o.cudnn_workspace.empty();
  if (!cudnn && o.sdpa_backend.empty()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      command, cudnn ? " --cudnn-workspace " : " --sdpa-backend ", cudnn ? o.cudnn_workspace : o.sdpa_backend,
      ": applies to a step recorded from PyTorch (python/gpusim_torch), and ",
      o.config.empty() ? std::string("a Megatron-LM launch line") : o.config, " is a run config"));
}


std::string YamlQuoted(const std::string& s) {
  std::string q = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') q += '\\';
    q += c;
  }
  return q + "\"";
}

// A run config, or an HLO module (STEP.hlo) run on `device`: the config
// `{framework: jax, device: NAME, program_hlo: STEP.hlo}`.
// REQUIRES: in.kind is kRunConfig or kHloModule.
absl::StatusOr<RunSpec> LoadSpec(const Input& in, const std::vector<std::string>& sets, const std::string& device) {
  const std::string& config = in.path;
  if (in.kind != InputKind::kHloModule) {
    if (!device.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--device is for an HLO module (STEP.hlo); for ", config, " use --set device=NAME"));
    }
    return LoadRunSpec(config, sets);
  }
  if (device.empty()) return absl::InvalidArgumentError(absl::StrCat(config, ": give the device with --device NAME"));
  const std::string yaml = absl::StrCat("framework: jax\ndevice: ", YamlQuoted(device),
                                        "\nprogram_hlo: ", YamlQuoted(config), "\n");
  auto spec = ParseRunSpec(yaml, "", sets);
  if (spec.ok()) spec->source_file = config;
  return spec;
}

// The step lowered with the other loop mode (rolled ↔ unrolled), for the
// dataflow graph's side-by-side view; nullopt when that lowering fails or
// the other mode is past its depth cap (a 1,024-layer rolled scan is cheap,
// the same layers unrolled are not: at 2,048 layers `--out` took 48 CPU s
// and 1.3 GB), and the graph then shows one lowering.
std::optional<StepReport> OtherLoopMode(const RunSpec& spec) {
  RunSpec other = spec;
  other.loop.mode = spec.loop.mode == "unrolled" ? "rolled" : "unrolled";
  if (!spec.model.name.empty() && !internal::CheckModelMagnitudes(other).ok()) {
    return std::nullopt;
  }
  auto r = SimulateStep(other);
  if (!r.ok()) return std::nullopt;
  return *std::move(r);
}

// `gpusim run --megatron-args "..." --world-size N --device D`: the run
// config {device: D, megatron: {world_size: N, args: "..."}} (sim/config/
// megatron_args.h); errors name the argument, "--megatron-args".
absl::StatusOr<RunSpec> MegatronSpecFromFlags(const RunOptions& o) {
  if (!o.config.empty()) return absl::InvalidArgumentError("run: give a config or --megatron-args, not both");
  if (o.device.empty()) return absl::InvalidArgumentError("--megatron-args: give the device with --device NAME");
  if (o.world_size < 1) return absl::InvalidArgumentError("--megatron-args: give the GPU count with --world-size N");
  const std::string yaml = absl::StrCat("device: ", YamlQuoted(o.device), "\nmegatron:\n  world_size: ", o.world_size,
                                        "\n  gpus_per_node: ", o.gpus_per_node,
                                        "\n  args: ", YamlQuoted(o.megatron_args), "\n");
  auto spec = ParseRunSpec(yaml, "--megatron-args", o.sets);
  if (spec.ok()) return spec;
  // Positions inside the launch line: "--megatron-args:5:C" is column C of
  // the args line above, whose string starts at column 9.
  const std::string msg(spec.status().message());
  constexpr absl::string_view kAt = "--megatron-args:5:";
  int col = 0;
  const size_t colon = msg.find(':', kAt.size());
  if (absl::StartsWith(msg, kAt) && colon != std::string::npos &&
      absl::SimpleAtoi(msg.substr(kAt.size(), colon - kAt.size()), &col) && col > 8) {
    return absl::InvalidArgumentError(
        absl::StrCat("--megatron-args (character ", col - 8, " of the launch line)", msg.substr(colon)));
  }
  return spec;
}

// The step files (--out, --charts, --timeline, --snapshot) of one step.
absl::Status WriteStepFiles(const RunOptions& o, const StepReport& report, const std::string& json,
                            const VizOptions& viz) {
  if (!o.out_dir.empty()) {
    // --out DIR: result.json, the trace, report.html, the charts and the
    // Perfetto timeline, written beside DIR and moved into place as a whole.
    RETURN_IF_ERROR(WriteOutputDir(o.out_dir, "--out", [&](const std::string& dir) -> absl::Status {
      RETURN_IF_ERROR(WriteTraceFile(report.lowered.trace, dir + "/trace.gpusim"));
      RETURN_IF_ERROR(WriteFileAtomically(dir + "/result.json", json));
      RETURN_IF_ERROR(WriteCharts(report, dir, viz));
      RETURN_IF_ERROR(WritePerfettoTimeline(report, dir + "/timeline.json"));
      return WriteHtmlReport(report, dir, viz);
    }));
  }
  if (!o.charts_dir.empty()) {
    RETURN_IF_ERROR(
        WriteOutputDir(o.charts_dir, "--charts", [&](const std::string& dir) { return WriteCharts(report, dir, viz); }));
  }
  if (!o.timeline.empty()) RETURN_IF_ERROR(WritePerfettoTimeline(report, o.timeline));
  if (!o.snapshot.empty()) RETURN_IF_ERROR(WriteMemorySnapshot(report, o.snapshot));
  return absl::OkStatus();
}

// Note [Where the CLI writes]: the step's timeline for a capture that asks.
void KeepTimelineSvg(const StepReport& report) {
  CliCapture* c = CliCapture::Active();
  if (c != nullptr && c->want_timeline_svg()) c->set_timeline_svg(TimelineSvg(report));
}

// A launch line's step files are those of its peak rank (PeakRankView,
// sim/step/megatron_step.h); result.json is the whole launch line's JSON.
int CmdRunMegatron(const RunOptions& o, const RunSpec& spec) {
  auto report = SimulateMegatron(spec);
  if (!report.ok()) return Fail(report.status());
  const std::string json = RenderMegatronJson(*report);
  const MegatronRankView view = PeakRankView(*report);
  KeepTimelineSvg(view.report);
  absl::Status st = WriteStepFiles(o, view.report, json, VizOptions{});
  if (!st.ok()) return Fail(st);
  CliOut() << (o.format == "json" ? json : RenderMegatronText(*report));
  return 0;
}

// One step of a run config for explain and diff: a launch line's peak rank.
// `critical_path`: as for SimulateStep (explain --time); a launch line's
// rank view walks it again (its step time is the pipeline schedule's).
absl::StatusOr<StepReport> SimulateOneStep(const RunSpec& spec, std::string* note, bool critical_path = false) {
  if (!spec.megatron.present) return SimulateStep(spec, critical_path);
  ASSIGN_OR_RETURN(MegatronReport m, SimulateMegatron(spec));
  MegatronRankView view = PeakRankView(m);
  if (note != nullptr) *note = DescribeRankView(view);
  return std::move(view.report);
}

// `gpusim run STEP.hlo --compiled STEP.opt.hlo --device NAME`: the same
// step imported from its unoptimised module (gpusim's fusion and schedule)
// and read from XLA's compiled module (XLA's own, Note [Compiled-module
// buffer assignment]), side by side.
int CmdRunCompiled(const RunOptions& o) {
  std::vector<Input> modules;
  for (const std::string& f : {o.config, o.compiled}) {
    auto in = SniffCommandInput("run", f);
    if (!in.ok()) return Fail(in.status());
    modules.push_back(*std::move(in));
  }
  if (modules[0].kind != InputKind::kHloModule || modules[1].kind != InputKind::kHloModule) {
    return Fail(absl::InvalidArgumentError(absl::StrCat(
        "run --compiled ", o.compiled, ": give the unoptimised module as the config (STEP.hlo) and the compiled one "
        "(compiled.as_text(), STEP.opt.hlo) after --compiled")));
  }
  if (!o.out_dir.empty() || !o.charts_dir.empty() || !o.timeline.empty() || !o.snapshot.empty()) {
    return Fail(absl::InvalidArgumentError("run --compiled: --out, --charts, --timeline and --snapshot take one module; "
                                           "run each module by itself for its files"));
  }
  std::vector<StepReport> reports;
  for (const Input& f : modules) {
    auto spec = LoadSpec(f, o.sets, o.device);
    if (!spec.ok()) return Fail(spec.status());
    auto report = SimulateStep(*spec);
    if (!report.ok()) return Fail(report.status());
    reports.push_back(std::move(*report));
  }
  if (reports[0].program.compiled.present || !reports[1].program.compiled.present) {
    return Fail(absl::InvalidArgumentError(absl::StrCat("run ", o.config, " --compiled ", o.compiled,
                                                        ": the first must be unoptimised and the second compiled "
                                                        "(is_scheduled=true in its header)")));
  }
  if (o.format == "json") {
    std::cout << "{\n\"unoptimised\": " << RenderJson(reports[0]) << ",\n\"compiled\": " << RenderJson(reports[1])
              << "}\n";
    return 0;
  }
  std::cout << RenderText(reports[0]);
  std::cout << "\nUnoptimised " << o.config << " (gpusim's fusion and schedule) against compiled " << o.compiled
            << " (XLA's):\n";
  auto row = [](const std::string& name, Bytes a, Bytes b) {
    std::cout << absl::StrFormat("  %-10s %30s %30s %+9.3f%%\n", name, FormatBytes(a), FormatBytes(b),
                                 b.value() == 0 ? 0.0 : 100.0 * static_cast<double>((a - b).value()) /
                                                            static_cast<double>(b.value()));
  };
  std::cout << absl::StrFormat("  %-10s %30s %30s %10s\n", "", "unoptimised", "compiled", "difference");
  row("argument", reports[0].argument, reports[1].argument);
  row("output", reports[0].output, reports[1].output);
  row("alias", reports[0].alias, reports[1].alias);
  row("temp", reports[0].temp, reports[1].temp);
  row("peak", reports[0].peak, reports[1].peak);
  const double ta = reports[0].sim.step_time.seconds(), tb = reports[1].sim.step_time.seconds();
  std::cout << absl::StrFormat("  %-10s %28.4f s %28.4f s %+9.3f%%\n", "step time", ta, tb,
                               tb == 0 ? 0.0 : 100.0 * (ta - tb) / tb);
  return 0;
}

int CmdRun(const RunOptions& o) {
  if (!o.compiled.empty()) return CmdRunCompiled(o);
  if (o.config.empty() && o.megatron_args.empty()) {
    return Fail(absl::InvalidArgumentError("run: give a run config (YAML or STEP.hlo) or --megatron-args"));
  }
  std::optional<Input> in;
  if (o.megatron_args.empty()) {
    auto sniffed = SniffCommandInput("run", o.config);
    if (!sniffed.ok()) return Fail(sniffed.status());
    in = *std::move(sniffed);
  }
  if (in.has_value() && IsTraceKind(in->kind)) {
    // A trace (a step recorded by python/gpusim_torch, or a recording:
    // Kineto, snapshot, memory timeline): what `gpusim replay` reports
    // (Note [Every command's inputs]).
    if (!o.out_dir.empty() || !o.charts_dir.empty() || !o.timeline.empty() || !o.snapshot.empty()) {
      return Fail(absl::InvalidArgumentError(absl::StrCat(
          "run ", o.config, ": --out, --charts, --timeline and --snapshot are for run configs; a trace's "
          "files are written by `gpusim viz TRACE --out DIR [--snapshot FILE]`")));
    }
    ReplayCli c;
    c.trace = o.config;
    c.device = o.device;
    c.format = o.format;
    c.cudnn_workspace = o.cudnn_workspace;
    c.sdpa_backend = o.sdpa_backend;
    for (const std::string& s : o.sets) {
      if (s.rfind("allocator.", 0) != 0) {
        return Fail(absl::InvalidArgumentError(
            absl::StrCat("run TRACE: --set ", s, ": only allocator.OPTION=VALUE applies to a recorded step")));
      }
      c.sets.push_back(s);
    }
    return CmdReplayInput(c, *in);
  }
  if (absl::Status st = RefuseCudnnForConfig("run", o); !st.ok()) return Fail(st);
  auto spec = o.megatron_args.empty() ? LoadSpec(*in, o.sets, o.device) : MegatronSpecFromFlags(o);
  if (!spec.ok()) return Fail(spec.status());
  if (spec->megatron.present) return CmdRunMegatron(o, *spec);
  auto report = SimulateStep(*spec);
  if (!report.ok()) return Fail(report.status());
  if (absl::Status st = SuggestFit(*report); !st.ok()) return Fail(st);
  const std::string json = RenderJson(*report);
  KeepTimelineSvg(*report);
  std::optional<StepReport> other;
  VizOptions viz;
  if (!o.out_dir.empty() || !o.charts_dir.empty()) {
    other = OtherLoopMode(*spec);
    if (other.has_value()) viz.other_loop_mode = &*other;
  }
  absl::Status st = WriteStepFiles(o, *report, json, viz);
  if (!st.ok()) return Fail(st);
  CliOut() << (o.format == "json" ? json : RenderText(*report));
  return 0;
}

int CmdExplain(const RunOptions& o, int top, bool time) {
  auto in = SniffCommandInput("explain", o.config);
  if (!in.ok()) return Fail(in.status());
  if (IsTraceKind(in->kind)) {  // a native or recorded trace (tools/cli_replay.cc)
    for (const std::string& set : o.sets) {
      // --allocator NAME arrives as allocator.impl=NAME (with_allocator).
      if (absl::StartsWith(set, "allocator.")) {
        return Fail(absl::InvalidArgumentError(
            "explain TRACE: --allocator applies to run configs; a trace's buffers are its own (`gpusim replay TRACE "
            "--allocator NAME` replays it through another allocator)"));
      }
    }
    if (!o.sets.empty()) return Fail(absl::InvalidArgumentError("explain TRACE: --set applies to run configs only"));
    if (time) return CmdExplainTraceTime(*in, top, o.format, o.device, o.device_options());
    return CmdExplainTrace(*in, top, o.format, o.device, o.device_options());
  }
  if (absl::Status st = RefuseCudnnForConfig("explain", o); !st.ok()) return Fail(st);
  auto spec = LoadSpec(*in, o.sets, o.device);
  if (!spec.ok()) return Fail(spec.status());
  std::string note;
  auto report = SimulateOneStep(*spec, &note, /*critical_path=*/time);
  if (!report.ok()) return Fail(report.status());
  if (time) return PrintExplainTime(*report, top, o.format, note);
  CliOut() << (o.format == "json" ? RenderExplainJson(*report, top) : note + RenderExplain(*report, top));
  return 0;
}

// A = CONFIG with --base-set overrides; B = A plus the --set overrides.
int CmdDiff(const RunOptions& o, const std::vector<std::string>& base_sets, int top) {
  if (o.sets.empty()) return Fail(absl::InvalidArgumentError("diff: give at least one --set path=value for B"));
  auto in = SniffCommandInput("diff", o.config);
  if (!in.ok()) return Fail(in.status());
  auto spec_a = LoadSpec(*in, base_sets, o.device);
  if (!spec_a.ok()) return Fail(spec_a.status());
  std::vector<std::string> b_sets = base_sets;
  b_sets.insert(b_sets.end(), o.sets.begin(), o.sets.end());
  auto spec_b = LoadSpec(*in, b_sets, o.device);
  if (!spec_b.ok()) return Fail(spec_b.status());
  std::string note_a, note_b;
  auto a = SimulateOneStep(*spec_a, &note_a);
  if (!a.ok()) return Fail(a.status());
  auto b = SimulateOneStep(*spec_b, &note_b);
  if (!b.ok()) return Fail(b.status());
  if (o.format != "json" && !note_a.empty()) CliOut() << "A: " << note_a << "B: " << note_b;
  const StepDiff d = DiffSteps(*a, *b);
  std::string la = o.config, lb = o.config;
  for (const std::string& s : base_sets) la += " --set " + s;
  lb = la;
  for (const std::string& s : o.sets) lb += " --set " + s;
  CliOut() << (o.format == "json" ? RenderDiffJson(d, la, lb) : RenderDiffText(d, la, lb, top));
  return 0;
}

struct AdviseCli {
  std::string config;
  std::vector<std::string> sets, vary, merge;
  std::string budget, shard, format = "text";
  int jobs = 0, top = 20;  // jobs 0: not given (all cores)
};

// An integer option's check: `min` to `max`, in words a user can act on
// (CLI11's PositiveNumber said "not in range 0 to 1.79e308" for 0).
CLI::Validator IntRange(int64_t min, int64_t max) {
  return CLI::Validator(
      [min, max](std::string& v) -> std::string {
        int64_t x = 0;
        const auto [ptr, ec] = std::from_chars(v.data(), v.data() + v.size(), x);
        if (ec != std::errc() || ptr != v.data() + v.size() || x < min || x > max) {
          return max == INT64_MAX ? absl::StrCat("expected an integer >= ", min, ", got '", v, "'")
                                  : absl::StrCat("expected an integer from ", min, " to ", max, ", got '", v, "'");
        }
        return "";
      },
      max == INT64_MAX ? absl::StrCat("INT >= ", min) : absl::StrCat("INT in [", min, ", ", max, "]"));
}

// Note [Shard from the job array]: `advise --shard auto` takes its shard
// from the job engine that started it, so one command line serves every
// task (issue 32):
//   - a Slurm job array (sbatch --array=A-B[:S]): SLURM_ARRAY_TASK_ID,
//     _MIN, _STEP (default 1) and _COUNT, as sbatch(1) "OUTPUT ENVIRONMENT
//     VARIABLES" documents them; shard (ID - MIN) / STEP of COUNT;
//   - a Kubernetes Indexed Job: JOB_COMPLETION_INDEX (the pod's index, set
//     by the Job controller, concepts/workloads/controllers/job "Completion
//     mode"); Kubernetes gives no variable with the completions count, so
//     the manifest sets GPUSIM_NUM_SHARDS to its spec.completions.
// Neither, both, or values that are not a shard are refused by name.
absl::StatusOr<std::string> ShardFromJobArray() {
  auto get = [](const char* name) -> std::optional<int64_t> {
    const char* v = std::getenv(name);
    int64_t n = 0;
    if (v == nullptr || !absl::SimpleAtoi(v, &n)) return std::nullopt;
    return n;
  };
  const bool slurm = std::getenv("SLURM_ARRAY_TASK_ID") != nullptr;
  const bool k8s = std::getenv("JOB_COMPLETION_INDEX") != nullptr;
  if (slurm && k8s) {
    return absl::InvalidArgumentError(
        "--shard auto: both SLURM_ARRAY_TASK_ID and JOB_COMPLETION_INDEX are set; give --shard I/N");
  }
  if (slurm) {
    const auto id = get("SLURM_ARRAY_TASK_ID"), count = get("SLURM_ARRAY_TASK_COUNT");
    const int64_t min = get("SLURM_ARRAY_TASK_MIN").value_or(0), step = get("SLURM_ARRAY_TASK_STEP").value_or(1);
    if (!id || !count || *count < 1 || step < 1 || *id < min || (*id - min) % step != 0 ||
        (*id - min) / step >= *count) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--shard auto: the Slurm array variables do not name a shard (SLURM_ARRAY_TASK_ID, _MIN, _STEP, _COUNT = ",
          std::getenv("SLURM_ARRAY_TASK_ID"), ", ", min, ", ", step, ", ",
          std::getenv("SLURM_ARRAY_TASK_COUNT") ? std::getenv("SLURM_ARRAY_TASK_COUNT") : "unset", ")"));
    }
    return absl::StrCat((*id - min) / step, "/", *count);
  }
  if (k8s) {
    const auto index = get("JOB_COMPLETION_INDEX"), count = get("GPUSIM_NUM_SHARDS");
    if (!count) {
      return absl::InvalidArgumentError(
          "--shard auto: JOB_COMPLETION_INDEX is set (a Kubernetes Indexed Job) but GPUSIM_NUM_SHARDS is not; set it "
          "in the Job's env to spec.completions");
    }
    if (!index || *index < 0 || *count < 1 || *index >= *count) {
      return absl::InvalidArgumentError(absl::StrCat("--shard auto: JOB_COMPLETION_INDEX ",
                                                     std::getenv("JOB_COMPLETION_INDEX"), " is not a shard of ",
                                                     *count, " (GPUSIM_NUM_SHARDS)"));
    }
    return absl::StrCat(*index, "/", *count);
  }
  return absl::InvalidArgumentError(
      "--shard auto: not in a job array (expected SLURM_ARRAY_TASK_ID and SLURM_ARRAY_TASK_COUNT from sbatch "
      "--array, or JOB_COMPLETION_INDEX and GPUSIM_NUM_SHARDS in a Kubernetes Indexed Job); give --shard I/N");
}

int CmdAdvise(AdviseCli c) {
  absl::StatusOr<AdviceResult> result;
  if (!c.merge.empty()) {
    result = MergeAdviceJsonLines(c.merge);
  } else {
    if (c.config.empty()) return Fail(absl::InvalidArgumentError("advise: give CONFIG, or --merge FILES"));
    auto in = SniffInput(c.config);
    if (!in.ok()) return Fail(in.status());
    if (absl::Status st = CheckCommandInput("advise", *in); !st.ok()) {
      // A recorded step also says how to get the grid it asked for.
      const absl::Status grid = RefuseTraceGrid("advise", *in);
      const std::string prefix = absl::StrCat("advise ", c.config, ": ");
      return Fail(grid.ok() ? st
                            : absl::InvalidArgumentError(absl::StrCat(
                                  st.message(), "; ", absl::string_view(grid.message()).substr(prefix.size()))));
    }
    AdviseOptions o;
    o.config = c.config;
    o.base_sets = c.sets;
    o.jobs = c.jobs;
    for (const std::string& v : c.vary) {
      auto axis = ParseAxis(v);
      if (!axis.ok()) return Fail(axis.status());
      o.axes.push_back(*axis);
    }
    if (!c.budget.empty()) {
      auto b = ParseBytes(c.budget);
      if (!b.ok()) return Fail(absl::InvalidArgumentError(absl::StrCat("--budget: ", b.status().message())));
      if (b->value() <= 0) {
        return Fail(absl::InvalidArgumentError(absl::StrCat(
            "--budget: expected a positive size such as 80GiB, got '", c.budget, "' (omit it for the device's usable memory)")));
      }
      o.budget = *b;
    }
    if (c.shard == "auto") {
      auto shard = ShardFromJobArray();
      if (!shard.ok()) return Fail(shard.status());
      c.shard = *shard;
    }
    if (!c.shard.empty()) {
      const size_t slash = c.shard.find('/');
      char* end1 = nullptr;
      char* end2 = nullptr;
      o.shard = static_cast<int>(std::strtol(c.shard.c_str(), &end1, 10));
      o.num_shards = slash == std::string::npos ? 0 : static_cast<int>(std::strtol(c.shard.c_str() + slash + 1, &end2, 10));
      if (slash == std::string::npos || end1 != c.shard.c_str() + slash || *end2 != '\0') {
        return Fail(absl::InvalidArgumentError(absl::StrCat("--shard ", c.shard, ": expected I/N such as 0/4")));
      }
    }
    if (isatty(2)) {
      o.progress = [](int64_t done, int64_t total) {
        const int width = 40;
        const int filled = static_cast<int>(width * done / std::max<int64_t>(total, 1));
        std::fprintf(stderr, "\r[%s%s] %lld/%lld", std::string(static_cast<size_t>(filled), '#').c_str(),
                     std::string(static_cast<size_t>(width - filled), ' ').c_str(), static_cast<long long>(done),
                     static_cast<long long>(total));
        if (done == total) std::fprintf(stderr, "\n");
      };
    }
    result = Advise(o);
    if (result.ok() && !c.shard.empty()) {
      CliOut() << RenderAdviceJsonLines(*result);
      return 0;
    }
  }
  if (!result.ok()) return Fail(result.status());
  CliOut() << (c.format == "json" ? RenderAdviceJson(*result) : RenderAdviceText(*result, c.top));
  return 0;
}

// `gpusim viz FILE --out DIR`: a run config is simulated (and lowered with
// the other loop mode too, for the dataflow graph); a native trace
// (gpusim-trace) or a recorded one (Kineto JSON, memory snapshot, memory
// timeline) is replayed through `allocator`, its recorded memory counters
// kept for the timeline; then the charts, timeline and report are written.
int CmdViz(const std::string& file, const std::vector<std::string>& sets, const std::string& device,
           const std::string& allocator, const std::string& out_dir, const std::string& snapshot,
           const std::string& format, const EagerDeviceOptions& device_options, const std::string& color_by) {
  // Note [Every command's inputs] (tools/cli.h).
  absl::StatusOr<Input> in = SniffCommandInput("viz", file);
  if (!in.ok()) return Fail(in.status());
  absl::StatusOr<StepReport> report;
  std::optional<StepReport> other;
  std::vector<RecordedMemorySample> recorded_counters;
  std::vector<SimTime> recorded_times;
  VizOptions viz;
  // viz/alloc_source.h: how blocks are coloured (checked by the option).
  viz.color_by = color_by == "role"         ? VizColorBy::kRole
                 : color_by == "source"     ? VizColorBy::kSource
                 : color_by == "allocation" ? VizColorBy::kAllocation
                                            : VizColorBy::kAuto;
  std::string rank_note;  // a launch line: which rank is drawn
  const bool yaml = in->kind == InputKind::kRunConfig;
  if (!IsTraceKind(in->kind)) {
    RunOptions as_config;
    as_config.config = file;
    as_config.cudnn_workspace = device_options.cudnn_workspace;
    as_config.sdpa_backend = device_options.sdpa_backend;
    if (absl::Status st = RefuseCudnnForConfig("viz", as_config); !st.ok()) return Fail(st);
    std::vector<std::string> config_sets = sets;
    if (!allocator.empty()) config_sets.push_back("allocator.impl=" + allocator);
    auto spec = LoadSpec(*in, config_sets, yaml ? "" : device);
    if (!spec.ok()) return Fail(spec.status());
    if (spec->megatron.present) {
      // A launch line: its peak rank, as explain and run --out show it.
      report = SimulateOneStep(*spec, &rank_note);
    } else {
      report = SimulateStep(*spec);
      other = OtherLoopMode(*spec);
      if (other.has_value()) viz.other_loop_mode = &*other;
    }
  } else {
    // A trace has no config: only allocator options apply.
    AllocatorSpec alloc_spec{allocator.empty() ? "pytorch_caching" : allocator, {}};
    for (const std::string& s : sets) {
      const size_t eq = s.find('=');
      if (s.rfind("allocator.", 0) != 0 || eq == std::string::npos || eq <= 10) {
        return Fail(absl::InvalidArgumentError(
            absl::StrCat("viz TRACE: --set ", s, ": only allocator.OPTION=VALUE applies to a trace")));
      }
      const std::string key = s.substr(10, eq - 10);
      if (key == "impl") {
        alloc_spec.impl = FoldAllocatorName(s.substr(eq + 1));
      } else {
        alloc_spec.options[key] = s.substr(eq + 1);
      }
    }
    if (in->kind != InputKind::kNativeTrace) {
      // A recording: the import, start state and device of `gpusim replay`
      // (Note [One start state for every command], sim/alloc/start_state.cc).
      ReplayOptions o;
      o.allocator = alloc_spec;
      absl::Status st = CheckDeviceOptionsApply(*in, device_options);
      if (st.ok()) st = ResolveReplayCapacity(device, &o);
      if (!st.ok()) return Fail(st);
      std::optional<std::vector<RecordedMemorySample>> counters;
      report = ReportFromRecording(*in, device, o, &counters, &recorded_times);
      viz.recorded_times = &recorded_times;
      if (counters.has_value()) {
        recorded_counters = *std::move(counters);
        viz.recorded_memory = &recorded_counters;
      }
    } else {
      absl::StatusOr<LoadedRecording> loaded = LoadRecording(*in);
      if (!loaded.ok()) return Fail(loaded.status());
      std::optional<Trace>& trace = loaded->native;
      // Capacity line and device name: --device, else H100-SXM-80GB.
      auto dev = ReplayDevice(device);
      if (!dev.ok()) return Fail(dev.status());
      EagerDeviceMemory added;
      absl::StatusOr<RunSpec> spec = PrepareRecordedStep(*trace, file, *dev, alloc_spec, device_options, &added);
      if (!spec.ok()) return Fail(spec.status());
      report = ReportFromNativeTrace(*trace, file, *spec);
    }
  }
  if (!report.ok()) return Fail(report.status());
  absl::Status st = WriteOutputDir(out_dir, "--out", [&](const std::string& dir) -> absl::Status {
    RETURN_IF_ERROR(WriteCharts(*report, dir, viz));
    RETURN_IF_ERROR(WritePerfettoTimeline(*report, dir + "/timeline.json", viz));
    return WriteHtmlReport(*report, dir, viz);
  });
  if (st.ok() && !snapshot.empty()) st = WriteMemorySnapshot(*report, snapshot);
  if (!st.ok()) return Fail(st);
  if (format == "json") {
    CliOut() << RenderVizJson(*report, out_dir, snapshot);
  } else {
    CliOut() << rank_note << "wrote charts, timeline.json and report.html to " << out_dir << "\n";
  }
  return 0;
}

// A calibration file (YAML), or one Kineto trace (Note [Calibrating from
// one trace], sim/calibrate/calibrate.h), which needs --device.
int CmdCalibrate(const std::string& file, const std::string& out, const std::string& format,
                 const std::string& device, double step_time_s) {
  const bool yaml = absl::EndsWith(file, ".yaml") || absl::EndsWith(file, ".yml");
  absl::StatusOr<CalibrationResult> r;
  if (yaml) {
    if (!device.empty() || step_time_s > 0) {
      return Fail(absl::InvalidArgumentError(absl::StrCat(
          file, ": --device and --step-time are for a Kineto trace; a calibration file names each case's device and "
          "measured.step_time_s")));
    }
    r = CalibrateFile(file);
  } else {
    absl::StatusOr<std::string> format_name = DetectRecordedFormat(file);
    if (!format_name.ok()) return Fail(format_name.status());
    if (*format_name != "kineto") {
      return Fail(absl::InvalidArgumentError(absl::StrCat(
          file, ": a ", *format_name, " recording has no kernel or CPU-op durations; calibrate reads a calibration "
          "file (.yaml) or a Kineto trace")));
    }
    if (device.empty()) {
      return Fail(absl::InvalidArgumentError(
          absl::StrCat(file, ": a Kineto trace needs --device NAME|PATH (the device it was recorded on)")));
    }
    absl::StatusOr<DeviceSpec> d = LoadDeviceSpec(device, "");
    if (!d.ok()) return Fail(d.status());
    r = CalibrateTrace(file, *d, step_time_s);
  }
  if (!r.ok()) return Fail(r.status());
  if (!out.empty()) {
    absl::Status st = WriteCalibratedDevice(*r, out);
    if (!st.ok()) return Fail(st);
  }
  CliOut() << (format == "json" ? RenderCalibrationJson(*r) : RenderCalibrationText(*r));
  return 0;
}

int CmdDevices() {
  std::vector<std::string> names = ListDeviceNames();
  CliOut() << absl::StrFormat("%-16s %4s %18s %12s %10s %10s %10s %10s %9s %9s\n", "device", "SMs", "usable memory",
                               "HBM", "bf16", "fp8", "tf32", "fp32", "NVLink", "PCIe");
  for (const std::string& n : names) {
    auto d = LoadDeviceSpec(n, "");
    if (!d.ok()) return Fail(d.status());
    const std::string fp8 = d->peak_fp8 > 0 ? absl::StrFormat("%5.0f TF/s", d->peak_fp8 / 1e12) : "      none";
    CliOut() << absl::StrFormat(
        "%-16s %4d %14.2f GiB %7.0f GB/s %5.0f TF/s %s %5.0f TF/s %5.1f TF/s %4.0f GB/s %4.0f GB/s\n", d->name, d->sms,
        d->usable().GiB(), d->hbm_bandwidth / 1e9, d->peak_bf16 / 1e12, fp8, d->peak_tf32 / 1e12, d->peak_fp32 / 1e12,
        d->nvlink_bandwidth / 1e9, d->pcie_bandwidth / 1e9);
  }
  CliOut() << "usable = CUDA total - context reserve; rates are dense peaks (datasheets), bandwidth per direction;\n"
              "fp8 none: no fp8 tensor cores (flops.fp8 absent), an fp8 matmul is refused\n";
  return 0;
}

// `gpusim list KIND`: every registry in one shape (sim/base/registry.h).
// JSON: {"KIND": [{"name", "doc", "parameters": [{name, type, unit,
// default, range, doc}], NOTE-LABEL: text, ...}]}; text: one row per entry,
// its parameters and notes indented under it.
int PrintList(const std::string& kind, const std::vector<RegistryEntry>& rows, const std::string& format, int width) {
  if (format == "json") {
    JsonWriter w;
    w.BeginObject().BeginArray(kind);
    for (const RegistryEntry& r : rows) {
      w.BeginObject().String("name", r.name).String("doc", r.doc).BeginArray("parameters");
      for (const ParamDoc& p : r.params) {
        w.BeginObject()
            .String("name", p.name)
            .String("type", p.type)
            .String("unit", p.unit)
            .String("default", p.default_value)
            .String("range", p.range)
            .String("doc", p.doc)
            .EndObject();
      }
      w.EndArray();
      for (const auto& [label, text] : r.notes) w.String(label, text);
      w.EndObject();
    }
    w.EndArray().EndObject();
    CliOut() << w.Finish() << "\n";
    return 0;
  }
  for (const RegistryEntry& r : rows) {
    CliOut() << absl::StrFormat("%-*s %s\n", width, r.name, r.doc);
    for (const ParamDoc& p : r.params) CliOut() << absl::StrFormat("%-*s   %s\n", width, "", DescribeParam(p));
    for (const auto& [label, text] : r.notes) {
      if (!text.empty()) CliOut() << absl::StrFormat("%-*s   %s: %s\n", width, "", label, text);
    }
  }
  return 0;
}

int CmdList(const std::string& what, const std::string& format) {
  if (format != "text" && format != "json") {
    return Fail(absl::InvalidArgumentError(absl::StrCat("--format ", format, ": expected text or json")));
  }
  if (what == "allocators") return PrintList(what, ListAllocators(), format, 20);
  if (what == "remat") return PrintList(what, ListRematPolicies(), format, 36);
  if (what == "kernels") return PrintList(what, ListKernelModels(), format, 10);
  if (what == "importers") return PrintList(what, ListImporters(), format, 16);
  if (what == "models") {
    // The per-framework notes name every modelled setting; the text form
    // prints those instead of one line per setting.
    std::vector<RegistryEntry> rows = ListModelFamilies();
    if (format == "text") {
      for (RegistryEntry& r : rows) r.params.clear();
    }
    return PrintList(what, rows, format, 8);
  }
  if (what == "devices" && format == "text") return CmdDevices();
  if (what == "devices") {
    std::vector<RegistryEntry> rows;
    for (const std::string& n : ListDeviceNames()) {
      auto d = LoadDeviceSpec(n, "");
      if (!d.ok()) return Fail(d.status());
      rows.push_back({d->name,
                      d->description,
                      {},
                      {{"usable_bytes", absl::StrCat(d->usable().value())}, {"kernel_model", d->kernel_model}}});
    }
    return PrintList(what, rows, format, 16);
  }
  return Fail(absl::InvalidArgumentError(absl::StrCat(
      "list: ", UnknownNameMessage("kind", what, {"allocators", "remat", "devices", "kernels", "importers", "models"}))));
}

int CmdCompareConfig(const RunOptions& o, const std::string& vary) {
  auto rows = Compare(o.config, o.sets, vary);
  if (!rows.ok()) return Fail(rows.status());
  CliOut() << (o.format == "json" ? RenderCompareJson(*rows) : RenderCompareText(*rows));
  if (o.format == "json") CliOut() << "\n";
  return 0;
}

// A misspelt command or option, named with what was meant (issue 32):
// CLI11 says only "A subcommand is required" or "The following arguments
// were not expected". Empty when the error is another kind (CLI11's own
// message is then the clearer one).
std::string ParseErrorHint(CLI::App& app, int argc, char** argv) {
  std::vector<std::string> commands;
  for (const CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; })) commands.push_back(sub->get_name());
  if (argc >= 2 && argv[1][0] != '-') {
    const std::string given = argv[1];
    if (std::find(commands.begin(), commands.end(), given) == commands.end()) {
      return absl::StrCat(UnknownNameMessage("command", given, commands), " (gpusim --help)");
    }
  }
  CLI::App* sub = nullptr;
  for (CLI::App* s : app.get_subcommands([](CLI::App* a) { return a->parsed(); })) sub = s;
  if (sub == nullptr) return "";
  std::vector<std::string> flags;
  for (const CLI::Option* opt : sub->get_options()) {
    for (const std::string& n : opt->get_lnames()) flags.push_back("--" + n);
    for (const std::string& n : opt->get_snames()) flags.push_back("-" + n);
  }
  for (const std::string& extra : sub->remaining()) {
    if (extra.size() < 2 || extra[0] != '-') continue;
    const std::string name = extra.substr(0, extra.find('='));
    if (std::find(flags.begin(), flags.end(), name) != flags.end()) continue;
    return absl::StrCat(sub->get_name(), ": ", UnknownNameMessage("option", name, flags), " (gpusim ",
                        sub->get_name(), " --help)");
  }
  return "";
}


// `--allocator NAME` on every subcommand that simulates: the same as
// `--set allocator.impl=NAME` (the config's `allocator:` block is the
// default), appended after the --set overrides once parsing is done.
constexpr char kAllocatorHelp[] =
    "Allocator strategy (gpusim list allocators); = --set allocator.impl=NAME; options: --set allocator.x=y";
constexpr char kFormatHelp[] = "Output format (json: documented keys, README \"JSON output\")";
constexpr char kCudnnHelp[] =
    "A recorded PyTorch step: the cuDNN workspace assumption, none (default), gemm, winograd_nonfused or bound "
    "(the algorithm is chosen on the GPU)";
constexpr char kSdpaHelp[] =
    "A recorded PyTorch step: force the fused attention backend whose workspaces every SDPA call gets, flash, "
    "efficient or cudnn (default: the replay device's sdp_utils.cpp choice as recorded)";

// Every subcommand's options (CLI11 binds each to a member, so the object
// outlives parsing), how they are declared, checked and dispatched.
struct Cli {
  // `gpusim run`.
  void AddRun(CLI::App& app) {
    run_cmd = app.add_subcommand("run", "Simulate one training step of a run config");
    run_cmd->add_option("config", run.config, "Run config (YAML), e.g. configs/llama7b.yaml, or an HLO module STEP.hlo");
    run_cmd->add_option("--device", run.device, "Device NAME or PATH for an HLO module (STEP.hlo)");
    run_cmd->add_option("--compiled", run.compiled,
                        "With an unoptimised STEP.hlo: XLA's compiled module of the same step (compiled.as_text(), "
                        "STEP.opt.hlo): both predictions side by side");
    run_cmd->add_option("--set", run.sets, "Override a config field: path=value (repeatable)");
    run_cmd->add_option("--format", run.format, "Output format")->check(CLI::IsMember({"text", "json"}));
    run_cmd->add_option("--out", run.out_dir,
                        "Also write result.json, trace.gpusim, report.html, charts and timeline.json into DIR");
    run_cmd->add_option("--charts", run.charts_dir, "Write the charts (SVG + PNG) into DIR");
    run_cmd->add_option("--timeline", run.timeline, "Write the simulated step as Chrome/Perfetto trace JSON");
    run_cmd->add_option("--allocator", run_allocator, kAllocatorHelp);
    run_cmd->add_option("--snapshot", run.snapshot,
                        "Write the step as a PyTorch memory snapshot (FILE.pickle, for memory_viz)");
    run_cmd->add_option("--megatron-args", run.megatron_args,
                        "A Megatron-LM launch line (pretrain_gpt.py arguments), instead of a config; with --world-size "
                        "and --device");
    // IntRange, not CLI::PositiveNumber, whose range text for 0 printed
    // DBL_MAX's 309 digits (issue 27).
    world_opt = run_cmd->add_option("--world-size", run.world_size, "GPUs of the --megatron-args run")
                                 ->check(IntRange(1, INT64_MAX));
    gpn_opt =
        run_cmd->add_option("--gpus-per-node", run.gpus_per_node, "GPUs per node of the --megatron-args run")
            ->check(IntRange(1, INT64_MAX));
    run_cmd->add_option("--cudnn-workspace", run.cudnn_workspace, kCudnnHelp);
    run_cmd->add_option("--sdpa-backend", run.sdpa_backend, kSdpaHelp);
  }

  // `gpusim explain`.
  void AddExplain(CLI::App& app) {
    explain_cmd = app.add_subcommand("explain", "List the buffers live at the peak, largest first");
    explain_cmd->add_option("config", explain.config,
                            "Run config (YAML), HLO module (STEP.hlo, with --device), or a trace (native, Kineto, "
                            "snapshot, memory timeline): its largest blocks at the peak with their stack frames")
        ->required();
    explain_cmd->add_option("--device", explain.device,
                            "Device NAME or PATH for an HLO module (STEP.hlo), or for a PyTorch trace (what its CUDA "
                            "libraries add; default h100-sxm-80gb)");
    explain_cmd->add_option("--format", explain.format, kFormatHelp)->check(CLI::IsMember({"text", "json"}));
    explain_cmd->add_option("--set", explain.sets, "Override a config field: path=value (repeatable)");
    explain_cmd->add_option("--top", explain_top, "How many buffers (with --time: critical-path segments and layers) to list")
        ->check(IntRange(1, 1000000));
    explain_cmd->add_flag("--time", explain_time,
                          "Explain the step time instead of the peak: the critical path by op class, by layer and by "
                          "what each start waited for, its largest segments, the host-bound spans and exposed "
                          "communication (every other option applies as without it)");
    explain_cmd->add_option("--allocator", explain_allocator, kAllocatorHelp);
    explain_cmd->add_option("--cudnn-workspace", explain.cudnn_workspace, kCudnnHelp);
    explain_cmd->add_option("--sdpa-backend", explain.sdpa_backend, kSdpaHelp);
  }

  // `gpusim diff`.
  void AddDiff(CLI::App& app) {
    diff_cmd = app.add_subcommand(
        "diff", "Attribute the memory and step-time difference between CONFIG (A) and CONFIG --set ... (B)");
    diff_cmd->add_option("config", diff.config, "Run config (YAML) or HLO module (STEP.hlo)")->required();
    diff_cmd->add_option("--device", diff.device, "Device NAME or PATH for an HLO module (STEP.hlo)");
    diff_cmd->add_option("--set", diff.sets, "Override for B: path=value (repeatable)")->required();
    diff_cmd->add_option("--base-set", diff_base, "Override for both A and B (repeatable)");
    diff_cmd->add_option("--format", diff.format, "Output format")->check(CLI::IsMember({"text", "json"}));
    diff_cmd->add_option("--top", diff_top, "How many lines per table")->check(IntRange(1, 1000000));
    diff_cmd->add_option("--allocator", diff_allocator, std::string(kAllocatorHelp) + " (for both A and B)");
  }

  // `gpusim advise`.
  void AddAdvise(CLI::App& app) {
    advise_cmd = app.add_subcommand(
        "advise", "Evaluate a grid of settings and print the Pareto front and the fastest that fits");
    advise_cmd->add_option("config", advise.config, "Run config (YAML)");
    advise_cmd->add_option("--budget", advise.budget, "Memory budget, e.g. 80GiB (default: the device's usable memory)");
    advise_cmd->add_option("--vary", advise.vary, "A grid axis: path=v1,v2,... (repeatable; default: remat x loop x batch)");
    advise_cmd->add_option("--set", advise.sets, "Override for every point: path=value (repeatable)");
    advise_cmd->add_option("--jobs", advise.jobs, "Worker threads (default: all cores; at most one per grid group)")
        ->check(IntRange(1, 100000));
    advise_cmd->add_option("--shard", advise.shard, "Evaluate only shard I of N (I/N, or auto: from a Slurm job array or a Kubernetes Indexed Job) and print JSON lines");
    advise_cmd->add_option("--merge", advise.merge, "Join JSON-lines shard files instead of simulating");
    advise_cmd->add_option("--format", advise.format, "Output format")->check(CLI::IsMember({"text", "json"}));
    advise_cmd->add_option("--top", advise.top, "Front rows to print")->check(IntRange(1, 1000000));
    advise_cmd->add_option("--allocator", advise_allocator, std::string(kAllocatorHelp) + " (every point)");
  }

  // `gpusim calibrate`.
  void AddCalibrate(CLI::App& app) {
    cal_cmd = app.add_subcommand(
        "calibrate", "Fit the device's efficiency parameters and host costs to measured runs or a Kineto trace; report predicted vs measured");
    cal_cmd->add_option("file", cal_file,
                        "Calibration file (YAML), e.g. traces/calibration/maxtext_llama7b.yaml, or one Kineto trace "
                        "(.json / .json.gz; needs --device)")
        ->required();
    cal_cmd->add_option("--device", cal_device, "A Kineto trace's device: NAME or PATH (required for a trace)");
    cal_cmd->add_option("--step-time", cal_step_time,
                        "A Kineto trace's step time unprofiled, seconds (removes the profiler's overhead from its "
                        "host spans)")
        ->check(CLI::PositiveNumber);
    cal_cmd->add_option("--out", cal_out, "Write the calibrated device YAML (usable as device: PATH)");
    cal_cmd->add_option("--format", cal_format, "Output format")->check(CLI::IsMember({"text", "json"}));
  }

  // `gpusim viz`.
  void AddViz(CLI::App& app) {
    viz_cmd = app.add_subcommand("viz", "Draw charts, a timeline and report.html for a config or a trace");
    viz_cmd->add_option("file", viz_file, "Run config (YAML), native trace, or recorded trace (Kineto JSON, snapshot)")
        ->required();
    viz_cmd->add_option("--out", viz_out, "Output directory")->required();
    viz_cmd->add_option("--set", viz_sets, "Override a config field: path=value (repeatable)");
    viz_cmd->add_option("--device", viz_device,
                        "Device for a trace (capacity line); default: the recorded device, else h100-sxm-80gb");
    viz_cmd->add_option("--allocator", viz_allocator,
                        "Allocator (gpusim list allocators): a trace is replayed through it (default pytorch_caching); "
                        "for a config = --set allocator.impl=NAME");
    viz_cmd->add_option("--format", viz_format, kFormatHelp)->check(CLI::IsMember({"text", "json"}));
    viz_cmd->add_option("--cudnn-workspace", viz_cudnn, kCudnnHelp);
    viz_cmd->add_option("--sdpa-backend", viz_sdpa, kSdpaHelp);
    viz_cmd->add_option("--color-by", viz_color_by,
                        "Colour blocks by role, source (the user's innermost Python frame or the recorder's op) or "
                        "allocation; auto: role where roles are recorded, else source, else allocation")
        ->check(CLI::IsMember({"auto", "role", "source", "allocation"}));

    viz_cmd->add_option("--snapshot", viz_snapshot,
                        "Also write the step as a PyTorch memory snapshot (FILE.pickle, for memory_viz)");
  }

  // `gpusim validate`.
  void AddValidate(CLI::App& app) {
    val_cmd = app.add_subcommand(
        "validate", "Check any input: a run config, a native trace, or a recorded trace (Kineto, snapshot, memory timeline)");
    val_cmd->add_option("file", validate_file,
                        "Config (YAML), native trace (gpusim-trace), Kineto JSON(.gz), memory snapshot (.pickle/JSON) "
                        "or memory timeline")
        ->required();
    val_cmd->add_option("--set", validate_sets, "Override a config field: path=value (repeatable)");
    val_cmd->add_option("--allocator", validate_allocator, kAllocatorHelp);
    val_cmd->add_option("--format", validate_format, kFormatHelp)->check(CLI::IsMember({"text", "json"}));
  }

  // `gpusim replay`.
  void AddReplay(CLI::App& app) {
    replay_cmd = app.add_subcommand(
        "replay", "Replay a recorded trace through an allocator; compare with the recorded totals and addresses");
    replay_cmd->add_option("trace", replay.trace, "Kineto JSON(.gz), memory snapshot (.pickle/JSON) or memory timeline")
        ->required();
    replay_cmd->add_option("--allocator", replay.allocator, "Allocator strategy (gpusim list allocators)");
    replay_cmd->add_option("--set", replay.sets, "Allocator option: allocator.OPTION=VALUE (repeatable)");
    replay_cmd->add_option("--device", replay.device, "Device whose usable memory is the capacity");
    replay_cmd->add_option("--device-index", replay.device_index, "Recorded device to replay (default: the only one)");
    replay_cmd->add_flag("--cold-start", replay.cold_start,
                         "Start pytorch_caching from an empty allocator even where a warm start can be inferred");
    replay_cmd->add_flag("--check-addresses", replay.check_addresses,
                         "Snapshot: rebuild the allocator state and check every allocation's address");
    replay_cmd->add_option("--cudnn-workspace", replay.cudnn_workspace, kCudnnHelp);
    replay_cmd->add_option("--sdpa-backend", replay.sdpa_backend, kSdpaHelp);
    replay_cmd->add_option("--snapshot", replay.snapshot,
                           "Write the replayed step as a PyTorch memory snapshot (FILE.pickle, for memory_viz)");
    replay_cmd->add_option("--format", replay.format, "Output format")->check(CLI::IsMember({"text", "json"}));
  }

  // `gpusim compare`.
  void AddCompare(CLI::App& app) {
    // compare: a run config with --vary (one row per value), or a recorded
    // trace with --allocators (one row per allocator).
    compare_cmd = app.add_subcommand(
        "compare",
        "CONFIG --vary path=v1,v2,...: one row per value (peak, temp, host bytes, recompute, PCIe, step, layer times); "
        "TRACE [--allocators a,b,...]: one row per allocator (peak reserved, fragmentation, segments, OOM)");
    compare_cmd->add_option("file", compare.trace, "Run config (YAML) or recorded trace")->required();
    compare_cmd->add_option("--vary", compare_vary, "Config: the axis, path=v1,v2,... e.g. remat.policy=full,minimal");
    compare_cmd->add_option("--set", compare_config.sets, "Config: override for every row: path=value (repeatable)");
    compare_cmd->add_option("--allocators", compare.allocators,
                            "Trace: comma-separated strategies (default: every registered one but composites)");
    compare_cmd->add_option("--device", compare.device, "Trace: device whose usable memory is the capacity");
    compare_cmd->add_option("--device-index", compare.device_index, "Trace: recorded device to replay");
    compare_cmd->add_option("--allocator", compare_allocator,
                            std::string(kAllocatorHelp) + "; a trace: the same as --allocators NAME");
    compare_cmd->add_option("--format", compare.format, "Output format")->check(CLI::IsMember({"text", "json"}));
    compare_cmd->add_option("--cudnn-workspace", compare.cudnn_workspace, std::string(kCudnnHelp) + "; a trace only");
    compare_cmd->add_option("--sdpa-backend", compare.sdpa_backend, std::string(kSdpaHelp) + "; a trace only");
  }

  // `gpusim devices` and `gpusim list`.
  void AddListings(CLI::App& app) {
    dev_cmd = app.add_subcommand("devices", "List the modelled devices");
    dev_cmd->add_option("--format", dev_format, kFormatHelp)->check(CLI::IsMember({"text", "json"}));

    list_cmd = app.add_subcommand("list", "List registered strategies and model families");
    list_cmd->add_option("kind", list_what, "allocators | remat | devices | kernels | importers | models")->required();
    list_cmd->add_option("--format", list_format, "text | json");
  }

  // What parsing leaves to check: --allocator against --set, config names,
  // and the --megatron-args options used without it.
  absl::Status Prepare() {
    // --allocator NAME is --set allocator.impl=NAME; both naming different
    // allocators is a conflict, refused rather than one silently winning
    // (issue 27). The same name twice is no conflict.
    auto with_allocator = [](std::vector<std::string>& sets, const std::string& name) -> absl::Status {
      if (name.empty()) return absl::OkStatus();
      constexpr absl::string_view kImpl = "allocator.impl=";
      for (const std::string& s : sets) {
        if (absl::StartsWith(s, kImpl) && s.substr(kImpl.size()) != name) {
          return absl::InvalidArgumentError(absl::StrCat("--allocator ", name, " and --set ", s,
                                                         " name different allocators; give one"));
        }
      }
      sets.push_back(std::string(kImpl) + name);
      return absl::OkStatus();
    };
    for (absl::Status st : {with_allocator(run.sets, run_allocator), with_allocator(explain.sets, explain_allocator),
                            with_allocator(diff_base, diff_allocator), with_allocator(advise.sets, advise_allocator),
                            with_allocator(validate_sets, validate_allocator),
                            with_allocator(compare_config.sets, compare_allocator)}) {
      if (!st.ok()) return st;
    }
    // Note [Run config names] (sim/config/loader.h): a command's config
    // argument, a NAME of a bundled config or a file, resolved once here.
    for (std::string* arg : {&run.config, &explain.config, &diff.config, &advise.config, &viz_file, &validate_file,
                             &compare.trace}) {
      if (arg->empty()) continue;
      absl::StatusOr<std::string> resolved = ResolveRunConfig(*arg);
      if (!resolved.ok()) return resolved.status();
      *arg = *std::move(resolved);
    }
    // --world-size and --gpus-per-node shape a --megatron-args run; with a
    // config they would be ignored (issue 27), so they are refused.
    if (*run_cmd && run.megatron_args.empty() && (world_opt->count() > 0 || gpn_opt->count() > 0)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "run ", run.config, ": ", world_opt->count() > 0 ? "--world-size" : "--gpus-per-node",
          " applies to --megatron-args; a config sets megatron.world_size / megatron.gpus_per_node (--set "
          "megatron.world_size=N)"));
    }
    return absl::OkStatus();
  }

  // `gpusim compare`: a run config with --vary, or a trace with --allocators.
  int Compare() {
      const std::string& f = compare.trace;
      auto in = SniffCommandInput("compare", f);
      if (!in.ok()) return Fail(in.status());
      if (in->kind == InputKind::kRunConfig) {
        if (!compare.allocators.empty() || !compare.device.empty() || compare.device_index >= 0) {
          return Fail(absl::InvalidArgumentError(
              "compare CONFIG: --allocators, --device and --device-index are for recorded traces; vary the "
              "allocator with --vary allocator.impl=a,b"));
        }
        compare_config.config = f;
        compare_config.cudnn_workspace = compare.cudnn_workspace;
        compare_config.sdpa_backend = compare.sdpa_backend;
        if (absl::Status st = RefuseCudnnForConfig("compare", compare_config); !st.ok()) return Fail(st);
        if (compare_vary.empty()) return Fail(absl::InvalidArgumentError("compare CONFIG: give --vary path=v1,v2,..."));
        compare_config.config = f;
        compare_config.format = compare.format;
        return CmdCompareConfig(compare_config, compare_vary);
      }
      if (!compare_allocator.empty()) {
        if (!compare.allocators.empty()) {
          return Fail(absl::InvalidArgumentError("compare TRACE: give --allocator NAME or --allocators a,b,..., not both"));
        }
        compare.allocators = compare_allocator;
        compare_config.sets.pop_back();  // with_allocator's entry: a trace has no config
      }
      if (!compare_vary.empty() || !compare_config.sets.empty()) {
        if (absl::Status st = RefuseTraceGrid("compare --vary", *in); !st.ok()) return Fail(st);
        return Fail(absl::InvalidArgumentError(
            "compare TRACE: --vary and --set are for run configs; use --allocators a,b,... for a trace"));
      }
      if (compare.allocators.empty()) {
        for (const AllocatorInfo& a : ListAllocators()) {
          if (a.name == "best_of" || a.name == "fallback") continue;  // composites need arguments
          compare.allocators += (compare.allocators.empty() ? "" : ",") + a.name;
        }
      }
      return CmdCompare(compare, *in);
  }

  // Runs the parsed subcommand.
  int Dispatch() {
    try {
      if (*run_cmd) return CmdRun(run);
      if (*explain_cmd) return CmdExplain(explain, explain_top, explain_time);
      if (*diff_cmd) return CmdDiff(diff, diff_base, diff_top);
      if (*advise_cmd) return CmdAdvise(advise);
      if (*viz_cmd) {
        return CmdViz(viz_file, viz_sets, viz_device, viz_allocator, viz_out, viz_snapshot, viz_format,
                      EagerDeviceOptions{viz_cudnn, viz_sdpa}, viz_color_by);
      }
      if (*cal_cmd) return CmdCalibrate(cal_file, cal_out, cal_format, cal_device, cal_step_time);
      if (*val_cmd) return CmdValidateAny(validate_file, validate_sets, validate_format);
      if (*replay_cmd) return CmdReplay(replay);
      if (*compare_cmd) return Compare();
      if (*dev_cmd) return dev_format == "json" ? CmdDevicesJson() : CmdDevices();
      if (*list_cmd) return CmdList(list_what, list_format);
    } catch (const std::bad_alloc&) {
      CliErr() << "gpusim: error: out of host memory: the input is too large to model\n";
      return 1;
    } catch (const std::exception& e) {
      CliErr() << "gpusim: internal error: " << e.what() << "\n";
      return 2;
    }
    return 2;
  }

  RunOptions run;
  std::string run_allocator;
  CLI::App* run_cmd = nullptr;
  CLI::Option* world_opt = nullptr;
  CLI::Option* gpn_opt = nullptr;
  RunOptions explain;
  int explain_top = 15;
  bool explain_time = false;
  std::string explain_allocator;
  CLI::App* explain_cmd = nullptr;
  RunOptions diff;
  std::vector<std::string> diff_base;
  int diff_top = 12;
  std::string diff_allocator;
  CLI::App* diff_cmd = nullptr;
  AdviseCli advise;
  std::string advise_allocator;
  CLI::App* advise_cmd = nullptr;
  std::string cal_file, cal_out, cal_format = "text", cal_device;
  double cal_step_time = 0;
  CLI::App* cal_cmd = nullptr;
  std::string viz_file, viz_out, viz_device, viz_allocator, viz_snapshot, viz_format = "text", viz_cudnn, viz_sdpa,
      viz_color_by = "auto";
  std::vector<std::string> viz_sets;
  CLI::App* viz_cmd = nullptr;
  std::string validate_file;
  std::vector<std::string> validate_sets;
  std::string validate_format = "text", validate_allocator;
  CLI::App* val_cmd = nullptr;
  ReplayCli replay;
  CLI::App* replay_cmd = nullptr;
  CompareCli compare;
  RunOptions compare_config;
  std::string compare_vary;
  std::string compare_allocator;
  CLI::App* compare_cmd = nullptr;
  std::string dev_format = "text";
  CLI::App* dev_cmd = nullptr;
  std::string list_what, list_format = "text";
  CLI::App* list_cmd = nullptr;
};

}  // namespace

int FailStatus(const absl::Status& st) { return Fail(st); }

int FinishStdout(int rc) {
  errno = 0;
  std::cout.flush();
  const bool failed = std::cout.fail() || std::fflush(stdout) != 0 || std::ferror(stdout) != 0;
  if (!failed) return rc;
  const int err = errno;
  std::cerr << "gpusim: error: writing standard output: " << (err != 0 ? std::strerror(err) : "write failed")
            << "\n";
  return rc != 0 ? rc : 3;
}

int RunCli(int argc, char** argv) {
  CLI::App app{"gpusim: trace-driven simulator of GPU memory and step time for deep-learning training"};
  app.require_subcommand(1);
  // Case folded (issue 32): `gpusim RUN`, `--Format`; subcommands inherit it.
  app.ignore_case();
  app.option_defaults()->ignore_case();
  app.footer(
      "Exit codes: 0 ok; 1 bad input (config, trace, command line, an input too large to model), with a message "
      "naming the input; 3 environment (I/O error, disk full, an output target that exists and is not a regular "
      "file or directory as expected); 2 an internal error (a bug: please report it). Killed by SIGINT/SIGTERM, "
      "gpusim removes its temporary files and stops its child processes first.");
  app.set_help_all_flag("--help-all", "Show help for every subcommand");
  app.set_version_flag("--version", std::string("gpusim ") + GPUSIM_VERSION);
  Cli cli;
  cli.AddRun(app);
  cli.AddExplain(app);
  cli.AddDiff(app);
  cli.AddAdvise(app);
  cli.AddCalibrate(app);
  cli.AddViz(app);
  cli.AddValidate(app);
  cli.AddReplay(app);
  cli.AddCompare(app);
  cli.AddListings(app);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (std::string msg = ParseErrorHint(app, argc, argv); !msg.empty()) {
      CliErr() << "gpusim: error: " << msg << "\n";
      return 1;
    }
    const int rc = app.exit(e, CliOut(), CliErr());
    return rc == 0 ? 0 : 1;
  }
  if (absl::Status st = cli.Prepare(); !st.ok()) return Fail(st);
  return cli.Dispatch();
}

}  // namespace gpusim
