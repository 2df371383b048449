// A warm Kineto trace recorded from the pytorch_caching model: a training
// loop's allocation stream run through the model unrecorded until its cache
// is warm, then every event written with the model's real address, block
// size and totals, as Kineto records them. The segments the model held at
// the first recorded event are the true start state, which the warm-start
// inference (Note [Warm start from recorded addresses]) is checked against.
// Used by tests/warm_synthetic_test.cc and bench/replay_stream_benchmark.cc
// (BM_EndToEndWarm).
#ifndef GPUSIM_TESTS_WARM_TRACE_H_
#define GPUSIM_TESTS_WARM_TRACE_H_

#include <zlib.h>

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "sim/alloc/impl/pytorch_caching.h"

namespace gpusim {
namespace warm_trace {

struct StepEvent {
  bool alloc;
  int64_t id;
  int64_t size;  // requested bytes (allocs)
};

// A training loop's allocation stream, one event at a time: every step
// makes the same `requests` requests (sizes from 512 B to 64 MiB, mostly
// small, from a fixed seed) and frees them in the same order (a random live
// block after about half the requests once 256 are live, the rest at the
// step's end), so a caching allocator warmed by a few steps reuses its
// segments, as in a warm recording.
class TrainingSteps {
 public:
  explicit TrainingSteps(int64_t requests = 2048) : requests_(requests) {
    uint64_t x = 0x2545f4914f6cdd1dULL;
    auto rand = [&x] {
      x ^= x << 13;
      x ^= x >> 7;
      x ^= x << 17;
      return x;
    };
    std::vector<int64_t> live;
    for (int64_t j = 0; j < requests; ++j) {
      const int shift = static_cast<int>(9 + rand() % 18);  // 512 B .. 64 MiB
      step_.push_back({true, j, (int64_t{1} << shift) + static_cast<int64_t>(rand() % 4096) * 512});
      live.push_back(j);
      if (live.size() > 256 && rand() % 2 == 0) {
        const size_t k = rand() % live.size();
        step_.push_back({false, live[k], 0});
        live[k] = live.back();
        live.pop_back();
      }
    }
    while (!live.empty()) {
      const size_t k = rand() % live.size();
      step_.push_back({false, live[k], 0});
      live[k] = live.back();
      live.pop_back();
    }
  }
  int64_t step_events() const { return static_cast<int64_t>(step_.size()); }
  StepEvent Next() {
    StepEvent e = step_[at_ % step_.size()];
    e.id += static_cast<int64_t>(at_ / step_.size()) * requests_;
    ++at_;
    return e;
  }

 private:
  int64_t requests_;
  std::vector<StepEvent> step_;
  uint64_t at_ = 0;
};

// What WriteWarmKineto recorded.
struct WarmRecording {
  std::string path;                  // empty: the trace could not be written
  std::vector<SegmentLayout> start;  // the model's segments at the first recorded event
  int64_t start_reserved = 0;        // their total (the first event's Total Reserved before it)
  int64_t events = 0;
  int64_t reserved_changes = 0;      // recorded events whose Total Reserved differs from the one before
  int64_t persistent_bytes = 0;      // WarmMechanisms::persistent's blocks, as placed
  int64_t graph_pool_reserved = 0;   // the graph's private pool's segments
};

// What the recording allocator does besides the steps (each a mechanism of
// the warm-start inference, tests/warm_synthetic_test.cc).
struct WarmMechanisms {
  // Blocks allocated half-way through the first step and never freed
  // (parameters, optimizer states): live through the recording at
  // addresses it never shows (Note [Bytes live through the recording]).
  std::vector<int64_t> persistent;
  // The steps' requests alternate over this many allocator streams
  // (Kineto's [memory] events record none).
  int streams = 1;
  // PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True in the recording.
  bool expandable = false;
  // A CUDA graph captured before the recording: its private pool (an
  // allocator of its own, Note [CUDA graph private pools]) served these
  // requests, every other one still live; its reserved and allocated bytes
  // are in every recorded total, and none of its blocks is recorded.
  std::vector<int64_t> graph_pool;
};

// Writes to `path` (gzip'd Kineto JSON, a device of 1 TiB) a warm trace of
// `n` events of `steps`, after `warm_up` events run through the
// pytorch_caching model unrecorded (the blocks live then are freed in the
// window, allocated before it). Kineto's [memory] event carries the block
// size handed out (CUDACachingAllocator.cpp malloc:
// reportMemoryUsageToProfiler(block->size, ...)) and the totals after it.
inline WarmRecording WriteWarmKineto(const std::string& path, TrainingSteps steps, int64_t warm_up, int64_t n,
                                     const WarmMechanisms& mech = {}) {
  WarmRecording out;
  gzFile f = gzopen(path.c_str(), "wb1");
  if (f == nullptr) return out;
  gzputs(f,
         "{\"deviceProperties\": [{\"id\": 0, \"name\": \"synthetic\", \"totalGlobalMem\": 1099511627776}],\n"
         "\"traceEvents\": [\n");
  PyTorchCachingOptions options;
  options.expandable_segments = mech.expandable;
  PyTorchCachingAllocator a(Bytes(1LL << 40), options);
  PyTorchCachingAllocator pool(Bytes(1LL << 40));
  constexpr int64_t kUnrecordedIds = int64_t{1} << 40;  // ids the steps never reach
  for (size_t k = 0; k < mech.graph_pool.size(); ++k) {
    pool.Alloc(kUnrecordedIds + static_cast<int64_t>(k), Bytes(mech.graph_pool[k]), 0);
    if (k % 2 == 1) pool.Free(kUnrecordedIds + static_cast<int64_t>(k));
  }
  out.graph_pool_reserved = pool.usage().reserved.value();
  const int64_t persistent_at = steps.step_events() / 2;
  int64_t last_reserved = -1;
  for (int64_t i = 0; i < warm_up + n; ++i) {
    if (i == persistent_at) {
      for (size_t k = 0; k < mech.persistent.size(); ++k) {
        const BufferId id = 2 * kUnrecordedIds + static_cast<int64_t>(k);
        if (!a.Alloc(id, Bytes(mech.persistent[k]), 0)) break;
        out.persistent_bytes += a.BlockSizeOf(id)->value();
      }
    }
    if (i == warm_up) {
      out.start = a.Segments();
      out.start_reserved = a.usage().reserved.value() + out.graph_pool_reserved;
      last_reserved = out.start_reserved;
    }
    const StepEvent e = steps.Next();
    const StreamId stream = static_cast<StreamId>(e.id % mech.streams);
    int64_t addr = 0, block = 0;
    if (e.alloc) {
      if (!a.Alloc(e.id, Bytes(e.size), stream)) {
        gzclose(f);
        std::remove(path.c_str());
        return out;
      }
      addr = static_cast<int64_t>(a.AddressOf(e.id).value());
      block = a.BlockSizeOf(e.id)->value();
    } else {
      addr = static_cast<int64_t>(a.AddressOf(e.id).value());
      block = -a.BlockSizeOf(e.id)->value();
      a.Free(e.id);
    }
    if (i < warm_up) continue;
    const AllocatorUsage u = a.usage(), p = pool.usage();
    const int64_t reserved = (u.reserved + p.reserved).value();
    out.reserved_changes += reserved != last_reserved;
    last_reserved = reserved;
    char buf[320];
    std::snprintf(buf, sizeof buf,
                  "%s{\"ph\": \"i\", \"cat\": \"cpu_instant_event\", \"name\": \"[memory]\", \"pid\": 1, "
                  "\"tid\": 1, \"ts\": %lld, \"s\": \"t\", \"args\": {\"Device Type\": 1, \"Device Id\": 0, "
                  "\"Addr\": %lld, \"Bytes\": %lld, \"Total Allocated\": %lld, \"Total Reserved\": %lld, "
                  "\"Ev Idx\": %lld}}\n",
                  i == warm_up ? "" : ",", static_cast<long long>(i), static_cast<long long>(addr),
                  static_cast<long long>(block), static_cast<long long>((u.allocated + p.allocated).value()),
                  static_cast<long long>(reserved), static_cast<long long>(i));
    gzputs(f, buf);
  }
  gzputs(f, "]}\n");
  gzclose(f);
  out.path = path;
  out.events = n;
  return out;
}

}  // namespace warm_trace
}  // namespace gpusim

#endif  // GPUSIM_TESTS_WARM_TRACE_H_
