#include "sim/lower/xla/entry_tuple.h"

#include <cstdint>
#include <vector>

#include "absl/strings/str_cat.h"

namespace gpusim {

void AddEntryTupleTable(Program* p) {
  if (!p->entry_result_tuple) return;
  // The tuple holds its elements' pointers: it is written after all of
  // them (the ROOT is scheduled last) and reads none of their bytes.
  std::vector<TensorId> elements;
  for (const Tensor& t : p->tensors) {
    if (t.live_out) elements.push_back(t.id);
  }
  const int64_t outputs = static_cast<int64_t>(elements.size());
  if (outputs < 2) return;
  Tensor table;
  table.id = static_cast<TensorId>(p->tensors.size());
  table.name = "output tuple index table";
  table.shape = {8 * outputs};
  table.dtype = DType::kU8;
  table.role = Role::kScalar;
  table.origin = absl::StrCat("the entry result's tuple of ", outputs, " pointers (8 B each)");
  table.live_out = true;
  p->tensors.push_back(table);
  Op op;
  op.id = static_cast<OpId>(p->ops.size());
  op.name = "output tuple";
  op.kind = OpKind::kCopy;
  op.inputs = std::move(elements);
  op.outputs = {table.id};
  op.bytes_read = Bytes(0);
  op.bytes_written = Bytes(0);
  op.phase = p->ops.empty() ? Phase::kForward : p->ops.back().phase;
  p->ops.push_back(std::move(op));
}

}  // namespace gpusim
