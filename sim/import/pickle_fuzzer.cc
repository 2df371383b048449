// libFuzzer target: the snapshot pickle reader (sim/import/pickle.h) and the
// snapshot reader after it (ParseSnapshotPickle), then ToNativeTrace with both
// free actions on every device. Every rejection names a byte offset in the
// pickle, and reading the pickle's values directly gives what reading its
// JSON gives (Note [One reader, two sources], snapshot.cc).
#include <cstddef>
#include <cstdint>
#include <string>

#include "sim/import/snapshot.h"
#include "tests/fuzz/fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace gpusim;
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<RecordedSnapshot> snapshot = ParseSnapshotPickle(bytes, "fuzz.pickle");
  absl::StatusOr<RecordedSnapshot> through_json = ParseSnapshotPickle(bytes, "fuzz.pickle", PickleRead::kThroughJson);
  if (snapshot.ok() != through_json.ok()) {
    fuzz::Fail("the pickle read directly and through its JSON disagree",
               snapshot.ok() ? through_json.status() : snapshot.status());
  }
  if (!snapshot.ok()) {
    fuzz::CheckRejection(snapshot.status(), {absl::StatusCode::kInvalidArgument},
                         {"fuzz.pickle: byte ", "no \"segments\" key"});
    return 0;
  }
  if (!(snapshot->segments == through_json->segments) ||
      !(snapshot->allocator_settings == through_json->allocator_settings) ||
      !(snapshot->trace.memory_events == through_json->trace.memory_events) ||
      !(snapshot->trace.frames == through_json->trace.frames) ||
      !(snapshot->trace.live_through == through_json->trace.live_through)) {
    fuzz::Fail("the pickle read directly and through its JSON give different snapshots", absl::OkStatus());
  }
  snapshot->TotalReserved();
  fuzz::CheckConversions(snapshot->trace);
  return 0;
}
