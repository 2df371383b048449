// A reader of the pickles torch.cuda.memory._dump_snapshot writes: plain
// Python values (dict, list, tuple, str, int, float, bool, None) in pickle
// protocols 2 to 5, read natively, with no Python and no class ever loaded.
//
// Opcodes as CPython documents them (Lib/pickletools.py) and loads them
// (Modules/_pickle.c, the C unpickler pickle.load uses); the snapshot's
// values as torch/cuda/memory.py _snapshot makes them. What is read, what is
// refused and the bounds: Note [Pickle subset] and Note [Pickle bounds] in
// pickle.cc.
//
// The result is the JSON text gpusim's snapshot reader reads (snapshot.h),
// byte for byte what tools/snapshot_to_json.py --keep-frames wrote before
// this reader replaced it (Note [Snapshot JSON from a pickle], pickle.cc).
//
// Internal to the importers.
#ifndef GPUSIM_SIM_IMPORT_PICKLE_H_
#define GPUSIM_SIM_IMPORT_PICKLE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace gpusim::import_internal {

// Bounds (Note [Pickle bounds]).
inline constexpr int kPickleMaxNesting = 1000;      // containers inside containers
inline constexpr int64_t kPickleValuesPerByte = 4;  // values written, per pickle byte ...
inline constexpr int64_t kPickleValuesExtra = 100000;  // ... plus these
inline constexpr int64_t kPickleJsonPerByte = 128;     // JSON bytes, per pickle byte ...
inline constexpr int64_t kPickleJsonExtra = int64_t{64} << 20;  // ... plus 64 MiB

// A decoded pickle of plain values.
class PlainPickle {
 public:
  // Decodes `bytes`, which must outlive the result (strings are kept as
  // views into it). `label` names the input in errors: "label: byte N:
  // what", N the offset in `bytes` of the opcode at fault.
  static absl::StatusOr<std::unique_ptr<PlainPickle>> Read(std::string_view bytes, std::string label);

  ~PlainPickle();
  PlainPickle(const PlainPickle&) = delete;
  PlainPickle& operator=(const PlainPickle&) = delete;

  // Appends the JSON text of the value (compact, ASCII, keys in pickle
  // order), or fails naming the byte offset of the value that cannot be
  // written: a class of value JSON lacks, an integer past 64 bits, more
  // values than the budget, nesting past kPickleMaxNesting, a top level
  // that is not a dict. `out` gets kJsonPadding bytes of spare capacity.
  absl::Status WriteJson(std::string* out) const;

  // The pickle offset of the value whose JSON text (as WriteJson writes it)
  // is the innermost one holding `json_offset`: errors found in the JSON
  // name the pickle's bytes (Note [Pickle offsets], snapshot.cc). Writes the
  // JSON again, so meant for errors only.
  int64_t PickleOffsetAt(int64_t json_offset) const;

  struct Impl;

 private:
  explicit PlainPickle(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace gpusim::import_internal

#endif  // GPUSIM_SIM_IMPORT_PICKLE_H_
