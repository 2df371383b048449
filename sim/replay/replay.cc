#include "sim/replay/replay.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <set>
#include <optional>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "sim/alloc/options.h"
#include "sim/import/import.h"
#include "sim/base/json_writer.h"
#include "sim/base/status.h"
#include "sim/trace/trace_io.h"
#include "sim/trace/validate.h"

namespace gpusim {
namespace {

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

// Fragmentation at the reserved peak: reserved - allocated at the moment
// reserved is at its peak and, among such moments (a warm cache holds its
// peak for long), allocated is highest — the "reserved but unallocated"
// bytes when the cache was used most fully.
struct PeakTracker {
  Bytes peak_reserved{-1};
  Bytes allocated_then{-1};
  Bytes fragmentation;
  template <typename Usage>  // AllocatorStats or AllocatorUsage
  void Observe(const Usage& s) {
    if (s.reserved > peak_reserved || (s.reserved == peak_reserved && s.allocated > allocated_then)) {
      peak_reserved = s.reserved;
      allocated_then = s.allocated;
      fragmentation = s.reserved - s.allocated;
    }
  }
};

// Fills options->capacity when it is 0 (see ReplayOptions::capacity).
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

}  // namespace

// --- Replay of the recorded alloc/free stream --------------------------------

namespace {

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
absl::Status ReplayTraceInto(const Trace& trace_in, const std::vector<int64_t>& source,
                             const RecordedTrace* recorded, const ReplayOptions& options, ReplayResult& r,
                             WarmPass* warm = nullptr) {
  const Trace* trace = &trace_in;
  auto allocator = MakeAllocator(options.allocator, options.capacity);
  if (!allocator.ok()) return allocator.status();
  Allocator& a = **allocator;
  r.allocator = std::string(a.name());
  r.capacity = options.capacity;
  r.capacity_source = options.capacity_source;
  r.preexisting = trace->preexisting;
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
  for (const TraceEvent& e : trace->events) next_id = std::max(next_id, e.buffer + 1);
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
    ASSIGN_OR_RETURN(WarmStart ws, RestoreWarmStart(*recorded, device, *trace, next_id, warm->grown_ends, a, &restored));
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
  } else if (caching && trace->preexisting > Bytes(kSmallRequest)) {
    const int64_t size = (trace->preexisting.value() + 511) / 512 * 512;
    if (Bytes(size) > options.capacity) {
      oom_before_start(trace->preexisting);
    } else {
      SegmentLayout seg;
      seg.address = 0x600000000000;  // below the simulated space's first-fit base
      seg.size = size;
      seg.blocks = {{seg.address, size, trace->preexisting.value(), next_id++}};
      absl::Status st = a.RestoreSegment(seg);
      if (!st.ok()) return st;
    }
  } else if (trace->preexisting > Bytes(0)) {
    if (!a.Alloc(next_id++, trace->preexisting, 0)) oom_before_start(trace->preexisting);
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
  const std::vector<TraceEvent>& ev = trace->events;
  for (size_t i = 0; i < ev.size(); ++i) {
    const TraceEvent& e = ev[i];
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
    Bytes cur = trace->preexisting, best = cur;
    for (const TraceEvent& e : ev) {
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
  ASSIGN_OR_RETURN(Trace trace, ToNativeTrace(recorded, to_native, &r.conversion));
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
  std::vector<int64_t> source(trace.events.size(), -1);
  for (size_t i = 0; i < trace.events.size(); ++i) {
    const EventType t = trace.events[i].type;
    if (t == EventType::kAlloc || t == EventType::kFree) source[i] = static_cast<int64_t>(i);
  }
  ReplayResult r;
  r.source = source_name;
  r.format = "gpusim-trace";
  RETURN_IF_ERROR(ReplayTraceInto(trace, source, nullptr, options, r));
  r.start_state = "cold (an empty allocator); Trace::preexisting allocated first";
  return r;
}

// --- Snapshot replay with address checking -----------------------------------

// Note [Rebuilding the window's start]
// A snapshot's trace is a window (the ring buffer of
// _record_memory_history(max_entries=...)); its `segments` are the state at
// the end. The state at the window's start follows by undoing the trace
// backwards from the end:
//   alloc at A          → the block at A did not exist yet (was free);
//   free_completed at A → the block at A was allocated before;
//   segment_alloc at A  → the segment did not exist;
//   segment_free at A   → the segment existed (2 MiB ⇒ small pool: large
//                          segments are ≥ 10 MiB, PyTorch
//                          CUDACachingAllocator.cpp get_allocation_size).
// Sizes: blocks still allocated at the end have their exact block size in
// `segments`; a block allocated before the window and freed inside it has
// only its requested size in the trace, so its block size is inferred: the
// rounded request (round_size), which is the block size unless the block
// kept an unsplit remainder (large pool, remainder ≤ 1 MiB; should_split).
// A guess that would overlap the next known block is cut at it. How a
// wrong guess shows, and is corrected, is Note [Growing guessed blocks to a
// fixed point].
// Frees are routed by allocation identity (recorded address at alloc time →
// our buffer id), so one misplaced block does not misroute later frees.
// A block is reusable at free_completed (free_requested only marks it
// pending: the stream may still use it).

// Note [Growing guessed blocks to a fixed point]
// PyTorch's allocator always hands out the *front* of the free block it
// picks (CUDACachingAllocator.cpp, DeviceCachingAllocator::malloc →
// alloc_found_block: the split remainder is the block's tail), and in the
// large pool it leaves a remainder ≤ kSmallSize (1 MiB) unsplit
// (should_split), so a block can be up to 1 MiB larger than its rounded
// request. A guessed block that is too small leaves a free block after it
// that starts too early and is too big; best fit (get_free_block: the
// smallest block ≥ the request, lower_bound on the size-ordered pool) can
// then pick a different free block — often in another segment — and the
// layouts diverge. The recording tells: when an allocation's recorded
// address lies inside one of the model's free blocks (as it was before the
// model placed that allocation), at most 1 MiB past the end of a guessed
// block that the free block follows, the real block ended at the recorded
// address (the allocation was carved from the front of the real free
// block). Every such growth found in a pass is kept (a block only ever
// grows), and the replay runs again until a pass finds none: a fixed point
// (bounded by kMaxPasses). AddressCheck::grown_block_sizes counts the sizes
// inferred this way.
namespace {

constexpr int64_t kSmallSegment = 2097152;  // kSmallBuffer
constexpr int64_t kSmallSize = 1048576;     // kSmallSize

struct InitBlock {
  int64_t size = 0;
  int64_t requested = 0;
  bool exact = false;
  int64_t free_event = -1;  // the free_completed that ends it (inexact ones)
};
struct InitSegment {
  int64_t size = 0;
  int64_t stream = 0;
  bool small = false;
};

struct SnapshotWindow {
  std::vector<const RecordedMemoryEvent*> events;  // this device, in order
  std::vector<int64_t> index;                      // into trace.memory_events
};

struct AddressReplay {
  const RecordedSnapshot& snap;
  const ReplayOptions& options;
  const Allocator& rounding;  // round_size under the options (Allocator::RoundedBlockSize)
  int32_t device = 0;
  SnapshotWindow window;
  std::map<int64_t, StreamId> streams;  // recorded stream → dense id

  StreamId Stream(int64_t rec) {
    auto [it, inserted] = streams.emplace(rec, static_cast<StreamId>(streams.size()));
    return it->second;
  }

  // The start state; `grown` maps a free_completed event index to the block
  // size inferred for it.
  absl::Status StartState(const std::map<int64_t, int64_t>& grown, std::map<uint64_t, InitSegment>* segs,
                          std::map<uint64_t, InitBlock>* blocks, int64_t* inferred) {
    segs->clear();
    blocks->clear();
    for (const SnapshotSegment& s : snap.segments) {
      if (s.device != device) continue;
      if (s.is_expandable) return absl::UnimplementedError("replaying expandable segments is not modelled yet");
      (*segs)[static_cast<uint64_t>(s.address)] = {s.total_size.value(), s.stream, s.segment_type == "small"};
      for (const SnapshotBlock& b : s.blocks) {
        if (b.state == "inactive") continue;
        (*blocks)[static_cast<uint64_t>(b.address)] = {b.size.value(), b.requested_size.value(), true, -1};
      }
    }
    for (size_t k = window.events.size(); k-- > 0;) {
      const RecordedMemoryEvent& m = *window.events[k];
      if (!m.address.has_value()) {
        return absl::InvalidArgumentError(absl::StrCat(snap.trace.metadata.source_file, ": trace entry ",
                                                       window.index[k], " has no address"));
      }
      const uint64_t addr = static_cast<uint64_t>(*m.address);
      switch (m.kind) {
        case MemoryEventKind::kAlloc:
          blocks->erase(addr);
          break;
        case MemoryEventKind::kFreeCompleted: {
          auto g = grown.find(window.index[k]);
          const int64_t size = g != grown.end() ? g->second : rounding.RoundedBlockSize(m.size).value();
          (*blocks)[addr] = {size, m.size.value(), false, window.index[k]};
          break;
        }
        case MemoryEventKind::kSegmentAlloc:
          segs->erase(addr);
          break;
        case MemoryEventKind::kSegmentFree:
          (*segs)[addr] = {m.size.value(), m.stream, m.size.value() == kSmallSegment};
          break;
        case MemoryEventKind::kSegmentMap:
        case MemoryEventKind::kSegmentUnmap:
          return absl::UnimplementedError("replaying expandable segments is not modelled yet");
        default:
          break;
      }
    }
    // Cut guesses at the next block or the segment's end.
    *inferred = 0;
    for (auto it = blocks->begin(); it != blocks->end(); ++it) {
      if (!it->second.exact) ++*inferred;
      auto seg = segs->upper_bound(it->first);
      if (seg == segs->begin()) {
        return absl::InvalidArgumentError(absl::StrFormat("%s: block at 0x%x lies in no segment",
                                                          snap.trace.metadata.source_file, it->first));
      }
      --seg;
      uint64_t limit = seg->first + static_cast<uint64_t>(seg->second.size);
      auto next = std::next(it);
      if (next != blocks->end()) limit = std::min(limit, next->first);
      if (it->first + static_cast<uint64_t>(it->second.size) > limit) {
        if (it->second.exact) {
          return absl::InvalidArgumentError(absl::StrFormat("%s: block at 0x%x overlaps the next block",
                                                            snap.trace.metadata.source_file, it->first));
        }
        it->second.size = static_cast<int64_t>(limit - it->first);
      }
    }
    return absl::OkStatus();
  }

  struct Pass {
    AddressCheck check;
    ReplayResult result;
    // Misplacements explained by a guessed block (Note [Growing guessed
    // blocks to a fixed point]): its free event → the size it grows to.
    std::map<int64_t, int64_t> growths;
  };

  // Note [Growing guessed blocks to a fixed point]: the model just placed
  // buffer `placed` elsewhere than the recorded address `addr`. If, before
  // that placement, `addr` lay inside a free block that directly follows a
  // guessed block and starts at most kSmallSize below `addr`, returns the
  // guessed block's address and the size that makes it end at `addr`.
  static std::optional<std::pair<uint64_t, int64_t>> GrowthFor(
      const Allocator& a, const absl::flat_hash_map<BufferId, uint64_t>& guessed_at,
      BufferId placed, uint64_t addr) {
    for (const SegmentLayout& seg : a.Segments()) {
      if (addr < seg.address || addr >= seg.address + static_cast<uint64_t>(seg.size)) continue;
      if (seg.small) return std::nullopt;  // small-pool blocks are always split
      const auto& b = seg.blocks;
      for (size_t i = 0; i < b.size(); ++i) {
        auto is_free = [&](size_t j) { return b[j].buffer < 0 || b[j].buffer == placed; };
        if (!is_free(i) || (i > 0 && is_free(i - 1))) continue;  // i starts a free run
        size_t j = i;
        while (j + 1 < b.size() && is_free(j + 1)) ++j;
        const uint64_t run_start = b[i].address;
        const uint64_t run_end = b[j].address + static_cast<uint64_t>(b[j].size);
        if (addr <= run_start || addr >= run_end) continue;
        if (i == 0 || addr - run_start > static_cast<uint64_t>(kSmallSize)) return std::nullopt;
        auto g = guessed_at.find(b[i - 1].buffer);
        if (g == guessed_at.end()) return std::nullopt;
        return std::make_pair(g->second, static_cast<int64_t>(addr - g->second));
      }
      return std::nullopt;
    }
    return std::nullopt;
  }

  absl::StatusOr<Pass> Run(const std::map<int64_t, int64_t>& grown) {
    std::map<uint64_t, InitSegment> segs;
    std::map<uint64_t, InitBlock> blocks;
    int64_t inferred = 0;
    absl::Status st = StartState(grown, &segs, &blocks, &inferred);
    if (!st.ok()) return st;
    Pass pass;
    pass.check.inferred_block_sizes = inferred;
    ASSIGN_OR_RETURN(std::unique_ptr<Allocator> made, MakeAllocator(options.allocator, options.capacity));
    Allocator& a = *made;
    // Restore.
    absl::flat_hash_map<uint64_t, BufferId> live;  // recorded address → id
    absl::flat_hash_map<BufferId, int64_t> requested_of;
    absl::flat_hash_map<BufferId, uint64_t> guessed_at;  // inexact restored blocks
    BufferId next_id = 0;
    for (const auto& [addr, seg] : segs) {
      SegmentLayout layout;
      layout.address = addr;
      layout.size = seg.size;
      layout.stream = Stream(seg.stream);
      layout.small = seg.small;
      uint64_t at = addr;
      const uint64_t end = addr + static_cast<uint64_t>(seg.size);
      for (auto it = blocks.lower_bound(addr); it != blocks.end() && it->first < end; ++it) {
        if (it->first > at) layout.blocks.push_back({at, static_cast<int64_t>(it->first - at), 0, -1});
        const BufferId id = next_id++;
        layout.blocks.push_back({it->first, it->second.size, it->second.requested, id});
        live[it->first] = id;
        requested_of[id] = it->second.requested;
        if (!it->second.exact) guessed_at[id] = it->first;
        at = it->first + static_cast<uint64_t>(it->second.size);
        ++pass.check.restored_blocks;
      }
      if (at < end) layout.blocks.push_back({at, static_cast<int64_t>(end - at), 0, -1});
      st = a.RestoreSegment(layout);
      if (!st.ok()) return absl::InvalidArgumentError(absl::StrCat(snap.trace.metadata.source_file, ": ", st.message()));
      ++pass.check.restored_segments;
    }
    if (const AllocatorUsage u = a.usage(); u.reserved > options.capacity) {
      // The recorded segments exceed the capacity: an OOM before the first
      // event; the replay goes on from the recorded state.
      ++pass.result.ooms;
      pass.result.oom = ReplayOom{-1, SimTime(-1), u.reserved, Bytes(0), options.capacity};
    }
    PeakTracker peak;
    peak.Observe(a.usage());
    Bytes cur_requested;
    for (const auto& [addr, b] : blocks) cur_requested += Bytes(b.requested);
    Bytes best_requested = cur_requested;
    for (size_t k = 0; k < window.events.size(); ++k) {
      const RecordedMemoryEvent& m = *window.events[k];
      const uint64_t addr = static_cast<uint64_t>(*m.address);
      const int64_t idx = window.index[k];
      switch (m.kind) {
        case MemoryEventKind::kAlloc: {
          const BufferId id = next_id++;
          ++pass.check.allocations;
          ++pass.result.events;
          if (!a.Alloc(id, m.size, Stream(m.stream))) {
            ++pass.result.ooms;
            if (!pass.result.oom.has_value()) {
              const AllocatorStats s = a.stats();
              pass.result.oom = ReplayOom{idx, m.time, m.size, s.reserved, options.capacity - s.reserved};
            }
            if (pass.check.misses.size() < 10) {
              pass.check.misses.push_back(absl::StrFormat("entry %d: alloc of %d bytes failed (out of memory)", idx,
                                                          m.size.value()));
            }
            break;
          }
          live[addr] = id;
          requested_of[id] = m.size.value();
          cur_requested += m.size;
          best_requested = std::max(best_requested, cur_requested);
          const uint64_t got = *a.AddressOf(id);
          if (got == addr) {
            ++pass.check.at_recorded_address;
          } else {
            if (pass.check.misses.size() < 10) {
              pass.check.misses.push_back(absl::StrFormat(
                  "entry %d: alloc of %d bytes at 0x%x, recorded at 0x%x", idx, m.size.value(), got, addr));
            }
            // Explained by a guessed block that was really larger?
            if (auto g = GrowthFor(a, guessed_at, id, addr)) {
              auto it = blocks.find(g->first);
              if (it != blocks.end() && it->second.free_event >= 0 && g->second > it->second.size) {
                pass.growths.try_emplace(it->second.free_event, g->second);
              }
            }
          }
          break;
        }
        case MemoryEventKind::kFreeCompleted: {
          auto it = live.find(addr);
          if (it == live.end()) {
            return absl::InvalidArgumentError(absl::StrFormat(
                "%s: trace entry %d frees 0x%x, which is not allocated", snap.trace.metadata.source_file, idx, addr));
          }
          ++pass.result.events;
          a.Free(it->second);
          cur_requested -= Bytes(requested_of[it->second]);
          requested_of.erase(it->second);
          guessed_at.erase(it->second);
          live.erase(it);
          break;
        }
        case MemoryEventKind::kFreeRequested:
          ++pass.result.events;
          break;
        case MemoryEventKind::kSegmentAlloc:
          a.SetNextSegmentAddress(addr);
          break;
        case MemoryEventKind::kSegmentFree: {
          // A release our model has not made itself: torch.cuda.empty_cache().
          bool held = false;
          for (const SegmentLayout& s : a.Segments()) held |= s.address == addr;
          if (held) a.ReleaseCache();
          break;
        }
        default:
          break;
      }
      peak.Observe(a.usage());
    }
    // The end state against the snapshot's segments.
    std::map<uint64_t, std::vector<std::pair<uint64_t, int64_t>>> want, got;  // segment → (addr, size) allocated
    std::map<uint64_t, int64_t> want_size, got_size;
    for (const SnapshotSegment& s : snap.segments) {
      if (s.device != device) continue;
      want_size[static_cast<uint64_t>(s.address)] = s.total_size.value();
      auto& v = want[static_cast<uint64_t>(s.address)];
      for (const SnapshotBlock& b : s.blocks) {
        if (b.state != "inactive") v.push_back({static_cast<uint64_t>(b.address), b.size.value()});
      }
    }
    for (const SegmentLayout& s : a.Segments()) {
      got_size[s.address] = s.size;
      auto& v = got[s.address];
      for (const SegmentLayout::Block& b : s.blocks) {
        if (b.buffer >= 0) v.push_back({b.address, b.size});
      }
    }
    int64_t diffs = 0;
    for (const auto& [addr, size] : want_size) {
      auto g = got_size.find(addr);
      if (g == got_size.end() || g->second != size || got[addr] != want[addr]) ++diffs;
    }
    for (const auto& [addr, size] : got_size) diffs += want_size.contains(addr) ? 0 : 1;
    pass.check.final_segment_differences = diffs;
    pass.check.final_segments_match = diffs == 0;
    pass.result.stats = a.stats();
    pass.result.fragmentation_at_peak = peak.fragmentation;
    pass.result.no_fragmentation_peak = best_requested;
    return pass;
  }
};

}  // namespace

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

// Note [One start state for snapshots]
// Through pytorch_caching a snapshot is always replayed from the start state
// rebuilt from its final segments (Note [Rebuilding the window's start]), with
// or without --check-addresses: that state is what the real allocator held,
// so the reserved bytes start at the recorded segments' total and, when no
// segment was freed, peak there too. Other allocators have no such state to
// start from; they replay the import (sim/import/recorded_trace.h
// ToNativeTrace) cold, with the blocks live through the window (Note [Blocks
// live through the window] in snapshot.cc) and those freed in it allocated
// first. --check-addresses only adds the address report.
absl::StatusOr<ReplayResult> ReplaySnapshot(const RecordedSnapshot& snapshot, const ReplayOptions& options_in) {
  if (!options_in.check_addresses && options_in.allocator.impl != "pytorch_caching") {
    return ReplayRecorded(snapshot.trace, options_in);
  }
  ReplayOptions options = options_in;
  absl::Status cap = ResolveCapacity(snapshot.trace.metadata, &options);
  if (!cap.ok()) return cap;
  // The capacity and stream ids must be in the ranges the caching
  // allocator packs (Note [Huge requests]; trace.h, kMaxStreamId): say so
  // here, naming the file.
  if (options.capacity <= Bytes(0) || options.capacity.value() >= kMaxDeviceBytes) {
    return absl::InvalidArgumentError(absl::StrCat(snapshot.trace.metadata.source_file, ": device capacity ",
                                                   options.capacity.value(), " is not in (0, 2^46) bytes"));
  }
  {
    std::set<int64_t> streams;
    for (const RecordedMemoryEvent& m : snapshot.trace.memory_events) streams.insert(m.stream);
    for (const SnapshotSegment& s : snapshot.segments) streams.insert(s.stream);
    if (streams.size() > static_cast<size_t>(kMaxStreamId) + 1) {
      return absl::InvalidArgumentError(absl::StrCat(snapshot.trace.metadata.source_file, ": ", streams.size(),
                                                     " streams; at most ", kMaxStreamId + 1, " are replayed"));
    }
  }
  if (options.allocator.impl != "pytorch_caching") {
    return absl::InvalidArgumentError(absl::StrCat("--check-addresses replays the snapshot through pytorch_caching, "
                                                   "whose addresses it can compare; got --allocator ",
                                                   options.allocator.impl));
  }
  ASSIGN_OR_RETURN(std::unique_ptr<Allocator> rounding, MakeAllocator(options.allocator, options.capacity));
  GPUSIM_CHECK(rounding->ModelsSegments());
  AddressReplay ar{snapshot, options, *rounding, 0, {}, {}};
  // The device.
  std::map<int32_t, int64_t> devices;
  for (const RecordedMemoryEvent& m : snapshot.trace.memory_events) ++devices[m.device];
  for (const SnapshotSegment& s : snapshot.segments) devices.emplace(s.device, 0);
  if (options.device.has_value()) {
    ar.device = *options.device;
  } else if (devices.size() > 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(snapshot.trace.metadata.source_file, ": the snapshot has several devices; choose one"));
  } else if (!devices.empty()) {
    ar.device = devices.begin()->first;
  }
  for (size_t i = 0; i < snapshot.trace.memory_events.size(); ++i) {
    const RecordedMemoryEvent& m = snapshot.trace.memory_events[i];
    if (m.device != ar.device) continue;
    ar.window.events.push_back(&m);
    ar.window.index.push_back(static_cast<int64_t>(i));
  }
  // Replay; grow the guesses that misplacements explain and replay again,
  // to a fixed point (Note [Growing guessed blocks to a fixed point]).
  std::map<int64_t, int64_t> grown;
  absl::StatusOr<AddressReplay::Pass> pass;
  int64_t passes = 0;
  constexpr int64_t kMaxPasses = 64;
  bool fixed_point = false;
  while (passes < kMaxPasses) {
    pass = ar.Run(grown);
    ++passes;
    if (!pass.ok()) return pass.status();
    bool changed = false;
    for (const auto& [event, size] : pass->growths) {
      int64_t& g = grown[event];
      if (size > g) {
        g = size;
        changed = true;
      }
    }
    if (!changed) {
      fixed_point = true;
      break;
    }
  }
  ReplayResult r = std::move(pass->result);
  r.addresses = pass->check;
  r.addresses->passes = passes;
  r.addresses->grown_block_sizes = static_cast<int64_t>(grown.size());
  r.addresses->fixed_point = fixed_point;
  r.start_state = absl::StrFormat("rebuilt from the snapshot's final segments: %d segments, %d live blocks",
                                  r.addresses->restored_segments, r.addresses->restored_blocks);
  {
    ToNativeOptions to_native;
    to_native.device = ar.device;
    to_native.include_gpu_ops = false;
    if (auto t = ToNativeTrace(snapshot.trace, to_native, &r.conversion); !t.ok()) return t.status();
  }
  if (!options.check_addresses) r.addresses.reset();
  r.source = snapshot.trace.metadata.source_file;
  r.format = "snapshot";
  r.allocator = "pytorch_caching";
  r.capacity = options.capacity;
  r.capacity_source = options.capacity_source;
  return r;
}

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

}  // namespace

std::string RenderReplayText(const ReplayResult& r) {
  std::string out;
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
                                        FormatBytes(s.peak_reserved - r.no_fragmentation_peak)));
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
        .Int("passes", ws.passes);
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
                                          gib(s.peak_reserved - r.no_fragmentation_peak), s.device_mallocs,
                                          gib(s.largest_free_block),
                                          !r.oom.has_value()  ? std::string("no")
                                          : r.oom->event < 0 ? std::string("yes, at the first event (live before "
                                                                           "recording does not fit)")
                                                             : absl::StrCat("yes, at event ", r.oom->event)));
  }
  absl::StrAppend(&out, "no-fragmentation bound (peak live requested bytes): ",
                  FormatBytes(rows[0].no_fragmentation_peak),
                  "\nfrag@peak: reserved - allocated at the reserved peak; over bound: peak reserved - bound; "
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
