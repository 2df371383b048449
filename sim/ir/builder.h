// ProgramBuilder: a small fluent helper for emitting Program IR, used by the
// model builders (models/) and by tests.
#ifndef GPUSIM_SIM_IR_BUILDER_H_
#define GPUSIM_SIM_IR_BUILDER_H_

#include <map>
#include <string>
#include <vector>

#include "sim/ir/program.h"

namespace gpusim {

class ProgramBuilder {
 public:
  explicit ProgramBuilder(std::string name) { program_.name = std::move(name); }

  TensorId AddTensor(std::string name, std::vector<int64_t> shape, DType dtype, Role role,
                     std::string origin = "");
  // The same with its origin in parts (Tensor::origin_kind is its kind).
  TensorId AddTensor(std::string name, std::vector<int64_t> shape, DType dtype, Role role, const Origin& origin);
  // An entry parameter (argument). `donated` marks it reusable for outputs.
  TensorId AddArgument(std::string name, std::vector<int64_t> shape, DType dtype, Role role,
                       bool donated, std::string origin = "");
  // The same with its origin in parts.
  TensorId AddArgument(std::string name, std::vector<int64_t> shape, DType dtype, Role role, bool donated,
                       const Origin& origin);
  Tensor& tensor(TensorId id) { return program_.tensors[static_cast<size_t>(id)]; }
  Op& op(OpId id) { return program_.ops[static_cast<size_t>(id)]; }

  // Appends an op; its phase and layer come from the builder's current state.
  // bytes_read/bytes_written default to the sum of input/output tensor sizes
  // when left at zero.
  Op& AddOp(std::string name, OpKind kind, std::vector<TensorId> inputs,
            std::vector<TensorId> outputs, double flops = 0);

  // A per-iteration slice of `source` (a stack, or a scanned operand): a
  // tensor of `shape`/`dtype` written by a kDynamicSlice op annotated with
  // `slice` (sim/ir/loop_slice.h). Lowering decides whether it is a buffer
  // of its own; if not, its readers read `source` in place, one slice's
  // bytes per read, and the op and tensor are removed.
  TensorId AddLoopSlice(const std::string& name, TensorId source, std::vector<int64_t> shape, DType dtype,
                        Role role, LoopSlice slice);

  // Ops that read `id` touch only `bytes` of it per read (a dynamic-slice of
  // a stacked buffer fused into its consumer).
  void set_read_bytes(TensorId id, Bytes bytes) { read_bytes_[id] = bytes; }

  void set_phase(Phase p) { phase_ = p; }
  void set_layer(int layer) { layer_ = layer; }
  void set_recompute(bool r) { recompute_ = r; }
  Phase phase() const { return phase_; }

  // Marks the ops appended between BeginRegion and EndRegion.
  // `while_loop`: a rolled loop, one XLA while (Region::while_loop).
  void BeginRegion(std::string name, std::string kind, bool while_loop = false);
  void EndRegion();
  // The innermost open region stands for `repeat` iterations (Region::repeat).
  void set_region_repeat(int64_t repeat);

  // Program::entry_result_tuple: the step returns its outputs as a jitted
  // function does (Note [Entry result tuple], sim/lower/xla/entry_tuple.h).
  void set_entry_result_tuple(bool v) { program_.entry_result_tuple = v; }

  OpId next_op() const { return static_cast<OpId>(program_.ops.size()); }
  Program Finish() { return std::move(program_); }
  const Program& program() const { return program_; }

 private:
  Program program_;
  Phase phase_ = Phase::kForward;
  int layer_ = -1;
  bool recompute_ = false;
  std::vector<size_t> open_regions_;
  std::map<TensorId, Bytes> read_bytes_;
};

}  // namespace gpusim

#endif  // GPUSIM_SIM_IR_BUILDER_H_
