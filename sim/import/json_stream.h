// Streaming scan of one large JSON document, element by element, in bounded
// memory: the Chrome-trace shape `{"traceEvents": [ {...}, ... ], ...}` (or a
// bare top-level array `[ {...}, ... ]`). The scanner only finds where each
// element begins and ends (strings, escapes and bracket nesting); each
// element's text is then parsed on its own (sim/import/kineto.cc uses
// simdjson On-Demand). Memory: one read buffer plus the largest element, not
// the file.
//
// Internal to the importers.
#ifndef GPUSIM_SIM_IMPORT_JSON_STREAM_H_
#define GPUSIM_SIM_IMPORT_JSON_STREAM_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "sim/import/byte_source.h"

namespace gpusim::import_internal {

// Every text handed to a visitor has at least this many bytes of capacity
// past its end (simdjson needs SIMDJSON_PADDING = 64).
inline constexpr size_t kJsonPadding = 64;
// What the scanner keeps contiguous ahead of an element for
// OnElementInPlace (a trace event is a few hundred bytes).
inline constexpr size_t kFastWindow = 1 << 14;

class JsonStreamVisitor {
 public:
  virtual ~JsonStreamVisitor() = default;
  // One element of the event array; `offset` is its first byte's offset in
  // the (decompressed) input. text.capacity() >= text.size() + kJsonPadding.
  virtual absl::Status OnElement(const std::string& text, int64_t offset) = 0;
  // The fast path (Note [One pass per trace event] in kineto.cc): `window`
  // holds the input from an element's first byte ('{') on, as far as the
  // read buffer reaches (at least kFastWindow bytes when the input has
  // them). A visitor that reads the whole element from it returns how many
  // bytes it took (the element's length) after handling it as OnElement
  // would; 0 declines, with no effect, and the element goes to OnElement.
  virtual absl::StatusOr<size_t> OnElementInPlace(std::string_view /*window*/, int64_t /*offset*/) {
    return size_t{0};
  }
  // Whether to capture the value of top-level key `key` (other than the
  // event array) for OnTopLevelValue; others are skipped without copying.
  virtual bool WantsTopLevelKey(std::string_view /*key*/) { return false; }
  virtual absl::Status OnTopLevelValue(std::string_view /*key*/, const std::string& /*text*/,
                                       int64_t /*offset*/) {
    return absl::OkStatus();
  }
};

// Scans `source`. If the document is an object, the elements of the array
// under `array_key` go to OnElement; if it is an array, its elements do.
// Errors are InvalidArgument "LABEL: byte N[ of the decompressed input]: ..."
// (or DataLoss from the source).
absl::Status ScanJsonStream(ByteSource& source, const std::string& label,
                            std::string_view array_key, JsonStreamVisitor& visitor);

// "LABEL: byte N: " or "LABEL: byte N of the decompressed input: ".
std::string OffsetPrefix(const std::string& label, int64_t offset, bool decompressed);

}  // namespace gpusim::import_internal

#endif  // GPUSIM_SIM_IMPORT_JSON_STREAM_H_
