// Allocator strategies: one small, event-shaped interface (in the manner of
// XLA's HeapAlgorithm, xla/service/heap_simulator/heap_simulator.h) that the
// engine consults at every alloc and free; strategies are picked by name
// from a registry that lists itself (`gpusim list allocators`).
//
// Exact replay: every placing strategy reports the address and the rounded
// size of each live block (AddressOf, BlockSizeOf), keeps PyTorch-style
// statistics (AllocatorStats), and can log each action it takes — block
// alloc/free, segment alloc/free/map/unmap, oom — in the vocabulary of a
// PyTorch memory snapshot's `device_traces` (RecordEventsTo). The OOM
// sequence of a caching allocator (release cached segments, retry, give up)
// is read from that log.
#ifndef GPUSIM_SIM_ALLOC_ALLOCATOR_H_
#define GPUSIM_SIM_ALLOC_ALLOCATOR_H_

#include <cstdint>
#include <map>
#include <memory>
#include <any>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "sim/base/registry.h"
#include "sim/base/checked.h"
#include "sim/base/units.h"
#include "sim/config/spec.h"
#include "sim/trace/trace.h"

namespace gpusim {

// Note [Huge requests]: no device holds kMaxDeviceBytes (64 TiB), so every strategy
// rounds min(request, kMaxRequestBytes) instead of the request itself: the
// rounding (to 512 B, 2 MiB, a power of two, a power-2 division) then never
// overflows int64 (nor the caching allocator's 48-bit size keys), and since MakeAllocator refuses a capacity of
// kMaxRequestBytes or more, a clamped request cannot fit and runs the
// strategy's ordinary out-of-memory path (a PyTorch caching allocator first
// releases its cache, as cudaMalloc failing would make it). A 2^63-1 byte
// request is therefore an OOM, never a CHECK or a wrapped size.
inline constexpr int64_t kMaxRequestBytes = kMaxDeviceBytes;
inline int64_t ClampRequest(int64_t bytes) { return bytes < kMaxRequestBytes ? bytes : kMaxRequestBytes; }

// Current values and high-water marks, all in bytes except the counters.
// Field names follow PyTorch's torch.cuda.memory_stats() where one exists.
struct AllocatorStats {
  Bytes allocated;        // bytes handed out (block sizes), now
  Bytes reserved;         // bytes obtained from the device (segments), now
  Bytes peak_allocated;
  Bytes peak_reserved;
  int64_t device_mallocs = 0;  // cudaMalloc calls / pages mapped (num_device_alloc)
  int64_t device_frees = 0;    // cudaFree calls / pages unmapped (num_device_free)
  Bytes largest_free_block;    // largest block that one request could get without a new segment
  Bytes requested;             // sum of live requests before rounding
  Bytes peak_requested;
  Bytes active;                // allocated, or freed but not yet reusable
  Bytes peak_active;
  Bytes inactive_split;        // free bytes inside partly used segments
  Bytes peak_inactive_split;
  int64_t segments = 0;        // segments (regions, arenas) held now
  int64_t peak_segments = 0;
  int64_t alloc_retries = 0;   // allocations that released cache and retried
  int64_t ooms = 0;            // allocations that failed
};

// The two counters a memory timeline draws (torch.cuda.memory_allocated()
// and memory_reserved()).
struct AllocatorUsage {
  Bytes allocated;
  Bytes reserved;
};

// What an allocator did, as a PyTorch memory snapshot's device_traces
// records it (torch/cuda/_memory_viz.py actions).
enum class AllocatorAction {
  kAlloc,         // a block handed to `buffer`; size = the request
  kFree,          // `buffer`'s block returned to the cache; size = the request
  kSegmentAlloc,  // a new segment (cudaMalloc, BFC region)
  kSegmentFree,   // a segment returned to the device (cudaFree)
  kSegmentMap,    // expandable segment: pages mapped
  kSegmentUnmap,  // expandable segment: pages unmapped
  kOom,           // the request failed; addr = device bytes free, size = rounded request
};
std::string_view ActionName(AllocatorAction a);  // "alloc", "segment_map", ...

struct AllocatorEvent {
  AllocatorAction action = AllocatorAction::kAlloc;
  uint64_t addr = 0;
  Bytes size;
  StreamId stream = 0;
  BufferId buffer = -1;  // kAlloc / kFree only
  int64_t pages = 0;     // kSegmentMap / kSegmentUnmap: physical pages (handles) mapped or unmapped
};

// A segment and the blocks tiling it, as a PyTorch snapshot's `segments`
// list shows one (torch.cuda.memory_snapshot(): SegmentInfo / BlockInfo):
// what Allocator::Segments reports and RestoreSegment rebuilds.
struct SegmentLayout {
  struct Block {
    uint64_t address = 0;
    int64_t size = 0;
    int64_t requested = 0;
    BufferId buffer = -1;  // -1: a free (inactive) block
  };
  uint64_t address = 0;
  int64_t size = 0;
  StreamId stream = 0;
  bool small = false;        // small pool (segment_type "small")
  std::vector<Block> blocks;  // ascending, contiguous, covering the segment
};

class Allocator {
 public:
  virtual ~Allocator() = default;
  virtual std::string_view name() const = 0;
  // Places a request. Returns false when the device has no room (an
  // out-of-memory result, not an error); the allocator is then unchanged
  // except for caches it released while trying.
  // REQUIRES: id is not live; size >= 0.
  virtual bool Alloc(BufferId id, Bytes size, StreamId stream) = 0;
  // REQUIRES: id is live.
  virtual void Free(BufferId id) = 0;
  virtual AllocatorStats stats() const = 0;
  // stats().allocated and stats().reserved alone. The engine samples them
  // after every memory event (the memory timeline's allocated / reserved
  // curves), so strategies whose stats() scans free lists override this
  // with their counters.
  virtual AllocatorUsage usage() const {
    const AllocatorStats s = stats();
    return {s.allocated, s.reserved};
  }

  // The device address `id`'s block starts at, or nullopt when `id` is not
  // live or the strategy places nothing (ideal).
  virtual std::optional<uint64_t> AddressOf(BufferId /*id*/) const { return std::nullopt; }
  // The block size `id` holds (its request after rounding and any unsplit
  // remainder), or nullopt as for AddressOf.
  virtual std::optional<Bytes> BlockSizeOf(BufferId /*id*/) const { return std::nullopt; }
  // Segment state, for replaying a recording from the state the real
  // allocator held (sim/replay: a snapshot's rebuilt window start, a Kineto
  // trace's inferred warm start) and driving it by the recorded segment
  // events. Strategies that model a caching allocator's segments
  // (pytorch_caching) return true and implement the calls below; for the
  // others RestoreSegment is an error naming the strategy, Segments() is
  // empty, and SetNextSegmentAddress / ReleaseCache must not be called.
  virtual bool ModelsSegments() const { return false; }
  // The block size a request of `size` bytes is rounded to (round_size),
  // before any unsplit remainder. Strategies that do not model segments
  // return `size`.
  virtual Bytes RoundedBlockSize(Bytes size) const { return size; }
  // Rebuilds a segment that existed before the replay began: its allocated
  // blocks live under their buffer ids, its free blocks cached. Not counted
  // as a device malloc.
  virtual absl::Status RestoreSegment(const SegmentLayout& segment);
  // Every segment now, ascending by address.
  virtual std::vector<SegmentLayout> Segments() const { return {}; }
  // The next new segment starts at `addr` (a recorded segment_alloc).
  // REQUIRES: ModelsSegments(); addr a multiple of 512 below 2^48.
  virtual void SetNextSegmentAddress(uint64_t addr);
  // torch.cuda.empty_cache(): release every unsplit cached segment.
  // REQUIRES: ModelsSegments().
  virtual void ReleaseCache();

  // End of the call stream. Offline planners place everything here; online
  // strategies have nothing to do. Errors only for broken input.
  virtual absl::Status Finish() { return absl::OkStatus(); }
  // True for offline planners, which place everything at Finish: their
  // stats() before then re-plan the calls so far (costly; call it once).
  virtual bool PlansOffline() const { return false; }

  // Appends every later action to `sink` (null stops logging). The sink must
  // outlive the allocator or the next call to this.
  void RecordEventsTo(std::vector<AllocatorEvent>* sink) { events_ = sink; }

 protected:
  void Record(AllocatorAction action, uint64_t addr, Bytes size, StreamId stream, BufferId buffer = -1,
              int64_t pages = 0) {
    if (events_ != nullptr) events_->push_back({action, addr, size, stream, buffer, pages});
  }
  bool recording() const { return events_ != nullptr; }

 private:
  std::vector<AllocatorEvent>* events_ = nullptr;
};

// A registry entry (sim/base/registry.h): name, doc, typed options.
using AllocatorInfo = RegistryEntry;

// An allocator choice with its options read and checked once: the spec as
// written and the implementation's typed options (BfcOptions,
// PyTorchCachingOptions, an alignment, parsed members, ...).
struct AllocatorConfig {
  AllocatorSpec spec;
  std::any options;
  // The typed options when they are a T (e.g. BfcOptions for impl bfc),
  // else nullptr.
  template <typename T>
  const T* options_as() const {
    return std::any_cast<T>(&options);
  }
};

// Unknown names or options are errors naming the key (`allocator.<key>`),
// the unknown name with a did-you-mean and the valid keys. A spec whose
// `typed` was parsed from its impl and options is not parsed again.
absl::StatusOr<AllocatorConfig> ParseAllocator(const AllocatorSpec& spec);
// REQUIRES: config from ParseAllocator. Errors only for a capacity outside
// (0, 2^46).
absl::StatusOr<std::unique_ptr<Allocator>> BuildAllocator(const AllocatorConfig& config, Bytes capacity);
// Parses run->allocator once into run->allocator.typed (AllocatorSpec::
// typed). An error names where the option was written, e.g.
// "run.yaml:12:3: allocator.mem_fraction: expected a number in (0, 1]".
absl::Status ParseAllocatorOptions(RunSpec* run);
// ParseAllocator, then BuildAllocator.
absl::StatusOr<std::unique_ptr<Allocator>> MakeAllocator(const AllocatorSpec& spec, Bytes capacity);
std::vector<AllocatorInfo> ListAllocators();
// Note [Registry names fold case] (sim/base/names.h): `name` as registered
// when it differs from exactly one allocator only by case.
std::string FoldAllocatorName(const std::string& name);

// Note [Counting memory replays]
// A memory replay is one run of a step's or a recording's allocs and frees
// through a fresh allocator: an engine Simulate (sim/engine/engine.h), one
// pass of a recorded replay (sim/replay/replay_core.h, snapshot_replay.cc).
// Each counts one here, process-wide, so that a test can pin how many a
// command makes (tests/memory_replays_test.cc; issue 28: the memory map and
// the memory snapshot replayed the step again, the map twice per --out).
void CountMemoryReplay();
int64_t MemoryReplays();

}  // namespace gpusim

#endif  // GPUSIM_SIM_ALLOC_ALLOCATOR_H_
