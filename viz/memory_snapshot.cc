// A simulated or replayed step as a PyTorch memory snapshot: the dict that
// torch.cuda.memory._snapshot() returns and torch.cuda.memory._dump_snapshot()
// pickles (torch/cuda/memory.py, the `Snapshot` / `Segment` / `Block` /
// `TraceEntry` TypedDicts; c10/cuda/CUDACachingAllocator.h, TraceEntry::Action),
// which pytorch.org/memory_viz and torch.cuda._memory_viz read:
//
//   {'segments': [{'device', 'address', 'total_size', 'allocated_size',
//                  'active_size', 'requested_size', 'stream', 'segment_type',
//                  'segment_pool_id', 'is_expandable', 'frames',
//                  'blocks': [{'address', 'size', 'requested_size', 'state',
//                              'frames'}]}],
//    'device_traces': [[{'action', 'addr', 'size', 'stream', 'time_us',
//                        'frames'[, 'device_free']}]],
//    'allocator_settings': {...}}
//
// Note [Snapshot from a simulation]
// The engine's memory event log (Note [One memory event log],
// sim/engine/engine.h) holds every action the step's allocator
// (r.spec.allocator) took (Allocator::RecordEventsTo), up to an
// out-of-memory; the snapshot reads it rather than replaying the step
// again. device_traces is that log: alloc and
// free with the request's size (PyTorch records orig_size and
// requested_size), each free as free_requested then free_completed (no
// cross-stream uses are modelled, so a block is reusable at once),
// segment_alloc / segment_free / segment_map / segment_unmap, and oom with
// device_free. time_us is the simulated issue time on the monotone memory
// clock of Note [Memory counters in time order] (viz/perfetto.cc).
// `segments` is the allocator's state at the end of the step (or at the OOM):
// the segments the log leaves (an expandable segment's mapped ranges merged
// into one segment each), each covered by its live blocks and, between them,
// one inactive block per gap (PyTorch merges adjacent free blocks). Bytes
// live before the trace never went through the allocator; they are one
// extra segment above the highest address with one block. gpusim has no
// Python stacks, so each live block's frames are one frame naming the
// buffer: {'filename': 'gpusim:<role>', 'line': 0, 'name': '<buffer>: <origin>'}.
#include <algorithm>
#include <map>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "sim/alloc/allocator.h"
#include "sim/alloc/graph_pools.h"
#include "sim/alloc/start_state.h"
#include "sim/base/file_util.h"
#include "sim/base/status.h"
#include "viz/pickle.h"
#include "viz/viz.h"

namespace gpusim {
namespace {

constexpr int64_t kSmallSegment = int64_t{2} << 20;  // PyTorch kSmallBuffer: the small pool's segments

struct Segment {
  int64_t size = 0;
  StreamId stream = 0;
  bool expandable = false;
};

// Adds [addr, addr + size) to the expandable mapped ranges, merging
// neighbours; Unmap removes it.
void Map(std::map<int64_t, Segment>* m, int64_t addr, int64_t size, StreamId stream) {
  int64_t lo = addr, hi = addr + size;
  auto it = m->upper_bound(addr);
  if (it != m->begin()) {
    auto prev = std::prev(it);
    if (prev->first + prev->second.size >= lo) {
      lo = prev->first;
      hi = std::max(hi, prev->first + prev->second.size);
      stream = prev->second.stream;
      it = m->erase(prev);
    }
  }
  while (it != m->end() && it->first <= hi) {
    hi = std::max(hi, it->first + it->second.size);
    it = m->erase(it);
  }
  (*m)[lo] = Segment{hi - lo, stream, true};
}

void Unmap(std::map<int64_t, Segment>* m, int64_t addr, int64_t size) {
  const int64_t lo = addr, hi = addr + size;
  auto it = m->upper_bound(lo);
  if (it != m->begin()) --it;
  while (it != m->end() && it->first < hi) {
    const int64_t s = it->first, e = it->first + it->second.size;
    const Segment seg = it->second;
    if (e <= lo) {
      ++it;
      continue;
    }
    it = m->erase(it);
    if (s < lo) (*m)[s] = Segment{lo - s, seg.stream, true};
    if (e > hi) it = m->emplace(hi, Segment{e - hi, seg.stream, true}).first;
  }
}

// `b`'s call stack: the frames its alloc event recorded (native trace 1.1
// `stack=`), innermost first as PyTorch lists them; else one frame naming
// the buffer (none for null). `file` replaces "gpusim:<role>" when given.
void Frames(PickleWriter& p, const Trace& tr, const BufferInfo* b, std::string_view file = "") {
  p.BeginList();
  const TraceEvent* alloc = b != nullptr && b->alloc_event >= 0 && static_cast<size_t>(b->alloc_event) < tr.events.size()
                                ? &tr.events[static_cast<size_t>(b->alloc_event)]
                                : nullptr;
  if (alloc != nullptr && !alloc->stack.empty()) {
    for (int32_t f : alloc->stack) {
      if (f < 0 || static_cast<size_t>(f) >= tr.frames.size()) continue;
      const StackFrame& fr = tr.frames[static_cast<size_t>(f)];
      p.BeginDict();
      p.Str("filename");
      p.Str(fr.file);
      p.Str("line");
      p.Int(fr.line);
      p.Str("name");
      p.Str(fr.function);
      p.EndDict();
    }
  } else if (b != nullptr) {
    p.BeginDict();
    p.Str("filename");
    p.Str(file.empty() ? absl::StrCat("gpusim:", std::string(RoleName(b->role))) : std::string(file));
    p.Str("line");
    p.Int(0);
    p.Str("name");
    p.Str(b->origin.empty() ? b->name : absl::StrCat(b->name, ": ", b->origin));
    p.EndDict();
  }
  p.EndList();
}

// A live block of the snapshot's segments.
struct LiveBlock {
  int64_t addr, size, requested;
  const BufferInfo* b;
};

// Writes a step's replay as torch.cuda.memory._snapshot() lays it out: the
// allocator's actions as the device trace, then the segments and blocks
// live at the end, then the allocator settings.
class SnapshotWriter {
 public:
  explicit SnapshotWriter(const StepReport& r) : r_(r), tr_(r.lowered.trace), log_(r.sim.memory_log) {}

  absl::StatusOr<std::string> Write() {
    p_.BeginDict();
    p_.Str("device_traces");
    p_.BeginList();
    p_.BeginList();  // device 0
    StartSegments();
    DeviceTrace();
    p_.EndList();
    p_.EndList();
    const std::string& name = r_.sim.allocator_name;
    if (!any_segment_ && !live_.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--snapshot: allocator '", name, "' reports no segments (cudaMalloc calls); a memory snapshot is written for "
          "allocators that do: pytorch_caching, bfc"));
    }
    for (const auto& [addr, seg] : mapped_) segments_[addr] = seg;
    ASSIGN_OR_RETURN(std::vector<LiveBlock> blocks, LiveBlocks());
    RETURN_IF_ERROR(Segments(blocks));
    AllocatorSettings();
    p_.EndDict();
    return p_.Finish();
  }

 private:
  // The start state's segments and the buffers live in them.
  void StartSegments() {
    for (const SegmentLayout& seg : r_.start.segments) {
      any_segment_ = true;
      segments_[static_cast<int64_t>(seg.address)] = Segment{seg.size, seg.stream, false};
      for (const SegmentLayout::Block& b : seg.blocks) {
        if (b.buffer >= 0) live_[b.buffer] = Bytes(b.requested);
      }
    }
  }

  void Entry(std::string_view action, int64_t addr, int64_t size, StreamId stream, SimTime t, const BufferInfo* b,
             int64_t device_free) {
    p_.BeginDict();
    p_.Str("action");
    p_.Str(action);
    p_.Str("addr");
    p_.Int(addr);
    p_.Str("size");
    p_.Int(size);
    p_.Str("stream");
    p_.Int(stream);
    p_.Str("time_us");
    p_.Int(t.ns() / 1000);
    p_.Str("frames");
    Frames(p_, tr_, b);
    if (device_free >= 0) {
      p_.Str("device_free");
      p_.Int(device_free);
    }
    p_.EndDict();
  }

  const BufferInfo* Buffer(BufferId id) const {
    return id >= 0 && static_cast<size_t>(id) < r_.lowered.buffers.size() ? &r_.lowered.buffers[static_cast<size_t>(id)]
                                                                          : nullptr;
  }

  // The trace's allocs and frees with the allocator's actions the engine
  // logged for each, one trace entry per action, until the first OOM.
  void DeviceTrace() {
    const size_t n = tr_.events.size();
    const int64_t oom_at = r_.sim.oom.happened ? r_.sim.oom.event : -1;
    SimTime clock(0);
    size_t k = 0;  // the next logged action
    for (size_t i = 0; i < n; ++i) {
      const TraceEvent& e = tr_.events[i];
      if (e.type != EventType::kAlloc && e.type != EventType::kFree) continue;
      clock = std::max(clock, r_.sim.start.size() == n ? r_.sim.start[i] : SimTime(0));
      const bool oom = static_cast<int64_t>(i) == oom_at;
      if (e.type == EventType::kAlloc) {
        if (!oom) live_[e.buffer] = e.size;
      } else {
        live_.erase(e.buffer);
      }
      const BufferInfo* b = Buffer(e.buffer);
      for (; k < log_.actions.size() && log_.actions[k].event == static_cast<int64_t>(i); ++k) {
        Action(log_.actions[k].action, clock, b);
      }
      if (oom) break;
    }
  }

  void Action(const AllocatorEvent& a, SimTime clock, const BufferInfo* b) {
    const int64_t addr = static_cast<int64_t>(a.addr);
    switch (a.action) {
      case AllocatorAction::kAlloc:
        Entry("alloc", addr, a.size.value(), a.stream, clock, b, -1);
        break;
      case AllocatorAction::kFree:
        Entry("free_requested", addr, a.size.value(), a.stream, clock, b, -1);
        Entry("free_completed", addr, a.size.value(), a.stream, clock, b, -1);
        break;
      case AllocatorAction::kSegmentAlloc:
        any_segment_ = true;
        segments_[addr] = Segment{a.size.value(), a.stream, false};
        Entry("segment_alloc", addr, a.size.value(), a.stream, clock, nullptr, -1);
        break;
      case AllocatorAction::kSegmentFree:
        segments_.erase(addr);
        Entry("segment_free", addr, a.size.value(), a.stream, clock, nullptr, -1);
        break;
      case AllocatorAction::kSegmentMap:
        any_segment_ = true;
        Map(&mapped_, addr, a.size.value(), a.stream);
        Entry("segment_map", addr, a.size.value(), a.stream, clock, nullptr, -1);
        break;
      case AllocatorAction::kSegmentUnmap:
        Unmap(&mapped_, addr, a.size.value());
        Entry("segment_unmap", addr, a.size.value(), a.stream, clock, nullptr, -1);
        break;
      case AllocatorAction::kOom:
        Entry("oom", 0, a.size.value(), a.stream, clock, b, addr);
        break;
    }
  }

  // Live blocks by address.
  absl::StatusOr<std::vector<LiveBlock>> LiveBlocks() const {
    std::vector<LiveBlock> blocks;
    for (const auto& [id, req] : live_) {
      const MemoryEventLog::Block* held = log_.LiveBlock(id);
      if (held == nullptr || !held->address.has_value() || !held->size.has_value()) {
        return absl::InternalError(
            absl::StrCat("--snapshot: allocator '", r_.sim.allocator_name, "' has no address for live buffer ", id));
      }
      blocks.push_back(LiveBlock{static_cast<int64_t>(*held->address), held->size->value(), req.value(), Buffer(id)});
    }
    std::sort(blocks.begin(), blocks.end(), [](const LiveBlock& a, const LiveBlock& b) { return a.addr < b.addr; });
    return blocks;
  }

  void BlockDict(int64_t addr, int64_t size, int64_t requested, std::string_view state, const BufferInfo* b,
                 std::string_view file = "") {
    p_.BeginDict();
    p_.Str("address");
    p_.Int(addr);
    p_.Str("size");
    p_.Int(size);
    p_.Str("requested_size");
    p_.Int(requested);
    p_.Str("state");
    p_.Str(state);
    p_.Str("frames");
    Frames(p_, tr_, b, file);
    p_.EndDict();
  }

  // A segment's dict up to its open "blocks" list.
  void SegmentHead(int64_t addr, int64_t total, int64_t allocated, int64_t requested, StreamId stream,
                   bool expandable) {
    p_.BeginDict();
    p_.Str("device");
    p_.Int(0);
    p_.Str("address");
    p_.Int(addr);
    p_.Str("total_size");
    p_.Int(total);
    p_.Str("allocated_size");
    p_.Int(allocated);
    p_.Str("active_size");
    p_.Int(allocated);
    p_.Str("requested_size");
    p_.Int(requested);
    p_.Str("stream");
    p_.Int(stream);
    p_.Str("segment_type");
    p_.Str(total <= kSmallSegment && !expandable ? "small" : "large");
    // A CUDA graph's private pool (Note [CUDA graph private pools]): its
    // MempoolId, as CUDAGraph::capture_begin gives a graph its own pool
    // ({id, 0}); the main pool is (0, 0).
    const int32_t pool = GraphPoolOfAddress(static_cast<uint64_t>(addr));
    p_.Str("segment_pool_id");
    p_.BeginTuple();
    p_.Int(pool < 0 ? 0 : pool + 1);
    p_.Int(0);
    p_.EndTuple();
    p_.Str("is_expandable");
    p_.Bool(expandable);
    p_.Str("frames");
    p_.BeginList();
    p_.EndList();
    p_.Str("blocks");
    p_.BeginList();
  }

  // Every segment with its blocks, live and inactive, in address order.
  absl::Status Segments(const std::vector<LiveBlock>& blocks) {
    p_.Str("segments");
    p_.BeginList();
    size_t k = 0;
    int64_t top = 0;
    for (const auto& [addr, seg] : segments_) {
      const int64_t end = addr + seg.size;
      top = std::max(top, end);
      while (k < blocks.size() && blocks[k].addr < addr) {
        return absl::InternalError(absl::StrCat("--snapshot: live block at ", blocks[k].addr, " is in no segment"));
      }
      size_t k1 = k;
      int64_t allocated = 0, requested = 0;
      while (k1 < blocks.size() && blocks[k1].addr < end) {
        if (blocks[k1].addr + blocks[k1].size > end) {
          return absl::InternalError(
              absl::StrCat("--snapshot: live block at ", blocks[k1].addr, " overruns its segment"));
        }
        allocated += blocks[k1].size;
        requested += blocks[k1].requested;
        ++k1;
      }
      SegmentHead(addr, seg.size, allocated, requested, seg.stream, seg.expandable);
      int64_t at = addr;
      for (; k < k1; ++k) {
        if (blocks[k].addr > at) BlockDict(at, blocks[k].addr - at, 0, "inactive", nullptr);
        BlockDict(blocks[k].addr, blocks[k].size, blocks[k].requested, "active_allocated", blocks[k].b);
        at = blocks[k].addr + blocks[k].size;
      }
      if (at < end) BlockDict(at, end - at, 0, "inactive", nullptr);
      p_.EndList();
      p_.EndDict();
    }
    if (k < blocks.size()) {
      return absl::InternalError(absl::StrCat("--snapshot: live block at ", blocks[k].addr, " is in no segment"));
    }
    // A start state holds the bytes live before the trace in its segments
    // (Note [One start state for every command]); without one they are a
    // segment of their own.
    if (tr_.preexisting.value() > 0 && r_.start.empty()) {
      const int64_t addr = (top + kSmallSegment - 1) / kSmallSegment * kSmallSegment;
      const int64_t size = tr_.preexisting.value();
      SegmentHead(addr, size, size, size, 0, false);
      BufferInfo pre;
      pre.name = "preexisting";
      pre.origin = "bytes live before the trace began (not replayed through the allocator)";
      BlockDict(addr, size, size, "active_allocated", &pre, "gpusim:preexisting");
      p_.EndList();
      p_.EndDict();
    }
    p_.EndList();
    return absl::OkStatus();
  }

  void AllocatorSettings() {
    p_.Str("allocator_settings");
    p_.BeginDict();
    std::vector<std::string> conf;
    for (const auto& [key, value] : r_.spec.allocator.options) conf.push_back(absl::StrCat(key, ":", value));
    p_.Str("PYTORCH_CUDA_ALLOC_CONF");
    p_.Str(absl::StrJoin(conf, ","));
    p_.Str("gpusim_allocator");
    p_.Str(r_.sim.allocator_name);
    for (const auto& [key, value] : r_.spec.allocator.options) {
      p_.Str(key);
      p_.Str(value);
    }
    p_.EndDict();
  }

  const StepReport& r_;
  const Trace& tr_;
  const MemoryEventLog& log_;
  PickleWriter p_;
  std::map<int64_t, Segment> segments_, mapped_;
  absl::flat_hash_map<BufferId, Bytes> live_;  // buffer -> request
  bool any_segment_ = false;
};

}  // namespace

absl::StatusOr<std::string> MemorySnapshotPickle(const StepReport& r) {
  const std::string& name = r.sim.allocator_name;
  if (name.empty() || name == "ideal") {
    return absl::InvalidArgumentError(absl::StrCat(
        "--snapshot: the step ran on allocator '", name.empty() ? "none" : name,
        "', which places no blocks",
        r.semantics.runtime_check == RuntimeCheck::kJaxArena
            ? " (framework jax: XLA steps are accounted statically; use --set framework=pytorch)"
            : "",
        "; a memory snapshot needs one that does, e.g. --allocator pytorch_caching"));
  }
  if (!r.sim.memory_log.kept) {
    return absl::InternalError("--snapshot: the step's engine kept no memory event log (Note [One memory event log])");
  }
  // The log starts from the replay's start state (Note [One start state for
  // every command], sim/alloc/start_state.cc): its segments and blocks are
  // there before the first entry, as in a snapshot whose window starts warm.
  return SnapshotWriter(r).Write();
}

absl::Status WriteMemorySnapshot(const StepReport& r, const std::string& path) {
  ASSIGN_OR_RETURN(std::string data, MemorySnapshotPickle(r));
  return WriteFileAtomically(path, data);
}

}  // namespace gpusim
