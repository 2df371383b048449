// The advisor: evaluates a grid of settings around one run config (remat
// policy x loop mode x per-device batch by default, or the user's --vary
// axes), in parallel, and reports the Pareto front of throughput against
// peak memory and the fastest setting that fits a memory budget.
//
// Large grids split deterministically (`--shard I/N`: point k goes to shard
// k mod N) into JSON-lines results that `--merge` joins; any batch system
// (a Slurm job array, GNU parallel) can run the shards.
#ifndef GPUSIM_SIM_ADVISE_ADVISE_H_
#define GPUSIM_SIM_ADVISE_ADVISE_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "sim/base/units.h"

namespace gpusim {

struct StepReport;

struct GridAxis {
  std::string path;                 // a config path, e.g. remat.policy
  std::vector<std::string> values;  // its values
};

// One evaluated grid point.
struct AdvicePoint {
  int64_t index = -1;                 // position in the full grid
  std::vector<std::string> settings;  // "path=value", one per axis
  bool ok = false;                    // simulated without error
  std::string error;                  // why not, when !ok
  Bytes peak;
  double step_time_s = 0;
  double tokens_per_s = 0;
  // Note [Verdict] (sim/base/verdict.h), as `gpusim run` judges the
  // point: whether the framework runs it (runtime_fits), the setting that
  // needs (setting; "" under its defaults), and what it must hold (need).
  bool runtime_fits = false;
  std::string setting;
  Bytes need;
  bool fits = false;                  // runtime_fits and need <= budget
  bool on_front = false;              // not dominated (faster and smaller)
  // A launch line's point: the rank its peak is of, the pipeline stage with
  // the largest peak ("stage 1 of 4, ranks 8-15"); its step time is the
  // pipeline's. Empty otherwise.
  std::string rank;
};

struct AdviceResult {
  Bytes budget;
  // The grid these points belong to (Note [Shard identity] in advise.cc):
  // a fingerprint of the config bytes, the --set overrides and the axes,
  // the number of points in the whole grid, and this part's shard.
  std::string grid;
  int64_t grid_points = 0;
  int shard = 0, num_shards = 1;
  std::vector<AdvicePoint> points;  // grid order
  int64_t winner = -1;              // index into points: fastest that fits
};

struct AdviseOptions {
  std::string config;
  std::vector<std::string> base_sets;  // applied to every point
  std::vector<GridAxis> axes;          // empty: the default grid
  Bytes budget;                        // 0: the device's usable memory
  int jobs = 0;                        // 0: all cores (the CLI refuses --jobs 0); capped at the groups to run
  int shard = 0, num_shards = 1;
  std::function<void(int64_t done, int64_t total)> progress;
  // Called with each simulated point's index into AdviceResult::points and
  // its report (compare's rows read it); from worker threads, one call per
  // point.
  std::function<void(int64_t point, const StepReport& report)> on_report;
};

// "path=v1,v2,..." → an axis.
absl::StatusOr<GridAxis> ParseAxis(const std::string& text);
// The default axes for a config: every non-offloading remat policy,
// rolled/unrolled, per-device batch 1, 2, 4, ... 64.
absl::StatusOr<std::vector<GridAxis>> DefaultAxes(const std::string& config);

absl::StatusOr<AdviceResult> Advise(const AdviseOptions& options);
// Marks the front and the winner (used after a merge too).
void Rank(AdviceResult& result);

std::string RenderAdviceText(const AdviceResult& r, int top);
std::string RenderAdviceJson(const AdviceResult& r);
// One JSON object per line, for --shard output and --merge input.
std::string RenderAdviceJsonLines(const AdviceResult& r);
// Refuses (InvalidArgument, naming the file) an empty file, lines of
// another grid, a shard given twice, and a grid point missing or repeated.
absl::StatusOr<AdviceResult> MergeAdviceJsonLines(const std::vector<std::string>& files);

}  // namespace gpusim

#endif  // GPUSIM_SIM_ADVISE_ADVISE_H_
