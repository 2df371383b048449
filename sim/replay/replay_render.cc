// Text and JSON of replay results (`gpusim replay`, `gpusim compare`).
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "sim/base/verdict.h"
#include "sim/base/json_writer.h"
#include "sim/replay/replay.h"

namespace gpusim {

// --- Rendering ------------------------------------------------------------------

namespace {

std::string Share(double v) { return absl::StrFormat("%.4f%%", 100.0 * v); }

std::string OomWhere(const ReplayOom& o) {
  if (o.event < 0) return "at the first event (the memory live before the recording does not fit)";
  return absl::StrCat("at recorded event ", o.event);
}

void TotalsText(std::string& out, const char* what, const std::optional<TotalsComparison>& c) {
  if (!c.has_value()) {
    absl::StrAppend(&out, absl::StrFormat("  %-9s not recorded in the trace\n", what));
    return;
  }
  absl::StrAppend(&out, absl::StrFormat("  %-9s exact at %d of %d events (%s); max |error| %s, mean |error| %.1f B; "
                                        "peak predicted %s, recorded %s\n",
                                        what, c->exact, c->compared, Share(c->exact_share()),
                                        FormatBytes(c->max_abs_error), c->mean_abs_error,
                                        FormatBytes(c->predicted_peak), FormatBytes(c->recorded_peak)));
  if (c->first_mismatch >= 0) absl::StrAppend(&out, "            first mismatch at recorded event ", c->first_mismatch, "\n");
}

void TotalsJson(JsonWriter& w, const char* key, const std::optional<TotalsComparison>& c) {
  if (!c.has_value()) {
    w.Null(key);
    return;
  }
  w.BeginObject(key)
      .Int("compared", c->compared)
      .Int("exact", c->exact)
      .Double("exact_share", c->exact_share())
      .Int("max_abs_error_bytes", c->max_abs_error.value())
      .Double("mean_abs_error_bytes", c->mean_abs_error)
      .Int("first_mismatch_event", c->first_mismatch)
      .Int("recorded_peak_bytes", c->recorded_peak.value())
      .Int("predicted_peak_bytes", c->predicted_peak.value())
      .EndObject();
}

// Note [Exact from the first determined event]: the share from the first
// determined event, and the runs of inexact reserved with their causes.
void DeterminedText(std::string& out, const ReplayResult& r) {
  if (!r.warm_start.has_value() || !r.warm_start->applied) return;
  const int64_t from = r.warm_start->determined_from;
  for (const auto& [what, c] : {std::pair{"allocated", &r.allocated_determined},
                                std::pair{"reserved", &r.reserved_determined}}) {
    if (!c->has_value()) continue;
    if (from < 0) {
      absl::StrAppend(&out, absl::StrFormat("  %-9s the start state is never fully determined (its facts not "
                                            "recorded say why)\n",
                                            what));
      continue;
    }
    absl::StrAppend(&out, absl::StrFormat("  %-9s from the first determined event (%d): exact at %d of %d events (%s)\n",
                                          what, from, (*c)->exact, (*c)->compared, Share((*c)->exact_share())));
  }
}

void MismatchRunsText(std::string& out, const ReplayResult& r) {
  for (const MismatchRun& run : r.reserved_mismatches) {
    absl::StrAppend(&out, absl::StrFormat("  reserved inexact at events %d-%d (%+d B at the first): %s\n", run.first,
                                          run.last, run.error.value(), run.why));
  }
  if (r.reserved_mismatch_runs > static_cast<int64_t>(r.reserved_mismatches.size())) {
    absl::StrAppend(&out, absl::StrFormat("  ... and %d more runs of inexact reserved\n",
                                          r.reserved_mismatch_runs - static_cast<int64_t>(r.reserved_mismatches.size())));
  }
}

void MismatchRunsJson(JsonWriter& w, const ReplayResult& r) {
  TotalsJson(w, "allocated_determined", r.allocated_determined);
  TotalsJson(w, "reserved_determined", r.reserved_determined);
  w.Int("reserved_mismatch_runs", r.reserved_mismatch_runs);
  w.BeginArray("reserved_mismatches");
  for (const MismatchRun& run : r.reserved_mismatches) {
    w.BeginObject()
        .Int("first_event", run.first)
        .Int("last_event", run.last)
        .Int("error_bytes", run.error.value())
        .String("why", run.why)
        .EndObject();
  }
  w.EndArray();
}

}  // namespace

// Note [Verdict] (sim/base/verdict.h) for a replayed recording: its
// allocator replay on the capacity.
Verdict ReplayVerdict(const ReplayResult& r) {
  const std::string runtime =
      r.allocator == "pytorch_caching" ? "PyTorch's caching allocator" : absl::StrCat("the ", r.allocator, " allocator");
  Verdict v = EagerVerdict(runtime, r.oom.has_value(), r.stats.peak_reserved, r.stats.peak_allocated, r.capacity, "");
  v.limit_name = absl::StrCat("the capacity (", r.capacity_source, ")");
  return v;
}

std::string RenderReplayText(const ReplayResult& r) {
  std::string out = absl::StrCat("verdict: ", ReplayVerdict(r).Line(), "\n");
  absl::StrAppend(&out, "replay of ", r.source, " (", r.format, ") through ", r.allocator, "\n");
  absl::StrAppend(&out, absl::StrFormat("  capacity  %s (%s)\n", FormatBytes(r.capacity), r.capacity_source));
  absl::StrAppend(&out, absl::StrFormat("  events    %d memory events", r.events));
  if (r.conversion.allocs_before_recording > 0 || r.preexisting > Bytes(0) ||
      r.conversion.allocs_live_through > 0) {
    absl::StrAppend(&out, absl::StrFormat("; live before recording: %d freed blocks (%s) + %s never freed",
                                          r.conversion.allocs_before_recording,
                                          FormatBytes(r.conversion.bytes_before_recording),
                                          FormatBytes(r.preexisting + r.conversion.bytes_live_through)));
    if (r.conversion.allocs_live_through > 0) {
      absl::StrAppend(&out, absl::StrFormat(" (%d blocks live through the window)", r.conversion.allocs_live_through));
    }
  }
  absl::StrAppend(&out, "\n");
  if (!r.start_state.empty()) absl::StrAppend(&out, "  start     ", r.start_state, "\n");
  if (!r.import.empty()) absl::StrAppend(&out, "  read      ", r.import, "\n");
  if (r.warm_start.has_value()) {
    if (!r.warm_start->applied) {
      absl::StrAppend(&out, "            a warm start could not be inferred: ", r.warm_start->why_not, "\n");
    }
    for (const std::string& u : r.warm_start->undetermined) absl::StrAppend(&out, "            not recorded: ", u, "\n");
  }
  const AllocatorStats& s = r.stats;
  absl::StrAppend(&out, absl::StrFormat("  peak      allocated %s, reserved %s, no-fragmentation bound %s\n",
                                        FormatBytes(s.peak_allocated), FormatBytes(s.peak_reserved),
                                        FormatBytes(r.no_fragmentation_peak)));
  absl::StrAppend(&out, absl::StrFormat("  fragment. reserved - allocated at the reserved peak %s; peak reserved - "
                                        "bound %s\n",
                                        FormatBytes(r.fragmentation_at_peak),
                                        r.oom.has_value() ? std::string("n/a (the replay ran out of memory)")
                                                          : FormatBytes(s.peak_reserved - r.no_fragmentation_peak)));
  absl::StrAppend(&out, absl::StrFormat("  segments  %d device mallocs, %d frees; %d held at the end; largest free "
                                        "block %s\n",
                                        s.device_mallocs, s.device_frees, s.segments,
                                        FormatBytes(s.largest_free_block)));
  if (r.graph_pools > 0) {
    absl::StrAppend(&out, absl::StrFormat("  graphs    %d CUDA graph captures: %d allocations served by their private "
                                          "pools, kept to the end (Note [CUDA graph private pools])\n",
                                          r.graph_pools, r.graph_pool_allocs));
  }
  if (r.offline) {
    absl::StrAppend(&out, "  offline planner: placed with the whole trace's lifetimes at the end; fragmentation is "
                          "peak heap - peak live\n");
  }
  if (r.oom.has_value()) {
    absl::StrAppend(&out, absl::StrFormat("  OOM       %s: %s requested, %s reserved, %s free "
                                          "(%d allocations failed)\n",
                                          OomWhere(*r.oom), FormatBytes(r.oom->requested), FormatBytes(r.oom->reserved),
                                          FormatBytes(r.oom->free), r.ooms));
  } else {
    absl::StrAppend(&out, "  OOM       none\n");
  }
  absl::StrAppend(&out, "predicted vs recorded totals:\n");
  if (r.offline) {
    absl::StrAppend(&out, "  not compared per event (offline planner)\n");
  } else {
    TotalsText(out, "allocated", r.allocated);
    TotalsText(out, "reserved", r.reserved);
    if (r.reserved_below_allocated > 0) {
      absl::StrAppend(&out, absl::StrFormat("            %d events record a Total Reserved below their Total "
                                            "Allocated, which no caching allocator records (every block lies in a "
                                            "segment): read as not recorded\n",
                                            r.reserved_below_allocated));
    }
    DeterminedText(out, r);
    MismatchRunsText(out, r);
  }
  if (r.addresses.has_value()) {
    const AddressCheck& c = *r.addresses;
    absl::StrAppend(&out, absl::StrFormat(
                              "addresses: %d of %d allocations at the recorded address (%s)\n"
                              "  start state rebuilt: %d segments, %d live blocks (%d sizes inferred, %d of "
                              "them grown from misplacements; %d replay passes%s)\n"
                              "  final segments %s the snapshot's (%d differ)\n",
                              c.at_recorded_address, c.allocations, Share(c.share()), c.restored_segments,
                              c.restored_blocks, c.inferred_block_sizes, c.grown_block_sizes, c.passes,
                              c.fixed_point ? "" : ", stopped before a fixed point",
                              c.final_segments_match ? "match" : "do not match", c.final_segment_differences));
    for (const std::string& m : c.misses) absl::StrAppend(&out, "  miss: ", m, "\n");
  }
  return out;
}

namespace {
void ResultJson(JsonWriter& w, const ReplayResult& r) {
  WriteVerdictJson(w, ReplayVerdict(r));  // Note [Verdict]: first, in replay and in compare rows
  const AllocatorStats& s = r.stats;
  w.String("source", r.source).String("format", r.format);
  w.BeginObject("allocator")
      .String("name", r.allocator)
      .Int("capacity_bytes", r.capacity.value())
      .String("capacity_source", r.capacity_source)
      .Int("peak_allocated_bytes", s.peak_allocated.value())
      .Int("peak_reserved_bytes", s.peak_reserved.value())
      .Int("no_fragmentation_peak_bytes", r.no_fragmentation_peak.value())
      .Int("fragmentation_at_peak_bytes", r.fragmentation_at_peak.value())
      .Int("device_mallocs", s.device_mallocs)
      .Int("device_frees", s.device_frees)
      .Int("segments_at_end", s.segments)
      .Int("largest_free_block_bytes", s.largest_free_block.value())
      .Int("alloc_retries", s.alloc_retries)
      .Int("ooms", r.ooms)
      .Bool("offline", r.offline)
      .Int("graph_pools", r.graph_pools)
      .Int("graph_pool_allocs", r.graph_pool_allocs)
      .EndObject();
  w.BeginObject("replay").Int("events", r.events);
  if (r.allocated.has_value()) {
    w.Double("allocated_exact_share", r.allocated->exact_share());
  } else {
    w.Null("allocated_exact_share");
  }
  if (r.reserved.has_value()) {
    w.Double("reserved_exact_share", r.reserved->exact_share());
  } else {
    w.Null("reserved_exact_share");
  }
  if (r.addresses.has_value()) {
    w.Double("address_exact_share", r.addresses->share());
  } else {
    w.Null("address_exact_share");
  }
  TotalsJson(w, "allocated", r.allocated);
  TotalsJson(w, "reserved", r.reserved);
  w.Int("reserved_below_allocated_events", r.reserved_below_allocated);
  MismatchRunsJson(w, r);
  if (r.addresses.has_value()) {
    const AddressCheck& c = *r.addresses;
    w.BeginObject("addresses")
        .Int("allocations", c.allocations)
        .Int("at_recorded_address", c.at_recorded_address)
        .Int("restored_segments", c.restored_segments)
        .Int("restored_blocks", c.restored_blocks)
        .Int("inferred_block_sizes", c.inferred_block_sizes)
        .Int("passes", c.passes)
        .Int("grown_block_sizes", c.grown_block_sizes)
        .Bool("fixed_point", c.fixed_point)
        .Bool("final_segments_match", c.final_segments_match)
        .Int("final_segment_differences", c.final_segment_differences);
    w.BeginArray("misses");
    for (const std::string& m : c.misses) w.String({}, m);
    w.EndArray().EndObject();
  } else {
    w.Null("addresses");
  }
  if (r.warm_start.has_value()) {
    const WarmStart& ws = *r.warm_start;
    w.BeginObject("warm_start")
        .Bool("applied", ws.applied)
        .String("why_not", ws.why_not)
        .Int("recorded_reserved_bytes", ws.recorded_reserved.value())
        .Int("small_segments", ws.small_segments)
        .Int("large_segments", ws.large_segments)
        .Int("inferred_bytes", ws.inferred_bytes.value())
        .Int("untouched_bytes", ws.untouched_bytes.value())
        .Int("restored_blocks", ws.restored_blocks)
        .Int("grown_segments", ws.grown_segments)
        .Int("joined_boundaries", ws.joined_boundaries)
        .Int("passes", ws.passes)
        .Int("determined_from_event", ws.determined_from)
        .Int("unknown_bytes", ws.unknown_bytes.value())
        .Int("unknown_in_proven_gaps_bytes", ws.proven_bytes.value())
        .Int("unknown_in_shown_gaps_bytes", ws.shown_bytes.value())
        .Int("unknown_in_chosen_gaps_bytes", ws.chosen_bytes.value())
        .Int("unknown_untouched_bytes", ws.movable_bytes.value())
        .Int("unknown_unplaced_bytes", ws.unplaced_bytes.value());
    w.BeginArray("undetermined");
    for (const std::string& u : ws.undetermined) w.String({}, u);
    w.EndArray().EndObject();
  } else {
    w.Null("warm_start");
  }
  w.String("start_state", r.start_state)
      .Int("allocs_live_through", r.conversion.allocs_live_through)
      .Int("bytes_live_through", r.conversion.bytes_live_through.value())
      .Int("allocs_before_recording", r.conversion.allocs_before_recording)
      .Int("bytes_before_recording", r.conversion.bytes_before_recording.value())
      .Int("preexisting_bytes", r.preexisting.value())
      .EndObject();
  if (r.oom.has_value()) {
    w.BeginObject("oom")
        .Int("event", r.oom->event)
        .Int("time_ns", r.oom->time.ns())
        .Int("requested_bytes", r.oom->requested.value())
        .Int("reserved_bytes", r.oom->reserved.value())
        .Int("free_bytes", r.oom->free.value())
        .EndObject();
  } else {
    w.Null("oom");
  }
}
}  // namespace

std::string RenderReplayJson(const ReplayResult& r) {
  return RenderReplayJson(r, [](JsonWriter&) {});
}

std::string RenderReplayJson(const ReplayResult& r, const std::function<void(JsonWriter&)>& more) {
  JsonWriter w;
  w.BeginObject();
  ResultJson(w, r);
  more(w);
  w.EndObject();
  return w.Finish();
}

std::string RenderAllocatorCompareText(const std::vector<ReplayResult>& rows) {
  std::string out;
  if (rows.empty()) return out;
  auto gib = [](Bytes b) { return absl::StrFormat("%.3f", b.GiB()); };
  absl::StrAppend(&out, "compare ", rows[0].source, ": ", rows[0].events, " memory events; capacity ",
                  FormatBytes(rows[0].capacity), " (", rows[0].capacity_source, ")\n");
  absl::StrAppend(&out, absl::StrFormat("%-18s %11s %11s %11s %11s %8s %11s  %s\n", "allocator (GiB)", "peak alloc",
                                        "peak resv", "frag@peak", "over bound", "mallocs", "largest free", "OOM"));
  for (const ReplayResult& r : rows) {
    const AllocatorStats& s = r.stats;
    absl::StrAppend(&out, absl::StrFormat("%-18s %11s %11s %11s %11s %8d %11s  %s\n", r.allocator,
                                          gib(s.peak_allocated), gib(s.peak_reserved), gib(r.fragmentation_at_peak),
                                          r.oom.has_value() ? std::string("n/a") : gib(s.peak_reserved - r.no_fragmentation_peak),
                                          s.device_mallocs,
                                          gib(s.largest_free_block),
                                          !r.oom.has_value()  ? std::string("no")
                                          : r.oom->event < 0 ? std::string("yes, at the first event (live before "
                                                                           "recording does not fit)")
                                                             : absl::StrCat("yes, at event ", r.oom->event)));
  }
  absl::StrAppend(&out, "no-fragmentation bound (peak live requested bytes): ",
                  FormatBytes(rows[0].no_fragmentation_peak),
                  "\nfrag@peak: reserved - allocated at the reserved peak; over bound: peak reserved - bound (n/a where "
                  "the replay ran out of memory: the failed requests count in the bound, not in reserved); "
                  "mallocs: segments obtained from the device (arena allocators: 1)\n");
  return out;
}

std::string RenderAllocatorCompareJson(const std::vector<ReplayResult>& rows) {
  JsonWriter w;
  w.BeginObject();
  w.BeginArray("allocators");
  for (const ReplayResult& r : rows) {
    w.BeginObject();
    ResultJson(w, r);
    w.EndObject();
  }
  w.EndArray();
  w.EndObject();
  return w.Finish();
}

}  // namespace gpusim
