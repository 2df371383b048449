// libFuzzer target: a native trace (gpusim-trace text) read, validated and
// replayed by the engine through every registered allocator (composites
// with two members). A trace that validates must simulate without error and
// keep tests/fuzz/step_invariants.h under each. Seeds: tests/fuzz/engine_replay/.
#include <cstddef>
#include <cstdint>
#include <sstream>
#include <string>

#include "sim/alloc/allocator.h"
#include "sim/config/loader.h"
#include "sim/engine/engine.h"
#include "sim/trace/trace_io.h"
#include "sim/trace/validate.h"
#include "tests/fuzz/fuzz_support.h"
#include "tests/fuzz/step_invariants.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace gpusim;
  std::istringstream in(std::string(reinterpret_cast<const char*>(data), size));
  absl::StatusOr<Trace> trace = ReadTrace(in, "fuzz.trace");
  if (!trace.ok()) {
    fuzz::CheckRejection(trace.status(), {absl::StatusCode::kInvalidArgument}, {"fuzz.trace"});
    return 0;
  }
  absl::Status valid = ValidateTrace(*trace);
  if (!valid.ok()) {
    fuzz::CheckRejection(valid, {absl::StatusCode::kInvalidArgument}, {"event ", "stream ", "trace: "});
    return 0;
  }
  if (trace->events.size() > 4000) return 0;
  static const DeviceSpec device = [] {
    absl::StatusOr<DeviceSpec> d = LoadDeviceSpec("h100-sxm-80gb", "");
    if (!d.ok()) fuzz::Fail("device", d.status());
    return *d;
  }();
  std::vector<AllocatorSpec> specs;
  for (const AllocatorInfo& a : ListAllocators()) {
    if (a.name == "best_of" || a.name == "fallback") continue;
    specs.push_back({a.name, {}});
  }
  specs.push_back({"pytorch_caching", {{"expandable_segments", "true"}}});
  specs.push_back({"best_of", {{"members", "pytorch_caching,bfc{preallocate=false}"}}});
  specs.push_back({"fallback", {{"members", "buddy,best_fit"}}});
  for (const AllocatorSpec& s : specs) {
    absl::StatusOr<std::unique_ptr<Allocator>> a = MakeAllocator(s, device.usable());
    if (!a.ok()) fuzz::Fail(s.impl, a.status());
    absl::StatusOr<SimResult> r = Simulate(*trace, device, a->get());
    if (!r.ok()) fuzz::Fail(absl::StrCat("Simulate through ", s.impl), r.status());
    const std::string why = fuzz::SimInvariantViolation(*trace, *r);
    if (!why.empty()) fuzz::Fail(absl::StrCat(s.impl, ": ", why), absl::InternalError("invariant"));
    (void)(*a)->Finish();
  }
  return 0;
}
