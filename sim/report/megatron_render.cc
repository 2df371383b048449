// See megatron_render.h.
#include "sim/report/megatron_render.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "sim/base/json_writer.h"
#include "sim/base/units.h"
#include "sim/report/render.h"

namespace gpusim {
namespace {

// The peak rank's report with the pipeline's step time, for render.h.
StepReport Headline(const MegatronReport& r) {
  StepReport h = r.ranks[r.peak].report;
  h.sim.step_time = r.step_time;
  return h;
}

std::string Layout(const MegatronSpec& g, const RunSpec& s) {
  return absl::StrCat("world ", g.world_size, " = TP ", s.parallelism.tensor, " x PP ", g.pipeline, " x CP ", g.context,
                      " x DP ", g.data, g.virtual_stages > 1 ? absl::StrCat(", ", g.virtual_stages, " chunks per rank (interleaved)") : "",
                      s.parallelism.sequence_parallel ? ", SP" : "", g.distributed_optimizer ? ", distributed optimizer" : "");
}

std::string Why(const MegatronRank& k) {
  std::string w = absl::StrCat(k.in_flight, " chunk activation set", k.in_flight == 1 ? "" : "s", " in flight (",
                               k.warmup, " warm-up forward", k.warmup == 1 ? "" : "s", ")");
  if (k.embedding) absl::StrAppend(&w, ", the embedding");
  if (k.head) absl::StrAppend(&w, ", the output layer and fp32 logits");
  return w;
}

// The routing bound's words (Note [MoE routing cases], models/gpt_moe.cc).
std::string MoeBound(const MegatronMoeSpec& e) {
  if (e.pad_to_capacity) return "every expert's input padded to its capacity (balanced = bound)";
  if (e.capacity_factor > 0) return absl::StrFormat("capacity-limited, factor %g (tokens beyond it dropped)", e.capacity_factor);
  return "worst case: every token of the EP group on this rank's experts";
}

std::string MoeText(const MegatronReport& r) {
  const MegatronMoeSpec& e = r.spec.megatron.moe;
  std::string o = absl::StrFormat(
      "\nMixture of experts: %d experts, top-%d, EP %d x ETP %d (expert data parallel %d), %s, %s dispatcher\n",
      e.experts, e.topk, e.ep, e.etp, e.edp, e.grouped_gemm ? "grouped GEMM" : "one GEMM per expert", e.dispatcher);
  absl::StrAppend(&o, "  routing is data-dependent: the rows above are the balanced case; the bound is ", MoeBound(e),
                  "\n");
  o += "  stage  balanced peak allocated     bound peak allocated        bound peak reserved         bound own step\n";
  for (const MegatronRank& k : r.ranks) {
    absl::StrAppendFormat(&o, "  %-5d  %-26s  %-26s  %-26s  %.4f s\n", k.stage,
                          FormatBytes(k.report.sim.allocator.peak_allocated), FormatBytes(k.moe_bound_peak),
                          FormatBytes(k.moe_bound_reserved), k.moe_bound_step.seconds());
  }
  const MegatronRank& h = r.ranks[r.moe_bound_peak];
  absl::StrAppendFormat(&o, "  heaviest rank under the bound: stage %d (ranks %d-%d); the bound decides \"fits\": %s"
                        " (balanced: %s)\n", h.stage, h.first_rank, h.last_rank, h.report.fits ? "fits" : "does not fit",
                        h.moe_balanced_fits ? "fits" : "does not fit");
  return o;
}

}  // namespace

std::string RenderMegatronText(const MegatronReport& r) {
  const MegatronSpec& g = r.spec.megatron;
  std::string o = RenderText(Headline(r));
  absl::StrAppend(&o, "\nMegatron-LM launch line: ", Layout(g, r.spec), "\n");
  absl::StrAppendFormat(&o, "  %d parameters in the model; global batch %d = micro-batch %d x %d micro-batches x DP %d\n",
                        r.param_count, g.global_batch, r.spec.batch.per_device, g.microbatches, g.data);
  absl::StrAppendFormat(&o, "  step %.4f s = slowest rank's own step %.4f s + waits on other stages %.4f s "
                        "(bubble and p2p sends); %.1f TFLOP/s/GPU (Megatron's formula), %.0f tokens/s/GPU\n",
                        r.step_time.seconds(), (r.step_time - r.bubble).seconds(), r.bubble.seconds(),
                        r.model_tflops_per_device, r.tokens_per_s_per_device);
  if (g.pipeline > 1) {
    absl::StrAppendFormat(&o, "  p2p: %s per message ([s, b, h] of one micro-batch), ", FormatBytes(
                          Bytes(PipelineMessageBytes(r.spec))));
    for (const MegatronRank& k : r.ranks) {
      absl::StrAppendFormat(&o, "%s%d->%d %.3f ms%s", &k == &r.ranks.front() ? "" : ", ", k.stage,
                            (k.stage + 1) % g.pipeline, k.send_time.seconds() * 1e3,
                            k.send_inter_node ? " (network)" : " (NVLink)");
      if (g.virtual_stages == 1 && k.stage + 2 == g.pipeline) break;  // 1F1B: no wrap-around send
    }
    absl::StrAppend(&o, g.virtual_stages > 1 && g.overlap_p2p ? "; overlapped with compute\n"
                                                                : "; the sender waits for its send\n");
  }
  o += "\nPer rank (one row per pipeline stage; every TP/CP/DP rank of a stage is alike)\n";
  o += "  stage  ranks        in-flight  peak allocated              end allocated               peak reserved               own step  (host issue, GPU waiting on it, host waiting at syncs)\n";
  for (const MegatronRank& k : r.ranks) {
    const StepReport& s = k.report;
    absl::StrAppendFormat(&o, "  %-5d  %-11s  %-9d  %-26s  %-26s  %-26s  %.4f s  (%.4f s, %.4f s, %.4f s at %d)\n",
                          k.stage,
                          absl::StrCat(k.first_rank, "-", k.last_rank), k.in_flight,
                          FormatBytes(s.sim.allocator.peak_allocated), FormatBytes(s.argument),
                          FormatBytes(s.sim.allocator.peak_reserved), s.sim.step_time.seconds(),
                          s.sim.host_busy.seconds(), s.sim.host_wait.seconds(), s.sim.host_sync_wait.seconds(),
                          s.sim.host_syncs);
  }
  const MegatronRank& p = r.ranks[r.peak];
  absl::StrAppendFormat(&o, "  peak: stage %d (%s)\n", p.stage, Why(p));
  absl::StrAppendFormat(&o, "  Megatron's log reports rank %d (the last rank): stage %d, the row above\n",
                        r.ranks[r.last].last_rank, r.ranks[r.last].stage);
  if (g.moe.experts > 0) absl::StrAppend(&o, MoeText(r));
  if (!g.no_effect.empty()) {
    absl::StrAppend(&o, "  accepted as not affecting memory or time: --", absl::StrJoin(g.no_effect, ", --"), "\n");
  }
  for (const auto& [name, how] : g.args) {
    if (absl::StartsWith(how, "not modelled")) {
      absl::StrAppend(&o, "  accepted, not in the step time: --", name, " (", how.substr(how.find(": ") + 2), ")\n");
    }
  }
  return o;
}

std::string RenderMegatronJson(const MegatronReport& r) {
  const MegatronSpec& g = r.spec.megatron;
  std::string base = RenderJson(Headline(r));
  JsonWriter w;
  w.BeginObject();
  w.BeginObject("megatron")
      .Int("world_size", g.world_size)
      .Int("tensor", r.spec.parallelism.tensor)
      .Int("pipeline", g.pipeline)
      .Int("virtual_stages", g.virtual_stages)
      .Int("context", g.context)
      .Int("data", g.data)
      .Bool("sequence_parallel", r.spec.parallelism.sequence_parallel)
      .Bool("distributed_optimizer", g.distributed_optimizer)
      .Int("global_batch", g.global_batch)
      .Int("micro_batch", r.spec.batch.per_device)
      .Int("microbatches", g.microbatches)
      .Int("padded_vocab", r.spec.model.vocab)
      .Int("ffn_hidden_size", r.spec.model.mlp_dim)
      .Int("num_query_groups", r.spec.model.n_kv_heads)
      .Int("param_count", r.param_count)
      .Double("step_time_s", r.step_time.seconds())
      .Double("bubble_s", r.bubble.seconds())
      .Int("p2p_message_bytes", g.pipeline > 1 ? PipelineMessageBytes(r.spec) : 0)
      .Bool("p2p_overlapped", g.virtual_stages > 1 && g.overlap_p2p)
      .Double("model_tflops_per_gpu", r.model_tflops_per_device)
      .Double("tokens_per_s_per_gpu", r.tokens_per_s_per_device)
      .Int("peak_rank_stage", r.ranks[r.peak].stage)
      .Int("logged_rank", r.ranks[r.last].last_rank);
  if (g.moe.experts > 0) {
    const MegatronMoeSpec& e = g.moe;
    w.BeginObject("moe")
        .Int("experts", e.experts)
        .Int("topk", e.topk)
        .Int("expert_parallel", e.ep)
        .Int("expert_tensor_parallel", e.etp)
        .Int("expert_data_parallel", e.edp)
        .Bool("grouped_gemm", e.grouped_gemm)
        .String("dispatcher", e.dispatcher)
        .Double("capacity_factor", e.capacity_factor)
        .Bool("pad_to_capacity", e.pad_to_capacity)
        .String("bound", MoeBound(e))
        .Int("bound_heaviest_stage", r.ranks[r.moe_bound_peak].stage)
        .EndObject();
  }
  w.BeginArray("args");
  for (const auto& [name, how] : g.args) w.BeginObject().String("name", name).String("treated", how).EndObject();
  w.EndArray();
  w.EndObject();
  w.BeginArray("ranks");
  for (const MegatronRank& k : r.ranks) {
    const StepReport& s = k.report;
    w.BeginObject()
        .Int("pipeline_stage", k.stage)
        .Int("first_rank", k.first_rank)
        .Int("last_rank", k.last_rank)
        .Bool("holds_embedding", k.embedding)
        .Bool("holds_output_layer", k.head)
        .Bool("logged_by_megatron", &k == &r.ranks[r.last])
        .Int("warmup_forwards", k.warmup)
        .Int("in_flight_chunk_activations", k.in_flight)
        .Int("param_count", s.param_count)
        .Int("peak_allocated_bytes", s.sim.allocator.peak_allocated.value())
        .Int("end_allocated_bytes", s.argument.value())
        .Int("peak_reserved_bytes", s.sim.allocator.peak_reserved.value())
        .Int("live_peak_bytes", s.sim.peak_live.value())
        .Bool("fits", s.fits)
        .Double("own_step_time_s", s.sim.step_time.seconds())
        .Double("compute_per_pass_s", k.compute_per_pass.seconds())
        .Double("p2p_send_s", k.send_time.seconds())
        .Bool("p2p_send_inter_node", k.send_inter_node)
        .Double("pipeline_wait_s", k.pipeline_wait.seconds())
        .Double("pipeline_end_s", k.pipeline_end.seconds())
        .Double("host_issue_s", s.sim.host_busy.seconds())
        .Double("host_wait_s", s.sim.host_wait.seconds())
        .Double("host_sync_wait_s", s.sim.host_sync_wait.seconds())  // Note [Host syncs]
        .Int("host_syncs", s.sim.host_syncs)
        .Double("compute_busy_s", s.sim.compute_busy.seconds())
        .Double("exposed_communication_s", s.sim.exposed_communication.seconds())
        .String("peak_why", Why(k));
    if (k.moe) {
      w.Int("moe_bound_peak_allocated_bytes", k.moe_bound_peak.value())
          .Int("moe_bound_peak_reserved_bytes", k.moe_bound_reserved.value())
          .Double("moe_bound_own_step_time_s", k.moe_bound_step.seconds())
          .Bool("moe_balanced_fits", k.moe_balanced_fits);
    }
    w.EndObject();
  }
  w.EndArray();
  w.EndObject();
  std::string extra = w.Finish();
  // Splice the two documents: base's closing "}\n" and extra's "{\n".
  base.resize(base.size() - 3);
  return absl::StrCat(base, ",\n", extra.substr(2));
}

}  // namespace gpusim
