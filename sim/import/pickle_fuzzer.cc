// libFuzzer target: the snapshot pickle reader (sim/import/pickle.h) and the
// snapshot reader after it (ParseSnapshotPickle), then ToNativeTrace with both
// free actions on every device. Every rejection names a byte offset in the
// pickle; every offset an error names is inside it.
#include <cstddef>
#include <cstdint>
#include <string>

#include "sim/import/pickle.h"
#include "sim/import/snapshot.h"
#include "tests/fuzz/fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace gpusim;
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  // The reader alone: its JSON, and the offsets it maps JSON offsets to.
  auto plain = import_internal::PlainPickle::Read(bytes, "fuzz.pickle");
  if (plain.ok()) {
    std::string json;
    if ((*plain)->WriteJson(&json).ok()) {
      for (int64_t at : {int64_t{0}, static_cast<int64_t>(json.size() / 2), static_cast<int64_t>(json.size())}) {
        const int64_t pos = (*plain)->PickleOffsetAt(at);
        if (pos < 0 || pos > static_cast<int64_t>(size)) {
          fuzz::Fail("PickleOffsetAt outside the pickle", absl::OkStatus());
        }
      }
    }
  }
  absl::StatusOr<RecordedSnapshot> snapshot = ParseSnapshotPickle(bytes, "fuzz.pickle");
  if (!snapshot.ok()) {
    fuzz::CheckRejection(snapshot.status(), {absl::StatusCode::kInvalidArgument},
                         {"fuzz.pickle: byte ", "no \"segments\" key"});
    return 0;
  }
  snapshot->TotalReserved();
  fuzz::CheckConversions(snapshot->trace);
  return 0;
}
