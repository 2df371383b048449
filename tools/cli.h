// The gpusim command line (CLI11): run, validate, devices, ...
// Exit codes (Note [Exit codes] in cli.cc): 0 ok, 1 bad input (message on
// stderr), 3 environment (I/O, a target that cannot be replaced), 2 a bug.
#ifndef GPUSIM_TOOLS_CLI_H_
#define GPUSIM_TOOLS_CLI_H_

#include <optional>
#include <ostream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "sim/import/input.h"
#include "sim/lower/eager/device_memory.h"
#include "sim/replay/replay.h"
#include "sim/step/step.h"
#include "viz/viz.h"

namespace gpusim {
int RunCli(int argc, char** argv);

// Note [Where the CLI writes]: every command prints through CliOut() and
// CliErr(), which are std::cout and std::cerr in the gpusim binary. The
// Python extension (python/_gpusim.cc) runs RunCli in its own process under
// a CliCapture, which collects both into strings for the calling thread
// (thread-local, so calls from several Python threads do not mix), and with
// the timeline SVG of the step `run` simulated when asked for it (the
// notebook's view; not rendered otherwise).
std::ostream& CliOut();
std::ostream& CliErr();
class CliCapture {
 public:
  explicit CliCapture(bool want_timeline_svg = false);
  ~CliCapture();
  CliCapture(const CliCapture&) = delete;
  CliCapture& operator=(const CliCapture&) = delete;

  std::ostream& out_stream() { return out_; }
  std::ostream& err_stream() { return err_; }
  std::string out() const { return out_.str(); }
  std::string err() const { return err_.str(); }
  const std::string& timeline_svg() const { return timeline_svg_; }
  // The capture on this thread, or null (the binary).
  static CliCapture* Active();
  bool want_timeline_svg() const { return want_timeline_svg_; }
  void set_timeline_svg(std::string svg) { timeline_svg_ = std::move(svg); }

 private:
  std::ostringstream out_, err_;
  bool want_timeline_svg_;
  std::string timeline_svg_;
  CliCapture* previous_;
};

// Note [Every command's inputs]
// A command's input is classified once, by SniffInput (sim/import/input.h,
// Note [One sniffer, one open]), and this one table says which kinds each
// command takes:
//   run, viz, explain, validate  every kind: a run config or an HLO module
//                                is simulated; a trace (native or recorded)
//                                is replayed as `gpusim replay` replays it;
//   replay                       a trace;
//   compare                      a run config (--vary) or a trace (--allocators);
//   diff                         a run config or an HLO module;
//   advise                       a run config.
// Any other kind is refused with one message per kind, whatever the
// command: "COMMAND PATH: KIND; COMMAND takes ...", with the command that
// takes it (tests/cli_inputs_test.cc runs every kind through every command).
absl::Status CheckCommandInput(const std::string& command, const Input& in);
// SniffInput(path), then CheckCommandInput.
absl::StatusOr<Input> SniffCommandInput(const std::string& command, const std::string& path);

// Note [Checked stdout]: what a command printed reaches its destination or
// the command fails. Flushes std::cout and stdout and checks both for an
// error (a full disk, /dev/full, a closed descriptor: issue 27 found
// `run > /dev/full` exiting 0); on one, prints "gpusim: error: writing
// standard output: ..." to stderr and returns 3 (environment) unless `rc`
// already reports a failure. Called once, by main, on RunCli's code.
int FinishStdout(int rc);

// Prints `st` as gpusim's error line and returns its exit code.
int FailStatus(const absl::Status& st);

// tools/cli_replay.cc.
struct ReplayCli {
  std::string trace, allocator = "pytorch_caching", device, format = "text";
  std::string snapshot;  // --snapshot FILE.pickle
  std::string cudnn_workspace;  // --cudnn-workspace (a PyTorch recording)
  std::string sdpa_backend;     // --sdpa-backend (a PyTorch recording)
  std::vector<std::string> sets;
  int device_index = -1;
  bool check_addresses = false;
  bool cold_start = false;
};
int CmdReplay(const ReplayCli& c);
// The same for c.trace sniffed by the caller (`run TRACE`).
int CmdReplayInput(const ReplayCli& c, const Input& in);
// A recording (Kineto, memory timeline, snapshot) as `gpusim viz` draws it:
// the import and start state of `gpusim replay` under `options`, then that
// import through the engine from that state, on `device` (NAME or PATH;
// empty: the recorded device, else H100-SXM-80GB). `counters` (may be
// null) receives the recorded memory counters, `times` (may be null) each
// event's recorded time (RecordedEventTimes, viz/viz.h).
// The same from an import and its replay already made (ReplayLoaded with
// keep_start_state, under `options`).
absl::StatusOr<StepReport> ReportFromReplayed(const LoadedRecording& loaded, const ReplayResult& replay,
                                              const std::string& device, const ReplayOptions& options,
                                              std::optional<std::vector<RecordedMemorySample>>* counters,
                                              std::vector<SimTime>* times = nullptr, bool critical_path = false);
absl::StatusOr<StepReport> ReportFromRecording(const Input& in, const std::string& device,
                                               const ReplayOptions& options,
                                               std::optional<std::vector<RecordedMemorySample>>* counters,
                                               std::vector<SimTime>* times = nullptr, bool critical_path = false);
// A native trace (gpusim-trace) as `gpusim viz` draws it: the start state
// `gpusim replay` replays it from (ReplayNativeTrace: the bytes live before
// recording, Trace::preexisting, held by the allocator) through `spec`'s
// allocator at its usable memory, then the trace through the engine from
// that state (Note [One start state for every command]).
// `critical_path` (both): as for SimulateStep (sim/step/step.h).
absl::StatusOr<StepReport> ReportFromNativeTrace(const Trace& trace, const std::string& path, const RunSpec& spec,
                                                 bool critical_path = false);
struct CompareCli {
  std::string trace, allocators, device, format = "text";
  std::string cudnn_workspace;  // --cudnn-workspace (a PyTorch recording)
  std::string sdpa_backend;     // --sdpa-backend (a PyTorch recording)
  int device_index = -1;
};
// REQUIRES: IsTraceKind(in.kind).
int CmdCompare(const CompareCli& c, const Input& in);

// tools/cli_inputs.cc: validate for every input kind; JSON forms.
int CmdValidateAny(const std::string& file, const std::vector<std::string>& sets, const std::string& format);
std::string RenderExplainJson(const StepReport& r, int top);
int CmdDevicesJson();
std::string RenderVizJson(const StepReport& r, const std::string& out_dir, const std::string& snapshot);
// `gpusim explain TRACE`: sim/replay/explain_trace.h.
// OK unless `path` is a native trace: then InvalidArgument saying that
// `command` cannot vary a recorded step and how to re-record it per batch
// size (python/gpusim_torch sweep), naming the trace's meta step_file.
absl::Status RefuseTraceGrid(const std::string& command, const Input& in);
// `device`: for a PyTorch recording, the device whose CUDA libraries'
// allocations are added (sim/lower/eager/device_memory.h); default H100;
// `device_options`: --cudnn-workspace and --sdpa-backend, refused by name
// where they do not apply.
int CmdExplainTrace(const Input& in, int top, const std::string& format, const std::string& device,
                    const EagerDeviceOptions& device_options);
// `gpusim explain --time TRACE`: the trace replayed as `gpusim replay`
// prices it (a recorded PyTorch step's host work charged, Note [Recorded
// host costs]) and its critical path explained (sim/report/explain_time.h).
int CmdExplainTraceTime(const Input& in, int top, const std::string& format, const std::string& device,
                        const EagerDeviceOptions& device_options);
// `gpusim explain --time` of a step: `note` (a launch line's rank) first.
int PrintExplainTime(const StepReport& r, int top, const std::string& format, const std::string& note);
}  // namespace gpusim

#endif  // GPUSIM_TOOLS_CLI_H_
