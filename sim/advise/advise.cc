#include "sim/advise/advise.h"

#include <algorithm>
#include <atomic>
#include <fstream>
#include <functional>
#include <optional>
#include <sstream>
#include <map>
#include <mutex>
#include <new>
#include <set>
#include <system_error>
#include <thread>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "sim/advise/json_lines.h"
#include "sim/base/status.h"
#include "sim/config/grid.h"
#include "sim/config/loader.h"
#include "sim/remat/remat_policy.h"
#include "sim/base/json_writer.h"
#include "sim/step/megatron_step.h"
#include "sim/step/step.h"
#include "sim/step/capabilities.h"

namespace gpusim {
namespace {

double Throughput(const AdvicePoint& p) {
  if (p.tokens_per_s > 0) return p.tokens_per_s;
  return p.step_time_s > 0 ? 1.0 / p.step_time_s : 0;
}

// The value of each axis at grid point `index` (the last axis varies fastest).
std::vector<size_t> ValuesOf(const std::vector<GridAxis>& axes, int64_t index) {
  std::vector<size_t> values(axes.size());
  int64_t rest = index;
  for (size_t a = axes.size(); a-- > 0;) {
    const int64_t n = static_cast<int64_t>(axes[a].values.size());
    values[a] = static_cast<size_t>(rest % n);
    rest /= n;
  }
  return values;
}

// The settings of grid point `index` ("path=value", one per axis).
std::vector<std::string> SettingsOf(const std::vector<GridAxis>& axes, int64_t index) {
  const std::vector<size_t> values = ValuesOf(axes, index);
  std::vector<std::string> settings(axes.size());
  for (size_t a = 0; a < axes.size(); ++a) settings[a] = axes[a].path + "=" + axes[a].values[values[a]];
  return settings;
}

// Each axis's values as typed settings (sim/config/grid.h), in axis order.
using TypedAxes = std::vector<std::vector<GridSetting>>;

// Note [Shared preparation]
// Building, lowering and heap-packing a step (PrepareStep) read neither the
// device nor the allocator; only the replay (ReplayStep) does. Grid points
// whose settings differ only in paths under `device` or `allocator` are
// therefore one group: the step is prepared once, for the group's first
// point, and replayed on each point's device and allocator, with results
// identical to simulating every point on its own (advise_test.cc checks).
bool OnlyReplayReadsIt(const std::string& setting) {
  for (absl::string_view root : {"device", "allocator"}) {
    if (absl::StartsWith(setting, absl::StrCat(root, "=")) || absl::StartsWith(setting, absl::StrCat(root, "."))) {
      return true;
    }
  }
  return false;
}

std::string GroupKey(const std::vector<std::string>& settings) {
  std::string key;
  for (const std::string& s : settings) {
    if (!OnlyReplayReadsIt(s)) absl::StrAppend(&key, s, "\n");
  }
  return key;
}

void TakeVerdict(const Verdict& v, AdvicePoint& p) {
  p.runtime_fits = v.fits();
  p.setting = v.setting;
  p.need = v.need;
}

// A launch line's point: every pipeline rank simulated (SimulateMegatron),
// the figures those of the rank with the largest peak, the step the
// pipeline's.
void EvaluateLaunchLine(const AdviseOptions& o, const RunSpec& spec, int64_t i, AdvicePoint& p, Bytes& budget) {
  absl::StatusOr<MegatronReport> m = SimulateMegatron(spec);
  if (!m.ok()) {
    p.error = std::string(m.status().message());
    return;
  }
  const MegatronRankView v = PeakRankView(*m);
  p.ok = true;
  if (o.on_report) o.on_report(i, v.report);
  p.peak = v.report.peak;
  TakeVerdict(v.report.verdict, p);
  p.step_time_s = m->step_time.seconds();
  p.tokens_per_s = m->tokens_per_s_per_device;
  p.rank = absl::StrCat("stage ", v.stage, " of ", v.stages, ", ranks ", v.first_rank, "-", v.last_rank);
  if (budget.value() == 0) budget = spec.device.usable();
}

// Evaluates the points of one group (same GroupKey) in order; `prepared`
// holds the group's prepared step once one point got that far.
// Each point's spec is the base spec with its typed settings applied (Note
// [Typed grid points] in sim/config/grid.cc): no YAML is read per point.
void EvaluateGroup(const AdviseOptions& o, const GridBase& base, const std::vector<GridAxis>& axes,
                   const TypedAxes& typed, const std::vector<int64_t>& indices, std::vector<AdvicePoint>& points,
                   std::vector<Bytes>& budgets, const std::function<void()>& done) {
  std::optional<absl::StatusOr<StepReport>> prepared;
  for (int64_t i : indices) {
    AdvicePoint& p = points[static_cast<size_t>(i)];
    const std::vector<size_t> values = ValuesOf(axes, p.index);
    std::vector<const GridSetting*> settings(axes.size());
    for (size_t a = 0; a < axes.size(); ++a) settings[a] = &typed[a][values[a]];
    auto spec = base.Point(settings);
    if (!spec.ok()) {
      p.error = std::string(spec.status().message());
      done();
      continue;
    }
    if (spec->megatron.present) {
      EvaluateLaunchLine(o, *spec, i, p, budgets[static_cast<size_t>(i)]);
      done();
      continue;
    }
    if (!prepared.has_value()) prepared = PrepareStep(*spec);
    if (!prepared->ok()) {
      p.error = std::string(prepared->status().message());
      done();
      continue;
    }
    StepReport& r = **prepared;
    r.spec = *spec;
    absl::Status replayed = ReplayStep(r);
    if (!replayed.ok()) {
      p.error = std::string(replayed.message());
      done();
      continue;
    }
    p.ok = true;
    if (o.on_report) o.on_report(i, r);
    p.peak = r.peak;
    TakeVerdict(r.verdict, p);
    p.step_time_s = r.sim.step_time.seconds();
    p.tokens_per_s = p.step_time_s > 0 ? r.tokens_per_step / p.step_time_s : 0;
    Bytes& budget = budgets[static_cast<size_t>(i)];
    if (budget.value() == 0) budget = spec->device.usable();
    done();
  }
}

// Note [Shard identity]: every JSON line of a shard names its grid (an
// FNV-1a hash of the config file's bytes, the base --set overrides and the
// axes, in order), the grid's point count and the shard (I of N), so a merge
// can refuse shards of another grid, a shard given twice, an empty file (an
// interrupted shard) and a missing point, instead of ranking part of a grid.
absl::StatusOr<std::string> GridFingerprint(const AdviseOptions& o, const std::vector<GridAxis>& axes) {
  ASSIGN_OR_RETURN(std::string config, ReadRunConfigBytes(o.config));
  uint64_t h = 1469598103934665603ull;
  auto mix = [&](std::string_view s) {
    for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
    h = (h ^ 0xff) * 1099511628211ull;  // separator
  };
  mix(config);
  for (const std::string& s : o.base_sets) mix(s);
  for (const GridAxis& a : axes) {
    mix(a.path);
    for (const std::string& v : a.values) mix(v);
  }
  return absl::StrFormat("%016x", h);
}

}  // namespace

absl::StatusOr<GridAxis> ParseAxis(const std::string& text) {
  const size_t eq = text.find('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == text.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--vary ", text, ": expected path=v1,v2,... such as remat.policy=full,minimal"));
  }
  GridAxis a;
  a.path = text.substr(0, eq);
  for (absl::string_view v : absl::StrSplit(text.substr(eq + 1), ',')) {
    if (v.empty()) return absl::InvalidArgumentError(absl::StrCat("--vary ", text, ": empty value"));
    a.values.emplace_back(v);
  }
  return a;
}

absl::StatusOr<std::vector<GridAxis>> DefaultAxes(const std::string& config) {
  ASSIGN_OR_RETURN(RunSpec spec, LoadRunSpec(config, {}));
  if (spec.megatron.present) {
    return absl::InvalidArgumentError(absl::StrCat(
        config, ": a Megatron-LM launch line has no default grid; give the axes with --vary (megatron.args.NAME=..., "
                "megatron.world_size=..., megatron.gpus_per_node=..., device=..., allocator.*)"));
  }
  // Only axes the run's family models (sim/step/capabilities.h).
  const std::vector<std::string> modelled = ModelledSettings(spec);
  auto models = [&](const char* path) { return std::find(modelled.begin(), modelled.end(), path) != modelled.end(); };
  std::vector<GridAxis> axes;
  if (models("remat.policy")) {
    GridAxis policies{"remat.policy", {}};
    for (const RematPolicyInfo& p : ListRematPolicies()) {
      // Policies that need names (save_only_these_names, ...) are left to
      // --vary; host-offloading ones are in (their PCIe time is modelled).
      if (!p.params.empty()) continue;
      policies.values.push_back(p.name);
    }
    axes.push_back(std::move(policies));
  }
  if (models("loop.mode")) axes.push_back({"loop.mode", {"rolled", "unrolled"}});
  if (models("batch.per_device")) axes.push_back({"batch.per_device", {"1", "2", "4", "8", "16", "32", "64"}});
  return axes;
}

namespace {

// Every value of every axis parses and is modelled by the run's family: a
// misspelt path or a refused value is the user's input, an error before any
// point is simulated. Each value is parsed once, into the typed setting the
// points apply.
// A --budget above a grid device's usable memory (its CUDA total less the
// context) would crown points the device cannot hold (issue 32): refused
// by name. `where` names the device's source ("the config", "--vary device=X").
absl::Status CheckBudget(Bytes budget, const RunSpec& spec, const std::string& where) {
  if (budget.value() == 0 || budget <= spec.device.usable()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrFormat(
      "--budget %s is more than %s (%s) can give: its usable memory is %s (%s total less the CUDA context); give "
      "--budget at most %d, or leave it out to use the device's usable memory",
      FormatBytes(budget), spec.device.name, where, FormatBytes(spec.device.usable()),
      FormatBytes(spec.device.cuda_total), spec.device.usable().value()));
}

absl::StatusOr<TypedAxes> ParseAxes(const GridBase& base, const std::vector<GridAxis>& axes, Bytes budget) {
  // A launch line's points run every rank (EvaluateLaunchLine).
  const bool launch_line = base.spec().megatron.present;
  if (!launch_line) RETURN_IF_ERROR(CheckStepInput(base.spec()));
  bool device_varied = false;
  for (const GridAxis& a : axes) device_varied |= a.path == "device";
  if (!device_varied) RETURN_IF_ERROR(CheckBudget(budget, base.spec(), "the config's device"));
  TypedAxes typed(axes.size());
  for (size_t a = 0; a < axes.size(); ++a) {
    for (const std::string& v : axes[a].values) {
      ASSIGN_OR_RETURN(GridSetting g, base.Parse(absl::StrCat(axes[a].path, "=", v)));
      ASSIGN_OR_RETURN(RunSpec spec, base.Point({&g}));
      RETURN_IF_ERROR(ApplyCapabilities(spec).status());
      if (axes[a].path == "device") RETURN_IF_ERROR(CheckBudget(budget, spec, absl::StrCat("--vary device=", v)));
      if (!launch_line) RETURN_IF_ERROR(CheckStepInput(spec));
      typed[a].push_back(std::move(g));
    }
  }
  return typed;
}

}  // namespace

void Rank(AdviceResult& r) {
  r.winner = -1;
  for (AdvicePoint& p : r.points) {
    p.fits = p.ok && p.runtime_fits && p.need <= r.budget;
    p.on_front = false;
  }
  for (size_t i = 0; i < r.points.size(); ++i) {
    AdvicePoint& p = r.points[i];
    if (!p.ok) continue;
    bool dominated = false;
    for (const AdvicePoint& q : r.points) {
      if (!q.ok || &q == &p) continue;
      const bool no_worse = q.peak <= p.peak && Throughput(q) >= Throughput(p);
      const bool better = q.peak < p.peak || Throughput(q) > Throughput(p);
      if (no_worse && better) {
        dominated = true;
        break;
      }
    }
    p.on_front = !dominated;
    if (p.fits) {
      const AdvicePoint* w = r.winner >= 0 ? &r.points[static_cast<size_t>(r.winner)] : nullptr;
      if (w == nullptr || Throughput(p) > Throughput(*w) || (Throughput(p) == Throughput(*w) && p.peak < w->peak)) {
        r.winner = static_cast<int64_t>(i);
      }
    }
  }
}

absl::StatusOr<AdviceResult> Advise(const AdviseOptions& o) {
  std::vector<GridAxis> axes = o.axes;
  if (axes.empty()) {
    ASSIGN_OR_RETURN(axes, DefaultAxes(o.config));
  }
  ASSIGN_OR_RETURN(RunConfig config, RunConfig::Read(o.config));
  ASSIGN_OR_RETURN(GridBase base, GridBase::Make(config, o.base_sets));
  if (o.budget < Bytes(0)) return absl::InvalidArgumentError("--budget: expected a positive size");
  ASSIGN_OR_RETURN(TypedAxes typed, ParseAxes(base, axes, o.budget));
  int64_t total = 1;
  constexpr int64_t kMaxGridPoints = 1000000;
  for (const GridAxis& a : axes) {
    total *= static_cast<int64_t>(a.values.size());
    if (total > kMaxGridPoints) {
      return absl::InvalidArgumentError(
          absl::StrCat("--vary: the grid has more than ", kMaxGridPoints, " points; split it into several runs"));
    }
  }
  if (o.jobs < 0) return absl::InvalidArgumentError(absl::StrCat("--jobs: expected >= 1, got ", o.jobs));
  if (o.budget < Bytes(0)) return absl::InvalidArgumentError("--budget: expected a positive size");
  if (o.num_shards < 1 || o.shard < 0 || o.shard >= o.num_shards) {
    return absl::InvalidArgumentError(absl::StrCat("--shard ", o.shard, "/", o.num_shards, ": expected I/N with 0 <= I < N"));
  }
  std::vector<int64_t> mine;
  for (int64_t k = o.shard; k < total; k += o.num_shards) mine.push_back(k);
  AdviceResult result;
  result.budget = o.budget;
  ASSIGN_OR_RETURN(result.grid, GridFingerprint(o, axes));
  result.grid_points = total;
  result.shard = o.shard;
  result.num_shards = o.num_shards;
  result.points.resize(mine.size());
  // Groups of points that share a prepared step, in grid order of their
  // first point (Note [Shared preparation]).
  std::vector<std::vector<int64_t>> groups;
  {
    absl::flat_hash_map<std::string, size_t> group_of;
    for (size_t i = 0; i < mine.size(); ++i) {
      AdvicePoint& p = result.points[i];
      p.index = mine[i];
      p.settings = SettingsOf(axes, mine[i]);
      auto [it, inserted] = group_of.try_emplace(GroupKey(p.settings), groups.size());
      if (inserted) groups.emplace_back();
      groups[it->second].push_back(static_cast<int64_t>(i));
    }
  }
  std::vector<Bytes> budgets(mine.size(), o.budget);
  std::atomic<int64_t> next{0}, done{0};
  const int64_t points = static_cast<int64_t>(mine.size());
  auto count_done = [&]() {
    const int64_t d = ++done;
    if (o.progress) o.progress(d, points);
  };
  // More threads than groups would idle; thread creation failing (e.g.
  // --jobs 100000 past the process limit) just leaves fewer workers.
  const int64_t want = o.jobs > 0 ? o.jobs : std::max(1u, std::thread::hardware_concurrency());
  const int jobs = static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(want, static_cast<int64_t>(groups.size()))));
  // Every worker's failure reaches the caller as a Status (never
  // std::terminate): the first one is kept and the others stop.
  std::mutex failure_mu;
  absl::Status failure;
  std::atomic<bool> failed{false};
  auto worker = [&]() {
    try {
      for (int64_t g = next++; g < static_cast<int64_t>(groups.size()) && !failed; g = next++) {
        EvaluateGroup(o, base, axes, typed, groups[static_cast<size_t>(g)], result.points, budgets, count_done);
      }
    } catch (const std::bad_alloc&) {
      std::lock_guard<std::mutex> l(failure_mu);
      if (failure.ok()) failure = absl::ResourceExhaustedError("advise: out of host memory evaluating the grid");
      failed = true;
    } catch (const std::exception& e) {
      std::lock_guard<std::mutex> l(failure_mu);
      if (failure.ok()) failure = absl::InternalError(absl::StrCat("advise: worker failed: ", e.what()));
      failed = true;
    }
  };
  std::vector<std::thread> pool;
  for (int j = 1; j < jobs; ++j) {
    try {
      pool.emplace_back(worker);
    } catch (const std::system_error&) {
      break;  // the threads made so far (and this one) do the work
    }
  }
  worker();
  for (std::thread& t : pool) t.join();
  RETURN_IF_ERROR(failure);
  if (result.budget.value() == 0) {
    for (Bytes b : budgets) {
      if (b.value() > 0) {
        result.budget = b;
        break;
      }
    }
  }
  Rank(result);
  return result;
}

namespace {

// "  (peak rank: stage 1 of 4, ranks 8-15)" for a launch line's point.
// A point that fits only with a runtime setting names it (Note [Verdict]).
std::string SettingNote(const AdvicePoint& p) {
  return p.fits && !p.setting.empty() ? absl::StrCat("  (* needs ", p.setting, ")") : "";
}

std::string RankNote(const AdvicePoint& p) {
  return p.rank.empty() ? "" : absl::StrCat("  (peak rank: ", p.rank, ")");
}

}  // namespace

std::string RenderAdviceText(const AdviceResult& r, int top) {
  std::string o;
  int ok = 0, fit = 0;
  for (const AdvicePoint& p : r.points) {
    ok += p.ok;
    fit += p.fits;
  }
  absl::StrAppendFormat(&o, "%d settings evaluated (%d simulated, %d fit the budget of %s)\n\n", r.points.size(), ok,
                        fit, FormatBytes(r.budget));
  std::vector<const AdvicePoint*> front;
  for (const AdvicePoint& p : r.points) {
    if (p.on_front) front.push_back(&p);
  }
  std::sort(front.begin(), front.end(), [](const AdvicePoint* a, const AdvicePoint* b) {
    return a->peak != b->peak ? a->peak < b->peak : a->index < b->index;
  });
  o += "Pareto front (throughput vs peak memory), smallest peak first:\n";
  absl::StrAppendFormat(&o, "  %-6s %-22s %-11s %-14s %s\n", "fits", "peak", "step (s)", "tokens/s/dev", "settings");
  int shown = 0;
  for (const AdvicePoint* p : front) {
    if (shown++ >= top) break;
    absl::StrAppendFormat(&o, "  %-6s %-22s %-11.4f %-14.0f %s%s%s\n", p->fits ? (p->setting.empty() ? "yes" : "yes*") : "no",
                          absl::StrFormat("%.2f GiB", p->peak.GiB()), p->step_time_s, p->tokens_per_s,
                          absl::StrJoin(p->settings, " "), RankNote(*p), SettingNote(*p));
  }
  if (r.winner >= 0) {
    const AdvicePoint& w = r.points[static_cast<size_t>(r.winner)];
    absl::StrAppendFormat(&o, "\nFastest that fits: %s%s%s\n  peak %s, margin %s; step %.4f s, %.0f tokens/s/device\n",
                          absl::StrJoin(w.settings, " "), RankNote(w), SettingNote(w), FormatBytes(w.need),
                          FormatBytes(r.budget - w.need), w.step_time_s, w.tokens_per_s);
  } else {
    o += "\nNo setting fits the budget.\n";
  }
  return o;
}

namespace {

void PointJson(JsonWriter& w, const AdvicePoint& p) {
  w.BeginObject().Int("index", p.index);
  w.BeginArray("settings");
  for (const std::string& s : p.settings) w.String("", s);
  w.EndArray();
  w.Bool("ok", p.ok).String("error", p.error).Int("peak_bytes", p.peak.value()).Double("step_time_s", p.step_time_s)
      .Double("tokens_per_s_per_device", p.tokens_per_s).Bool("fits", p.fits).Bool("runtime_fits", p.runtime_fits).String("setting", p.setting)
      .Int("need_bytes", p.need.value()).Bool("on_front", p.on_front);
  if (!p.rank.empty()) w.String("peak_rank", p.rank);
  w.EndObject();
}

}  // namespace

std::string RenderAdviceJson(const AdviceResult& r) {
  JsonWriter w;
  w.BeginObject().Int("budget_bytes", r.budget.value());
  if (r.winner >= 0) {
    w.Int("winner_index", r.points[static_cast<size_t>(r.winner)].index);
  } else {
    w.Null("winner_index");
  }
  w.BeginArray("points");
  for (const AdvicePoint& p : r.points) PointJson(w, p);
  w.EndArray().EndObject();
  return w.Finish();
}

std::string RenderAdviceJsonLines(const AdviceResult& r) {
  std::string o;
  for (const AdvicePoint& p : r.points) {
    std::string line = absl::StrFormat("{\"grid\":\"%s\",\"grid_points\":%d,\"shard\":%d,\"num_shards\":%d,"
                                       "\"index\":%d,\"settings\":[",
                                       r.grid, r.grid_points, r.shard, r.num_shards, p.index);
    for (size_t i = 0; i < p.settings.size(); ++i) absl::StrAppend(&line, i ? "," : "", JsonEscape(p.settings[i]));
    absl::StrAppendFormat(&line,
                          "],\"ok\":%s,\"error\":%s,\"peak_bytes\":%d,\"step_time_s\":%.17g,"
                          "\"tokens_per_s_per_device\":%.17g,\"runtime_fits\":%s,\"setting\":%s,"
                          "\"need_bytes\":%d,\"budget_bytes\":%d%s}\n",
                          p.ok ? "true" : "false", JsonEscape(p.error), p.peak.value(), p.step_time_s,
                          p.tokens_per_s, p.runtime_fits ? "true" : "false", JsonEscape(p.setting), p.need.value(),
                          r.budget.value(),
                          p.rank.empty() ? "" : absl::StrCat(",\"peak_rank\":", JsonEscape(p.rank)));
    o += line;
  }
  return o;
}

absl::StatusOr<AdviceResult> MergeAdviceJsonLines(const std::vector<std::string>& files) {
  AdviceResult r;
  std::map<int, std::string> shard_file;  // shard → the file that held it
  std::string first_file;
  for (const std::string& f : files) {
    std::ifstream in(f);
    if (!in) return absl::NotFoundError(absl::StrCat(f, ": cannot open"));
    std::string line;
    int64_t n = 0, points_in_file = 0;
    int file_shard = -1;
    while (std::getline(in, line)) {
      ++n;
      if (line.empty()) continue;
      auto obj = ParseFlatJsonObject(line);
      if (!obj.ok()) return absl::InvalidArgumentError(absl::StrCat(f, ":", n, ": ", obj.status().message()));
      AdvicePoint p;
      auto get = [&](const std::string& key) -> absl::StatusOr<const JsonLineValue*> {
        auto it = obj->find(key);
        if (it == obj->end()) return absl::InvalidArgumentError(absl::StrCat(f, ":", n, ": missing key '", key, "'"));
        return &it->second;
      };
      ASSIGN_OR_RETURN(const JsonLineValue* grid, get("grid"));
      ASSIGN_OR_RETURN(const JsonLineValue* grid_points, get("grid_points"));
      ASSIGN_OR_RETURN(const JsonLineValue* shard, get("shard"));
      ASSIGN_OR_RETURN(const JsonLineValue* num_shards, get("num_shards"));
      const int64_t gp = static_cast<int64_t>(grid_points->number);
      const int sh = static_cast<int>(shard->number), ns = static_cast<int>(num_shards->number);
      if (first_file.empty()) {
        first_file = f;
        r.grid = grid->text;
        r.grid_points = gp;
        r.num_shards = ns;
      } else if (grid->text != r.grid || gp != r.grid_points || ns != r.num_shards) {
        return absl::InvalidArgumentError(absl::StrCat(
            f, ":", n, ": a shard of another grid (grid ", grid->text, ", ", gp, " points, ", ns, " shards; ",
            first_file, " has grid ", r.grid, ", ", r.grid_points, " points, ", r.num_shards, " shards)"));
      }
      if (file_shard < 0) {
        file_shard = sh;
        auto [it, inserted] = shard_file.emplace(sh, f);
        if (!inserted) {
          return absl::InvalidArgumentError(
              absl::StrCat(f, ": shard ", sh, "/", ns, " given twice (also ", it->second, ")"));
        }
      } else if (sh != file_shard) {
        return absl::InvalidArgumentError(absl::StrCat(f, ":", n, ": line of shard ", sh, " in the file of shard ",
                                                       file_shard));
      }
      ++points_in_file;
      ASSIGN_OR_RETURN(const JsonLineValue* index, get("index"));
      ASSIGN_OR_RETURN(const JsonLineValue* settings, get("settings"));
      ASSIGN_OR_RETURN(const JsonLineValue* ok, get("ok"));
      ASSIGN_OR_RETURN(const JsonLineValue* error, get("error"));
      ASSIGN_OR_RETURN(const JsonLineValue* peak, get("peak_bytes"));
      ASSIGN_OR_RETURN(const JsonLineValue* step, get("step_time_s"));
      ASSIGN_OR_RETURN(const JsonLineValue* tok, get("tokens_per_s_per_device"));
      ASSIGN_OR_RETURN(const JsonLineValue* budget, get("budget_bytes"));
      ASSIGN_OR_RETURN(const JsonLineValue* runtime_fits, get("runtime_fits"));
      ASSIGN_OR_RETURN(const JsonLineValue* setting, get("setting"));
      ASSIGN_OR_RETURN(const JsonLineValue* need, get("need_bytes"));
      p.index = static_cast<int64_t>(index->number);
      if (p.index < 0 || p.index >= gp || p.index % ns != sh) {
        return absl::InvalidArgumentError(
            absl::StrCat(f, ":", n, ": grid point ", p.index, " is not a point of shard ", sh, "/", ns));
      }
      p.settings = settings->strings;
      p.ok = ok->boolean;
      p.error = error->text;
      p.peak = Bytes(static_cast<int64_t>(peak->number));
      p.step_time_s = step->number;
      p.tokens_per_s = tok->number;
      p.runtime_fits = runtime_fits->boolean;
      p.setting = setting->text;
      p.need = Bytes(static_cast<int64_t>(need->number));
      if (auto it = obj->find("peak_rank"); it != obj->end()) p.rank = it->second.text;
      r.budget = Bytes(static_cast<int64_t>(budget->number));
      r.points.push_back(std::move(p));
    }
    if (in.bad()) return absl::UnavailableError(absl::StrCat(f, ": read error"));
    if (points_in_file == 0) {
      return absl::InvalidArgumentError(absl::StrCat(f, ": empty shard (no grid points; was it interrupted?)"));
    }
  }
  if (files.empty()) return absl::InvalidArgumentError("--merge: give the shard files");
  std::sort(r.points.begin(), r.points.end(),
            [](const AdvicePoint& a, const AdvicePoint& b) { return a.index < b.index; });
  for (size_t i = 1; i < r.points.size(); ++i) {
    if (r.points[i].index == r.points[i - 1].index) {
      return absl::InvalidArgumentError(absl::StrCat("--merge: grid point ", r.points[i].index, " appears twice"));
    }
  }
  std::vector<int64_t> missing;
  for (int s = 0; s < r.num_shards; ++s) {
    if (!shard_file.contains(s)) missing.push_back(s);
  }
  if (!missing.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("--merge: missing shard(s) ", absl::StrJoin(missing, ", "), " of ",
                                                   r.num_shards, " (grid ", r.grid, ")"));
  }
  if (static_cast<int64_t>(r.points.size()) != r.grid_points) {
    return absl::InvalidArgumentError(absl::StrCat("--merge: the shards hold ", r.points.size(), " of the grid's ",
                                                   r.grid_points, " points (a shard cut short?)"));
  }
  Rank(r);
  return r;
}

}  // namespace gpusim
