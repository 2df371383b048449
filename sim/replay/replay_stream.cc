// Note [Replaying as the trace is parsed]
// A Kineto trace of N memory events held in memory costs ~230 bytes an
// event (RecordedMemoryEvent, then the 24 B MemoryOp and its 8 B source
// index), so a long training recording did not fit in a laptop's memory
// (issue 14: 2.25 GB for 10 M events). Most of what the replay reads, it
// reads once and in order: each event is paired with its alloc (Note
// [Matching frees]: by address, a map of the live blocks), goes through the
// allocator (whose state is the live blocks and the segments), and its
// recorded totals are compared with the model's at once. What needs the
// whole trace:
//  - a free whose alloc was before recording: ToNativeTrace allocates its
//    block at the trace's start, before every event;
//  - the warm start (Note [Warm start from recorded addresses]): it is tried
//    only when the cold start misses the first recorded Total Reserved, and
//    then reads every address;
//  - the order: the in-memory import sorts the events by (ts, Ev Idx) when
//    the file is not in that order; the stream puts them in order within a
//    bounded window (Note [A bounded reorder window]);
//  - CUDA graph captures (Note [CUDA graph private pools]): their runtime
//    calls come after the memory events (Note [Capture windows from a
//    first pass]);
//  - the recorded device's memory size, when deviceProperties follow the
//    events (Kineto writes them last). The default caching allocator reads
//    its capacity only when a cudaMalloc would pass it, so it streams at a
//    capacity no replay reaches and, at the end, keeps the result when its
//    reserved bytes never passed the recorded capacity; other allocators
//    (and pytorch_caching with options, e.g. a garbage-collection threshold
//    relative to capacity) need it from the start;
//  - Total Allocated first recorded after the first event (the bytes live
//    before recording are allocated before the first event);
//  - an offline planner, which places the whole trace at its end.
// So the replay streams (one pass over the file, memory bounded by the live
// blocks and the segment state) and checks each of these as it goes; the
// first one that fails stops the pass and names itself, and the file is
// imported whole and replayed as before — the same numbers either way
// (tests/replay_stream_test.cc compares the two on every shipped trace and
// on synthetic ones that trip each condition). The first two (blocks live
// at the start, the warm start) need only facts that a pass over the file
// can collect in memory bounded by the distinct blocks: those traces are
// streamed more than once (Note [Streaming a warm trace in passes]).
//
// Note [Streaming a warm trace in passes]
// A warm recording (Total Reserved constant from the start) frees blocks
// allocated before it began, and its start state is inferred from every
// address (Note [Warm start from recorded addresses]). Neither needs the
// events held: pass 1 streams the trace into the pairing (taking the head:
// which frees have no alloc, in order, and their requested bytes), the warm
// fact collector (Note [Warm facts, not events]: bounded by the distinct
// blocks) and the file's metadata (deviceProperties, which Kineto writes
// last, so the capacity is known before pass 2). The inference runs on the
// facts. Pass 2 replays the stream cold — the head allocated first, as
// ToMemoryOps puts it — as far as the first recorded Total Reserved: when
// the cold start explains it, or no warm start can be inferred, it goes on
// to the end and that is the result, as in ReplayRecorded. Otherwise each
// further pass replays the stream from the inferred state (restored into
// the allocator, the head blocks in it), growing segments to the fixed
// point of Note [Growing inferred segments] as the whole-trace path does,
// one stream per pass. Buffer ids are recycled as in one pass, but for the
// head blocks', which are restored by id and so never reused. Any fact a
// pass cannot take (order, devices, streams, captures, an error) sends the
// trace to the whole-trace path, named, as above. Pass 1 also packs the
// events it read, and the passes after it replay them from memory rather
// than reading the file again (Note [Later passes from memory],
// sim/replay/event_cache.h), when they fit under a byte cap.
//
// Note [Capture windows from a first pass]
// Which allocations a CUDA graph's private pool serves depends on the
// capture windows (cudaStreamBeginCapture .. cudaStreamEndCapture, hip*),
// which Kineto records as runtime activities. libkineto writes a trace's
// activities buffer by buffer (libkineto/src/CuptiActivityProfiler.cpp
// processTraceInternal: processCpuTrace for every CPU trace buffer, then
// the CUPTI / roctracer activity buffers: runtime calls, kernels), and
// PyTorch's memory events are CPU-buffer activities (torch/csrc/autograd/
// profiler_kineto.cpp materializeOpEvents: cpu_trace_.addMemoryUsageActivity),
// so in the file every runtime call follows every memory event: measured
// on the shipped traces, bert-small's
// memory events are traceEvents 480-715 and its runtime calls 2,101-2,485;
// MI300X 522-1,584 and 7,589-8,059; V100 HTA 42,070-86,724 and
// 86,727-216,049. A one-pass replay therefore meets an allocation before
// it can know whether a capture held it. The windows themselves are few
// (two numbers per capture), so the facts pass (pass 1 of Note [Streaming
// a warm trace in passes]) keeps them (StreamFacts::captures, paired as
// the whole import pairs them, sim/import/kineto.cc PairCaptures) and
// every later pass routes allocations by them, as ReplayRecorded does; the
// memory is bounded by the number of captures.
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "sim/alloc/options.h"
#include "sim/base/status.h"
#include "sim/import/kineto.h"
#include "sim/import/import.h"
#include "sim/replay/event_cache.h"
#include "sim/replay/replay.h"
#include "sim/replay/replay_core.h"
#include "sim/replay/reorder_window.h"
#include "sim/replay/replay_internal.h"

namespace gpusim {

namespace {

using replay_internal::ReplayCore;

// The buffer id of the bytes live before recording: above every id the
// pairing hands out, as in ToMemoryOps' stream (where it is the next id
// after the last).
constexpr BufferId kPreexistingId = std::numeric_limits<BufferId>::max() / 2;
// A capacity no replay reaches (see provisional_capacity below).
constexpr Bytes kUnbounded((int64_t{1} << 46) - 1);  // the largest capacity MakeAllocator takes

// The pairing's buffer ids grow with the events (one per alloc); the
// allocators index their live blocks by id (pytorch_caching: a vector for
// dense ids, 8 B per id ever seen), so the stream hands the allocator ids
// recycled from freed buffers instead, bounded by the live blocks. No
// allocator places by id, and no report shows one.
class RecycledIds {
 public:
  BufferId OnAlloc(BufferId id) {
    BufferId small = next_;
    if (free_.empty()) {
      ++next_;
    } else {
      small = free_.back();
      free_.pop_back();
    }
    of_[id] = small;
    return small;
  }
  // The id to free, recycled after the free (Release); -1 (no buffer) when
  // `id` was never allocated.
  BufferId OnFree(BufferId id) {
    auto it = of_.find(id);
    if (it == of_.end()) return -1;
    const BufferId small = it->second;
    of_.erase(it);
    return small;
  }
  void Release(BufferId small) { free_.push_back(small); }
  // An id of its own (before any OnAlloc), and `id` freed as it.
  BufferId Reserve() { return next_++; }
  void Bind(BufferId id, BufferId small) { of_[id] = small; }

 private:
  absl::flat_hash_map<BufferId, BufferId> of_;
  std::vector<BufferId> free_;
  BufferId next_ = 0;
};

// Stops the pass: the trace needs the whole-trace path, for `why`.
absl::Status NotStreamable(std::string why) { return absl::CancelledError(why); }

// The payload that marks NotStreamable for an event out of (ts, Ev Idx)
// order, which a reorder window may fix (Note [A bounded reorder window]).
constexpr char kOutOfOrderPayload[] = "gpusim/replay/out_of_order";
absl::Status OutOfOrder(int64_t event) {
  absl::Status s = NotStreamable(absl::StrCat("memory event ", event, " is out of (ts, Ev Idx) order"));
  s.SetPayload(kOutOfOrderPayload, absl::Cord("1"));
  return s;
}

// Why the stream gave up, for ReplayResult::import.
struct NotStreamed {
  std::string why;
  bool out_of_order = false;  // an event out of order stopped it (OutOfOrder)
};
// Stops the one pass: the trace streams in passes (Note [Streaming a warm
// trace in passes]), for `why`.
absl::Status NeedsPasses(std::string why) { return absl::AbortedError(why); }

// What every pass checks of each event before it uses it: (ts, Ev Idx)
// order, one device, no recorded streams. Returns false for an event of
// another device (options.device chosen).
struct EventChecks {
  std::optional<int32_t> device;
  SimTime last_time{-SimTime::kMaxNs};  // before every time (Note [Checked time]: INT64_MIN is out of range)
  int64_t last_seq = std::numeric_limits<int64_t>::min();
  absl::StatusOr<bool> Check(const RecordedMemoryEvent& m, int64_t i, const ReplayOptions& options) {
    if (m.time < last_time || (m.time == last_time && m.seq < last_seq)) {
      return OutOfOrder(i);
    }
    last_time = m.time;
    last_seq = m.seq;
    if (!device.has_value()) device = m.device;
    if (m.device != *device) {
      if (!options.device.has_value()) return NotStreamable("memory events on several devices");
      return false;
    }
    if (m.stream >= 0) return NotStreamable("recorded streams");
    return true;
  }
};

// Pass 1 of Note [Streaming a warm trace in passes].
struct StreamFacts {
  explicit StreamFacts(int64_t cache_bytes) : events_held(cache_bytes) {}
  RecordedMetadata metadata;  // the whole file's
  std::optional<int32_t> device;
  std::vector<Bytes> head;    // requested bytes of the head allocs, in order
  Bytes preexisting;          // Trace::preexisting
  int64_t events = 0;         // memory events of the device
  int64_t first_reserved = -1;  // the first alloc or free of the device recording Total Reserved
  bool any_allocated = false, any_reserved = false;  // some memory event records the total
  std::unique_ptr<Allocator> rounding;   // the allocator's block rounding, for `warm`
  std::optional<WarmFactCollector> warm;  // pytorch_caching, infer_warm_start
  std::vector<CaptureWindow> captures;    // Note [Capture windows from a first pass]
  // The device's memory events, for the later passes (Note [Later passes
  // from memory]); when not complete, they read the file again.
  replay_internal::MemoryEventCache events_held;
  ConversionStats conversion;  // the pairing's (a pass's ReplayResult::conversion)
};

// The Kineto import of `in` (one source over its one open, Note [One
// sniffer, one open]) with its memory events handed to `on_event`
// in (ts, Ev Idx) order, through a window of `window` events (Note [A
// bounded reorder window]); the last ones after the file's end, with its
// whole metadata.
absl::StatusOr<RecordedTrace> ImportInOrder(const Input& in, int64_t window,
                                            replay_internal::ReorderWindow::Emit on_event) {
  ASSIGN_OR_RETURN(std::unique_ptr<ByteSource> source, OpenByteSource(in.file));
  KinetoImportOptions ko;
  ko.keep_gpu_ops = false;
  ko.keep_cpu_ops = false;
  ko.keep_stacks = false;
  if (window <= 0) {  // as read (the passes check the order)
    ko.on_memory_event = std::move(on_event);
    return ImportKinetoTrace(*source, in.path, ko);
  }
  replay_internal::ReorderWindow reorder(window, std::move(on_event));
  ko.on_memory_event = [&](const RecordedMemoryEvent& m, const RecordedMetadata& meta) { return reorder.Add(m, meta); };
  absl::StatusOr<RecordedTrace> t = ImportKinetoTrace(*source, in.path, ko);
  if (t.ok()) RETURN_IF_ERROR(reorder.Drain(t->metadata));
  return t;
}

// The import of one pass; `on_event` gets each memory event with its index.
absl::StatusOr<RecordedTrace> StreamEvents(const Input& in, const ReplayOptions& options,
                                           const std::function<absl::Status(const RecordedMemoryEvent&, int64_t)>& on_event) {
  int64_t index = 0;  // recorded memory-event index: every kept event counts
  return ImportInOrder(in, options.reorder_window,
                       [&](const RecordedMemoryEvent& m, const RecordedMetadata&) { return on_event(m, index++); });
}

// Why a pass stopped, for ReplayResult::import (a trace error included: the
// whole-trace path reports it as it always has).
std::string WhyStopped(const absl::Status& s) {
  return absl::IsCancelled(s) ? std::string(s.message()) : absl::StrCat("the trace has an error (", s.message(), ")");
}

// The stream gives up: nullopt, with why in *n.
std::optional<ReplayResult> GiveUp(NotStreamed* n, std::string why) {
  if (n != nullptr) n->why = std::move(why);
  return std::nullopt;
}
// The stream gives up at the status a pass stopped with.
std::optional<ReplayResult> GiveUp(NotStreamed* n, const absl::Status& stopped) {
  if (n != nullptr) n->out_of_order = stopped.GetPayload(kOutOfOrderPayload).has_value();
  return GiveUp(n, WhyStopped(stopped));
}

absl::StatusOr<StreamFacts> CollectFacts(const Input& in, const ReplayOptions& options) {
  const std::string& path = in.path;
  StreamFacts f(options.stream_cache_bytes);
  EventChecks checks;
  checks.device = options.device;
  ToNativeOptions to_native;
  to_native.device = options.device;
  MemoryOpPairer pairer(path, to_native, /*take_head=*/true);
  std::vector<MemoryOp> ops;
  auto on_event = [&](const RecordedMemoryEvent& m, int64_t i) -> absl::Status {
    f.any_allocated |= m.total_allocated.has_value();
    f.any_reserved |= m.total_reserved.has_value();
    ASSIGN_OR_RETURN(bool mine, checks.Check(m, i, options));
    if (!mine) return absl::OkStatus();
    if (f.events++ == 0 && options.allocator.impl == "pytorch_caching" && options.infer_warm_start) {
      ASSIGN_OR_RETURN(f.rounding, MakeAllocator(options.allocator, Bytes(int64_t{1} << 40)));
      if (f.rounding->ModelsSegments()) f.warm.emplace(m.device, *f.rounding);
    }
    ops.clear();
    const size_t heads = pairer.head().size();
    RETURN_IF_ERROR(pairer.Add(m, i, 0, ops).status());
    if (f.warm.has_value()) f.warm->Add(m, i);
    f.events_held.Add(m, i, ops, pairer.head().size() > heads);
    if (f.first_reserved < 0 && m.total_reserved.has_value() &&
        (m.kind == MemoryEventKind::kAlloc || m.kind == MemoryEventKind::kFree)) {
      f.first_reserved = i;
    }
    return absl::OkStatus();
  };
  ASSIGN_OR_RETURN(RecordedTrace t, StreamEvents(in, options, on_event));
  f.captures = std::move(t.captures);
  if (f.events == 0) return NotStreamable("no memory events");
  ASSIGN_OR_RETURN(f.preexisting, pairer.Preexisting());
  for (const auto& [id, size] : pairer.head()) f.head.push_back(size);
  f.conversion = pairer.stats();
  f.device = checks.device;
  f.metadata = std::move(t.metadata);
  return f;
}

// A replay pass from the facts: cold (warm == nullptr), or from the warm
// start with the growths of earlier passes. A cold pass with
// `stop_at_first_reserved` stops (Cancelled) after the first Total Reserved
// when the cold start misses it; *missed says whether it did.
absl::Status ReplayPass(const Input& in, const ReplayOptions& options, const StreamFacts& f,
                        replay_internal::WarmPass* warm, bool stop_at_first_reserved, bool* missed, ReplayResult& r) {
  const std::string& path = in.path;
  r.source = path;
  r.format = "kineto";
  ASSIGN_OR_RETURN(std::unique_ptr<ReplayCore> core, ReplayCore::Make(options, f.captures.empty() ? nullptr : &f.captures,
                                                                 /*kineto_sizes=*/true, r));
  if (r.offline) return NotStreamable("an offline planner places the whole trace at its end");
  if (f.any_allocated) r.allocated.emplace();
  if (f.any_reserved) r.reserved.emplace();
  RecycledIds ids;
  std::vector<BufferId> head_ids;
  for (size_t k = 0; k < f.head.size(); ++k) head_ids.push_back(ids.Reserve());
  const BufferId first_body_id = static_cast<BufferId>(head_ids.size());
  absl::flat_hash_set<BufferId> restored;
  if (warm != nullptr) {
    ASSIGN_OR_RETURN(WarmStart ws, RestoreWarmStart(*f.warm, head_ids, f.preexisting, kPreexistingId,
                                                    warm->kept, core->allocator(), &restored));
    if (ws.applied) r.start_state = WarmStartState(ws);
    r.warm_start = std::move(ws);
  }
  RETURN_IF_ERROR(core->Start(f.preexisting, kPreexistingId, r.warm_start.has_value() ? &*r.warm_start : nullptr,
                              std::move(restored), warm));
  for (size_t k = 0; k < f.head.size(); ++k) {
    RETURN_IF_ERROR(core->Op({EventType::kAlloc, 0, head_ids[k], f.head[k]}, nullptr, -1));
  }
  size_t heads_bound = 0;
  // Binds head block `id` (the pairing's) to the next head id.
  auto bind_head = [&](BufferId id) -> absl::Status {
    if (heads_bound >= head_ids.size()) return absl::InternalError("stream passes: the head grew");
    ids.Bind(id, head_ids[heads_bound++]);
    return absl::OkStatus();
  };
  // Event `i` (`m`), paired into `n` ops at `paired`.
  auto replay = [&](const RecordedMemoryEvent& m, int64_t i, const MemoryOp* paired, size_t n) -> absl::Status {
    for (size_t k = 0; k < n; ++k) {
      MemoryOp op = paired[k];
      const bool free = op.type == EventType::kFree;
      op.buffer = free ? ids.OnFree(op.buffer) : ids.OnAlloc(op.buffer);
      RETURN_IF_ERROR(core->Op(op, &m, i));
      if (free && op.buffer >= first_body_id) ids.Release(op.buffer);
    }
    if (n > 0) core->EndEvent(&m, i);
    if (i == f.first_reserved) {
      *missed = r.reserved.has_value() && r.reserved->first_mismatch == i;
      if (*missed && stop_at_first_reserved) return absl::CancelledError("stopped at the first Total Reserved");
    }
    return absl::OkStatus();
  };
  if (f.events_held.complete()) {
    // Note [Later passes from memory]: the events pass 1 read, which passed
    // its checks (they pass this pass's too: the same order, device and
    // streams), with the ops its pairing made of them (Note [Paired ops
    // kept with the events]).
    replay_internal::MemoryEventCache::Reader reader(f.events_held);
    RecordedMemoryEvent m;
    int64_t i = 0;
    MemoryOp paired[2];
    size_t n = 0;
    bool head = false;
    while (reader.Next(m, i, paired, n, head)) {
      if (head) RETURN_IF_ERROR(bind_head(paired[0].buffer));
      RETURN_IF_ERROR(replay(m, i, paired, n));
    }
    r.conversion = f.conversion;
  } else {
    ToNativeOptions to_native;
    to_native.device = options.device;
    MemoryOpPairer pairer(path, to_native, /*take_head=*/true);
    EventChecks checks;
    checks.device = f.device;
    std::vector<MemoryOp> ops;
    auto on_event = [&](const RecordedMemoryEvent& m, int64_t i) -> absl::Status {
      ASSIGN_OR_RETURN(bool mine, checks.Check(m, i, options));
      if (!mine) return absl::OkStatus();
      ops.clear();
      RETURN_IF_ERROR(pairer.Add(m, i, 0, ops).status());
      while (heads_bound < pairer.head().size()) RETURN_IF_ERROR(bind_head(pairer.head()[heads_bound].first));
      return replay(m, i, ops.data(), ops.size());
    };
    RETURN_IF_ERROR(StreamEvents(in, options, on_event).status());
    r.conversion = pairer.stats();
  }
  if (heads_bound != head_ids.size()) return absl::InternalError("stream passes: the head shrank");
  return core->Finish();
}

// Note [Streaming a warm trace in passes]: nullopt (and *why_not) when a
// pass finds what needs the whole trace.
absl::StatusOr<std::optional<ReplayResult>> ReplayKinetoInPasses(const Input& in,
                                                                 const ReplayOptions& options_in,
                                                                 const std::string& why_passes,
                                                                 NotStreamed* why_not) {
  // The start state under the import's buffer ids is ReplayRecorded's.
  if (options_in.keep_start_state) return GiveUp(why_not, "the start state is kept");
  auto facts = CollectFacts(in, options_in);
  if (!facts.ok()) return GiveUp(why_not, facts.status());
  const StreamFacts& f = *facts;
  ReplayOptions options = options_in;
  if (absl::Status st = replay_internal::ResolveCapacity(f.metadata, &options); !st.ok()) {
    return GiveUp(why_not, st);
  }
  int64_t passes = 1;
  auto done = [&](ReplayResult r) {
    r.import = absl::StrCat("streamed in ", passes, " passes (", why_passes, ")");
    r.reserved_below_allocated = f.metadata.reserved_below_allocated;
    return std::optional<ReplayResult>(std::move(r));
  };
  // Can a warm start be inferred at all? (On an allocator of its own.)
  std::optional<WarmStart> first_warm;
  if (f.warm.has_value()) {
    auto scratch = MakeAllocator(options.allocator, options.capacity);
    if (!scratch.ok()) return GiveUp(why_not, scratch.status());
    std::vector<BufferId> head_ids;
    for (size_t k = 0; k < f.head.size(); ++k) head_ids.push_back(static_cast<BufferId>(k));
    absl::flat_hash_set<BufferId> restored;
    auto ws = RestoreWarmStart(*f.warm, head_ids, f.preexisting, kPreexistingId, {}, **scratch, &restored);
    if (!ws.ok()) return GiveUp(why_not, ws.status());
    first_warm = *std::move(ws);
  }
  auto cold = [&](bool stop, bool* missed) -> absl::StatusOr<std::optional<ReplayResult>> {
    ReplayResult r;
    ++passes;
    *missed = false;
    absl::Status st = ReplayPass(in, options, f, nullptr, stop, missed, r);
    if (stop && *missed && absl::IsCancelled(st)) return std::optional<ReplayResult>();  // stopped there
    if (!st.ok()) return st;
    return std::optional<ReplayResult>(std::move(r));
  };
  bool missed = false;
  const bool warm_applies = first_warm.has_value() && first_warm->applied;
  auto c = cold(warm_applies, &missed);
  if (!c.ok()) return GiveUp(why_not, c.status());
  if (c->has_value()) {
    ReplayResult r = std::move(**c);
    if (missed && first_warm.has_value() && r.allocator == "pytorch_caching") r.warm_start = std::move(first_warm);
    return done(std::move(r));
  }
  // From the inferred state, to the fixed point (as ReplayRecorded).
  replay_internal::WarmFixedPoint fixed(f.events);
  for (int64_t n = 1;; ++n) {
    ReplayResult w;
    fixed.Begin(n);
    ++passes;
    absl::Status st = ReplayPass(in, options, f, &fixed.pass(), false, &missed, w);
    if (!st.ok() && !replay_internal::StoppedAtDeparture(st, fixed.pass())) return GiveUp(why_not, st);
    if (!w.warm_start->applied) {
      auto full = cold(false, &missed);
      if (!full.ok()) return GiveUp(why_not, full.status());
      ReplayResult r = std::move(**full);
      r.warm_start = std::move(w.warm_start);
      return done(std::move(r));
    }
    if (fixed.End(n, std::move(w))) return done(fixed.Take());
  }
}

// ReplayKinetoStreaming through a window of options_in.reorder_window events.
absl::StatusOr<std::optional<ReplayResult>> ReplayKinetoOnce(const Input& in, const ReplayOptions& options_in,
                                                             NotStreamed* why_not) {
  const std::string& path = in.path;
  ReplayOptions options = options_in;
  ReplayResult r;
  r.source = path;
  r.format = "kineto";
  ToNativeOptions to_native;
  to_native.device = options.device;
  MemoryOpPairer pairer(path, to_native);
  std::unique_ptr<ReplayCore> core;
  EventChecks checks;
  checks.device = options.device;
  int64_t index = 0;  // recorded memory-event index: every kept event counts
  bool checked_first_reserved = false;
  bool first_had_allocated = false;
  std::vector<MemoryOp> ops;
  RecycledIds ids;

  size_t devices_at_first = 0;  // deviceProperties read before the first memory event
  bool provisional_capacity = false;
  auto on_event = [&](const RecordedMemoryEvent& m, const RecordedMetadata& meta) -> absl::Status {
    const int64_t i = index++;
    ASSIGN_OR_RETURN(bool mine, checks.Check(m, i, options));
    if (!mine) {
      // Another device's totals still make the comparison appear (as in
      // ReplayRecorded, whose check reads every event).
      if (core != nullptr && !r.offline) {
        if (m.total_allocated.has_value() && !r.allocated.has_value()) r.allocated.emplace();
        if (m.total_reserved.has_value() && !r.reserved.has_value()) r.reserved.emplace();
      }
      return absl::OkStatus();
    }
    ops.clear();
    ASSIGN_OR_RETURN(bool converted, pairer.Add(m, i, 0, ops));
    if (!converted) {
      return NeedsPasses(absl::StrCat("memory event ", i, " frees a block allocated before recording"));
    }
    if (core == nullptr) {
      devices_at_first = meta.devices.size();
      if (devices_at_first == 0 && options.capacity <= Bytes(0) && options.allocator.impl == "pytorch_caching" &&
          options.allocator.options.empty()) {
        // Kineto writes deviceProperties after the events: the capacity is
        // not known yet. The caching allocator reads it only when a
        // cudaMalloc would pass it (then it frees its cache and retries, or
        // fails), so a replay whose reserved bytes never pass the capacity
        // known at the end is the one at that capacity (checked there).
        provisional_capacity = true;
        options.capacity = kUnbounded;
      } else {
        RETURN_IF_ERROR(replay_internal::ResolveCapacity(meta, &options));
      }
      ASSIGN_OR_RETURN(core, ReplayCore::Make(options, nullptr, /*kineto_sizes=*/true, r));
      if (r.offline) return NotStreamable("an offline planner places the whole trace at its end");
      first_had_allocated = pairer.initial_allocated().has_value();
      RETURN_IF_ERROR(core->Start(pairer.initial_allocated().value_or(Bytes(0)), kPreexistingId, nullptr, {}, nullptr));
    }
    for (MemoryOp op : ops) {
      const bool free = op.type == EventType::kFree;
      op.buffer = free ? ids.OnFree(op.buffer) : ids.OnAlloc(op.buffer);
      RETURN_IF_ERROR(core->Op(op, &m, i));
      if (free && op.buffer >= 0) ids.Release(op.buffer);
    }
    if (!ops.empty()) core->EndEvent(&m, i);
    if (!checked_first_reserved && m.total_reserved.has_value() &&
        (m.kind == MemoryEventKind::kAlloc || m.kind == MemoryEventKind::kFree)) {
      checked_first_reserved = true;
      if (options.infer_warm_start && r.allocator == "pytorch_caching" && r.reserved.has_value() &&
          r.reserved->first_mismatch == i) {
        return NeedsPasses("the cold start misses the first Total Reserved: a warm start is inferred");
      }
    }
    return absl::OkStatus();
  };

  auto imported = ImportInOrder(in, options.reorder_window, on_event);
  auto give_up = [&](std::string why) { return GiveUp(why_not, std::move(why)); };
  if (absl::IsAborted(imported.status())) {
    return ReplayKinetoInPasses(in, options_in, std::string(imported.status().message()), why_not);
  }
  if (!imported.ok()) {
    // Not streamable, or bad input: the whole-trace path reports the error
    // as it always has.
    return GiveUp(why_not, imported.status());
  }
  if (!imported->captures.empty()) {
    return ReplayKinetoInPasses(in, options_in, "CUDA graph captures, whose runtime calls follow the memory events",
                                why_not);
  }
  if (core == nullptr) return give_up("no memory events");
  if (pairer.initial_allocated().has_value() != first_had_allocated) {
    return give_up("Total Allocated first recorded after the first memory event");
  }
  auto preexisting = pairer.Preexisting();
  if (!preexisting.ok()) return give_up("the trace has an error");
  r.conversion = pairer.stats();
  RETURN_IF_ERROR(core->Finish());
  if (provisional_capacity) {
    ReplayOptions resolved = options_in;
    RETURN_IF_ERROR(replay_internal::ResolveCapacity(imported->metadata, &resolved));
    if (r.stats.peak_reserved > resolved.capacity || r.ooms > 0) {
      return give_up("deviceProperties after the memory events, and the reserved bytes reach the capacity");
    }
    r.capacity = resolved.capacity;
    r.capacity_source = resolved.capacity_source;
  } else if (devices_at_first != imported->metadata.devices.size()) {
    // Devices whose deviceProperties came after the events could change the
    // capacity.
    return give_up("deviceProperties after the memory events");
  }
  r.import = "streamed";
  r.reserved_below_allocated = imported->metadata.reserved_below_allocated;
  return std::optional<ReplayResult>(std::move(r));
}

}  // namespace

// Note [A bounded reorder window]: the window is used only when a pass
// without one meets an event out of order.
absl::StatusOr<std::optional<ReplayResult>> ReplayKinetoStreaming(const Input& in, const ReplayOptions& options,
                                                                  std::string* why_not) {
  ReplayOptions as_read = options;
  as_read.reorder_window = 0;
  NotStreamed why;
  ASSIGN_OR_RETURN(std::optional<ReplayResult> r, ReplayKinetoOnce(in, as_read, &why));
  if (!r.has_value() && options.reorder_window > 0 && why.out_of_order) {
    why = NotStreamed();
    ASSIGN_OR_RETURN(r, ReplayKinetoOnce(in, options, &why));
  }
  if (why_not != nullptr) *why_not = std::move(why.why);
  return r;
}

absl::StatusOr<std::optional<ReplayResult>> ReplayKinetoStreaming(const std::string& path,
                                                                  const ReplayOptions& options,
                                                                  std::string* why_not) {
  ASSIGN_OR_RETURN(Input in, SniffInput(path));
  if (in.kind != InputKind::kKineto) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", InputKindWords(in.kind), ", not a Kineto trace"));
  }
  return ReplayKinetoStreaming(in, options, why_not);
}

}  // namespace gpusim
