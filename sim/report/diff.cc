#include "sim/report/diff.h"

#include <algorithm>
#include <cstdlib>
#include <map>

#include "absl/strings/str_format.h"
#include "sim/device/timing.h"
#include "sim/report/explain.h"
#include "sim/base/json_writer.h"

namespace gpusim {
namespace {

// "layer12.wq.all_gather" → "layer*.wq.all_gather"; "iter3.z" → "iter*.z".
std::string FoldIndex(const std::string& name) {
  std::string out;
  for (size_t i = 0; i < name.size(); ++i) {
    out.push_back(name[i]);
    const bool word_end = (out.size() >= 5 && out.compare(out.size() - 5, 5, "layer") == 0) ||
                          (out.size() >= 4 && out.compare(out.size() - 4, 4, "iter") == 0);
    if (word_end && i + 1 < name.size() && std::isdigit(static_cast<unsigned char>(name[i + 1]))) {
      while (i + 1 < name.size() && std::isdigit(static_cast<unsigned char>(name[i + 1]))) ++i;
      out.push_back('*');
    }
  }
  return out;
}

std::vector<DiffLine> Sorted(std::map<std::string, DiffLine>& m) {
  std::vector<DiffLine> v;
  for (auto& [k, l] : m) {
    if (l.delta() != 0) v.push_back(l);
  }
  std::stable_sort(v.begin(), v.end(), [](const DiffLine& x, const DiffLine& y) {
    return std::llabs(x.delta()) > std::llabs(y.delta());
  });
  return v;
}

}  // namespace

StepDiff DiffSteps(const StepReport& a, const StepReport& b) {
  StepDiff d;
  d.temp_a = a.temp;
  d.temp_b = b.temp;
  d.peak_a = a.peak;
  d.peak_b = b.peak;
  d.time_a = a.sim.step_time;
  d.time_b = b.sim.step_time;
  std::map<std::string, DiffLine> bufs;
  for (const PeakBuffer& p : BuffersAtPeak(a)) {
    DiffLine& l = bufs[p.name];
    l.name = p.name;
    l.origin = p.origin;
    l.kind = p.origin_kind;
    l.a += p.bytes.value();
    d.live_peak_a += p.bytes;
  }
  for (const PeakBuffer& p : BuffersAtPeak(b)) {
    DiffLine& l = bufs[p.name];
    l.name = p.name;
    if (l.origin.empty()) l.origin = p.origin;
    if (l.kind.empty()) l.kind = p.origin_kind;
    l.b += p.bytes.value();
    d.live_peak_b += p.bytes;
  }
  d.buffers = Sorted(bufs);
  std::map<std::string, DiffLine> groups;
  for (const auto& [name, l] : bufs) {
    // Its kind where its builder gave one (Tensor::origin_kind, an Origin's
    // kind), else its origin's words whole (issue 28: no string parsed back).
    const std::string key = !l.kind.empty() ? l.kind : l.origin.empty() ? name : l.origin;
    DiffLine& g = groups[key];
    g.name = key;
    g.a += l.a;
    g.b += l.b;
  }
  d.groups = Sorted(groups);
  std::map<std::string, DiffLine> ops;
  auto add_ops = [&](const StepReport& r, bool first) {
    const auto& ev = r.lowered.trace.events;
    for (size_t i = 0; i < ev.size(); ++i) {
      if (!IsTimed(ev[i].type)) continue;
      const std::string key = FoldIndex(ev[i].name);
      DiffLine& l = ops[key];
      l.name = key;
      (first ? l.a : l.b) += (r.sim.end[i] - r.sim.start[i]).ns();
    }
  };
  add_ops(a, true);
  add_ops(b, false);
  d.ops = Sorted(ops);
  return d;
}

std::string RenderDiffText(const StepDiff& d, const std::string& la, const std::string& lb, int top) {
  std::string o;
  absl::StrAppendFormat(&o, "A: %s\nB: %s\n\n", la, lb);
  absl::StrAppendFormat(&o, "temp        A %s\n            B %s\n            B-A %s\n", FormatBytes(d.temp_a),
                        FormatBytes(d.temp_b), FormatBytes(d.temp_b - d.temp_a));
  absl::StrAppendFormat(&o, "peak        B-A %s\n", FormatBytes(d.peak_b - d.peak_a));
  const Bytes live_delta = d.live_peak_b - d.live_peak_a;
  absl::StrAppendFormat(&o, "live at the peak: B-A %s (heap packing adds %s)\n", FormatBytes(live_delta),
                        FormatBytes((d.temp_b - d.temp_a) - live_delta));
  const double total = static_cast<double>((d.temp_b - d.temp_a).value());
  o += "\nBy kind of buffer (B - A):\n";
  for (size_t i = 0; i < d.groups.size() && static_cast<int>(i) < top; ++i) {
    const DiffLine& l = d.groups[i];
    absl::StrAppendFormat(&o, "  %+18s B  %6.1f%%  %s\n", WithCommas(l.delta()),
                          total != 0 ? 100.0 * static_cast<double>(l.delta()) / total : 0.0, l.name);
  }
  o += "\nBuffers live at each peak, by difference (B - A):\n";
  for (size_t i = 0; i < d.buffers.size() && static_cast<int>(i) < top; ++i) {
    const DiffLine& l = d.buffers[i];
    absl::StrAppendFormat(&o, "  %+18s B  %6.1f%% of the temp difference  %s\n      %s\n",
                          WithCommas(l.delta()), total != 0 ? 100.0 * static_cast<double>(l.delta()) / total : 0.0,
                          l.name, l.origin);
  }
  absl::StrAppendFormat(&o, "\nstep time   A %.4f s, B %.4f s, B-A %+.4f s (B/A %.4f)\n", d.time_a.seconds(),
                        d.time_b.seconds(), (d.time_b - d.time_a).seconds(),
                        d.time_a.ns() > 0 ? d.time_b.seconds() / d.time_a.seconds() : 0.0);
  o += "Ops by busy-time difference (B - A), all streams:\n";
  for (size_t i = 0; i < d.ops.size() && static_cast<int>(i) < top; ++i) {
    const DiffLine& l = d.ops[i];
    absl::StrAppendFormat(&o, "  %+10.3f ms  %s\n", static_cast<double>(l.delta()) * 1e-6, l.name);
  }
  return o;
}

std::string RenderDiffJson(const StepDiff& d, const std::string& la, const std::string& lb) {
  JsonWriter w;
  w.BeginObject();
  w.String("a", la).String("b", lb);
  w.BeginObject("memory")
      .Int("temp_a_bytes", d.temp_a.value())
      .Int("temp_b_bytes", d.temp_b.value())
      .Int("temp_delta_bytes", (d.temp_b - d.temp_a).value())
      .Int("peak_delta_bytes", (d.peak_b - d.peak_a).value())
      .Int("live_peak_delta_bytes", (d.live_peak_b - d.live_peak_a).value());
  w.BeginArray("buffers");
  for (const DiffLine& l : d.buffers) {
    w.BeginObject().String("name", l.name).String("origin", l.origin).Int("a_bytes", l.a).Int("b_bytes", l.b)
        .Int("delta_bytes", l.delta()).EndObject();
  }
  w.EndArray();
  w.BeginArray("groups");
  for (const DiffLine& l : d.groups) {
    w.BeginObject().String("kind", l.name).Int("a_bytes", l.a).Int("b_bytes", l.b).Int("delta_bytes", l.delta())
        .EndObject();
  }
  w.EndArray().EndObject();
  w.BeginObject("time")
      .Double("step_time_a_s", d.time_a.seconds())
      .Double("step_time_b_s", d.time_b.seconds())
      .Double("ratio_b_over_a", d.time_a.ns() > 0 ? d.time_b.seconds() / d.time_a.seconds() : 0.0);
  w.BeginArray("ops");
  for (const DiffLine& l : d.ops) {
    w.BeginObject().String("name", l.name).Int("a_ns", l.a).Int("b_ns", l.b).Int("delta_ns", l.delta()).EndObject();
  }
  w.EndArray().EndObject();
  w.EndObject();
  return w.Finish();
}

}  // namespace gpusim
