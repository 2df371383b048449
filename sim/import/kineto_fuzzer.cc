// libFuzzer target: the Kineto / Chrome-trace importer (sim/import/kineto.h),
// plain JSON from memory (whole, in small reads, and through the general
// path alone, which must all give the same result), or gzip (input starting
// 1f 8b) through the file path (OpenByteSource: ISA-L, zlib at errors), then
// ToNativeTrace on every device.
#include <cstddef>
#include <cstdint>
#include <string>

#include "sim/import/byte_source.h"
#include "sim/import/kineto.h"
#include "tests/fuzz/fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace gpusim;
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<RecordedTrace> recorded;
  if (fuzz::IsGzip(data, size)) {
    fuzz::MemFile file(bytes);
    recorded = ImportKinetoTrace(file.path());
  } else {
    std::unique_ptr<ByteSource> source = StringByteSource(bytes);
    recorded = ImportKinetoTrace(*source, "fuzz.json");
    // The same bytes in small reads (1..64 bytes, chosen by the input).
    fuzz::ChunkedSource chunked(bytes, 1 + (size > 0 ? data[size / 2] % 64 : 0));
    fuzz::CheckSameImport(recorded, ImportKinetoTrace(chunked, "fuzz.json"));
    // Note [One pass per trace event]: the general path alone gives the same.
    KinetoImportOptions general;
    general.fast_path = false;
    std::unique_ptr<ByteSource> again = StringByteSource(bytes);
    fuzz::CheckSameImport(recorded, ImportKinetoTrace(*again, "fuzz.json", general), "fast vs general path differ");
  }
  if (!recorded.ok()) {
    fuzz::CheckRejection(recorded.status(),
                         {absl::StatusCode::kInvalidArgument, absl::StatusCode::kDataLoss},
                         {"byte ", "decompressed bytes"});
    return 0;
  }
  fuzz::CheckConversions(*recorded);
  return 0;
}
