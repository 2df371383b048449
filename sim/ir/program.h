// Program IR: what one device computes in one training step. Tensors carry
// shape, dtype and role; ops carry kind, FLOPs and bytes moved; regions mark
// loops and layers; every op belongs to a phase. Model builders (models/)
// produce Programs; lowering (sim/lower) turns them into Traces.
#ifndef GPUSIM_SIM_IR_PROGRAM_H_
#define GPUSIM_SIM_IR_PROGRAM_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "sim/base/units.h"
#include "sim/ir/dtype.h"
#include "sim/ir/loop_slice.h"

namespace gpusim {

using TensorId = int32_t;
using OpId = int32_t;
constexpr TensorId kNoTensor = -1;

// What a buffer is for; reports group bytes by role.
enum class Role {
  kParameter,
  kOptimizerState,
  kGradient,
  kActivation,
  kResidual,     // saved for the backward pass
  kTemporary,
  kWorkspace,
  kInputBatch,
  kLoopState,
  kScalar,       // step counters, metrics
};
constexpr int kNumRoles = 10;
std::string_view RoleName(Role r);  // "parameter", "optimizer_state", ...
bool ParseRole(std::string_view s, Role* out);

enum class Phase { kForward, kBackward, kOptimizer, kOther };
std::string_view PhaseName(Phase p);

enum class OpKind {
  kMatmul,
  kAttention,           // fused (flash) attention
  kElementwise,
  kReduce,
  kTranspose,
  kCopy,
  kConvert,
  kGather,              // embedding lookup
  kScatter,             // embedding gradient
  kDynamicSlice,
  kDynamicUpdateSlice,  // in place into its first operand
  kAllGather,
  kReduceScatter,
  kAllReduce,
  kHostToDevice,
  kDeviceToHost,
  kBroadcast,  // a root's buffer to every rank (NCCL ncclBroadcast; trace format 1.3)
};
constexpr int kNumOpKinds = 17;
std::string_view OpKindName(OpKind k);
bool ParseOpKind(std::string_view s, OpKind* out);
bool IsCollective(OpKind k);

// A tensor's origin as its parts: the kind of buffer and the subject it
// names ("transposed copy of stacked params (param_scan_axis=1)", "wq").
struct Origin {
  std::string kind;
  std::string subject;  // may be empty
  // The words `explain` prints: "KIND: SUBJECT", or KIND alone.
  std::string Text() const { return subject.empty() ? kind : kind + ": " + subject; }
};

struct Tensor {
  TensorId id = kNoTensor;
  std::string name;
  std::vector<int64_t> shape;
  DType dtype = DType::kF32;
  Role role = Role::kTemporary;
  std::string origin;          // in words, for `explain`
  // The kind of buffer `origin` describes, without the subject it names
  // (a parameter, a value): what `diff` sums buffers by (sim/report/diff.cc).
  // Set where the buffer is made (ProgramBuilder::AddTensor or AddArgument
  // with an Origin, or beside the words that name it); empty where the
  // origin's words are the kind whole. Nothing parses `origin` back.
  std::string origin_kind;
  bool entry_parameter = false;  // exists before the step (argument)
  bool donated = false;          // entry parameter whose buffer may be reused
  bool live_out = false;         // returned by the step (output)
  TensorId aliases = kNoTensor;  // live-out tensor written into this donated input
  // Lives in pinned host memory (XLA memory space S(5), JAX memory kind
  // "pinned_host"; PyTorch save_on_cpu's pinned tensors): never a device
  // buffer; lowering counts it as host bytes (Note [Host offload] in
  // models/llama.cc).
  bool host = false;

  int64_t elements() const;
  Bytes bytes() const { return Bytes(elements() * DTypeSize(dtype)); }
};

struct Op {
  OpId id = -1;
  std::string name;
  OpKind kind = OpKind::kElementwise;
  std::vector<TensorId> inputs;
  std::vector<TensorId> outputs;
  double flops = 0;           // floating-point operations
  Bytes bytes_read;           // HBM bytes read
  Bytes bytes_written;        // HBM bytes written
  DType dtype = DType::kBF16; // compute type (selects the unit's peak)
  Phase phase = Phase::kForward;
  int layer = -1;             // decoder layer, -1 outside layers
  bool recompute = false;     // rematerialised in the backward pass
  int64_t group = 1;          // collective group size (devices)
  // Nodes the collective's group spans (its ranks' distinct nodes); 0: not
  // known, the group taken as consecutive ranks (collective_model.h).
  int64_t group_nodes = 0;
  // Matmul shape, for shape-aware kernel models: [batch] x (m x k) @ (k x n).
  int64_t m = 0, n = 0, k = 0, batch = 1;
  // Ops this one may not start before (besides its data dependencies): an
  // async copy issued at a scheduling point, a loop iteration that waits for
  // the previous iteration's copies to finish.
  std::vector<OpId> control_deps;
  // Runs on the compute stream even when its kind has its own stream (a
  // PyTorch save_on_cpu copy, issued on the current stream).
  bool on_compute_stream = false;
  // A kDynamicSlice that reads one iteration's slice of a stack: its index
  // in Program::loop_slices; -1 otherwise. Lowering decides whether the
  // slice is a buffer (sim/lower/xla/loop_slices.h LowerLoopSlices).
  int32_t loop_slice = -1;
  // The eager host (Note [Eager host costs], sim/lower/eager/host_timeline.h):
  // Python calls the host makes before issuing this op that launch nothing
  // of their own (a Megatron-LM p2p call, a loop over parameters), priced
  // host.module each; and whether the host waits for the device after
  // issuing it (a .item(), torch.cuda.synchronize(); Note [Host syncs] in
  // sim/engine/engine.h).
  int64_t host_calls = 0;
  bool host_sync = false;
};

// A contiguous range of ops with a meaning: a decoder layer's forward, a loop.
struct Region {
  std::string name;
  // "layer": one decoder layer's forward or backward (models/llama.cc,
  //   models/gpt.cc); the charts' loop iterations;
  // "iteration": one iteration of a rolled program-file scan (models/jax_program.cc);
  // "loop": a scan or an HLO while, around its iterations;
  // "phase": the head's forward and backward, the optimizer (models/llama_state.cc);
  // "pipeline_slot": one pass of a Megatron rank's pipeline schedule
  //   (models/gpt.cc; sim/step/megatron_step_pipeline.h replays them).
  std::string kind;
  OpId first = 0;    // first op (inclusive)
  OpId last = 0;     // last op (inclusive)
  // A rolled loop lowered to one XLA `while`: the entry schedule moves it
  // as one instruction and keeps its body's order (sim/lower/xla/entry_schedule.h).
  bool while_loop = false;
  // A "layer" (or "iteration") region inside a while loop whose ops stand for `repeat`
  // identical consecutive iterations, built once (Note [Rolled loop built
  // once], sim/lower/lower.h): its layer number is the first of the layers
  // [layer, layer + repeat) it stands for. Lowering marks its events
  // (Trace::repeats); the engine charges them `repeat` times.
  int64_t repeat = 1;
  int layer = -1;              // the builder's layer when the region began
  Phase phase = Phase::kForward;  // the builder's phase when the region began
};

// A compiled XLA module's own buffer assignment (sim/import/hlo/
// hlo_buffer_assignment.h, Note [Compiled-module buffer assignment]), when
// the program was read from one: the step keeps the module's schedule and
// takes the temp heap from it instead of packing the lowered buffers.
struct CompiledMemory {
  bool present = false;
  Bytes argument, output, alias;  // memory_analysis()'s
  Bytes temp;          // memory_analysis() temp_size_in_bytes
  Bytes heap;          // the packed preallocated temp buffer
  Bytes tuple_tables;  // tuple-shaped temp allocations
  std::string heap_algorithm;
  struct Line {
    std::string name;  // defining instruction (and tuple index)
    std::string what;  // shape, computation, op_name
    Bytes size, offset;
    int64_t start = 0, end = 0;  // flattened schedule positions
  };
  std::vector<Line> at_peak;  // the heap's values where it reaches its size, by offset
};

struct Program {
  std::string name;
  std::vector<Tensor> tensors;
  std::vector<Op> ops;
  std::vector<Region> regions;
  std::vector<LoopSlice> loop_slices;  // the annotations Op::loop_slice indexes
  // The step's live-out values are returned as one flat tuple (a jitted
  // function's result pytree): the XLA lowering adds the tuple's pointer
  // table (sim/lower/xla/entry_tuple.h, Note [Entry result tuple]).
  bool entry_result_tuple = false;
  CompiledMemory compiled;

  const Tensor& tensor(TensorId id) const { return tensors[static_cast<size_t>(id)]; }
  const Op& op(OpId id) const { return ops[static_cast<size_t>(id)]; }
};

// Every tensor's bytes (elements x dtype size), and their sum, fit in
// int64, and no dimension is negative; else InvalidArgument naming the
// tensor and its shape. Lowering checks this first, so Tensor::bytes() and
// every sum of tensor bytes below it cannot overflow (issue 17).
absl::Status CheckTensorSizes(const Program& p);

}  // namespace gpusim

#endif  // GPUSIM_SIM_IR_PROGRAM_H_
