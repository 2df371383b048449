#include "sim/ir/builder.h"

#include "sim/base/status.h"

namespace gpusim {

TensorId ProgramBuilder::AddTensor(std::string name, std::vector<int64_t> shape, DType dtype,
                                   Role role, std::string origin) {
  Tensor t;
  t.id = static_cast<TensorId>(program_.tensors.size());
  t.name = std::move(name);
  t.shape = std::move(shape);
  t.dtype = dtype;
  t.role = role;
  t.origin = std::move(origin);
  program_.tensors.push_back(std::move(t));
  return program_.tensors.back().id;
}

TensorId ProgramBuilder::AddTensor(std::string name, std::vector<int64_t> shape, DType dtype, Role role,
                                   const Origin& origin) {
  TensorId id = AddTensor(std::move(name), std::move(shape), dtype, role, origin.Text());
  tensor(id).origin_kind = origin.kind;
  return id;
}

TensorId ProgramBuilder::AddArgument(std::string name, std::vector<int64_t> shape, DType dtype,
                                     Role role, bool donated, std::string origin) {
  TensorId id = AddTensor(std::move(name), std::move(shape), dtype, role, std::move(origin));
  tensor(id).entry_parameter = true;
  tensor(id).donated = donated;
  return id;
}

TensorId ProgramBuilder::AddArgument(std::string name, std::vector<int64_t> shape, DType dtype, Role role,
                                     bool donated, const Origin& origin) {
  TensorId id = AddArgument(std::move(name), std::move(shape), dtype, role, donated, origin.Text());
  tensor(id).origin_kind = origin.kind;
  return id;
}

Op& ProgramBuilder::AddOp(std::string name, OpKind kind, std::vector<TensorId> inputs,
                          std::vector<TensorId> outputs, double flops) {
  Op op;
  op.id = static_cast<OpId>(program_.ops.size());
  op.name = std::move(name);
  op.kind = kind;
  op.flops = flops;
  op.phase = phase_;
  op.layer = layer_;
  op.recompute = recompute_;
  for (TensorId t : inputs) {
    auto it = read_bytes_.find(t);
    op.bytes_read += it != read_bytes_.end() ? it->second : tensor(t).bytes();
  }
  for (TensorId t : outputs) op.bytes_written += tensor(t).bytes();
  op.inputs = std::move(inputs);
  op.outputs = std::move(outputs);
  program_.ops.push_back(std::move(op));
  return program_.ops.back();
}

TensorId ProgramBuilder::AddLoopSlice(const std::string& name, TensorId source, std::vector<int64_t> shape,
                                      DType dtype, Role role, LoopSlice slice) {
  const TensorId t = AddTensor(name, std::move(shape), dtype, role);
  Op& op = AddOp(name, OpKind::kDynamicSlice, {source}, {t}, 0);
  op.bytes_read = tensor(t).bytes();
  op.dtype = dtype;
  op.loop_slice = static_cast<int32_t>(program_.loop_slices.size());
  program_.loop_slices.push_back(std::move(slice));
  return t;
}

void ProgramBuilder::BeginRegion(std::string name, std::string kind, bool while_loop) {
  Region r;
  r.name = std::move(name);
  r.kind = std::move(kind);
  r.while_loop = while_loop;
  r.layer = layer_;
  r.phase = phase_;
  r.first = next_op();
  open_regions_.push_back(program_.regions.size());
  program_.regions.push_back(std::move(r));
}

void ProgramBuilder::EndRegion() {
  GPUSIM_CHECK(!open_regions_.empty());
  program_.regions[open_regions_.back()].last = next_op() - 1;
  open_regions_.pop_back();
}

void ProgramBuilder::set_region_repeat(int64_t repeat) {
  GPUSIM_CHECK(!open_regions_.empty());
  program_.regions[open_regions_.back()].repeat = repeat;
}

}  // namespace gpusim
