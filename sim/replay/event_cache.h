// Internal to sim/replay: a streamed trace's memory events kept in memory,
// packed, for the later passes of a warm replay.
//
// Note [Later passes from memory]
// A warm trace streams in passes (Note [Streaming a warm trace in passes],
// replay_stream.cc): the facts pass reads the whole file, then each replay
// pass read it again — inflate, the JSON read, the Kineto fields — for the
// same events; on BM_EndToEndWarm's trace (5 passes) the reads were most
// of the time, and the V100 HTA trace streams in 25 passes. The facts pass
// therefore also packs each memory event the later passes use (those of
// the replayed device, after the checks and the reorder window) into a
// MemoryEventCache, and the passes after it decode them from there. An
// event packs into a flags byte and varints (LEB128): the time, address
// and Ev Idx as differences from the previous event's, the recorded
// memory-event index and the device only when they are not the previous
// event's plus one and the same, Total Allocated not at all when it is the
// previous one plus or minus the event's bytes (as the caching allocator
// reports it), Total Reserved not at all when unchanged — about 12 bytes
// an event on the benchmark's traces, their ops included (Note [Paired ops
// kept with the events]), against ~290 in the file, inflated. The
// differences wrap in 64 bits, so every value round-trips exactly, and an
// event the cache cannot hold as it is (another kind, a stream, a stack, a
// category: none a Kineto stream pass keeps) or past the byte cap
// (ReplayOptions::stream_cache_bytes, 256 MiB: 10 M events stay under the
// 300 MB target) drops the cache, and the later passes read the file as
// before. A pass replays the same events either way, so the results are the
// same byte for byte (tests/replay_stream_test.cc replays every trace with
// the cache and with a cap of 0, and past a tiny cap). Memory: chunks of
// 1 MiB, touched only as they fill.
//
// Note [Paired ops kept with the events]
// Each pass paired the events again (Note [Matching frees]: a hash lookup
// by address per event, and the ops vector), though every pass pairs the
// same events the same way as pass 1. So the cache keeps, with each event,
// the ops pass 1's pairing made of it, and a pass from memory replays
// those: an alloc's buffer id is the pairing's next one (it hands ids out
// in order), so it takes no byte; a free's is the distance back from the
// next id, or one bit when it frees a head block (one allocated before
// recording, which takes the next id); an alloc at a live address carries
// its implicit free. Events whose ops have another form (none in a Kineto
// pass) drop the cache. The conversion statistics are pass 1's (the same
// pairing of the same events).
#ifndef GPUSIM_SIM_REPLAY_EVENT_CACHE_H_
#define GPUSIM_SIM_REPLAY_EVENT_CACHE_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "sim/import/recorded_trace.h"

namespace gpusim {
namespace replay_internal {

class MemoryEventCache {
 public:
  // `cap_bytes`: the most bytes of chunks it holds (0: holds nothing).
  explicit MemoryEventCache(int64_t cap_bytes) : cap_bytes_(cap_bytes), complete_(cap_bytes > 0) {}
  MemoryEventCache(MemoryEventCache&&) = default;
  MemoryEventCache& operator=(MemoryEventCache&&) = default;

  // Appends recorded memory event `index` (indices ascending) with the ops
  // the pairing made of it (MemoryOpPairer::Add, stream 0); `head`: its free
  // is of a head block (the pairing's head grew). Past the cap, or for an
  // event it cannot hold, drops every event and holds no more.
  void Add(const RecordedMemoryEvent& m, int64_t index, const std::vector<MemoryOp>& ops, bool head);
  // Every event added is held (then Reader hands them back).
  bool complete() const { return complete_; }
  int64_t events() const { return events_; }
  int64_t bytes() const { return bytes_; }  // of the chunks held

 private:
  // What the next event is packed against: the previous one's values.
  struct Last {
    uint64_t index = ~uint64_t{0}, time = 0, address = 0, seq = ~uint64_t{0}, allocated = 0, reserved = 0;
    int32_t device = 0, device_type = 0;
    BufferId next_id = 0;  // the pairing's next buffer id
  };

 public:
  // The events in the order added, as Add received them.
  class Reader {
   public:
    explicit Reader(const MemoryEventCache& cache) : cache_(cache) {}
    // The next event, its index, its ops (the first n_ops of `ops`) and
    // whether it frees a head block; false after the last.
    bool Next(RecordedMemoryEvent& m, int64_t& index, MemoryOp (&ops)[2], size_t& n_ops, bool& head);

   private:
    const MemoryEventCache& cache_;
    size_t chunk_ = 0;  // the next chunk to read
    const uint8_t* p_ = nullptr;
    const uint8_t* end_ = nullptr;
    Last last_;
  };

 private:
  static constexpr int64_t kChunk = int64_t{1} << 20;
  static constexpr int64_t kMaxEvent = 112;  // the longest packed event (101 bytes), rounded up
  struct Chunk {
    std::unique_ptr<uint8_t[]> bytes;
    size_t used = 0;  // packed (the last chunk's: when a reader starts it)
  };
  bool NewChunk();
  void Drop();

  int64_t cap_bytes_;
  bool complete_;
  int64_t events_ = 0;
  int64_t bytes_ = 0;
  std::vector<Chunk> chunks_;
  uint8_t* p_ = nullptr;  // the next byte of the last chunk
  uint8_t* end_ = nullptr;
  Last last_;
};

}  // namespace replay_internal
}  // namespace gpusim

#endif  // GPUSIM_SIM_REPLAY_EVENT_CACHE_H_
