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
// The step's memory events are replayed again through the allocator the
// step ran on (r.spec.allocator), logging every action it takes
// (Allocator::RecordEventsTo), as the engine does, and stopping at an
// out-of-memory as the engine does. device_traces is that log: alloc and
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
  // From the replay's start state (Note [One start state for every
  // command], sim/alloc/start_state.cc): its segments and blocks are there
  // before the first entry, as in a snapshot whose window starts warm.
  ASSIGN_OR_RETURN(std::unique_ptr<Allocator> alloc, MakeStartedAllocator(r.spec.allocator, r.capacity, r.start));
  const Trace& tr = r.lowered.trace;
  const size_t n = tr.events.size();
  std::vector<AllocatorEvent> log;
  alloc->RecordEventsTo(&log);

  PickleWriter p;
  p.BeginDict();
  p.Str("device_traces");
  p.BeginList();
  p.BeginList();  // device 0
  std::map<int64_t, Segment> segments, mapped;
  absl::flat_hash_map<BufferId, Bytes> live;  // buffer -> request
  bool any_segment = false;
  for (const SegmentLayout& seg : r.start.segments) {
    any_segment = true;
    segments[static_cast<int64_t>(seg.address)] = Segment{seg.size, seg.stream, false};
    for (const SegmentLayout::Block& b : seg.blocks) {
      if (b.buffer >= 0) live[b.buffer] = Bytes(b.requested);
    }
  }
  SimTime clock(0);
  auto entry = [&](std::string_view action, int64_t addr, int64_t size, StreamId stream, SimTime t,
                   const BufferInfo* b, int64_t device_free) {
    p.BeginDict();
    p.Str("action");
    p.Str(action);
    p.Str("addr");
    p.Int(addr);
    p.Str("size");
    p.Int(size);
    p.Str("stream");
    p.Int(stream);
    p.Str("time_us");
    p.Int(t.ns() / 1000);
    p.Str("frames");
    Frames(p, tr, b);
    if (device_free >= 0) {
      p.Str("device_free");
      p.Int(device_free);
    }
    p.EndDict();
  };
  bool oom = false;
  for (size_t i = 0; i < n && !oom; ++i) {
    const TraceEvent& e = tr.events[i];
    if (e.type != EventType::kAlloc && e.type != EventType::kFree) continue;
    clock = std::max(clock, r.sim.start.size() == n ? r.sim.start[i] : SimTime(0));
    log.clear();
    if (e.type == EventType::kAlloc) {
      if (r.start.Holds(e.buffer)) {
        live[e.buffer] = e.size;  // held since the start
      } else if (alloc->Alloc(e.buffer, e.size, e.stream)) {
        live[e.buffer] = e.size;
      } else {
        oom = true;
      }
    } else if (live.erase(e.buffer) > 0) {
      alloc->Free(e.buffer);
    }
    const BufferInfo* b = e.buffer >= 0 && static_cast<size_t>(e.buffer) < r.lowered.buffers.size()
                              ? &r.lowered.buffers[static_cast<size_t>(e.buffer)]
                              : nullptr;
    for (const AllocatorEvent& a : log) {
      const int64_t addr = static_cast<int64_t>(a.addr);
      switch (a.action) {
        case AllocatorAction::kAlloc:
          entry("alloc", addr, a.size.value(), a.stream, clock, b, -1);
          break;
        case AllocatorAction::kFree:
          entry("free_requested", addr, a.size.value(), a.stream, clock, b, -1);
          entry("free_completed", addr, a.size.value(), a.stream, clock, b, -1);
          break;
        case AllocatorAction::kSegmentAlloc:
          any_segment = true;
          segments[addr] = Segment{a.size.value(), a.stream, false};
          entry("segment_alloc", addr, a.size.value(), a.stream, clock, nullptr, -1);
          break;
        case AllocatorAction::kSegmentFree:
          segments.erase(addr);
          entry("segment_free", addr, a.size.value(), a.stream, clock, nullptr, -1);
          break;
        case AllocatorAction::kSegmentMap:
          any_segment = true;
          Map(&mapped, addr, a.size.value(), a.stream);
          entry("segment_map", addr, a.size.value(), a.stream, clock, nullptr, -1);
          break;
        case AllocatorAction::kSegmentUnmap:
          Unmap(&mapped, addr, a.size.value());
          entry("segment_unmap", addr, a.size.value(), a.stream, clock, nullptr, -1);
          break;
        case AllocatorAction::kOom:
          entry("oom", 0, a.size.value(), a.stream, clock, b, addr);
          break;
      }
    }
  }
  alloc->RecordEventsTo(nullptr);
  p.EndList();
  p.EndList();
  if (!any_segment && !live.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--snapshot: allocator '", name, "' reports no segments (cudaMalloc calls); a memory snapshot is written for "
        "allocators that do: pytorch_caching, bfc"));
  }
  for (const auto& [addr, seg] : mapped) segments[addr] = seg;

  // Live blocks by address.
  struct Block {
    int64_t addr, size, requested;
    const BufferInfo* b;
  };
  std::vector<Block> blocks;
  for (const auto& [id, req] : live) {
    const auto addr = alloc->AddressOf(id);
    const auto size = alloc->BlockSizeOf(id);
    if (!addr.has_value() || !size.has_value()) {
      return absl::InternalError(absl::StrCat("--snapshot: allocator '", name, "' has no address for live buffer ", id));
    }
    const BufferInfo* b = id >= 0 && static_cast<size_t>(id) < r.lowered.buffers.size()
                              ? &r.lowered.buffers[static_cast<size_t>(id)]
                              : nullptr;
    blocks.push_back(Block{static_cast<int64_t>(*addr), size->value(), req.value(), b});
  }
  std::sort(blocks.begin(), blocks.end(), [](const Block& a, const Block& b) { return a.addr < b.addr; });

  auto block_dict = [&](int64_t addr, int64_t size, int64_t requested, std::string_view state, const BufferInfo* b,
                        std::string_view file = "") {
    p.BeginDict();
    p.Str("address");
    p.Int(addr);
    p.Str("size");
    p.Int(size);
    p.Str("requested_size");
    p.Int(requested);
    p.Str("state");
    p.Str(state);
    p.Str("frames");
    Frames(p, tr, b, file);
    p.EndDict();
  };
  auto segment_head = [&](int64_t addr, int64_t total, int64_t allocated, int64_t requested, StreamId stream,
                          bool expandable) {
    p.BeginDict();
    p.Str("device");
    p.Int(0);
    p.Str("address");
    p.Int(addr);
    p.Str("total_size");
    p.Int(total);
    p.Str("allocated_size");
    p.Int(allocated);
    p.Str("active_size");
    p.Int(allocated);
    p.Str("requested_size");
    p.Int(requested);
    p.Str("stream");
    p.Int(stream);
    p.Str("segment_type");
    p.Str(total <= kSmallSegment && !expandable ? "small" : "large");
    // A CUDA graph's private pool (Note [CUDA graph private pools]): its
    // MempoolId, as CUDAGraph::capture_begin gives a graph its own pool
    // ({id, 0}); the main pool is (0, 0).
    const int32_t pool = GraphPoolOfAddress(static_cast<uint64_t>(addr));
    p.Str("segment_pool_id");
    p.BeginTuple();
    p.Int(pool < 0 ? 0 : pool + 1);
    p.Int(0);
    p.EndTuple();
    p.Str("is_expandable");
    p.Bool(expandable);
    p.Str("frames");
    p.BeginList();
    p.EndList();
    p.Str("blocks");
    p.BeginList();
  };

  p.Str("segments");
  p.BeginList();
  size_t k = 0;
  int64_t top = 0;
  for (const auto& [addr, seg] : segments) {
    const int64_t end = addr + seg.size;
    top = std::max(top, end);
    while (k < blocks.size() && blocks[k].addr < addr) {
      return absl::InternalError(absl::StrCat("--snapshot: live block at ", blocks[k].addr, " is in no segment"));
    }
    size_t k1 = k;
    int64_t allocated = 0, requested = 0;
    while (k1 < blocks.size() && blocks[k1].addr < end) {
      if (blocks[k1].addr + blocks[k1].size > end) {
        return absl::InternalError(absl::StrCat("--snapshot: live block at ", blocks[k1].addr, " overruns its segment"));
      }
      allocated += blocks[k1].size;
      requested += blocks[k1].requested;
      ++k1;
    }
    segment_head(addr, seg.size, allocated, requested, seg.stream, seg.expandable);
    int64_t at = addr;
    for (; k < k1; ++k) {
      if (blocks[k].addr > at) block_dict(at, blocks[k].addr - at, 0, "inactive", nullptr);
      block_dict(blocks[k].addr, blocks[k].size, blocks[k].requested, "active_allocated", blocks[k].b);
      at = blocks[k].addr + blocks[k].size;
    }
    if (at < end) block_dict(at, end - at, 0, "inactive", nullptr);
    p.EndList();
    p.EndDict();
  }
  if (k < blocks.size()) {
    return absl::InternalError(absl::StrCat("--snapshot: live block at ", blocks[k].addr, " is in no segment"));
  }
  // A start state holds the bytes live before the trace in its segments
  // (Note [One start state for every command]); without one they are a
  // segment of their own.
  if (tr.preexisting.value() > 0 && r.start.empty()) {
    const int64_t addr = (top + kSmallSegment - 1) / kSmallSegment * kSmallSegment;
    const int64_t size = tr.preexisting.value();
    segment_head(addr, size, size, size, 0, false);
    BufferInfo pre;
    pre.name = "preexisting";
    pre.origin = "bytes live before the trace began (not replayed through the allocator)";
    block_dict(addr, size, size, "active_allocated", &pre, "gpusim:preexisting");
    p.EndList();
    p.EndDict();
  }
  p.EndList();

  p.Str("allocator_settings");
  p.BeginDict();
  std::vector<std::string> conf;
  for (const auto& [key, value] : r.spec.allocator.options) conf.push_back(absl::StrCat(key, ":", value));
  p.Str("PYTORCH_CUDA_ALLOC_CONF");
  p.Str(absl::StrJoin(conf, ","));
  p.Str("gpusim_allocator");
  p.Str(name);
  for (const auto& [key, value] : r.spec.allocator.options) {
    p.Str(key);
    p.Str(value);
  }
  p.EndDict();
  p.EndDict();
  return p.Finish();
}

absl::Status WriteMemorySnapshot(const StepReport& r, const std::string& path) {
  ASSIGN_OR_RETURN(std::string data, MemorySnapshotPickle(r));
  return WriteFileAtomically(path, data);
}

}  // namespace gpusim
