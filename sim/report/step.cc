#include "sim/report/step.h"

#include <memory>

#include "absl/container/flat_hash_map.h"
#include "sim/alloc/allocator.h"
#include "sim/base/status.h"
#include "models/llama.h"

namespace gpusim {
namespace {

// Peak of live temporaries (neither arguments nor outputs) in trace order.
void TempPeak(const LoweredStep& l, Bytes* peak, int64_t* at) {
  Bytes cur(0);
  *peak = Bytes(0);
  *at = -1;
  for (size_t i = 0; i < l.trace.events.size(); ++i) {
    const TraceEvent& e = l.trace.events[i];
    if (e.type != EventType::kAlloc && e.type != EventType::kFree) continue;
    const BufferInfo& b = l.buffers[static_cast<size_t>(e.buffer)];
    if (b.argument || b.output) continue;
    if (e.type == EventType::kAlloc) {
      cur += b.bytes;
      if (cur > *peak) {
        *peak = cur;
        *at = static_cast<int64_t>(i);
      }
    } else {
      cur -= b.bytes;
    }
  }
}

}  // namespace

absl::StatusOr<StepReport> SimulateStep(const RunSpec& spec) {
  StepReport r;
  r.spec = spec;
  r.param_count = LlamaParamCount(spec.model);
  ASSIGN_OR_RETURN(r.program, BuildLlamaTrainStep(spec));
  ASSIGN_OR_RETURN(r.lowered, LowerEager(r.program));
  r.capacity = spec.device.usable();
  ASSIGN_OR_RETURN(std::unique_ptr<Allocator> alloc, MakeAllocator(spec.allocator, r.capacity));
  ASSIGN_OR_RETURN(r.sim, Simulate(r.lowered.trace, spec.device, alloc.get()));
  r.sim.oom.capacity = r.capacity;
  r.argument = r.lowered.argument_bytes;
  r.output = r.lowered.output_bytes;
  r.alias = r.lowered.alias_bytes;
  TempPeak(r.lowered, &r.temp, &r.temp_peak_event);
  if (spec.framework == "jax") {
    r.peak = r.argument + r.output - r.alias + r.temp;
  } else {
    r.peak = r.sim.peak_live;
  }
  r.fits = r.peak <= r.capacity && !r.sim.oom.happened;
  r.tokens_per_step = static_cast<double>(spec.batch.per_device * spec.batch.seq_len);
  return r;
}

}  // namespace gpusim
