#include "sim/lower/xla/entry_tuple.h"

#include <cstdint>
#include <vector>

#include "absl/strings/str_cat.h"

namespace gpusim {

void AddEntryTupleTable(ProgramBuilder& b) {
  // The tuple holds its elements' pointers: it is written after all of
  // them (the ROOT is scheduled last) and reads none of their bytes.
  std::vector<TensorId> elements;
  for (const Tensor& t : b.program().tensors) {
    if (t.live_out) elements.push_back(t.id);
  }
  const int64_t outputs = static_cast<int64_t>(elements.size());
  if (outputs < 2) return;
  const TensorId table = b.AddTensor("output tuple index table", {8 * outputs}, DType::kU8, Role::kScalar,
                                     absl::StrCat("the entry result's tuple of ", outputs, " pointers (8 B each)"));
  b.tensor(table).live_out = true;
  Op& op = b.AddOp("output tuple", OpKind::kCopy, elements, {table}, 0);
  op.bytes_read = Bytes(0);
  op.bytes_written = Bytes(0);
}

}  // namespace gpusim
