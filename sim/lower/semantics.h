// Framework semantics: the lowering a run's `framework` selects and the
// named facts that follow from it, resolved once from the RunSpec (Note
// [Framework semantics]). Front-ends (models/), the step pipeline
// (sim/step), reports, the advisor, viz and the CLI read these facts; only
// sim/lower compares a framework's name.
#ifndef GPUSIM_SIM_LOWER_SEMANTICS_H_
#define GPUSIM_SIM_LOWER_SEMANTICS_H_

#include <string>
#include <vector>

#include "sim/config/spec.h"
#include "sim/trace/trace.h"

namespace gpusim {

// Note [Framework semantics]
// A training step's memory and time depend on how its framework runs the
// program, not only on the program. gpusim models two ways:
//
//   xla    (framework jax): one compiled executable. XLA's buffer
//          assignment places every buffer before the step runs
//          (buffer_assignment.cc, heap_simulator.cc): elementwise ops write
//          into a dying operand's buffer, the entry computation is
//          scheduled by XLA's scheduler (sim/lower/xla/entry_schedule.h),
//          temps are packed into one heap and compiled.memory_analysis()
//          reports argument + output - alias + temp. The runtime question is
//          whether those few blocks fit JAX's BFC arena (Note [JAX arena],
//          sim/step/step.cc). Scan structure is XLA's too: rolled or
//          unrolled while loops, residual and gradient stacks, the
//          param_scan_axis transposes (models/llama_scan.cc).
//   eager  (framework pytorch): ops run in program order and allocate as
//          they run; autograd-saved tensors live until their backward op
//          reads them, recompute re-runs ops in the backward pass, and the
//          footprint is the live bytes replayed through the configured
//          allocator (PyTorch c10/cuda/CUDACachingAllocator.cpp). The host
//          issues every op (Note [Eager host costs],
//          sim/lower/eager/host_timeline.h). Layers are a module list with
//          their own parameters: nothing is scanned or stacked.
//
// LoweringSemanticsOf turns the framework into the facts below once; each
// is named for what it is, so code that needs one asks for it (e.g.
// `accounting == Accounting::kXlaMemoryAnalysis`) and never for the
// framework's name. The settings only the XLA lowering reads
// (XlaOnlySettings) are refused by name under eager when written to a value
// that would change an XLA result (sim/step/capabilities.cc).

enum class Lowering { kXla, kEager };

// What the step's footprint is.
enum class Accounting {
  // XLA memory_analysis(): argument + output - alias + temp, temp the packed
  // heap (../shared/reference/xla_semantics.md §1); the peak that matters
  // is the temps'.
  kXlaMemoryAnalysis,
  // The live bytes of the replay, in program order (eager allocation).
  kLiveBytes,
};

// How the runtime side of the footprint is checked.
enum class RuntimeCheck {
  // The executable's few blocks against JAX's BFC arena (Note [JAX arena]);
  // the engine replays with an ideal allocator.
  kJaxArena,
  // Every buffer replayed through the configured allocator (eager steps,
  // and program files, which declare their own buffers).
  kAllocatorReplay,
};

// Whose rules split a layer over a tensor-parallel group (Note [Llama
// tensor parallelism], models/llama_layer.cc).
enum class TensorParallelRules {
  // MaxText logical-axis rules: norm scales sharded over tensor, the
  // residual stream sharded on embed without sequence parallelism, the
  // output projection's gathered input reused by its dW.
  kMaxTextLogicalAxes,
  // Megatron-LM: replicated norm scales, a vocab-parallel cross-entropy
  // that all-reduces the target logit, the output layer's input gathered
  // again for dW.
  kMegatronLm,
};

struct LoweringSemantics {
  Lowering lowering = Lowering::kXla;
  // XLA buffer assignment lets an elementwise op write into a dying
  // operand's buffer (Note [Operand buffer reuse], sim/lower/lower.cc);
  // PyTorch eager allocates every output anew.
  bool reuse_operand_buffers = true;
  // XLA's scheduler orders the entry computation (Note [Entry schedule],
  // sim/lower/xla/entry_schedule.h); an eager step runs in program order.
  bool schedule_entry = true;
  // A jitted step returns its outputs as one tuple (Note [Entry result
  // tuple], sim/lower/xla/entry_tuple.h).
  bool entry_result_tuple = true;
  Accounting accounting = Accounting::kXlaMemoryAnalysis;
  RuntimeCheck runtime_check = RuntimeCheck::kJaxArena;
  // The host issues every op, module call and optimizer launch (Note
  // [Eager host costs]); an XLA step is one executable launch whose host
  // side is not modelled.
  bool charge_host_timeline = false;
  // Host offload copies run on the compute stream: torch.autograd.graph.
  // save_on_cpu's pack/unpack hooks issue them on the current stream. XLA
  // schedules them as async copy-start/copy-done on a stream of their own
  // (Note [Host offload], models/llama_scan.cc).
  bool host_copies_on_compute_stream = false;
  // XLA fuses the convert of a gradient to the weight dtype into every
  // reader (priority_fusion.cc CanFuseWithAllNonBitcastUsers), so no
  // weight-dtype copy is held; eager PyTorch materialises the cast.
  bool grad_cast_fuses_into_readers = true;
  // The step also returns MaxText train_step's scalar metrics
  // (total_weights, moe_lb_loss) as outputs (models/llama_state.cc).
  bool maxtext_metric_outputs = true;
  TensorParallelRules tensor_parallel = TensorParallelRules::kMaxTextLogicalAxes;
  // Layers may be one scanned loop with stacked parameters (model.scan_layers,
  // loop.mode, model.param_scan_axis); eager layers are a module list.
  bool scans_layers = true;
};

// The semantics of `spec`'s framework (and, for the runtime check, whether
// it is a program file). REQUIRES: spec.framework is "jax" or "pytorch" (the
// config layer's enum).
LoweringSemantics LoweringSemanticsOf(const RunSpec& spec);

// A setting only the XLA lowering reads, with the value an eager step runs
// and why the eager step has no other.
struct XlaOnlySetting {
  const char* path;         // "model.param_scan_axis"
  const char* eager_value;  // as SettingInfo::value prints it
  const char* why;          // what the setting is, and what eager PyTorch does instead
};

// The settings above, for the capability check (sim/step/capabilities.cc).
const std::vector<XlaOnlySetting>& XlaOnlySettings();

// Whether a recorded trace was recorded from eager PyTorch (meta framework
// pytorch, python/gpusim_torch), so its replay charges the host per op.
bool RecordedFromEagerPyTorch(const Trace& trace);

}  // namespace gpusim

#endif  // GPUSIM_SIM_LOWER_SEMANTICS_H_
