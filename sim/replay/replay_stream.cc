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
//    the file is not in that order;
//  - CUDA graph captures (Note [CUDA graph private pools]): their runtime
//    calls may come anywhere in the file;
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
// on synthetic ones that trip each condition).
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "sim/base/status.h"
#include "sim/import/kineto.h"
#include "sim/import/import.h"
#include "sim/replay/replay.h"
#include "sim/replay/replay_core.h"
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

 private:
  absl::flat_hash_map<BufferId, BufferId> of_;
  std::vector<BufferId> free_;
  BufferId next_ = 0;
};

// Stops the pass: the trace needs the whole-trace path, for `why`.
absl::Status NotStreamable(std::string why) { return absl::CancelledError(why); }

}  // namespace

absl::StatusOr<std::optional<ReplayResult>> ReplayKinetoStreaming(const std::string& path,
                                                                  const ReplayOptions& options_in,
                                                                  std::string* why_not) {
  ReplayOptions options = options_in;
  ReplayResult r;
  r.source = path;
  r.format = "kineto";
  ToNativeOptions to_native;
  to_native.device = options.device;
  MemoryOpPairer pairer(path, to_native);
  std::unique_ptr<ReplayCore> core;
  std::optional<int32_t> device = options.device;
  int64_t index = 0;  // recorded memory-event index: every kept event counts
  bool checked_first_reserved = false;
  bool first_had_allocated = false;
  SimTime last_time(std::numeric_limits<int64_t>::min());
  int64_t last_seq = std::numeric_limits<int64_t>::min();
  std::vector<MemoryOp> ops;
  RecycledIds ids;

  size_t devices_at_first = 0;  // deviceProperties read before the first memory event
  bool provisional_capacity = false;
  auto on_event = [&](const RecordedMemoryEvent& m, const RecordedMetadata& meta) -> absl::Status {
    const int64_t i = index++;
    if (m.time < last_time || (m.time == last_time && m.seq < last_seq)) {
      return NotStreamable(absl::StrCat("memory event ", i, " is out of (ts, Ev Idx) order"));
    }
    last_time = m.time;
    last_seq = m.seq;
    if (!device.has_value()) device = m.device;
    if (m.device != *device) {
      if (!options.device.has_value()) return NotStreamable("memory events on several devices");
      // Another device's totals still make the comparison appear (as in
      // ReplayRecorded, whose check reads every event).
      if (core != nullptr && !r.offline) {
        if (m.total_allocated.has_value() && !r.allocated.has_value()) r.allocated.emplace();
        if (m.total_reserved.has_value() && !r.reserved.has_value()) r.reserved.emplace();
      }
      return absl::OkStatus();
    }
    if (m.stream >= 0) return NotStreamable("recorded streams");
    ops.clear();
    ASSIGN_OR_RETURN(bool converted, pairer.Add(m, i, 0, ops));
    if (!converted) {
      return NotStreamable(absl::StrCat("memory event ", i, " frees a block allocated before recording"));
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
        return NotStreamable("the cold start misses the first Total Reserved (a warm start is inferred from the "
                             "whole trace)");
      }
    }
    return absl::OkStatus();
  };

  KinetoImportOptions ko;
  ko.keep_gpu_ops = false;
  ko.keep_cpu_ops = false;
  ko.keep_stacks = false;
  ko.on_memory_event = on_event;
  auto imported = ImportKinetoTrace(path, ko);
  auto give_up = [&](std::string why) -> std::optional<ReplayResult> {
    if (why_not != nullptr) *why_not = std::move(why);
    return std::nullopt;
  };
  if (!imported.ok()) {
    // Not streamable, or bad input: the whole-trace path reports the error
    // as it always has.
    return give_up(absl::IsCancelled(imported.status()) ? std::string(imported.status().message())
                                                        : absl::StrCat("the trace has an error (", imported.status().message(), ")"));
  }
  if (!imported->captures.empty()) return give_up("CUDA graph captures");
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
  return std::optional<ReplayResult>(std::move(r));
}

}  // namespace gpusim
