// See semantics.h (Note [Framework semantics]).
#include "sim/lower/semantics.h"

#include "sim/base/status.h"

namespace gpusim {

LoweringSemantics LoweringSemanticsOf(const RunSpec& spec) {
  LoweringSemantics s;  // the XLA defaults
  if (spec.framework == "jax") {
    // A program file declares its own buffers and replays them through the
    // configured allocator (sim/step/capabilities.cc).
    if (spec.program.present) s.runtime_check = RuntimeCheck::kAllocatorReplay;
    return s;
  }
  GPUSIM_CHECK(spec.framework == "pytorch");
  s.lowering = Lowering::kEager;
  s.reuse_operand_buffers = false;
  s.schedule_entry = false;
  s.entry_result_tuple = false;
  s.accounting = Accounting::kLiveBytes;
  s.runtime_check = RuntimeCheck::kAllocatorReplay;
  s.charge_host_timeline = true;
  s.host_copies_on_compute_stream = true;
  s.grad_cast_fuses_into_readers = false;
  s.maxtext_metric_outputs = false;
  s.tensor_parallel = TensorParallelRules::kMegatronLm;
  s.scans_layers = false;
  return s;
}

const std::vector<XlaOnlySetting>& XlaOnlySettings() {
  static const std::vector<XlaOnlySetting>* const kSettings = new std::vector<XlaOnlySetting>{
      {"model.param_scan_axis", "0",
       "the layer axis of stacked parameters in an XLA scan (MaxText param_scan_axis; flax nn.scan transposes "
       "it to the front); under framework pytorch the layers are a module list with their own parameters, "
       "nothing is stacked or transposed"},
      {"model.scan_layers", "false",
       "layers as one XLA scan over stacked parameters (MaxText scan_layers); under framework pytorch the "
       "layers are a module list run one after another"},
      {"loop.mode", "unrolled",
       "a rolled XLA while loop with residual and gradient stacks; under framework pytorch the layers run "
       "one after another and autograd keeps each layer's saved tensors"},
  };
  return *kSettings;
}

bool RecordedFromEagerPyTorch(const Trace& trace) {
  const std::string* framework = FindMeta(trace, "framework");
  return framework != nullptr && *framework == "pytorch";
}

}  // namespace gpusim
