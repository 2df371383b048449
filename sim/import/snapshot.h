// Importer for PyTorch CUDA caching-allocator memory snapshots
// (torch.cuda.memory._record_memory_history() + _dump_snapshot("x.pickle")).
// A .pickle is read natively (sim/import/pickle.h: plain values only, every
// class refused, so no code in the pickle runs; no Python) into the JSON form,
// which is then read here. Keys as in PyTorch torch/cuda/memory.py
// (_snapshot) and c10/cuda/CUDACachingAllocator.h (SegmentInfo, BlockInfo,
// TraceEntry).
#ifndef GPUSIM_SIM_IMPORT_SNAPSHOT_H_
#define GPUSIM_SIM_IMPORT_SNAPSHOT_H_

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "sim/base/units.h"
#include "sim/import/byte_source.h"
#include "sim/import/recorded_trace.h"

namespace gpusim {

struct SnapshotBlock {
  int64_t address = 0;
  Bytes size;            // bytes the block occupies in its segment
  Bytes requested_size;  // bytes the caller asked for
  std::string state;     // "active_allocated", "active_pending_free", "inactive"
  std::vector<int32_t> stack;  // `frames`, innermost first, into trace.frames
  bool operator==(const SnapshotBlock&) const = default;
};

struct SnapshotSegment {
  int32_t device = 0;
  int64_t address = 0;
  Bytes total_size;
  Bytes allocated_size;
  Bytes active_size;
  Bytes requested_size;
  int64_t stream = 0;
  std::string segment_type;  // "large" or "small" pool
  bool is_expandable = false;
  std::vector<SnapshotBlock> blocks;
  bool operator==(const SnapshotSegment&) const = default;
};

// allocator_settings (newer PyTorch): the fields gpusim models, plus every
// key with its JSON text so nothing is lost.
struct SnapshotAllocatorSettings {
  bool present = false;
  std::string alloc_conf;                 // PYTORCH_CUDA_ALLOC_CONF
  std::optional<int64_t> max_split_size;  // -1 = unlimited
  std::optional<bool> expandable_segments;
  std::optional<double> garbage_collection_threshold;
  std::vector<std::pair<std::string, std::string>> raw;  // key -> JSON text
  bool operator==(const SnapshotAllocatorSettings&) const = default;
};

struct RecordedSnapshot {
  std::vector<SnapshotSegment> segments;  // state at dump time
  SnapshotAllocatorSettings allocator_settings;
  // device_traces flattened in order (device i's entries have device = i):
  // actions alloc, free_requested, free_completed, segment_alloc,
  // segment_free, segment_map, segment_unmap, snapshot, oom; time_us as ns.
  RecordedTrace trace;

  Bytes TotalReserved() const;  // sum of segments' total_size
};

// Reads the JSON form (json.dumps of the unpickled snapshot, as
// sim/import/pickle.h writes it). `label` names the input in errors and
// metadata.source_file.
absl::StatusOr<RecordedSnapshot> ParseSnapshotJson(const std::string& json,
                                                   const std::string& label);

// Reads a snapshot pickle's bytes (sim/import/pickle.h) as the JSON reader
// above reads its JSON, without writing that JSON (kDirect; Note [One reader,
// two sources] in snapshot.cc). kThroughJson writes it and reads it, to test
// that both agree; its errors then name no offset in the pickle. `label` as
// above; errors name byte offsets in `pickle`.
enum class PickleRead { kDirect, kThroughJson };
absl::StatusOr<RecordedSnapshot> ParseSnapshotPickle(const std::string& pickle, const std::string& label,
                                                     PickleRead how = PickleRead::kDirect);

// Loads `path`: a .pickle/.pkl file (or any file starting with the pickle
// protocol byte 0x80) is read as a pickle (sim/import/pickle.h), anything
// else as snapshot JSON. Either may be gzipped (x.pickle.gz, as
// validation/*/snapshots/ ships them): decompressed first, in memory. Errors
// name `path` and a byte offset (of the decompressed bytes).
absl::StatusOr<RecordedSnapshot> LoadSnapshot(const std::string& path);
// The same through a file opened once (sim/import/input.h): one source.
absl::StatusOr<RecordedSnapshot> LoadSnapshot(std::shared_ptr<const InputFd> file);

}  // namespace gpusim

#endif  // GPUSIM_SIM_IMPORT_SNAPSHOT_H_
