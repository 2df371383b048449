#include "sim/replay/replay.h"

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <istream>
#include <map>
#include <optional>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "sim/alloc/options.h"
#include "sim/import/byte_source.h"
#include "sim/import/import.h"
#include "sim/base/status.h"
#include "sim/replay/replay_core.h"
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

using replay_internal::ReplayCore;
using replay_internal::ResolveCapacity;
using replay_internal::WarmPass;

// --- Replay of the recorded alloc/free stream --------------------------------

// The memory events of `trace` through options.allocator. `source[i]` is the
// recorded memory event native event i came from (-1: none); `recorded`, when
// set, supplies the recorded totals and times. Fills `r` (whose conversion,
// source and format the caller set).
// Note [Warm-up history]
// The caching allocator keeps every segment it maps until an OOM retry or
// empty_cache() (PyTorch CUDACachingAllocator.cpp release_cached_blocks), so
// the bytes a step reserves depend on everything allocated before it: the
// model's build, the first step's optimizer states, the earlier steps'
// activations in their order. A recording that carries that history
// (`warmup` lines, traces/FORMAT.md 1.5; written by python/gpusim_torch,
// Note [The warm-up history] in recorder.py) has it replayed through a
// scratch allocator of the replay's strategy; the segments it leaves, with
// the start state's buffers in the blocks the history placed them in, are
// restored into the replay's allocator (as a warm start's are), whose peaks
// then begin there: the window's peaks are what
// torch.cuda.reset_peak_memory_stats() before the step and
// max_memory_allocated()/max_memory_reserved() after it read. Measured on
// an H200 (validation/h200_2026-12-04/zoo.json, tools/collect/check_zoo.py):
// peak reserved of the cold replay was -6% to +17% off; from the history,
// within 0.5% on the cases in docs/validation_torch_zoo.md. A strategy
// without segments has no cached state: the history changes nothing there
// and the start state is allocated as before (said in start_state). An OOM
// in the history is the step's OOM, before its first event.
struct WarmupApplied {
  absl::flat_hash_set<BufferId> held;
  std::vector<SegmentLayout> segments;
  int64_t allocs = 0, frees = 0;
  bool oom = false;
  Bytes oom_requested, oom_reserved;
};

absl::StatusOr<WarmupApplied> ApplyWarmup(const std::vector<WarmupOp>& warmup, const ReplayOptions& options) {
  WarmupApplied w;
  ASSIGN_OR_RETURN(std::unique_ptr<Allocator> a, MakeAllocator(options.allocator, options.capacity));
  for (const WarmupOp& op : warmup) {
    if (op.kind == WarmupOp::Kind::kCompute) continue;  // places workspaces (device_memory.cc); no memory here
    if (op.kind == WarmupOp::Kind::kAlloc) {
      ++w.allocs;
      if (!a->Alloc(op.buffer, op.size, 0)) {
        w.oom = true;
        w.oom_requested = op.size;
        w.oom_reserved = a->stats().reserved;
        return w;
      }
      w.held.insert(op.buffer);
    } else {
      ++w.frees;
      a->Free(op.buffer);
      w.held.erase(op.buffer);
    }
  }
  RETURN_IF_ERROR(a->Finish());
  w.segments = a->Segments();
  return w;
}

absl::Status ReplayTraceInto(const MemoryOpStream& stream, const std::vector<int64_t>& source,
                             const RecordedTrace* recorded, const ReplayOptions& options, ReplayResult& r,
                             WarmPass* warm = nullptr, const std::vector<WarmupOp>* warmup = nullptr) {
  ASSIGN_OR_RETURN(std::unique_ptr<ReplayCore> core,
                   ReplayCore::Make(options, recorded != nullptr ? &recorded->captures : nullptr,
                                    recorded != nullptr && recorded->metadata.format == "kineto", r));
  Allocator& a = core->allocator();
  static const std::vector<RecordedMemoryEvent> kNoEvents;
  const std::vector<RecordedMemoryEvent>& memory_events = recorded != nullptr ? recorded->memory_events : kNoEvents;
  // Which recorded events carry totals (those of other devices and kinds
  // too, as the comparison's presence has always meant).
  if (!r.offline) {
    for (const RecordedMemoryEvent& m : memory_events) {
      if (m.total_allocated.has_value() && !r.allocated.has_value()) r.allocated.emplace();
      if (m.total_reserved.has_value() && !r.reserved.has_value()) r.reserved.emplace();
    }
  }
  BufferId next_id = 0;
  for (const MemoryOp& e : stream.ops) next_id = std::max(next_id, e.buffer + 1);
  // A warm start (Note [Warm start from recorded addresses]) restores the
  // blocks live at the start, Trace::preexisting included.
  absl::flat_hash_set<BufferId> restored;
  if (warm != nullptr && a.ModelsSegments() && recorded != nullptr) {
    int32_t device = 0;
    if (options.device.has_value()) {
      device = *options.device;
    } else if (!recorded->memory_events.empty()) {
      device = recorded->memory_events.front().device;
    }
    WarmFactCollector facts(device, a);
    for (size_t i = 0; i < recorded->memory_events.size(); ++i) {
      facts.Add(recorded->memory_events[i], static_cast<int64_t>(i));
    }
    // The head allocs of the native trace, in order, are the start blocks.
    std::vector<BufferId> head_ids;
    for (size_t i = 0; i < stream.ops.size() && source[i] < 0; ++i) {
      if (stream.ops[i].type == EventType::kAlloc) head_ids.push_back(stream.ops[i].buffer);
    }
    ASSIGN_OR_RETURN(WarmStart ws, RestoreWarmStart(facts, head_ids, stream.preexisting, next_id, warm->kept, a,
                                                    &restored));
    if (ws.applied) r.start_state = WarmStartState(ws);
    r.warm_start = std::move(ws);
  }
  if (warmup != nullptr && !warmup->empty() && warm == nullptr && a.ModelsSegments()) {
    ASSIGN_OR_RETURN(WarmupApplied w, ApplyWarmup(*warmup, options));
    if (w.oom) {
      ++r.ooms;
      r.oom = ReplayOom{-1, SimTime(-1), w.oom_requested, w.oom_reserved, options.capacity - w.oom_reserved};
      r.start_state = absl::StrCat("the warm-up history ran out of memory at its allocation ", w.allocs, " (",
                                   w.oom_requested.value(), " B); the window starts cold");
    } else {
      for (const SegmentLayout& seg : w.segments) RETURN_IF_ERROR(a.RestoreSegment(seg));
      restored = std::move(w.held);
      r.start_state = absl::StrCat("the recording's warm-up history (", w.allocs, " allocations, ", w.frees,
                                   " frees) replayed through the allocator: ", w.segments.size(),
                                   " segments held at the start");
    }
  } else if (warmup != nullptr && !warmup->empty() && !a.ModelsSegments()) {
    r.start_state = absl::StrCat("cold: ", r.allocator, " keeps no cached segments, so the recording's warm-up "
                                 "history leaves only the start state's buffers, allocated first");
  }
  std::vector<BufferId> held;
  if (options.keep_start_state) held.assign(restored.begin(), restored.end());
  RETURN_IF_ERROR(core->Start(stream.preexisting, next_id, r.warm_start.has_value() ? &*r.warm_start : nullptr,
                              std::move(restored), warm));
  if (options.keep_start_state) {
    // Note [One start state for every command]: what the replay starts from.
    r.start = CaptureStartState(a, std::move(held), r.oom.has_value() ? Bytes(0) : stream.preexisting, next_id);
  }
  const std::vector<MemoryOp>& ev = stream.ops;
  for (size_t i = 0; i < ev.size(); ++i) {
    const int64_t src = source[i];
    const RecordedMemoryEvent* m = src >= 0 && recorded != nullptr ? &memory_events[static_cast<size_t>(src)] : nullptr;
    RETURN_IF_ERROR(core->Op(ev[i], m, src));
    // Compare after the last native event of one recorded event.
    if (src < 0 || (i + 1 < ev.size() && source[i + 1] == src)) continue;
    core->EndEvent(m, src);
  }
  return core->Finish();
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
      replay_internal::WarmFixedPoint passes(r.events);
      for (int64_t n = 1;; ++n) {
        ReplayResult w;
        w.source = r.source;
        w.format = r.format;
        w.conversion = r.conversion;
        passes.Begin(n);
        if (absl::Status st = ReplayTraceInto(trace, source, &recorded, options, w, &passes.pass());
            !st.ok() && !replay_internal::StoppedAtDeparture(st, passes.pass())) {
          return st;
        }
        if (!w.warm_start.has_value() || !w.warm_start->applied) {
          r.warm_start = std::move(w.warm_start);
          break;
        }
        if (passes.End(n, std::move(w))) {
          ReplayResult fixed = passes.Take();
          fixed.reserved_below_allocated = recorded.metadata.reserved_below_allocated;
          return fixed;
        }
      }
    }
  }
  r.reserved_below_allocated = recorded.metadata.reserved_below_allocated;
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
  RETURN_IF_ERROR(ReplayTraceInto(ops, source, nullptr, options, r, nullptr, &trace.warmup));
  if (trace.warmup.empty()) r.start_state = "cold (an empty allocator); Trace::preexisting allocated first";
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
// sums over the main pool and the private ones, all bounded by the capacity
// (sim/alloc/graph_pools.h GraphPoolAllocator, which the engine's replay
// that viz draws runs too: the start state names each pool's buffers).
// Offline planners see no pools (they place the whole trace at once).

absl::StatusOr<LoadedRecording> LoadRecording(const Input& in) {
  LoadedRecording out;
  out.path = in.path;
  out.format = std::string(RecordingFormatName(in.kind));
  if (in.kind == InputKind::kNativeTrace) {
    // Note [One sniffer, one open] (sim/import/input.h): the sniff's open.
    ASSIGN_OR_RETURN(std::unique_ptr<ByteSource> source, OpenByteSource(in.file));
    ByteSourceStreambuf buf(*source);
    std::istream stream(&buf);
    absl::StatusOr<Trace> t = ReadTrace(stream, in.path);
    RETURN_IF_ERROR(buf.status());  // a read error, not the parser's end of input
    if (!t.ok()) return t.status();
    out.native = *std::move(t);
    return out;
  }
  if (in.kind == InputKind::kSnapshot) {
    ASSIGN_OR_RETURN(RecordedSnapshot snap, LoadSnapshot(in.file));
    out.snapshot = std::move(snap);
    return out;
  }
  ASSIGN_OR_RETURN(RecordedTrace t, ImportRecordedTrace(in));
  out.recorded = std::move(t);
  return out;
}

absl::StatusOr<LoadedRecording> LoadRecording(const std::string& path) {
  ASSIGN_OR_RETURN(Input in, SniffInput(path));
  return LoadRecording(in);
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

absl::StatusOr<ReplayResult> ReplayFile(const Input& in, const ReplayOptions& options) {
  std::string why;
  if (!options.check_addresses && in.kind == InputKind::kKineto) {
    ASSIGN_OR_RETURN(std::optional<ReplayResult> streamed, ReplayKinetoStreaming(in, options, &why));
    if (streamed.has_value()) return std::move(*streamed);
  }
  ASSIGN_OR_RETURN(LoadedRecording loaded, LoadRecording(in));
  ASSIGN_OR_RETURN(ReplayResult r, ReplayLoaded(loaded, options));
  if (!why.empty()) r.import = absl::StrCat("whole: ", why);
  return r;
}

absl::StatusOr<ReplayResult> ReplayFile(const std::string& path, const ReplayOptions& options) {
  ASSIGN_OR_RETURN(Input in, SniffInput(path));
  return ReplayFile(in, options);
}

}  // namespace gpusim
