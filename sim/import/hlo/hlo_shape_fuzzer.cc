// libFuzzer target: the HLO text parser's shapes (issue 27: a 20k-deep
// tuple overflowed the stack, a parameter number sized a table, products
// of dimensions wrapped). The input's first line is a shape, parsed alone
// (ParseHloShape) and as a parameter's shape in a module whose parameter
// number is the second line. A rejection must be InvalidArgument naming
// its position; an accepted shape must print and re-parse to itself, with
// an element count and byte size that fit int64 and are never negative.
#include <cstddef>
#include <cstdint>
#include <string>

#include "sim/import/hlo/hlo_parser.h"
#include "tests/fuzz/fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace gpusim;
  const std::string text(reinterpret_cast<const char*>(data), size);
  const size_t nl = text.find('\n');
  const std::string shape = text.substr(0, nl);
  const std::string number = nl == std::string::npos ? "0" : text.substr(nl + 1, text.find('\n', nl + 1) - nl - 1);
  absl::StatusOr<HloShape> s = ParseHloShape(shape);
  if (!s.ok()) {
    fuzz::CheckRejection(s.status(), {absl::StatusCode::kInvalidArgument}, {"shape:1:"});
  } else {
    if (s->ElementCount() < 0 || (!s->tuple && s->ArrayBytes() < 0)) {
      fuzz::Fail("a negative element count or size", absl::InternalError(s->ToString()));
    }
    absl::StatusOr<HloShape> again = ParseHloShape(s->ToString());
    if (!again.ok()) fuzz::Fail("a printed shape does not parse", again.status());
    if (again->ToString() != s->ToString()) {
      fuzz::Fail("print -> parse -> print is not a fixed point", absl::InternalError(s->ToString()));
    }
  }
  const std::string module = "HloModule fuzz\nENTRY main {\n  p = " + shape + " parameter(" + number +
                             ")\n  ROOT c = f32[] constant(0)\n}\n";
  absl::StatusOr<HloModule> m = ParseHloModule(module, "fuzz.hlo");
  if (!m.ok()) fuzz::CheckRejection(m.status(), {absl::StatusCode::kInvalidArgument}, {"fuzz.hlo:"});
  return 0;
}
