// Lowering: Program → Trace under a framework's memory semantics.
//
// Eager (PyTorch-like): every op's outputs are allocated just before it runs
// and each buffer is freed right after its last reader, in program order;
// autograd-saved tensors are simply read by their backward op, so they live
// until then. Entry parameters exist before the step; live-out outputs that
// alias a donated input are written in place (XLA input_output_alias, or a
// PyTorch optimizer's in-place update).
//
// The XLA `memory_analysis()` accounting is reported beside it (see
// ../shared/reference/xla_semantics.md §1): argument = entry parameters,
// output = live-out values, alias = outputs written into donated inputs,
// temp = the peak of everything else.
//
// Note [Rolled loop built once]
// A rolled scan is one XLA while: its body is one computation whose buffers
// are assigned once and reused by every iteration (the loop state and the
// stacked xs/ys, sized by the trip count, live around it; body temps live
// within an iteration). A builder therefore emits a long rolled loop with a
// few iterations built explicitly on each side (the first ones, whose
// prefetch starts the pipeline, and the last ones, which drain it) and one
// steady iteration between them standing for all the others: a "layer"
// Region with `repeat` = the iterations it stands for. Lowering marks that
// region's events as a TraceRepeat; the engine runs them once and charges
// them `repeat` times: the events after them start (repeat - 1) periods
// later, and busy times, FLOPs and the critical path count them `repeat`
// times (sim/engine/engine.h). The live set of a steady iteration is the
// same in every iteration, so peaks and the packed temp heap are those of
// the whole loop; tests/rolled_loop_test.cc checks every figure against the
// loop built iteration by iteration.
#ifndef GPUSIM_SIM_LOWER_LOWER_H_
#define GPUSIM_SIM_LOWER_LOWER_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "sim/ir/program.h"
#include "sim/trace/trace.h"

namespace gpusim {

// Streams the lowering uses.
constexpr StreamId kComputeStream = 0;
constexpr StreamId kCollectiveStream = 1;
constexpr StreamId kHostCopyStream = 2;

// One device buffer of the lowered step, for reports and `explain`.
struct BufferInfo {
  BufferId id = -1;
  std::string name;
  std::string origin;
  std::string origin_kind;  // Tensor::origin_kind
  Role role = Role::kTemporary;
  Bytes bytes;
  bool argument = false;
  bool output = false;
  int64_t alloc_event = -1;  // -1: live before the step
  int64_t free_event = -1;   // -1: live after the step
  Phase phase = Phase::kForward;  // phase of the producing op
};

struct LoweredStep {
  Trace trace;
  std::vector<BufferInfo> buffers;  // indexed by BufferId
  Bytes argument_bytes;
  Bytes output_bytes;
  Bytes alias_bytes;
  Bytes host_bytes;                 // pinned host memory (tensors with `host`)
  std::vector<Phase> event_phase;   // phase of each trace event
  std::vector<int64_t> op_event;    // per program op: its timed trace event
};

struct LowerOptions {
  // XLA: elementwise ops write into a dying operand's buffer (Note
  // [Operand buffer reuse] in lower.cc). PyTorch eager allocates anew.
  bool reuse_operand_buffers = false;
  // With reuse_operand_buffers: whether a matmul's result may be the buffer
  // an elementwise consumer writes over. XLA-GPU's gemm is a cuBLAS(Lt)
  // custom call whose result is a tuple element, which no consumer may
  // write over (Note [Gemm results are not written over] in lower.cc).
  bool reuse_matmul_results = true;
};

absl::StatusOr<LoweredStep> LowerEager(const Program& p, const LowerOptions& options = {});

}  // namespace gpusim

#endif  // GPUSIM_SIM_LOWER_LOWER_H_
