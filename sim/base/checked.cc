#include "sim/base/checked.h"

#include <string>

#include "absl/strings/str_cat.h"

namespace gpusim {
namespace {

absl::StatusOr<int64_t> Fold(std::initializer_list<NamedInt> operands, std::string_view what, bool product) {
  int64_t acc = product ? 1 : 0;
  bool overflow = false;
  for (const NamedInt& o : operands) {
    if (!(product ? CheckedMul(acc, o.value, &acc) : CheckedAdd(acc, o.value, &acc))) {
      overflow = true;
      break;
    }
  }
  if (!overflow) return acc;
  const char* op = product ? " × " : " + ";
  std::string names, values;
  for (const NamedInt& o : operands) {
    absl::StrAppend(&names, names.empty() ? "" : op, std::string(o.name));
    absl::StrAppend(&values, values.empty() ? "" : op, o.value);
  }
  return absl::InvalidArgumentError(absl::StrCat(names, " = ", values, " exceeds 2^63 - 1",
                                                 what.empty() ? "" : absl::StrCat(" (", std::string(what), ")")));
}

}  // namespace

absl::StatusOr<int64_t> CheckedProduct(std::initializer_list<NamedInt> operands, std::string_view what) {
  return Fold(operands, what, true);
}

absl::StatusOr<int64_t> CheckedSum(std::initializer_list<NamedInt> operands, std::string_view what) {
  return Fold(operands, what, false);
}

}  // namespace gpusim
