// libFuzzer target: the memory-snapshot JSON reader (sim/import/snapshot.h,
// the JSON a snapshot pickle is read as; the pickle reader has
// pickle_fuzzer.cc), then ToNativeTrace with both free actions on every
// device.
#include <cstddef>
#include <cstdint>
#include <string>

#include "sim/import/snapshot.h"
#include "tests/fuzz/fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace gpusim;
  const std::string json(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<RecordedSnapshot> snapshot = ParseSnapshotJson(json, "fuzz.json");
  if (!snapshot.ok()) {
    fuzz::CheckRejection(snapshot.status(), {absl::StatusCode::kInvalidArgument},
                         {"byte ", "no \"segments\" key"});
    return 0;
  }
  snapshot->TotalReserved();
  fuzz::CheckConversions(snapshot->trace);
  return 0;
}
