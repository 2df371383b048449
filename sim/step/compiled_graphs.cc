#include "sim/step/compiled_graphs.h"

#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "sim/base/units.h"

namespace gpusim {
namespace {

constexpr char kBegin[] = "compiled:";
constexpr char kEnd[] = "compiled_end:";

struct Run {
  size_t graph = 0;
  size_t begin = 0;  // event index of its begin marker
  Bytes start;
  absl::flat_hash_set<BufferId> made;  // blocks it allocated, still live
};

}  // namespace

std::vector<CompiledGraphSummary> SummarizeCompiledGraphs(const Trace& trace) {
  std::vector<CompiledGraphSummary> out;
  absl::flat_hash_map<std::string, size_t> index;
  absl::flat_hash_map<BufferId, Bytes> size;
  std::vector<std::pair<size_t, std::pair<size_t, size_t>>> spans;  // graph, [begin, end]
  Bytes live = trace.preexisting;
  Bytes peak = live;
  size_t peak_at = 0;
  std::vector<Run> open;  // a graph's runs do not nest, but a backward may run inside a forward's span
  for (size_t i = 0; i < trace.events.size(); ++i) {
    const TraceEvent& e = trace.events[i];
    if (e.type == EventType::kAlloc) {
      size[e.buffer] = e.size;
      live += e.size;
      if (!open.empty()) {
        CompiledGraphSummary& g = out[open.back().graph];
        ++g.blocks;
        g.allocated += e.size;
        open.back().made.insert(e.buffer);
      }
    } else if (e.type == EventType::kFree) {
      auto it = size.find(e.buffer);
      if (it != size.end()) {
        live -= it->second;
        size.erase(it);
      }
      for (Run& r : open) r.made.erase(e.buffer);
    } else if (e.type == EventType::kMarker && absl::StartsWith(e.name, kBegin)) {
      std::string name = e.name.substr(sizeof(kBegin) - 1);
      auto [it, fresh] = index.try_emplace(name, out.size());
      if (fresh) {
        CompiledGraphSummary g;
        g.name = name;
        out.push_back(std::move(g));
      }
      ++out[it->second].runs;
      open.push_back(Run{it->second, i, live, {}});
    } else if (e.type == EventType::kMarker && absl::StartsWith(e.name, kEnd) && !open.empty()) {
      Run& r = open.back();
      CompiledGraphSummary& g = out[r.graph];
      for (BufferId id : r.made) {
        auto it = size.find(id);
        if (it != size.end()) g.kept += it->second;
      }
      spans.push_back({r.graph, {r.begin, i}});
      open.pop_back();
    } else if (IsTimed(e.type) && !open.empty()) {
      ++out[open.back().graph].kernels;
    }
    for (const Run& r : open) {
      CompiledGraphSummary& g = out[r.graph];
      if (live > g.highest_live) {
        g.highest_live = live;
        g.live_at_start = r.start;
      }
    }
    if (live > peak) {
      peak = live;
      peak_at = i;
    }
  }
  for (const auto& [graph, span] : spans) {
    if (span.first <= peak_at && peak_at <= span.second) out[graph].holds_peak = true;
  }
  return out;
}

std::string RenderCompiledGraphsText(const std::vector<CompiledGraphSummary>& graphs) {
  if (graphs.empty()) return "";
  std::string out =
      "  compiled graphs (torch.compile: Inductor's plan per graph, python/gpusim_torch/inductor_plan.py):\n";
  for (const CompiledGraphSummary& g : graphs) {
    absl::StrAppend(&out, absl::StrFormat("    %-12s %d run(s), %d kernels, %d blocks allocated: %s, %s kept at its "
                                          "end; live %s at its start, %s at its highest%s\n",
                                          g.name, g.runs, g.kernels, g.blocks, FormatBytes(g.allocated),
                                          FormatBytes(g.kept), FormatBytes(g.live_at_start),
                                          FormatBytes(g.highest_live), g.holds_peak ? " (the step's peak)" : ""));
  }
  return out;
}

void CompiledGraphsJson(JsonWriter& w, const std::vector<CompiledGraphSummary>& graphs) {
  w.BeginArray("compiled_graphs");
  for (const CompiledGraphSummary& g : graphs) {
    w.BeginObject().String("name", g.name).Int("runs", g.runs).Int("kernels", g.kernels).Int("blocks", g.blocks);
    w.Int("allocated_bytes", g.allocated.value()).Int("kept_bytes", g.kept.value());
    w.Int("live_at_start_bytes", g.live_at_start.value()).Int("highest_live_bytes", g.highest_live.value());
    w.Bool("holds_peak", g.holds_peak).EndObject();
  }
  w.EndArray();
}

}  // namespace gpusim
