#include "sim/step/native_step.h"

#include <algorithm>
#include <optional>

#include "absl/container/flat_hash_map.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "sim/lower/eager/host_timeline.h"
#include "sim/lower/semantics.h"
#include "sim/trace/frames.h"

namespace gpusim {
absl::StatusOr<NativeStepReport> SimulateNativeStep(const Trace& trace, const std::string& source,
                                                    const DeviceSpec& device, Allocator* allocator, int top,
                                                    const AllocatorStartState* start) {
  NativeStepReport r;
  // Note [Eager host costs]: each recorded op of a PyTorch step is issued
  // by the host (dispatch and launch, host.op); the recording has no module
  // or optimizer structure to charge beyond that.
  std::optional<Trace> charged;
  if (RecordedFromEagerPyTorch(trace)) {
    charged = trace;
    r.host_charged_events = ChargeRecordedHostTimeline(&*charged);
    for (const TraceEvent& e : charged->events) {
      if (!IsTimed(e.type) || !e.host_recorded) continue;
      ++r.host_recorded_events;
      r.host_dispatches += e.host_dispatches;
      r.host_nodes += e.host_nodes;
      r.host_module_calls += e.host_module_calls;
    }
  }
  absl::StatusOr<SimResult> sim = Simulate(charged.has_value() ? *charged : trace, device, allocator, start);
  if (!sim.ok()) return sim.status();
  r.device = device.name;
  for (const TraceEvent& e : trace.events) {
    r.timed_events += IsTimed(e.type) ? 1 : 0;
    r.collective_events += e.type == EventType::kCollective ? 1 : 0;
  }
  r.collective_busy = sim->collective_busy;
  r.step_time = sim->step_time;
  r.compute_busy = sim->compute_busy;
  r.host_busy = sim->host_busy;
  r.host_wait = sim->host_wait;
  r.flops = sim->flops;
  r.time_by_op = sim->time_by_op;
  r.oom = sim->oom;
  r.peak_live = sim->peak_live;
  r.compiled_graphs = SummarizeCompiledGraphs(trace);
  (void)source;
  // The alloc that made each buffer live at the peak: the last alloc of its
  // id at or before the peak event (ids are reused after frees).
  absl::flat_hash_map<BufferId, size_t> alloc_of;
  const size_t upto = sim->peak_event < 0 ? trace.events.size()
                                          : std::min(trace.events.size(), static_cast<size_t>(sim->peak_event) + 1);
  for (size_t i = 0; i < upto; ++i) {
    if (trace.events[i].type == EventType::kAlloc) alloc_of[trace.events[i].buffer] = i;
  }
  std::vector<std::pair<size_t, StepPeakBuffer>> live;
  for (BufferId id : sim->live_at_peak) {
    auto it = alloc_of.find(id);
    if (it == alloc_of.end()) continue;
    const TraceEvent& e = trace.events[it->second];
    StepPeakBuffer b{e.name, e.role, e.size, ""};
    // Note [The user's frame] (sim/trace/frames.h).
    if (const std::optional<int32_t> k = UserFrame(trace.frames, e.stack); k.has_value()) {
      const StackFrame& f = trace.frames[static_cast<size_t>(*k)];
      b.where = absl::StrCat(f.function, " ", f.file, ":", f.line);
    }
    live.emplace_back(it->second, std::move(b));
  }
  std::sort(live.begin(), live.end(), [](const auto& a, const auto& b) {
    return a.second.size != b.second.size ? a.second.size > b.second.size : a.first < b.first;
  });
  for (auto& [at, b] : live) {
    if (top >= 0 && r.largest.size() >= static_cast<size_t>(top)) break;
    r.largest.push_back(std::move(b));
  }
  return r;
}

std::string RenderNativeStepText(const NativeStepReport& r) {
  std::string out = absl::StrFormat(
      "step on %s (engine: recorded ops' shapes through the device model)\n"
      "  step time %.4f s (%d timed events; compute busy %.4f s; %.3g FLOP)\n"
      "  peak live %s\n",
      r.device, r.step_time.seconds(), r.timed_events, r.compute_busy.seconds(), r.flops,
      FormatBytes(r.peak_live));
  if (r.host_recorded_events > 0) {
    // Note [Recorded host costs] (sim/lower/eager/host_timeline.h).
    const int64_t rest = r.host_charged_events - r.host_recorded_events;
    absl::StrAppend(&out, absl::StrFormat("  host issue %.4f s (%d dispatches x host.dispatch, %d autograd nodes x "
                                          "host.node, %d module calls x host.python_module%s), kernels waited "
                                          "%.4f s for it\n",
                                          r.host_busy.seconds(), r.host_dispatches, r.host_nodes, r.host_module_calls,
                                          rest > 0 ? absl::StrFormat("; %d ops without recorded host work x host.op",
                                                                     rest)
                                                   : std::string(),
                                          r.host_wait.seconds()));
  } else if (r.host_charged_events > 0) {
    absl::StrAppend(&out, absl::StrFormat("  host issue %.4f s (%d ops x host.op; host.module does not apply: a "
                                          "recording has no module calls), kernels waited %.4f s for it\n",
                                          r.host_busy.seconds(), r.host_charged_events, r.host_wait.seconds()));
  }
  if (r.collective_events > 0) {
    absl::StrAppend(&out, absl::StrFormat("  collectives %d on the collective stream, busy %.6f s (ring all-reduce, "
                                          "all-gather, reduce-scatter, broadcast over the device's links; "
                                          "sim/device/collective_model.h)\n",
                                          r.collective_events, r.collective_busy.seconds()));
  }
  if (r.oom.happened) {
    absl::StrAppend(&out, absl::StrFormat("  OOM at event %d: %s requested for %s, %s live\n", r.oom.event,
                                          FormatBytes(r.oom.requested), r.oom.buffer, FormatBytes(r.oom.live)));
  }
  const EagerDeviceMemory& dm = r.device_memory;
  if (dm.applied) {
    absl::StrAppend(&out, absl::StrFormat("  what the device adds (torch %s on %s; sim/lower/eager/device_memory.h):\n",
                                          dm.torch_version, dm.device));
    for (const DeviceAddition& a : dm.added) {
      absl::StrAppend(&out, absl::StrFormat("    %-26s %5d x, largest %s%s  (%s)\n", a.what, a.count,
                                            FormatBytes(a.largest), a.kept ? ", never freed" : "", a.source));
    }
    absl::StrAppend(&out, absl::StrFormat(
                              "    outside the allocator: CUDA context + library handles %s (memory.context_reserve, "
                              "taken off the capacity)\n",
                              FormatBytes(dm.context_reserve)));
    if (dm.nccl.distributed) {
      absl::StrAppend(&out, absl::StrFormat("    outside the allocator: NCCL buffers %s (rank %d of %d; ",
                                            FormatBytes(dm.nccl.total), dm.nccl.rank, dm.nccl.world_size));
      if (dm.nccl.communicators.empty()) absl::StrAppend(&out, "no process group ran a collective");
      for (size_t i = 0; i < dm.nccl.communicators.size(); ++i) {
        const NcclCommunicator& c = dm.nccl.communicators[i];
        absl::StrAppend(&out, i > 0 ? ", " : "", absl::StrFormat("communicator %s of %d ranks: ", c.id, c.ranks),
                        c.ranks > 1 ? absl::StrFormat("%d channels x %s", c.channels, FormatBytes(c.per_channel))
                                    : std::string("no connections"));
      }
      absl::StrAppend(&out, "; Note [NCCL buffers]), taken off the capacity\n");
    }
    for (const std::string& n : dm.not_modelled) absl::StrAppend(&out, "    not modelled: ", n, "\n");
    for (const std::string& n : dm.assumptions) absl::StrAppend(&out, "    assumed: ", n, "\n");
    for (const SdpaCallClass& c : dm.sdpa) {
      absl::StrAppend(&out, absl::StrFormat("    SDPA backend: %d x %s ran %s: %s\n", c.count, c.op, c.backend, c.why));
    }
    if (dm.has_step) {
      absl::StrAppend(&out, absl::StrFormat("    rise above the step's start %s (live requests rounded to 512 B: "
                                            "%s at the start, %s at the highest)\n",
                                            FormatBytes(dm.step_peak_live - dm.step_start_live),
                                            FormatBytes(dm.step_start_live), FormatBytes(dm.step_peak_live)));
    }
  }
  absl::StrAppend(&out, "  largest buffers live at the peak (gpusim explain TRACE: whole stacks):\n");
  for (const StepPeakBuffer& b : r.largest) {
    absl::StrAppend(&out, absl::StrFormat("    %14s  %-15s %s%s\n", FormatBytes(b.size), RoleName(b.role),
                                          b.name.empty() ? "-" : b.name,
                                          b.where.empty() ? "" : absl::StrCat("  (", b.where, ")")));
  }
  absl::StrAppend(&out, RenderCompiledGraphsText(r.compiled_graphs));
  return out;
}

void NativeStepJson(JsonWriter& w, const NativeStepReport& r) {
  w.BeginObject("step");
  w.String("device", r.device);
  w.Double("step_time_s", r.step_time.seconds());
  w.Double("compute_s", r.compute_busy.seconds());
  w.Double("host_issue_s", r.host_busy.seconds());
  w.Double("host_wait_s", r.host_wait.seconds());
  if (r.host_recorded_events > 0) {
    w.Int("host_dispatches", r.host_dispatches);
    w.Int("host_nodes", r.host_nodes);
    w.Int("host_module_calls", r.host_module_calls);
  }
  w.Int("collective_events", r.collective_events);
  w.Double("collective_s", r.collective_busy.seconds());
  w.Int("timed_events", r.timed_events);
  w.Double("flops", r.flops);
  w.Int("peak_live_bytes", r.peak_live.value());
  w.BeginArray("largest");
  for (const StepPeakBuffer& b : r.largest) {
    w.BeginObject();
    w.String("name", b.name);
    w.String("role", RoleName(b.role));
    w.Int("bytes", b.size.value());
    w.String("where", b.where);
    w.EndObject();
  }
  w.EndArray();
  if (r.oom.happened) {
    w.BeginObject("oom");
    w.Int("event", r.oom.event);
    w.Int("requested_bytes", r.oom.requested.value());
    w.Int("live_bytes", r.oom.live.value());
    w.String("buffer", r.oom.buffer);
    w.EndObject();
  } else {
    w.Null("oom");
  }
  const EagerDeviceMemory& dm = r.device_memory;
  if (dm.applied) {
    w.BeginObject("device_memory");
    w.String("torch_version", dm.torch_version);
    w.Int("context_reserve_bytes", dm.context_reserve.value());
    if (dm.nccl.distributed) {
      w.BeginObject("nccl");
      w.Int("world_size", dm.nccl.world_size);
      w.Int("rank", dm.nccl.rank);
      w.Int("total_bytes", dm.nccl.total.value());
      w.BeginArray("communicators");
      for (const NcclCommunicator& c : dm.nccl.communicators) {
        w.BeginObject();
        w.String("id", c.id);
        w.Int("ranks", c.ranks);
        w.Int("channels", c.channels);
        w.Int("bytes", c.bytes.value());
        w.EndObject();
      }
      w.EndArray();
      w.EndObject();
    } else {
      w.Null("nccl");
    }
    w.BeginArray("added");
    for (const DeviceAddition& a : dm.added) {
      w.BeginObject();
      w.String("what", a.what);
      w.String("source", a.source);
      w.Int("count", a.count);
      w.Int("largest_bytes", a.largest.value());
      w.Bool("kept", a.kept);
      w.EndObject();
    }
    w.EndArray();
    w.BeginArray("not_modelled");
    for (const std::string& n : dm.not_modelled) w.String("", n);
    w.EndArray();
    w.BeginArray("assumptions");
    for (const std::string& n : dm.assumptions) w.String("", n);
    w.EndArray();
    if (!dm.sdpa.empty()) {  // only with fused SDPA events: other reports keep their keys
      w.BeginArray("sdpa");
      for (const SdpaCallClass& c : dm.sdpa) {
        w.BeginObject();
        w.String("op", c.op);
        w.Int("count", c.count);
        w.String("backend", c.backend);
        w.String("why", c.why);
        w.EndObject();
      }
      w.EndArray();
    }
    if (dm.has_step) {
      w.Int("step_start_live_bytes", dm.step_start_live.value());
      w.Int("step_rise_bytes", (dm.step_peak_live - dm.step_start_live).value());
    } else {
      w.Null("step_rise_bytes");
    }
    w.EndObject();
  } else {
    w.Null("device_memory");
  }
  // Note [Kernel time by op] (sim/engine/engine.h): largest first.
  std::vector<const std::pair<const std::pair<OpKind, std::string>, SimResult::OpTime>*> rows;
  for (const auto& kv : r.time_by_op) rows.push_back(&kv);
  std::stable_sort(rows.begin(), rows.end(), [](const auto* a, const auto* b) { return a->second.busy > b->second.busy; });
  w.BeginArray("kernel_time");
  for (const auto* kv : rows) {
    w.BeginObject();
    w.String("kind", std::string(OpKindName(kv->first.first)));
    w.String("op", kv->first.second);
    w.Int("events", kv->second.events);
    w.Double("busy_s", kv->second.busy.seconds());
    w.Double("flops", kv->second.flops);
    w.Double("bytes", kv->second.bytes);
    w.EndObject();
  }
  w.EndArray();
  if (!r.compiled_graphs.empty()) CompiledGraphsJson(w, r.compiled_graphs);
  w.EndObject();
}

}  // namespace gpusim
