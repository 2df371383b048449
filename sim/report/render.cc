// Text and JSON renderings of a StepReport. JSON keys are a contract (see
// DESIGN.md "Outputs users rely on"): add keys, never rename them.
#include "sim/report/render.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "sim/base/json_writer.h"
#include "sim/step/step.h"

namespace gpusim {
namespace {

double TflopsPerDevice(const StepReport& r) {
  const double s = r.sim.step_time.seconds();
  return s > 0 ? r.sim.model_flops / s / 1e12 : 0;
}

double MaxTextTflopsPerSecond(const StepReport& r) {
  const double s = r.sim.step_time.seconds();
  return s > 0 ? r.spec.maxtext.tflops_per_device_step / s : 0;
}

double MaxTextTokensPerSecond(const StepReport& r) {
  const double s = r.sim.step_time.seconds();
  return s > 0 ? r.spec.maxtext.tokens_per_device_step / s : 0;
}

double TokensPerSecond(const StepReport& r) {
  const double s = r.sim.step_time.seconds();
  return s > 0 ? r.tokens_per_step / s : 0;
}

std::string PhaseOfEvent(const StepReport& r, int64_t e) {
  if (e < 0) return "start";
  return std::string(PhaseName(r.lowered.event_phase[static_cast<size_t>(e)]));
}

// The run's header: what ran, on which device, under which semantics.
void AppendHeader(const StepReport& r, std::string& o) {
  const RunSpec& s = r.spec;
  if (!s.program_hlo.empty()) {
    int loops = 0;
    for (const Region& reg : r.program.regions) loops += reg.kind == "loop";
    absl::StrAppendFormat(&o, "gpusim: HLO module %s (%s) on %s (%s)\n", r.program.name, s.program_hlo, s.device.name,
                          s.device.description);
    absl::StrAppendFormat(&o, "  %d ops, %d rolled while loops; donated parameters %s elements; XLA (jax) semantics\n",
                          r.program.ops.size(), loops, WithCommas(r.param_count));
  } else if (s.program.present) {
    absl::StrAppendFormat(&o, "gpusim: program %s on %s (%s)\n", s.program.name, s.device.name,
                          s.device.description);
    absl::StrAppendFormat(&o, "  scan %s, trip count %d; jax.grad w.r.t. %d parameters; XLA (jax) semantics\n",
                          s.loop.mode, s.loop.trip_count, r.param_count);
  } else {
    // Only settings the family models (StepReport::modelled).
    auto modelled = [&](const char* path) {
      return std::find(r.modelled.begin(), r.modelled.end(), path) != r.modelled.end();
    };
    std::string parallel;
    if (modelled("parallelism.fsdp")) absl::StrAppend(&parallel, "FSDP ", s.parallelism.fsdp, "; ");
    if (modelled("parallelism.tensor")) {
      absl::StrAppend(&parallel, "TP ", s.parallelism.tensor,
                      s.parallelism.sequence_parallel && s.parallelism.tensor > 1 ? " + SP" : "", "; ");
    }
    absl::StrAppendFormat(&o, "gpusim: %s on %s (%s)\n", s.model.name, s.device.name, s.device.description);
    // A tensor-parallel group shares one replica's batch.
    const std::string per = modelled("parallelism.tensor") && s.parallelism.tensor > 1
                                ? absl::StrCat("tensor-parallel group of ", s.parallelism.tensor)
                                : "device";
    // A Megatron launch line's header is its peak rank's (megatron_render.cc).
    absl::StrAppendFormat(&o, "  parameters%s %s; batch %d x %d per %s; %s%s semantics\n",
                          s.megatron.present ? " per rank" : "", WithCommas(r.param_count), s.batch.per_device, s.batch.seq_len, per, parallel,
                          r.semantics.lowering == Lowering::kXla ? "XLA (jax)" : "eager (pytorch)");
    std::string layers = absl::StrCat("layers ", s.loop.mode);
    if (modelled("model.param_scan_axis")) absl::StrAppend(&layers, ", param_scan_axis ", s.model.param_scan_axis);
    absl::StrAppend(&layers, ", remat ", s.remat.policy);
    if (modelled("remat.method") && s.remat.policy == "full") {
      absl::StrAppend(&layers, " (", s.remat.method, " ", s.remat.num_layers, ")");
    }
    absl::StrAppend(&layers, ", attention ", s.model.attention);
    if (s.model.experts > 1) {
      absl::StrAppend(&layers, ", MoE MLP: ", s.model.experts, " experts, top-", s.model.experts_per_token);
    }
    absl::StrAppendFormat(&o, "  %s\n", layers);
  }
}

// Memory per device, XLA's memory_analysis() terms first.
void AppendMemory(const StepReport& r, std::string& o) {
  const RunSpec& s = r.spec;
  o += "\nMemory per device (bytes; GiB = 2^30)\n";
  absl::StrAppendFormat(&o, "  argument   %s\n", FormatBytes(r.argument));
  absl::StrAppendFormat(&o, "  output     %s\n", FormatBytes(r.output));
  absl::StrAppendFormat(&o, "  alias      %s\n", FormatBytes(r.alias));
  // XLA memory_analysis() reports temp as the packed heap and the peak as
  // its sum (Note [Framework semantics], sim/lower/semantics.h).
  const bool xla = r.semantics.accounting == Accounting::kXlaMemoryAnalysis;
  absl::StrAppendFormat(&o, "  temp       %s%s\n", FormatBytes(r.temp),
                        xla
                            ? absl::StrCat("  packed heap (", r.heap_algorithm, "); live peak ",
                                           FormatBytes(r.temp_live_peak))
                            : "");
  if (xla) {
    // As the seed's script prints it: (output + temp) / 1024**3.
    absl::StrAppendFormat(&o, "  output + temp  %.6f GiB  (%s B)\n", (r.output + r.temp).GiB(),
                          WithCommas((r.output + r.temp).value()));
  }
  absl::StrAppendFormat(&o, "  peak       %s%s\n", FormatBytes(r.peak),
                        xla ? "  = argument + output - alias + temp" : "");
  if (r.semantics.schedule_entry) {
    absl::StrAppendFormat(&o, "  %s\n", r.entry_schedule.Describe());
    for (const std::string& d : r.entry_schedule.decisions) absl::StrAppendFormat(&o, "    %s\n", d);
  }
  if (r.lowered.host_bytes.value() > 0) {
    absl::StrAppendFormat(&o, "  host       %s  pinned host memory (offloaded residuals; not device memory)\n",
                          FormatBytes(r.lowered.host_bytes));
  }
  absl::StrAppendFormat(&o, "  capacity   %s  (%s usable of %s)\n", FormatBytes(r.capacity), s.device.name,
                        FormatBytes(s.device.cuda_total));
  absl::StrAppendFormat(&o, "  fits       %s (Note [Verdict]: the first line)\n", r.verdict.Word());
  if (r.jax_arena.checked) {
    const StepReport::JaxArena& j = r.jax_arena;
    absl::StrAppendFormat(&o, "  JAX arena  %s, %s mem_fraction %.2f of the device's %s: %s; %s\n", j.allocator,
                          j.preallocate ? "preallocated," : "growing to", j.mem_fraction,
                          FormatBytes(s.device.cuda_total), FormatBytes(j.arena),
                          j.fits                   ? "the step fits"
                          : j.fitting_fraction > 0 ? absl::StrFormat("the step does NOT fit; it fits at %.2f",
                                                                     j.fitting_fraction)
                                                   : std::string("the step does NOT fit at any fraction"));
  }
  if (r.sim.oom.happened) {
    absl::StrAppendFormat(&o, "  OOM at event %d (t=%.6f s): %s requested %s with %s live\n",
                          ExecutedEventIndex(r.lowered.trace, r.sim.oom.event),
                          r.sim.oom.time.seconds(), r.sim.oom.buffer, FormatBytes(r.sim.oom.requested),
                          FormatBytes(r.sim.oom.live));
  }
}

// What is live at the peak, by role, and the largest buffers then.
void AppendLiveAtPeak(const StepReport& r, std::string& o) {
  const bool xla = r.semantics.accounting == Accounting::kXlaMemoryAnalysis;
  absl::StrAppendFormat(&o, "\nLive at the peak (event %d, %s phase), by role\n",
                        ExecutedEventIndex(r.lowered.trace, r.sim.peak_event),
                        PhaseOfEvent(r, r.sim.peak_event));
  for (int i = 0; i < kNumRoles; ++i) {
    const Bytes b = r.sim.live_by_role_at_peak[static_cast<size_t>(i)];
    if (b.value() == 0) continue;
    absl::StrAppendFormat(&o, "  %-16s %s\n", RoleName(static_cast<Role>(i)), FormatBytes(b));
  }
  absl::StrAppendFormat(&o, "  temp peak at event %d (%s phase)\n", ExecutedEventIndex(r.lowered.trace, r.temp_peak_event),
                        PhaseOfEvent(r, r.temp_peak_event));
  const int64_t why_event = xla ? r.temp_peak_event : r.sim.peak_event;
  if (why_event >= 0 && !r.peak_holders.empty()) {
    const TraceEvent& at = r.lowered.trace.events[static_cast<size_t>(why_event)];
    absl::StrAppendFormat(&o, "  why: the %s peak is reached in the %s phase when `%s` is allocated; largest %s then:\n",
                          xla ? "temp" : "live", PhaseOfEvent(r, why_event), at.name,
                          xla ? "temps live" : "buffers live");
    for (BufferId id : r.peak_holders) {
      const BufferInfo& b = r.lowered.buffers[static_cast<size_t>(id)];
      absl::StrAppendFormat(&o, "    %-44s %s  %s (%s)\n", b.name, FormatBytes(b.bytes), RoleName(b.role), b.origin);
    }
  }
}

// The step time and its parts.
void AppendStepTime(const StepReport& r, std::string& o) {
  const RunSpec& s = r.spec;
  o += "\nStep time\n";
  absl::StrAppendFormat(&o, "  step          %.4f s\n", r.sim.step_time.seconds());
  absl::StrAppendFormat(&o, "  compute       %.4f s (recompute %.4f s)\n", r.sim.compute_busy.seconds(),
                        r.sim.recompute_busy.seconds());
  absl::StrAppendFormat(&o, "  communication %.4f s (exposed %.4f s)\n", r.sim.collective_busy.seconds(),
                        r.sim.exposed_communication.seconds());
  absl::StrAppendFormat(&o, "  host copies   %.4f s over PCIe (exposed %.4f s)\n", r.sim.copy_busy.seconds(),
                        r.sim.exposed_copy.seconds());
  if (r.sim.host_busy.ns() > 0) {
    // Note [Eager host costs] (sim/lower/eager/host_timeline.h).
    absl::StrAppendFormat(&o, "  host issue    %.4f s (%d launches, %d module calls, %d gradient hooks, %d optimizer "
                          "updates in %d launches); kernels waited %.4f s for the host\n",
                          r.sim.host_busy.seconds(), r.host.launches, r.host.module_calls, r.host.grad_hooks,
                          r.host.optimizer_updates, r.host.optimizer_launches, r.sim.host_wait.seconds());
    if (r.sim.host_syncs > 0) {  // Note [Host syncs] (sim/engine/engine.h)
      absl::StrAppendFormat(&o, "  host syncs    %d (.item(), synchronize()); the host waited %.4f s for the device\n",
                            r.sim.host_syncs, r.sim.host_sync_wait.seconds());
    }
  }
  if (r.sim.copy_busy.ns() > 0) {
    absl::StrAppendFormat(&o, "    to host   %.4f s, %s\n    to device %.4f s, %s\n", r.sim.copy_to_host.seconds(),
                          FormatBytes(r.sim.bytes_to_host), r.sim.copy_to_device.seconds(),
                          FormatBytes(r.sim.bytes_to_device));
  }
  absl::StrAppendFormat(&o, "  allocator     %.6f s in device calls: %d cudaMalloc (new segments), %d cudaFree, "
                        "%d pages mapped, %d unmapped; %.6f s waiting for drains (cache starts empty, as in a "
                        "first step)\n",
                        r.sim.allocator_time.seconds(), r.sim.segment_allocs, r.sim.segment_frees,
                        r.sim.pages_mapped, r.sim.pages_unmapped, r.sim.allocator_sync_wait.seconds());
  absl::StrAppendFormat(&o,
                        "  critical path %d events: compute %.4f s, communication %.4f s, host copies %.4f s, "
                        "allocator %.6f s\n",
                        r.sim.critical_events, r.sim.critical_compute.seconds(),
                        r.sim.critical_communication.seconds(), r.sim.critical_copy.seconds(),
                        r.sim.critical_allocator.seconds());
  absl::StrAppendFormat(&o, "  %.1f TFLOP/s/device (model FLOPs), %.0f tokens/s/device\n", TflopsPerDevice(r),
                        TokensPerSecond(r));
  if (s.maxtext.present) {
    // Note [MaxText TFLOP/s] (sim/config/maxtext.cc): MaxText's own count.
    absl::StrAppendFormat(&o,
                          "  %.1f TFLOP/s/device by MaxText's formula (calculate_tflops_training_per_device, MaxText "
                          "%s: %.2f TFLOP per device step, %.2f learnable weights + %.2f attention), %.0f "
                          "tokens/s/device\n",
                          MaxTextTflopsPerSecond(r), s.maxtext.commit, s.maxtext.tflops_per_device_step,
                          s.maxtext.learnable_weight_tflops, s.maxtext.attention_tflops,
                          MaxTextTokensPerSecond(r));
    if (!s.maxtext.no_effect.empty()) {
      absl::StrAppendFormat(&o, "  maxtext keys accepted as not affecting memory or time: %s\n",
                            absl::StrJoin(s.maxtext.no_effect, ", "));
    }
  }
  absl::StrAppendFormat(&o, "  allocator %s: peak allocated %s, peak reserved %s\n", r.sim.allocator_name,
                        FormatBytes(r.sim.allocator.peak_allocated), FormatBytes(r.sim.allocator.peak_reserved));
}

// Note [MaxText MoE routing figures]: a Megatron-LM MoE step is reported
// for balanced routing and for its bound (Note [MoE routing cases],
// models/gpt_moe.cc), because there the tokens an expert receives size its
// buffers. MaxText's MoeBlock.dense_matmul without capacity (Note [MaxText
// MoE dense matmul], models/llama_moe.cc) runs every token through every
// expert: the router's top-k only decides values in the [B,S,E] weights, no
// shape. So one program is both cases, and the two columns are the same
// simulation, shown side by side with the reason. Every rank of the mesh
// (FSDP x TP) runs that SPMD program on its own batch rows: one row stands
// for all of them.
void AppendMaxTextMoe(const StepReport& r, std::string& o) {
  const RunSpec& s = r.spec;
  const int64_t ranks = s.parallelism.fsdp * s.parallelism.tensor;
  absl::StrAppendFormat(&o,
                        "\nMixture of experts: %d experts, top-%d, MaxText %s MoeBlock.dense_matmul without capacity "
                        "(layers/linears.py:831-862): every token through all %d experts, %.1fx the dropless FFN "
                        "FLOPs MaxText's formula counts\n",
                        s.maxtext.experts, s.maxtext.experts_per_token, s.maxtext.commit, s.maxtext.experts,
                        static_cast<double>(s.maxtext.experts) / static_cast<double>(s.maxtext.experts_per_token));
  o += "  routing: balanced = bound: every buffer shape is static (top-k routing only changes values in the "
       "[B,S,E] router weights), so no routing changes a rank's memory or time\n";
  o += "  ranks    balanced peak               bound peak                  step (balanced = bound)\n";
  const std::string label = ranks > 1 ? absl::StrCat("0-", ranks - 1) : "0";
  absl::StrAppendFormat(&o, "  %-7s  %-26s  %-26s  %.4f s\n", label, FormatBytes(r.peak), FormatBytes(r.peak),
                        r.sim.step_time.seconds());
  absl::StrAppendFormat(&o, "  every rank (%d = FSDP %d x TP %d) runs the same SPMD program on its own batch rows: "
                        "one row stands for all, and the verdict (first line) holds for both routings\n",
                        ranks, s.parallelism.fsdp, s.parallelism.tensor);
}

// Per-layer times: the mean and the middle layer.
void AppendLayerTimes(const StepReport& r, std::string& o) {
  if (!r.layer_times.empty()) {
    // Mean over layers, and the middle layer (clear of the embedding and
    // head at either end).
    SimTime f(0), b(0), rc(0);
    for (const LayerTime& t : r.layer_times) {
      f += t.forward;
      b += t.backward;
      rc += t.backward_recompute;
    }
    const double n = static_cast<double>(r.layer_times.size());
    const LayerTime& mid = r.layer_times[r.layer_times.size() / 2];
    o += "\nPer-layer time (compute stream, first kernel start to last kernel end)\n";
    absl::StrAppendFormat(&o, "  mean of %d layers  forward %.3f ms  backward %.3f ms (recompute %.3f ms)\n",
                          r.layer_times.size(), f.seconds() * 1e3 / n, b.seconds() * 1e3 / n,
                          rc.seconds() * 1e3 / n);
    absl::StrAppendFormat(&o, "  layer %-10d  forward %.3f ms  backward %.3f ms (recompute %.3f ms)\n", mid.layer,
                          mid.forward.seconds() * 1e3, mid.backward.seconds() * 1e3,
                          mid.backward_recompute.seconds() * 1e3);
  }
}

}  // namespace

std::string RenderText(const StepReport& r) {
  // Note [Verdict]: the answer first.
  std::string o = absl::StrCat("verdict: ", r.verdict.Line(), "\n");
  AppendHeader(r, o);
  AppendMemory(r, o);
  AppendLiveAtPeak(r, o);
  AppendStepTime(r, o);
  AppendLayerTimes(r, o);
  if (r.spec.maxtext.present && r.spec.maxtext.experts > 1) AppendMaxTextMoe(r, o);
  return o;
}

std::string RenderJson(const StepReport& r) {
  const RunSpec& s = r.spec;
  JsonWriter w;
  w.BeginObject();
  w.BeginObject("config")
      .String("file", s.source_file)
      .String("framework", s.framework)
      .String("device", s.device.name)
      .String("model", s.program.present ? "" : s.model.name)
      .String("program", s.program.present ? s.program.name : (s.program_hlo.empty() ? "" : r.program.name))
      .Int("trip_count", s.loop.trip_count)
      .Int("param_count", r.param_count)
      .String("loop_mode", s.loop.mode)
      .Int("param_scan_axis", s.model.param_scan_axis)
      .String("remat_policy", s.remat.policy)
      .Int("fsdp", s.parallelism.fsdp)
      .Int("batch_per_device", s.batch.per_device)
      .Int("seq_len", s.batch.seq_len)
      .EndObject();
  WriteVerdictJson(w, r.verdict);
  w.BeginObject("memory")
      .Int("argument_bytes", r.argument.value())
      .Int("output_bytes", r.output.value())
      .Int("alias_bytes", r.alias.value())
      .Int("temp_bytes", r.temp.value())
      .Int("temp_live_peak_bytes", r.temp_live_peak.value())
      .Int("output_plus_temp_bytes", (r.output + r.temp).value())
      .Int("peak_bytes", r.peak.value())
      .Int("capacity_bytes", r.capacity.value())
      .Bool("fits", r.fits)
      .Bool("jax_arena_fits", !r.jax_arena.checked || r.jax_arena.fits)
      .Int("jax_arena_bytes", r.jax_arena.arena.value())
      .Double("jax_arena_needed_fraction", r.jax_arena.needed_fraction)
      .Double("jax_arena_fitting_fraction", r.jax_arena.fitting_fraction)
      .Int("live_peak_bytes", r.sim.peak_live.value())
      .Int("live_peak_event", ExecutedEventIndex(r.lowered.trace, r.sim.peak_event))
      .String("live_peak_phase", PhaseOfEvent(r, r.sim.peak_event))
      .Int("temp_peak_event", ExecutedEventIndex(r.lowered.trace, r.temp_peak_event))
      .Int("host_bytes", r.lowered.host_bytes.value());
  if (r.sim.oom.happened) {
    w.BeginObject("oom")
        .Int("event", ExecutedEventIndex(r.lowered.trace, r.sim.oom.event))
        .Double("time_s", r.sim.oom.time.seconds())
        .Int("requested_bytes", r.sim.oom.requested.value())
        .Int("live_bytes", r.sim.oom.live.value())
        .Int("reserved_bytes", r.sim.oom.reserved.value())
        .String("buffer", r.sim.oom.buffer)
        .EndObject();
  } else {
    w.Null("oom");
  }
  w.EndObject();
  w.BeginObject("allocator")
      .String("name", r.sim.allocator_name)
      .Int("peak_allocated_bytes", r.sim.allocator.peak_allocated.value())
      .Int("peak_reserved_bytes", r.sim.allocator.peak_reserved.value())
      .Int("fragmentation_bytes", FragmentationBytes(r.sim).value())
      .Int("peak_segments", r.sim.allocator.peak_segments)
      .Int("segment_allocs", r.sim.segment_allocs)
      .Int("segment_frees", r.sim.segment_frees)
      .Int("pages_mapped", r.sim.pages_mapped)
      .Int("pages_unmapped", r.sim.pages_unmapped)
      .EndObject();
  w.BeginObject("time")
      .Double("step_time_s", r.sim.step_time.seconds())
      .Double("compute_s", r.sim.compute_busy.seconds())
      .Double("communication_s", r.sim.collective_busy.seconds())
      .Double("exposed_communication_s", r.sim.exposed_communication.seconds())
      .Double("recompute_s", r.sim.recompute_busy.seconds())
      .Double("host_transfer_s", r.sim.copy_busy.seconds())
      .Double("host_transfer_exposed_s", r.sim.exposed_copy.seconds())
      .Double("host_issue_s", r.sim.host_busy.seconds())
      .Double("host_wait_s", r.sim.host_wait.seconds())
      .Double("host_sync_wait_s", r.sim.host_sync_wait.seconds())
      .Int("host_launches", r.host.launches + r.host.optimizer_launches)
      .Int("host_module_calls", r.host.module_calls + r.host.grad_hooks)
      .Double("device_to_host_s", r.sim.copy_to_host.seconds())
      .Double("host_to_device_s", r.sim.copy_to_device.seconds())
      .Int("device_to_host_bytes", r.sim.bytes_to_host.value())
      .Int("host_to_device_bytes", r.sim.bytes_to_device.value())
      .Double("tflops_per_device", TflopsPerDevice(r))
      .Double("tokens_per_s_per_device", TokensPerSecond(r))
      .Int("critical_path_events", r.sim.critical_events)
      .Double("critical_path_compute_s", r.sim.critical_compute.seconds())
      .Double("critical_path_communication_s", r.sim.critical_communication.seconds())
      .Double("allocator_s", r.sim.allocator_time.seconds())
      .Double("allocator_sync_wait_s", r.sim.allocator_sync_wait.seconds())
      .Double("critical_path_allocator_s", r.sim.critical_allocator.seconds())
      .EndObject();
  w.BeginArray("layers");
  for (const LayerTime& t : r.layer_times) {
    w.BeginObject()
        .Int("layer", t.layer)
        .Double("forward_s", t.forward.seconds())
        .Double("backward_s", t.backward.seconds())
        .Double("backward_recompute_s", t.backward_recompute.seconds())
        .EndObject();
  }
  w.EndArray();
  if (r.semantics.lowering == Lowering::kXla) {
    // Note [Entry schedule] and Note [Donated allocation] (sim/lower/xla/entry_schedule.h).
    w.BeginObject("xla")
        .Bool("dynamic_slice_fusion", s.xla.dynamic_slice_fusion)
        .String("entry_schedule", r.entry_schedule.chosen)
        .Int("entry_schedule_list_peak_bytes", r.entry_schedule.list_peak.value())
        .Int("entry_schedule_dfs_peak_bytes", r.entry_schedule.dfs_peak.value())
        .Int("entry_schedule_post_order_peak_bytes", r.entry_schedule.post_order_peak.value());
    w.BeginArray("donated_allocation_decisions");
    for (const std::string& d : r.entry_schedule.decisions) w.String({}, d);
    w.EndArray();
    w.EndObject();
  }
  if (s.maxtext.present) {
    w.BeginObject("maxtext")
        .String("model_name", s.maxtext.model_name)
        .String("commit", s.maxtext.commit)
        .Double("tflops_per_device_step", s.maxtext.tflops_per_device_step)
        .Double("learnable_weight_tflops", s.maxtext.learnable_weight_tflops)
        .Double("attention_tflops", s.maxtext.attention_tflops)
        .Double("tflops_per_s_per_device", MaxTextTflopsPerSecond(r))
        .Double("tokens_per_device_step", s.maxtext.tokens_per_device_step)
        .Double("tokens_per_s_per_device", MaxTextTokensPerSecond(r));
    w.BeginArray("keys_without_effect");
    for (const std::string& k : s.maxtext.no_effect) w.String({}, k);
    w.EndArray();
    if (s.maxtext.experts > 1) {
      // Note [MaxText MoE routing figures].
      w.BeginObject("moe")
          .Int("experts", s.maxtext.experts)
          .Int("experts_per_token", s.maxtext.experts_per_token)
          .String("path", "dense_matmul without capacity: every token through all experts")
          .Int("ranks", s.parallelism.fsdp * s.parallelism.tensor)
          .Bool("ranks_identical", true)
          .Int("balanced_peak_bytes", r.peak.value())
          .Int("bound_peak_bytes", r.peak.value())
          .Double("balanced_step_time_s", r.sim.step_time.seconds())
          .Double("bound_step_time_s", r.sim.step_time.seconds())
          .String("why_equal", "every buffer shape is static; routing only changes values");
      w.EndObject();
    }
    w.EndObject();
  }
  w.BeginObject("breakdown");
  for (int i = 0; i < kNumRoles; ++i) {
    w.Int(RoleName(static_cast<Role>(i)), r.sim.live_by_role_at_peak[static_cast<size_t>(i)].value());
  }
  w.EndObject();
  w.EndObject();
  return w.Finish();
}

}  // namespace gpusim
