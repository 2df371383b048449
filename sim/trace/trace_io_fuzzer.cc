// libFuzzer target: the native trace reader (sim/trace/trace_io.h). A trace
// that reads must validate or be rejected with an event index; one that
// validates must write, and writing what was read back must reproduce the
// same text (WriteTrace -> ReadTrace -> WriteTrace is a fixed point).
#include <cstddef>
#include <cstdint>
#include <sstream>
#include <string>

#include "sim/trace/trace_io.h"
#include "sim/trace/validate.h"
#include "tests/fuzz/fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace gpusim;
  std::istringstream in(std::string(reinterpret_cast<const char*>(data), size));
  absl::StatusOr<Trace> trace = ReadTrace(in, "fuzz.trace");
  if (!trace.ok()) {
    fuzz::CheckRejection(trace.status(), {absl::StatusCode::kInvalidArgument}, {"fuzz.trace:"});
    return 0;
  }
  absl::Status valid = ValidateTrace(*trace);
  ComputeTraceStats(*trace);
  if (!valid.ok()) {
    fuzz::CheckRejection(valid, {absl::StatusCode::kInvalidArgument}, {"event ", "stream "});
  }
  std::ostringstream first;
  absl::Status written = WriteTrace(*trace, first);
  if (!written.ok()) {
    fuzz::CheckRejection(written, {absl::StatusCode::kInvalidArgument}, {"event "});
    return 0;
  }
  std::istringstream again(first.str());
  absl::StatusOr<Trace> reread = ReadTrace(again, "written.trace");
  if (!reread.ok()) fuzz::Fail("ReadTrace of WriteTrace output", reread.status());
  std::ostringstream second;
  absl::Status rewritten = WriteTrace(*reread, second);
  if (!rewritten.ok()) fuzz::Fail("WriteTrace of a re-read trace", rewritten);
  if (first.str() != second.str()) {
    fuzz::Fail("WriteTrace -> ReadTrace -> WriteTrace changed the text",
               absl::InternalError(first.str() + "\n---\n" + second.str()));
  }
  return 0;
}
