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
// The result reads as JSON: WriteJson writes it, byte for byte what
// tools/snapshot_to_json.py --keep-frames wrote before this reader replaced
// it (Note [Snapshot JSON from a pickle], pickle.cc), and the accessors give
// the values as that JSON reads, for the snapshot reader to take them with
// no text in between (Note [One reader, two sources], snapshot.cc).
//
// Internal to the importers.
#ifndef GPUSIM_SIM_IMPORT_PICKLE_H_
#define GPUSIM_SIM_IMPORT_PICKLE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "absl/functional/function_ref.h"
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

  // WriteJson's checks (and refusals) without writing the text: what must
  // pass before the accessors below are used.
  absl::Status Check() const;

  // The values as a JSON reader would see WriteJson's text (Note [One
  // reader, two sources], snapshot.cc). A value is an id; Root() is the
  // top-level dict.
  enum class JsonType { kObject, kArray, kString, kNumber, kBoolean, kNull };
  uint32_t Root() const;
  JsonType Type(uint32_t v) const;
  int64_t Offset(uint32_t v) const;  // of the opcode that made it
  // An object's fields in order, keys as the JSON's (json.dumps(key) for a
  // key that is no str, equal texts merged); fails naming the key where its
  // JSON text would not read back (a lone surrogate).
  absl::Status Fields(uint32_t object,
                      absl::FunctionRef<absl::Status(std::string_view key, uint32_t value)> fn) const;
  absl::Status Elements(uint32_t array, absl::FunctionRef<absl::Status(uint32_t item)> fn) const;
  // As import_internal::ParseInteger reads the JSON number (an integral
  // float up to 2^53 included); false for anything else.
  bool Integer(uint32_t v, int64_t* out) const;
  bool Double(uint32_t v, double* out) const;  // a number's value
  bool Bool(uint32_t v, bool* out) const;
  // A string as its JSON text reads back: a view into the pickle, or into
  // *rebuilt when surrogate pairs had to be joined; false where a lone
  // surrogate makes the JSON string unreadable (as simdjson finds it).
  bool String(uint32_t v, std::string_view* out, std::string* rebuilt) const;
  std::string JsonText(uint32_t v) const;  // as WriteJson writes it

  struct Impl;

 private:
  explicit PlainPickle(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace gpusim::import_internal

#endif  // GPUSIM_SIM_IMPORT_PICKLE_H_
