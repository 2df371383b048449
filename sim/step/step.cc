#include "sim/step/step.h"

#include "sim/alloc/bfc_options.h"
#include "sim/alloc/options.h"

#include <algorithm>
#include <map>
#include <memory>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "sim/alloc/allocator.h"
#include "sim/alloc/heap_planner.h"
#include "sim/base/status.h"
#include "sim/step/capabilities.h"
#include "sim/step/model_program.h"
#include "sim/step/temp_heap.h"
#include "sim/step/families.h"

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

// The largest non-argument, non-output buffers live at `event`, largest first.
std::vector<BufferId> Holders(const LoweredStep& l, int64_t event, bool temps_only, size_t n) {
  std::vector<BufferId> live;
  if (event < 0) return live;
  for (const BufferInfo& b : l.buffers) {
    if (temps_only && (b.argument || b.output)) continue;
    if (b.alloc_event > event || (b.free_event >= 0 && b.free_event <= event)) continue;
    live.push_back(b.id);
  }
  std::stable_sort(live.begin(), live.end(), [&](BufferId a, BufferId b) {
    return l.buffers[static_cast<size_t>(a)].bytes > l.buffers[static_cast<size_t>(b)].bytes;
  });
  if (live.size() > n) live.resize(n);
  return live;
}

}  // namespace

// Per-layer times from the layer regions' fields (layer, phase); a region
// standing for several iterations (Note [Rolled loop built once],
// sim/lower/lower.h) gives each layer it stands for its time.
std::vector<LayerTime> LayerTimes(const StepReport& r) {
  std::map<int, LayerTime> by_layer;
  const Trace& tr = r.lowered.trace;
  if (r.lowered.op_event.size() != r.program.ops.size()) return {};
  for (const Region& reg : r.program.regions) {
    if (reg.kind != "layer" || reg.layer < 0) continue;
    const bool forward = reg.phase == Phase::kForward;
    if (!forward && reg.phase != Phase::kBackward) continue;
    SimTime first(-1), last(0), recompute(0);
    for (OpId op = reg.first; op <= reg.last && op < static_cast<OpId>(r.program.ops.size()); ++op) {
      const int64_t e = r.lowered.op_event[static_cast<size_t>(op)];
      if (e < 0 || tr.events[static_cast<size_t>(e)].stream != kComputeStream) continue;
      const SimTime s = r.sim.start[static_cast<size_t>(e)], end = r.sim.end[static_cast<size_t>(e)];
      if (first.ns() < 0 || s < first) first = s;
      last = Max(last, end);
      if (r.program.op(op).recompute) recompute += end - s;
    }
    if (first.ns() < 0) continue;
    for (int64_t i = 0; i < reg.repeat; ++i) {
      const int layer = reg.layer + static_cast<int>(i);
      LayerTime& t = by_layer[layer];
      t.layer = layer;
      if (forward) {
        t.forward = last - first;
      } else {
        t.backward = last - first;
        t.backward_recompute = recompute;
      }
    }
  }
  std::vector<LayerTime> out;
  out.reserve(by_layer.size());
  for (const auto& [l, t] : by_layer) out.push_back(t);
  return out;
}

absl::Status CheckStepInput(const RunSpec& spec) {
  if (spec.megatron.present && !spec.megatron.rank_selected) {
    return absl::InvalidArgumentError(absl::StrCat(
        spec.source_file, ": a Megatron-LM launch line (megatron:) runs with `gpusim run` (every pipeline rank, "
        "sim/step/megatron_step.h), `explain`, `diff` and `viz` (its peak rank); this command does not take one yet"));
  }
  return absl::OkStatus();
}

absl::StatusOr<StepReport> PrepareStep(const RunSpec& given) {
  RETURN_IF_ERROR(CheckStepInput(given));
  StepReport r;
  ASSIGN_OR_RETURN(r.spec, ApplyCapabilities(given));
  const RunSpec& spec = r.spec;
  r.semantics = LoweringSemanticsOf(spec);
  const LoweringSemantics& sem = r.semantics;
  r.modelled = ModelledSettings(spec);
  ASSIGN_OR_RETURN(const ModelFamily* family, FamilyOf(spec));
  ASSIGN_OR_RETURN(r.program, BuildFamilyProgram(*family, spec));
  if (family->param_count != nullptr) {
    r.param_count = family->param_count(spec.model);
  } else {
    for (const Tensor& t : r.program.tensors) {
      if (t.entry_parameter && t.role == Role::kParameter) r.param_count += t.elements();
    }
  }
  // A compiled module is scheduled already (Note [Compiled modules] in
  // sim/import/hlo/hlo_to_program.cc).
  if (sem.schedule_entry && !r.program.compiled.present) {
    ASSIGN_OR_RETURN(r.entry_schedule, ScheduleEntry(r.program));  // Note [Entry schedule]
  }
  LowerOptions lower_options;
  lower_options.reuse_operand_buffers = sem.reuse_operand_buffers;
  // Note [Gemm results are not written over] (sim/lower/lower.cc), for an
  // unoptimised HLO module (a compiled one's temps are its own buffer
  // assignment's). The built-in families' XLA lowering keeps the reuse for
  // now: their figures and goldens were checked with it.
  lower_options.reuse_matmul_results = spec.program_hlo.empty() || r.program.compiled.present;
  ASSIGN_OR_RETURN(r.lowered, LowerEager(r.program, lower_options));
  if (sem.charge_host_timeline) {
    // Note [Eager host costs]: Megatron-LM steps with TE / apex FusedAdam
    // and registers a Python hook per parameter gradient; torch.optim
    // defaults to its foreach implementation.
    HostTimelineOptions host;
    const bool megatron = family->name == "megatron";
    host.grad_hooks = megatron;
    host.optimizer = megatron                        ? OptimizerLaunch::kFusedAdam
                     : spec.optimizer.kind == "sgd" ? OptimizerLaunch::kForeachSgd
                                                    : OptimizerLaunch::kForeachAdamW;
    r.host = ChargeHostTimeline(r.program, host, &r.lowered);
  }
  r.argument = r.lowered.argument_bytes;
  r.output = r.lowered.output_bytes;
  r.alias = r.lowered.alias_bytes;
  TempPeak(r.lowered, &r.temp_live_peak, &r.temp_peak_event);
  r.temp = r.temp_live_peak;
  if (sem.accounting == Accounting::kXlaMemoryAnalysis) {
    // XLA's temp is the size of the packed temp heap (buffer_assignment.cc,
    // heap_simulator.cc): best-fit over the temps' live ranges, spatial and
    // temporal orders, the smaller kept; ≥ the live peak.
    const std::vector<HeapBuffer> temps = TempHeapBuffers(r.lowered);
    HeapPlan plan = PackBestOf(temps);
    r.temp = plan.heap_size;
    r.heap_algorithm = plan.algorithm;
    r.temp_offsets.assign(r.lowered.buffers.size(), Bytes(-1));
    for (size_t i = 0; i < temps.size(); ++i) r.temp_offsets[static_cast<size_t>(temps[i].id)] = plan.offsets[i];
    r.peak = r.argument + r.output - r.alias + r.temp;
  }
  if (r.program.compiled.present) {
    // XLA's own buffer assignment of the compiled module (Note
    // [Compiled-module buffer assignment], sim/import/hlo/hlo_buffer_assignment.h).
    const CompiledMemory& c = r.program.compiled;
    r.argument = c.argument;
    r.output = c.output;
    r.alias = c.alias;
    r.temp = c.temp;
    r.heap_algorithm = c.heap_algorithm;
    r.peak = r.argument + r.output - r.alias + r.temp;
    r.temp_live_peak = Bytes(0);  // what the heap holds where it reaches its size
    for (const CompiledMemory::Line& l : c.at_peak) r.temp_live_peak += l.size;
    r.entry_schedule.chosen = "compiled";
  }
  // A tensor-parallel group of parallelism.tensor devices processes one
  // replica's batch.per_device sequences together: each device's share of
  // the tokens is 1/tensor of them (Megatron-LM: data-parallel size =
  // world / tensor).
  r.tokens_per_step = spec.program.present || !spec.program_hlo.empty()
                          ? 0
                          : static_cast<double>(spec.batch.per_device * spec.batch.seq_len) /
                                static_cast<double>(spec.parallelism.tensor);
  return r;
}

// Note [JAX arena]
// An XLA executable does not allocate its temps one by one: buffer
// assignment packs them into one temp allocation, and the PjRt client asks
// its device allocator for the entry parameters (already resident), the
// non-aliased outputs and that one temp block (xla/pjrt/gpu, xla/service/
// gpu/gpu_executable.cc). JAX's device allocator is TF/XLA's BFC over an
// arena of XLA_PYTHON_CLIENT_MEM_FRACTION (0.75) of the device's total
// memory as cudaMemGetInfo reports it (xla/pjrt/gpu/gpu_helpers.cc
// CreateBFCAllocator: `total_memory * memory_fraction`), preallocated by
// default. The arena must also be obtainable: a fraction whose arena
// exceeds what the CUDA context leaves fails at client start-up, so the
// highest fraction the verdict names is usable / total. So the runtime
// question is whether those few blocks fit that arena; the per-buffer
// replay through an allocator is the eager (PyTorch) question. For jax
// configs the configured allocator, when it is bfc, gives the arena's
// options (otherwise JAX's defaults), and the engine tracks live bytes only.

// Whether the executable's blocks fit BFC with `bfc`'s options at
// `fraction` of the device's total memory.
absl::StatusOr<bool> ArenaHolds(const StepReport& r, AllocatorSpec bfc, double fraction) {
  const Bytes total = r.spec.device.cuda_total;
  if (fraction * static_cast<double>(total.value()) > static_cast<double>(r.capacity.value())) return false;
  bfc.options["mem_fraction"] = absl::StrFormat("%.17g", fraction);
  bfc.typed.reset();
  ASSIGN_OR_RETURN(AllocatorConfig config, ParseAllocator(bfc));
  ASSIGN_OR_RETURN(std::unique_ptr<Allocator> a, BuildAllocator(config, total));
  for (const BufferInfo& b : r.lowered.buffers) {
    if (b.argument && !a->Alloc(b.id, b.bytes, 0)) return false;
  }
  for (const BufferInfo& b : r.lowered.buffers) {
    if (b.output && !b.argument && !a->Alloc(b.id, b.bytes, 0)) return false;
  }
  const BufferId temp_id = static_cast<BufferId>(r.lowered.buffers.size());
  return r.temp <= Bytes(0) || a->Alloc(temp_id, r.temp, 0);
}

absl::Status CheckJaxArena(StepReport& r) {
  const RunSpec& spec = r.spec;
  // The configured bfc as ApplyCapabilities parsed it, else JAX's defaults.
  const AllocatorSpec bfc = spec.allocator.impl == "bfc" ? spec.allocator : AllocatorSpec("bfc", {});
  ASSIGN_OR_RETURN(AllocatorConfig config, ParseAllocator(bfc));
  const BfcOptions& o = *config.options_as<BfcOptions>();
  const double total = static_cast<double>(spec.device.cuda_total.value());
  StepReport::JaxArena& j = r.jax_arena;
  j.checked = true;
  j.mem_fraction = o.mem_fraction;
  j.preallocate = o.preallocate;
  j.arena = Bytes(static_cast<int64_t>(o.mem_fraction * total));
  j.allocator = bfc.options.empty() ? "bfc (JAX defaults)" : "bfc";
  ASSIGN_OR_RETURN(j.fits, ArenaHolds(r, bfc, o.mem_fraction));
  j.needed_fraction = static_cast<double>(r.peak.value()) / total;
  j.fitting_fraction = 0;
  if (j.fits) return absl::OkStatus();
  // The lowest fraction, in hundredths, from the bytes' own lower bound up
  // to what the device can give.
  const int most = static_cast<int>(100.0 * static_cast<double>(r.capacity.value()) / total);
  for (int h = std::max(1, static_cast<int>(100.0 * j.needed_fraction)); h <= std::min(most, 100); ++h) {
    ASSIGN_OR_RETURN(bool holds, ArenaHolds(r, bfc, h / 100.0));
    if (holds) {
      j.fitting_fraction = h / 100.0;
      break;
    }
  }
  return absl::OkStatus();
}

// Note [Verdict] (sim/base/verdict.h) for a simulated step.
Verdict JudgeStep(const StepReport& r) {
  const RunSpec& spec = r.spec;
  const std::string device = spec.device.name;
  if (!r.jax_arena.checked) {
    const std::string runtime = spec.allocator.impl == "pytorch_caching" ? "PyTorch's caching allocator"
                                : spec.allocator.impl == "ideal"          ? "an ideal allocator (no fragmentation)"
                                                                          : absl::StrCat("the ", spec.allocator.impl,
                                                                                         " allocator");
    const Bytes reserved =
        r.semantics.accounting == Accounting::kXlaMemoryAnalysis ? r.peak : r.sim.allocator.peak_reserved;
    return EagerVerdict(runtime, r.sim.oom.happened, reserved, r.peak, r.capacity, device);
  }
  const StepReport::JaxArena& j = r.jax_arena;
  Verdict v;
  v.runtime = j.allocator == "bfc (JAX defaults)"
                  ? "JAX defaults"
                  : absl::StrFormat("JAX (XLA_PYTHON_CLIENT_MEM_FRACTION=%.2f%s)", j.mem_fraction,
                                    j.preallocate ? "" : ", XLA_PYTHON_CLIENT_PREALLOCATE=false");
  v.need = r.peak;
  v.limit = j.arena;
  v.limit_name = absl::StrFormat("JAX's arena (%.2f x %s's %.2f GiB)", j.mem_fraction, device,
                                 spec.device.cuda_total.GiB());
  if (j.fits) return v;
  if (j.fitting_fraction > 0) {
    v.kind = Verdict::Kind::kFitsWithSetting;
    v.setting = absl::StrFormat("XLA_PYTHON_CLIENT_MEM_FRACTION=%.2f", j.fitting_fraction);
    return v;
  }
  v.kind = Verdict::Kind::kDoesNotFit;
  v.limit = r.capacity;
  v.limit_name = absl::StrCat(device, "'s usable memory");
  v.shortfall = r.peak > r.capacity ? r.peak - r.capacity : Bytes(0);
  if (v.shortfall.value() == 0) {
    v.why = "no XLA_PYTHON_CLIENT_MEM_FRACTION the device can give holds the step's blocks in BFC's bins";
  }
  return v;
}

absl::Status ReplayStep(StepReport& r, bool keep_memory_log, bool critical_path) {
  // The advisor changes device and allocator between replays.
  ASSIGN_OR_RETURN(r.spec, ApplyCapabilities(r.spec));
  const RunSpec& spec = r.spec;
  r.capacity = spec.device.usable();
  AllocatorSpec engine_alloc = spec.allocator;
  r.semantics = LoweringSemanticsOf(spec);
  const LoweringSemantics& sem = r.semantics;
  if (sem.runtime_check == RuntimeCheck::kJaxArena) {
    RETURN_IF_ERROR(CheckJaxArena(r));
    engine_alloc = AllocatorSpec{"ideal", {}};  // Note [JAX arena]
  }
  ASSIGN_OR_RETURN(std::unique_ptr<Allocator> alloc, MakeAllocator(engine_alloc, r.capacity));
  // (No time_by_op: Note [Kernel time by op on request], sim/engine/engine.h.)
  // Note [One memory event log]: the engine's allocator is spec.allocator's
  // unless it tracks live bytes only (Note [JAX arena]).
  const bool log = keep_memory_log && sem.runtime_check != RuntimeCheck::kJaxArena;
  ASSIGN_OR_RETURN(r.sim, Simulate(r.lowered.trace, spec.device, alloc.get(), nullptr, /*time_by_op=*/false,
                                   critical_path, log));
  r.sim_has_critical_path = critical_path;
  r.sim.oom.capacity = r.capacity;
  if (sem.accounting == Accounting::kLiveBytes) r.peak = r.sim.peak_live;
  r.verdict = JudgeStep(r);
  r.fits = r.verdict.fits();
  // Both read the simulation: per-layer times from event times, the
  // eager peak's holders from the simulated peak.
  r.layer_times = LayerTimes(r);
  r.peak_holders = sem.accounting == Accounting::kXlaMemoryAnalysis
                       ? Holders(r.lowered, r.temp_peak_event, true, 4)
                       : Holders(r.lowered, r.sim.peak_event, false, 4);
  return absl::OkStatus();
}

absl::StatusOr<StepReport> SimulateStep(const RunSpec& spec, bool critical_path) {
  ASSIGN_OR_RETURN(StepReport r, PrepareStep(spec));
  RETURN_IF_ERROR(ReplayStep(r, /*keep_memory_log=*/true, critical_path));
  return r;
}

absl::StatusOr<std::unique_ptr<Allocator>> StartedAllocator(const StepReport& r) {
  return MakeStartedAllocator(r.spec.allocator, r.capacity, r.start);
}

absl::StatusOr<SimResult> StepCriticalPath(const StepReport& r) {
  if (r.sim_has_critical_path) return r.sim;  // walked by the report's own run
  // Note [JAX arena]: an XLA step's engine replay tracks live bytes only.
  const bool arena = r.semantics.runtime_check == RuntimeCheck::kJaxArena;
  ASSIGN_OR_RETURN(std::unique_ptr<Allocator> alloc,
                   arena ? MakeAllocator(AllocatorSpec{"ideal", {}}, r.capacity) : StartedAllocator(r));
  const AllocatorStartState* start = arena || r.start.empty() ? nullptr : &r.start;
  return Simulate(r.lowered.trace, r.spec.device, alloc.get(), start, /*time_by_op=*/false, /*critical_path=*/true);
}

absl::StatusOr<StepReport> ReportFromTrace(const Trace& trace, const RunSpec& spec,
                                           const AllocatorStartState* start, bool critical_path) {
  StepReport r;
  r.spec = spec;
  r.spec.framework = "pytorch";
  r.semantics = LoweringSemanticsOf(r.spec);
  r.program.name = trace.name;
  LoweredStep& l = r.lowered;
  l.trace = trace;
  absl::flat_hash_map<BufferId, size_t> index;
  for (size_t i = 0; i < trace.events.size(); ++i) {
    const TraceEvent& e = trace.events[i];
    l.event_phase.push_back(e.phase);
    if (e.type == EventType::kAlloc) {
      BufferInfo b;
      b.id = static_cast<BufferId>(l.buffers.size());
      b.name = e.name.empty() ? absl::StrCat("buffer ", e.buffer) : e.name;
      b.origin = absl::StrCat("recorded allocation of ", e.size.value(), " B");
      b.role = e.role;
      b.bytes = e.size;
      b.alloc_event = static_cast<int64_t>(i);
      b.phase = e.phase;
      index[e.buffer] = l.buffers.size();
      l.buffers.push_back(b);
    } else if (e.type == EventType::kFree) {
      auto it = index.find(e.buffer);
      if (it != index.end()) l.buffers[it->second].free_event = static_cast<int64_t>(i);
    }
  }
  // Buffer ids of the report are dense; the trace's may not be.
  for (TraceEvent& e : l.trace.events) {
    if (e.type == EventType::kAlloc || e.type == EventType::kFree) {
      auto it = index.find(e.buffer);
      if (it != index.end()) e.buffer = static_cast<BufferId>(it->second);
    }
  }
  if (start != nullptr) {
    // The start state under the report's ids; a block of a buffer the trace
    // never allocates (the bytes live before recording) gets an id past
    // the report's buffers.
    absl::flat_hash_map<BufferId, BufferId> extra;
    auto id_of = [&](BufferId id) {
      if (auto it = index.find(id); it != index.end()) return static_cast<BufferId>(it->second);
      auto [it, inserted] = extra.emplace(id, static_cast<BufferId>(l.buffers.size() + extra.size()));
      return it->second;
    };
    r.start = *start;
    for (SegmentLayout& seg : r.start.segments) {
      for (SegmentLayout::Block& b : seg.blocks) {
        if (b.buffer >= 0) b.buffer = id_of(b.buffer);
      }
    }
    for (BufferId& id : r.start.held) id = id_of(id);
    std::sort(r.start.held.begin(), r.start.held.end());
    if (r.start.allocated_first > Bytes(0)) r.start.allocated_first_id = id_of(r.start.allocated_first_id);
    GraphPoolMembers pools;
    pools.pools = r.start.graph_pools.pools;
    for (const auto& [id, pool] : r.start.graph_pools.pool_of) pools.pool_of[id_of(id)] = pool;
    r.start.graph_pools = std::move(pools);
  }
  r.capacity = spec.device.usable();
  ASSIGN_OR_RETURN(std::unique_ptr<Allocator> alloc, StartedAllocator(r));
  ASSIGN_OR_RETURN(r.sim, Simulate(l.trace, spec.device, alloc.get(), &r.start, /*time_by_op=*/true,
                                   critical_path, /*keep_memory_log=*/true));
  r.sim_has_critical_path = critical_path;
  r.sim.oom.capacity = r.capacity;
  r.peak = r.sim.peak_live;
  TempPeak(l, &r.temp_live_peak, &r.temp_peak_event);
  r.temp = r.temp_live_peak;
  r.verdict = JudgeStep(r);
  r.fits = r.verdict.fits();
  return r;
}

}  // namespace gpusim
