#include "sim/replay/replay.h"

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <map>
#include <optional>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "sim/alloc/options.h"
#include "sim/import/import.h"
#include "sim/base/status.h"
#include "sim/replay/replay_internal.h"
#include "sim/trace/trace_io.h"
#include "sim/trace/validate.h"

namespace gpusim {
namespace replay_internal {

absl::Status ResolveCapacity(const RecordedMetadata& meta, ReplayOptions* o) {
  if (o->capacity > Bytes(0)) return absl::OkStatus();
  for (const RecordedDevice& d : meta.devices) {
    if (d.total_global_mem > Bytes(0) && (!o->device.has_value() || *o->device == d.id)) {
      o->capacity = d.total_global_mem;
      o->capacity_source = absl::StrCat("recorded totalGlobalMem of ", d.name);
      return absl::OkStatus();
    }
  }
  if (o->default_capacity <= Bytes(0)) {
    return absl::InvalidArgumentError(
        absl::StrCat(meta.source_file, ": the trace records no device memory size; give a device"));
  }
  o->capacity = o->default_capacity;
  o->capacity_source = o->default_capacity_source;
  return absl::OkStatus();
}

}  // namespace replay_internal

namespace {

using replay_internal::PeakTracker;
using replay_internal::ResolveCapacity;

void Compare(TotalsComparison& c, Bytes predicted, Bytes recorded, int64_t event, double& abs_sum) {
  ++c.compared;
  const int64_t err = std::llabs(predicted.value() - recorded.value());
  if (err == 0) {
    ++c.exact;
  } else if (c.first_mismatch < 0) {
    c.first_mismatch = event;
  }
  c.max_abs_error = std::max(c.max_abs_error, Bytes(err));
  abs_sum += static_cast<double>(err);
  c.mean_abs_error = abs_sum / static_cast<double>(c.compared);
  c.recorded_peak = std::max(c.recorded_peak, recorded);
  c.predicted_peak = std::max(c.predicted_peak, predicted);
}

// --- Replay of the recorded alloc/free stream --------------------------------

// One warm-start replay (Note [Growing inferred segments]): the segment
// growths earlier passes found, and those this pass finds.
struct WarmPass {
  std::map<int64_t, int64_t> grown_ends;  // segment begin → end
  std::map<int64_t, int64_t> found;
};

// The memory events of `trace` through options.allocator. `source[i]` is the
// recorded memory event native event i came from (-1: none); `recorded`, when
// set, supplies the recorded totals and times. Fills `r` (whose conversion,
// source and format the caller set).
absl::Status ReplayTraceInto(const MemoryOpStream& stream, const std::vector<int64_t>& source,
                             const RecordedTrace* recorded, const ReplayOptions& options, ReplayResult& r,
                             WarmPass* warm = nullptr) {
  auto allocator = MakeAllocator(options.allocator, options.capacity);
  if (!allocator.ok()) return allocator.status();
  Allocator& a = **allocator;
  r.allocator = std::string(a.name());
  r.capacity = options.capacity;
  r.capacity_source = options.capacity_source;
  r.preexisting = stream.preexisting;
  r.start_state = "cold (an empty allocator); blocks live before recording allocated first";
  static const std::vector<RecordedMemoryEvent> kNoEvents;
  const std::vector<RecordedMemoryEvent>& memory_events = recorded != nullptr ? recorded->memory_events : kNoEvents;

  // Which recorded events carry totals.
  bool any_allocated = false, any_reserved = false;
  for (const RecordedMemoryEvent& m : memory_events) {
    any_allocated |= m.total_allocated.has_value();
    any_reserved |= m.total_reserved.has_value();
  }
  // An offline planner places everything at the end: no per-event totals
  // to compare, and stats() only once (after Finish).
  const bool offline = a.PlansOffline();
  r.offline = offline;
  if (any_allocated && !offline) r.allocated.emplace();
  if (any_reserved && !offline) r.reserved.emplace();
  double alloc_abs = 0, reserved_abs = 0;
  PeakTracker peak;

  // Bytes live before recording and never freed, whose blocks the trace
  // never shows: one block, allocated first. For the caching allocator a
  // small-pool request when ≤ 1 MiB (a cold start: it shares its 2 MiB
  // segment with the first small requests, as the MI300X cold-start trace's
  // Total Reserved confirms); larger, a restored segment of exactly that
  // size, so the allocated total stays exact (a fresh 2 MiB-rounded segment
  // would keep an unsplit remainder); how those bytes lay in segments is
  // unknown.
  BufferId next_id = 0;
  for (const MemoryOp& e : stream.ops) next_id = std::max(next_id, e.buffer + 1);
  const bool caching = a.ModelsSegments();
  constexpr int64_t kSmallRequest = 1048576;  // CUDACachingAllocator.cpp kSmallSize
  // A warm start (Note [Warm start from recorded addresses]) restores the
  // blocks live at the start, Trace::preexisting included.
  absl::flat_hash_set<BufferId> restored;
  if (warm != nullptr && caching && recorded != nullptr) {
    int32_t device = 0;
    if (options.device.has_value()) {
      device = *options.device;
    } else if (!recorded->memory_events.empty()) {
      device = recorded->memory_events.front().device;
    }
    ASSIGN_OR_RETURN(WarmStart ws, RestoreWarmStart(*recorded, device, stream, next_id, warm->grown_ends, a, &restored));
    if (ws.applied) {
      ++next_id;
      r.start_state = absl::StrFormat(
          "warm, inferred from the recorded addresses and Total Reserved: %d small + %d large segments (%s), %s "
          "where no recorded block lies; %d blocks live at the start%s",
          ws.small_segments, ws.large_segments, FormatBytes(ws.inferred_bytes), FormatBytes(ws.untouched_bytes),
          ws.restored_blocks,
          ws.grown_segments == 0 ? ""
                                 : absl::StrFormat("; %d segments grown past their blocks by the recorded block sizes",
                                                   ws.grown_segments));
    }
    r.warm_start = std::move(ws);
  }
  const bool warm_applied = r.warm_start.has_value() && r.warm_start->applied;
  // Bytes that do not fit are an OOM before the first event (event -1), not
  // an error, so that `compare` still prints the strategy's row.
  auto oom_before_start = [&](Bytes requested) {
    ++r.ooms;
    const AllocatorStats s = a.stats();
    if (!r.oom.has_value()) r.oom = ReplayOom{-1, SimTime(-1), requested, s.reserved, options.capacity - s.reserved};
  };
  if (warm_applied) {
    // Trace::preexisting is in the restored state.
  } else if (caching && stream.preexisting > Bytes(kSmallRequest)) {
    const int64_t size = (stream.preexisting.value() + 511) / 512 * 512;
    if (Bytes(size) > options.capacity) {
      oom_before_start(stream.preexisting);
    } else {
      SegmentLayout seg;
      seg.address = 0x600000000000;  // below the simulated space's first-fit base
      seg.size = size;
      seg.blocks = {{seg.address, size, stream.preexisting.value(), next_id++}};
      absl::Status st = a.RestoreSegment(seg);
      if (!st.ok()) return st;
    }
  } else if (stream.preexisting > Bytes(0)) {
    if (!a.Alloc(next_id++, stream.preexisting, 0)) oom_before_start(stream.preexisting);
  }
  absl::flat_hash_map<BufferId, Bytes> placed;  // buffers the allocator holds
  // Note [CUDA graph private pools]: one allocator per capture window.
  const std::vector<CaptureWindow> no_captures;
  const std::vector<CaptureWindow>& captures =
      recorded != nullptr && !offline ? recorded->captures : no_captures;
  std::vector<std::unique_ptr<Allocator>> pools(captures.size());
  absl::flat_hash_map<BufferId, Allocator*> pool_of;  // buffers in a private pool
  auto usage = [&] {
    AllocatorUsage u = a.usage();
    for (const auto& p : pools) {
      if (p == nullptr) continue;
      const AllocatorUsage pu = p->usage();
      u.allocated += pu.allocated;
      u.reserved += pu.reserved;
    }
    return u;
  };
  auto capture_of = [&](size_t i) -> int64_t {  // the capture window native event i lies in, or -1
    if (captures.empty() || source[i] < 0) return -1;
    const SimTime t = memory_events[static_cast<size_t>(source[i])].time;
    for (size_t w = 0; w < captures.size(); ++w) {
      if ((captures[w].begin < SimTime(0) || captures[w].begin <= t) &&
          (captures[w].end < SimTime(0) || t <= captures[w].end)) {
        return static_cast<int64_t>(w);
      }
    }
    return -1;
  };
  AllocatorUsage combined_peak;
  const std::vector<MemoryOp>& ev = stream.ops;
  for (size_t i = 0; i < ev.size(); ++i) {
    const MemoryOp& e = ev[i];
    if (e.type == EventType::kAlloc) {
      const int64_t w = restored.contains(e.buffer) ? -1 : capture_of(i);
      bool ok = false;
      if (w >= 0) {
        std::unique_ptr<Allocator>& pool = pools[static_cast<size_t>(w)];
        if (pool == nullptr) {
          ASSIGN_OR_RETURN(pool, MakeAllocator(options.allocator, options.capacity));
          ++r.graph_pools;
        }
        ok = pool->Alloc(e.buffer, e.size, e.stream);
        if (ok && usage().reserved > options.capacity) {  // the pools share the device
          pool->Free(e.buffer);
          ok = false;
        }
        if (ok) {
          pool_of[e.buffer] = pool.get();
          ++r.graph_pool_allocs;
        }
      }
      if (restored.contains(e.buffer)) {
        placed[e.buffer] = e.size;
      } else if (w >= 0 ? ok : a.Alloc(e.buffer, e.size, e.stream)) {
        placed[e.buffer] = e.size;
        // Note [Growing inferred segments]: Kineto records block sizes.
        if (warm_applied && w < 0 && source[i] >= 0 && recorded->metadata.format == "kineto") {
          const RecordedMemoryEvent& m = memory_events[static_cast<size_t>(source[i])];
          const std::optional<uint64_t> at = a.AddressOf(e.buffer);
          if (m.address.has_value() && at.has_value() && static_cast<int64_t>(*at) == *m.address) {
            const int64_t recorded_block = (e.size.value() + 511) / 512 * 512;
            if (auto g = SegmentGrowthFor(*r.warm_start, *m.address, recorded_block, a.BlockSizeOf(e.buffer)->value())) {
              int64_t& end = warm->found[g->first];
              end = std::max(end, g->second);
            }
          }
        }
      } else {
        ++r.ooms;
        if (!r.oom.has_value()) {
          const AllocatorStats s = a.stats();
          ReplayOom o;
          o.event = source[i];
          o.time = o.event >= 0 && recorded != nullptr ? memory_events[static_cast<size_t>(o.event)].time
                                                       : SimTime(-1);
          o.requested = e.size;
          o.reserved = s.reserved;
          o.free = options.capacity - s.reserved;
          r.oom = o;
        }
      }
    } else if (e.type == EventType::kFree) {
      auto it = placed.find(e.buffer);
      if (it != placed.end()) {
        // A private pool keeps its freed blocks for the graph's later use.
        if (auto p = pool_of.find(e.buffer); p != pool_of.end()) {
          p->second->Free(e.buffer);
          pool_of.erase(p);
        } else {
          a.Free(e.buffer);
        }
        placed.erase(it);
      }
    } else {
      continue;
    }
    if (offline) continue;  // placed at Finish; see below
    const AllocatorUsage s = pools.empty() ? a.usage() : usage();  // cheap: stats() may scan free lists
    peak.Observe(s);
    if (!pools.empty()) {
      combined_peak.allocated = std::max(combined_peak.allocated, s.allocated);
      combined_peak.reserved = std::max(combined_peak.reserved, s.reserved);
    }
    // Compare after the last native event of one recorded event.
    const int64_t src = source[i];
    if (src < 0 || (i + 1 < ev.size() && source[i + 1] == src)) continue;
    ++r.events;
    if (recorded == nullptr) {
      if (options.keep_series) r.series.push_back({src, SimTime(-1), s.allocated, s.reserved, {}, {}});
      continue;
    }
    const RecordedMemoryEvent& m = memory_events[static_cast<size_t>(src)];
    if (m.total_allocated.has_value()) Compare(*r.allocated, s.allocated, *m.total_allocated, src, alloc_abs);
    if (m.total_reserved.has_value()) Compare(*r.reserved, s.reserved, *m.total_reserved, src, reserved_abs);
    if (options.keep_series) {
      r.series.push_back({src, m.time, s.allocated, s.reserved, m.total_allocated, m.total_reserved});
    }
  }
  // Live requested bytes for the no-fragmentation bound: recompute exactly.
  {
    absl::flat_hash_map<BufferId, Bytes> sizes;
    Bytes cur = stream.preexisting, best = cur;
    for (const MemoryOp& e : ev) {
      if (e.type == EventType::kAlloc) {
        sizes[e.buffer] = e.size;
        cur += e.size;
        best = std::max(best, cur);
      } else if (e.type == EventType::kFree) {
        cur -= sizes[e.buffer];
      }
    }
    r.no_fragmentation_peak = best;
  }
  RETURN_IF_ERROR(a.Finish());
  r.stats = a.stats();
  for (const auto& p : pools) {
    if (p == nullptr) continue;
    const AllocatorStats ps = p->stats();
    r.stats.allocated += ps.allocated;
    r.stats.reserved += ps.reserved;
    r.stats.device_mallocs += ps.device_mallocs;
    r.stats.device_frees += ps.device_frees;
    r.stats.segments += ps.segments;
    r.stats.peak_allocated = std::max(r.stats.peak_allocated, combined_peak.allocated);
    r.stats.peak_reserved = std::max(r.stats.peak_reserved, combined_peak.reserved);
  }
  if (offline) {
    r.events = 0;
    for (size_t i = 0; i < ev.size(); ++i) {
      if (source[i] >= 0 && (i + 1 == ev.size() || source[i + 1] != source[i])) ++r.events;
    }
    peak.Observe(r.stats);  // the plan's heap at its peak
    r.fragmentation_at_peak = r.stats.peak_reserved - r.stats.peak_allocated;
  } else {
    r.fragmentation_at_peak = peak.fragmentation;
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ReplayResult> ReplayRecorded(const RecordedTrace& recorded, const ReplayOptions& options_in) {
  ReplayOptions options = options_in;
  RETURN_IF_ERROR(ResolveCapacity(recorded.metadata, &options));
  std::vector<int64_t> source;
  ToNativeOptions to_native;
  to_native.device = options.device;
  to_native.include_gpu_ops = false;
  to_native.source_index = &source;
  ReplayResult r;
  r.source = recorded.metadata.source_file;
  r.format = recorded.metadata.format;
  ASSIGN_OR_RETURN(MemoryOpStream trace, ToMemoryOps(recorded, to_native, &r.conversion));
  RETURN_IF_ERROR(ReplayTraceInto(trace, source, &recorded, options, r));
  // Does the cold start explain the first event's Total Reserved? If not,
  // try the warm start (Note [Warm start from recorded addresses]).
  if (options.infer_warm_start && r.allocator == "pytorch_caching" && r.reserved.has_value() &&
      r.reserved->first_mismatch >= 0) {
    int64_t first = -1;
    for (size_t i = 0; i < recorded.memory_events.size() && first < 0; ++i) {
      const RecordedMemoryEvent& m = recorded.memory_events[i];
      if (m.total_reserved.has_value() && (!options.device.has_value() || m.device == *options.device) &&
          (m.kind == MemoryEventKind::kAlloc || m.kind == MemoryEventKind::kFree)) {
        first = static_cast<int64_t>(i);
      }
    }
    if (first == r.reserved->first_mismatch) {
      // Replay from the inferred state, growing its segments to a fixed
      // point (Note [Growing inferred segments]).
      WarmPass pass;
      constexpr int64_t kMaxPasses = 64;
      for (int64_t n = 1;; ++n) {
        ReplayResult w;
        w.source = r.source;
        w.format = r.format;
        w.conversion = r.conversion;
        pass.found.clear();
        RETURN_IF_ERROR(ReplayTraceInto(trace, source, &recorded, options, w, &pass));
        if (!w.warm_start.has_value() || !w.warm_start->applied) {
          r.warm_start = std::move(w.warm_start);
          break;
        }
        // Keep the growths that fit in the spare reserved bytes together.
        Bytes spare = w.warm_start->spare_bytes;
        bool changed = false;
        std::map<int64_t, int64_t> ends;  // this pass's segments
        for (const InferredSegment& s : w.warm_start->segments) ends[s.begin] = s.end;
        for (const auto& [begin, end] : pass.found) {
          const int64_t now = ends[begin];
          if (end > now && Bytes(end - now) <= spare) {
            spare -= Bytes(end - now);
            pass.grown_ends[begin] = end;
            changed = true;
          }
        }
        w.warm_start->passes = n;
        if (!changed || n == kMaxPasses) return w;
      }
    }
  }
  return r;
}

absl::StatusOr<ReplayResult> ReplayNativeTrace(const Trace& trace, const std::string& source_name,
                                               const ReplayOptions& options_in) {
  RETURN_IF_ERROR(ValidateTrace(trace));
  ReplayOptions options = options_in;
  RecordedMetadata meta;
  meta.source_file = source_name;
  RETURN_IF_ERROR(ResolveCapacity(meta, &options));
  std::vector<int64_t> source;
  const MemoryOpStream ops = MemoryOpsOf(trace, &source);
  ReplayResult r;
  r.source = source_name;
  r.format = "gpusim-trace";
  RETURN_IF_ERROR(ReplayTraceInto(ops, source, nullptr, options, r));
  r.start_state = "cold (an empty allocator); Trace::preexisting allocated first";
  return r;
}

// Note [CUDA graph private pools]
// While a CUDA/HIP graph is captured, the caching allocator serves the
// capturing stream from the graph's private memory pool (PyTorch
// CUDACachingAllocator.cpp Note [Interaction with CUDA graph capture]:
// beginAllocateToPool / get_pool picks the PrivatePool of the capture's
// MempoolId, with its own small and large BlockPools and segments). Blocks
// freed into a private pool are reused only by that pool, and its segments
// are not released (release_cached_blocks skips pools in use) while the
// graph lives — which a recording does not show ending, so here it lives to
// the end. A recording shows captures as the runtime calls
// cudaStreamBeginCapture / cudaStreamEndCapture (hip*), paired in time order
// (RecordedTrace::captures); every alloc recorded inside a window is served
// by that window's pool — one allocator of the chosen kind per window (pools
// shared between graphs through graph_pool_handle() are not recorded and not
// modelled) — its frees go back to it, and reserved and allocated are the
// sums over the main pool and the private ones, all bounded by the capacity.
// Offline planners see no pools (they place the whole trace at once).

absl::StatusOr<LoadedRecording> LoadRecording(const std::string& path) {
  LoadedRecording out;
  out.path = path;
  {
    std::ifstream in(path);
    if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot open"));
    std::string first;
    while (std::getline(in, first)) {  // the native format's header, after blank and comment lines
      const size_t b = first.find_first_not_of(" \t\r");
      if (b == std::string::npos || first[b] == '#') continue;
      if (first.compare(b, 12, "gpusim-trace") == 0) out.format = "gpusim-trace";
      break;
    }
  }
  if (out.format == "gpusim-trace") {
    ASSIGN_OR_RETURN(Trace t, ReadTraceFile(path));
    out.native = std::move(t);
    return out;
  }
  ASSIGN_OR_RETURN(out.format, DetectRecordedFormat(path));
  if (out.format == "snapshot") {
    ASSIGN_OR_RETURN(RecordedSnapshot snap, LoadSnapshot(path));
    out.snapshot = std::move(snap);
    return out;
  }
  ASSIGN_OR_RETURN(RecordedTrace t, ImportRecordedTrace(path, out.format));
  out.recorded = std::move(t);
  return out;
}

absl::StatusOr<ReplayResult> ReplayLoaded(const LoadedRecording& loaded, const ReplayOptions& options) {
  if (loaded.snapshot.has_value()) return ReplaySnapshot(*loaded.snapshot, options);
  if (options.check_addresses) {
    return absl::InvalidArgumentError(absl::StrCat(
        loaded.path, ": --check-addresses needs a memory snapshot (its segments give the allocator state); this is a ",
        loaded.format, " trace"));
  }
  if (loaded.native.has_value()) return ReplayNativeTrace(*loaded.native, loaded.path, options);
  return ReplayRecorded(loaded.recorded, options);
}

absl::StatusOr<ReplayResult> ReplayFile(const std::string& path, const ReplayOptions& options) {
  ASSIGN_OR_RETURN(LoadedRecording loaded, LoadRecording(path));
  return ReplayLoaded(loaded, options);
}

}  // namespace gpusim
