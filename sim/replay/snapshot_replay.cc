// The snapshot replay: the allocator state at the window's start rebuilt
// from the final segments, replayed forward through pytorch_caching with
// every address checked (ReplaySnapshot, sim/replay/replay.h).
#include <algorithm>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "sim/alloc/cuda_caching_constants.h"
#include "sim/base/status.h"
#include "sim/replay/replay.h"
#include "sim/replay/replay_internal.h"

namespace gpusim {

using replay_internal::PeakTracker;
using replay_internal::ResolveCapacity;

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

constexpr int64_t kSmallSegment = cuda_caching::kSmallBuffer;
using cuda_caching::kSmallSize;

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

  // What a pass tracks while it replays: the live blocks by recorded
  // address, their requests, the restored blocks whose size was guessed,
  // and the requested bytes now and at their peak.
  struct ReplayState {
    absl::flat_hash_map<uint64_t, BufferId> live;  // recorded address → id
    absl::flat_hash_map<BufferId, int64_t> requested_of;
    absl::flat_hash_map<BufferId, uint64_t> guessed_at;  // inexact restored blocks
    BufferId next_id = 0;
    Bytes cur_requested, best_requested;
  };

  // Restores the window's start state: each segment with its blocks.
  absl::Status Restore(Allocator& a, const std::map<uint64_t, InitSegment>& segs,
                       const std::map<uint64_t, InitBlock>& blocks, ReplayState& s, Pass& pass) {
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
        const BufferId id = s.next_id++;
        layout.blocks.push_back({it->first, it->second.size, it->second.requested, id});
        s.live[it->first] = id;
        s.requested_of[id] = it->second.requested;
        if (!it->second.exact) s.guessed_at[id] = it->first;
        at = it->first + static_cast<uint64_t>(it->second.size);
        ++pass.check.restored_blocks;
      }
      if (at < end) layout.blocks.push_back({at, static_cast<int64_t>(end - at), 0, -1});
      const absl::Status st = a.RestoreSegment(layout);
      if (!st.ok()) return absl::InvalidArgumentError(absl::StrCat(snap.trace.metadata.source_file, ": ", st.message()));
      ++pass.check.restored_segments;
    }
    return absl::OkStatus();
  }

  // Replays the window's k-th event.
  absl::Status Replay(Allocator& a, const std::map<uint64_t, InitBlock>& blocks, size_t k, ReplayState& s,
                      Pass& pass) {
    const RecordedMemoryEvent& m = *window.events[k];
    const uint64_t addr = static_cast<uint64_t>(*m.address);
    const int64_t idx = window.index[k];
    switch (m.kind) {
      case MemoryEventKind::kAlloc: {
        const BufferId id = s.next_id++;
        ++pass.check.allocations;
        ++pass.result.events;
        if (!a.Alloc(id, m.size, Stream(m.stream))) {
          ++pass.result.ooms;
          if (!pass.result.oom.has_value()) {
            const AllocatorStats stats = a.stats();
            pass.result.oom = ReplayOom{idx, m.time, m.size, stats.reserved, options.capacity - stats.reserved};
          }
          if (pass.check.misses.size() < 10) {
            pass.check.misses.push_back(absl::StrFormat("entry %d: alloc of %d bytes failed (out of memory)", idx,
                                                        m.size.value()));
          }
          break;
        }
        s.live[addr] = id;
        s.requested_of[id] = m.size.value();
        s.cur_requested += m.size;
        s.best_requested = std::max(s.best_requested, s.cur_requested);
        const uint64_t got = *a.AddressOf(id);
        if (got == addr) {
          ++pass.check.at_recorded_address;
        } else {
          if (pass.check.misses.size() < 10) {
            pass.check.misses.push_back(absl::StrFormat(
                "entry %d: alloc of %d bytes at 0x%x, recorded at 0x%x", idx, m.size.value(), got, addr));
          }
          // Explained by a guessed block that was really larger?
          if (auto g = GrowthFor(a, s.guessed_at, id, addr)) {
            auto it = blocks.find(g->first);
            if (it != blocks.end() && it->second.free_event >= 0 && g->second > it->second.size) {
              pass.growths.try_emplace(it->second.free_event, g->second);
            }
          }
        }
        break;
      }
      case MemoryEventKind::kFreeCompleted: {
        auto it = s.live.find(addr);
        if (it == s.live.end()) {
          return absl::InvalidArgumentError(absl::StrFormat(
              "%s: trace entry %d frees 0x%x, which is not allocated", snap.trace.metadata.source_file, idx, addr));
        }
        ++pass.result.events;
        a.Free(it->second);
        s.cur_requested -= Bytes(s.requested_of[it->second]);
        s.requested_of.erase(it->second);
        s.guessed_at.erase(it->second);
        s.live.erase(it);
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
        for (const SegmentLayout& seg : a.Segments()) held |= seg.address == addr;
        if (held) a.ReleaseCache();
        break;
      }
      default:
        break;
    }
    return absl::OkStatus();
  }

  // The end state against the snapshot's segments: segments that differ in
  // size or allocated blocks, or are on one side only.
  int64_t FinalSegmentDifferences(const Allocator& a) const {
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
    return diffs;
  }

  absl::StatusOr<Pass> Run(const std::map<int64_t, int64_t>& grown) {
    std::map<uint64_t, InitSegment> segs;
    std::map<uint64_t, InitBlock> blocks;
    int64_t inferred = 0;
    RETURN_IF_ERROR(StartState(grown, &segs, &blocks, &inferred));
    Pass pass;
    pass.check.inferred_block_sizes = inferred;
    ASSIGN_OR_RETURN(std::unique_ptr<Allocator> made, MakeAllocator(options.allocator, options.capacity));
    CountMemoryReplay();  // Note [Counting memory replays]
    Allocator& a = *made;
    ReplayState s;
    RETURN_IF_ERROR(Restore(a, segs, blocks, s, pass));
    if (options.keep_start_state) pass.result.start = CaptureStartState(a, {}, Bytes(0), -1);  // this replay's ids
    if (const AllocatorUsage u = a.usage(); u.reserved > options.capacity) {
      // The recorded segments exceed the capacity: an OOM before the first
      // event; the replay goes on from the recorded state.
      ++pass.result.ooms;
      pass.result.oom = ReplayOom{-1, SimTime(-1), u.reserved, Bytes(0), options.capacity};
    }
    PeakTracker peak;
    peak.Observe(a.usage());
    for (const auto& [addr, b] : blocks) s.cur_requested += Bytes(b.requested);
    s.best_requested = s.cur_requested;
    for (size_t k = 0; k < window.events.size(); ++k) {
      RETURN_IF_ERROR(Replay(a, blocks, k, s, pass));
      peak.Observe(a.usage());
    }
    const int64_t diffs = FinalSegmentDifferences(a);
    pass.check.final_segment_differences = diffs;
    pass.check.final_segments_match = diffs == 0;
    pass.result.stats = a.stats();
    pass.result.fragmentation_at_peak = peak.fragmentation;
    pass.result.no_fragmentation_peak = s.best_requested;
    return pass;
  }
};

// Note [One start state for every command] (sim/alloc/start_state.cc) for a
// snapshot: the rebuilt window start holds its blocks under this replay's
// ids; the import (ToNativeTrace) allocates the same blocks first, as head
// allocs, before any free, and says which recorded address each is
// (ToNativeOptions::head_addresses: the pairing's own identity of a block).
// Each restored block becomes the import's buffer at its address (held: its
// head alloc is not replayed again); a restored block the import never
// allocates keeps an id past the import's.
absl::Status StartStateUnderImportIds(const Trace& imported,
                                      const std::vector<std::pair<BufferId, int64_t>>& head_addresses,
                                      AllocatorStartState* start) {
  absl::flat_hash_map<uint64_t, BufferId> head;  // address → import id
  BufferId next = 0;
  for (const TraceEvent& e : imported.events) next = std::max(next, e.buffer + 1);
  for (const auto& [id, addr] : head_addresses) head.emplace(static_cast<uint64_t>(addr), id);
  std::vector<BufferId> held;
  for (SegmentLayout& seg : start->segments) {
    for (SegmentLayout::Block& b : seg.blocks) {
      if (b.buffer < 0) continue;
      auto it = head.find(b.address);
      if (it == head.end()) {
        b.buffer = next++;
        continue;
      }
      b.buffer = it->second;
      held.push_back(it->second);
      head.erase(it);
    }
  }
  std::sort(held.begin(), held.end());
  start->held = std::move(held);
  return absl::OkStatus();
}

}  // namespace

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
    if (auto t = ToMemoryOps(snapshot.trace, to_native, &r.conversion); !t.ok()) return t.status();
  }
  if (r.start.has_value()) {
    ToNativeOptions to_native;
    to_native.device = ar.device;
    to_native.include_gpu_ops = false;
    std::vector<std::pair<BufferId, int64_t>> head_addresses;
    to_native.head_addresses = &head_addresses;
    ASSIGN_OR_RETURN(Trace imported, ToNativeTrace(snapshot.trace, to_native));
    RETURN_IF_ERROR(StartStateUnderImportIds(imported, head_addresses, &*r.start));
  }
  if (!options.check_addresses) r.addresses.reset();
  r.source = snapshot.trace.metadata.source_file;
  r.format = "snapshot";
  r.allocator = "pytorch_caching";
  r.capacity = options.capacity;
  r.capacity_source = options.capacity_source;
  return r;
}

}  // namespace gpusim
