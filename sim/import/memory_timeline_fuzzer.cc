// libFuzzer target: the torch.profiler memory-timeline raw importer
// (sim/import/memory_timeline.h), plain JSON from memory (whole, and in small reads that must give the same result) or gzip (input
// starting 1f 8b) through the file path, then ToNativeTrace.
#include <cstddef>
#include <cstdint>
#include <string>

#include "sim/import/byte_source.h"
#include "sim/import/memory_timeline.h"
#include "tests/fuzz/fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace gpusim;
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<RecordedTrace> recorded;
  if (fuzz::IsGzip(data, size)) {
    fuzz::MemFile file(bytes);
    recorded = ImportMemoryTimelineRaw(file.path());
  } else {
    std::unique_ptr<ByteSource> source = StringByteSource(bytes);
    recorded = ImportMemoryTimelineRaw(*source, "fuzz.json");
    // The same bytes in small reads (1..64 bytes, chosen by the input).
    fuzz::ChunkedSource chunked(bytes, 1 + (size > 0 ? data[size / 2] % 64 : 0));
    fuzz::CheckSameImport(recorded, ImportMemoryTimelineRaw(chunked, "fuzz.json"));
  }
  if (!recorded.ok()) {
    fuzz::CheckRejection(recorded.status(),
                         {absl::StatusCode::kInvalidArgument, absl::StatusCode::kDataLoss},
                         {"byte ", "decompressed bytes", "got an object"});
    return 0;
  }
  fuzz::CheckConversions(*recorded);
  return 0;
}
