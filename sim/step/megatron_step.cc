// See megatron_step.h.
//
// Note [Megatron step time]: each pipeline rank's program is its own
// schedule (models/megatron_schedule.h): warm-up forwards, 1F1B pairs,
// cool-down backwards, gradient sync, optimizer, simulated on one device as
// if its inputs were always there. The ranks' steps are then replayed
// together, each slot waiting for what it receives from its neighbour over
// the link between them (Note [Megatron pipeline in time],
// megatron_step_pipeline.cc): the step is the last rank's end, and the
// bubble is what that adds to the slowest rank's own step.
#include "sim/step/megatron_step.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "models/megatron_ranks.h"
#include "models/megatron_schedule.h"
#include "sim/base/status.h"
#include "sim/lower/lower.h"

namespace gpusim {

// Megatron-LM's model FLOPs per iteration, the figure its log turns into
// "throughput per GPU (TFLOP/s/GPU)": megatron/training/training.py
// num_floating_point_operations (the dense, non-MoE form; checked against the
// copy NeMo's nemo/tron keeps "adapted from Megatron-LM"): 12 = 3 GEMMs per
// weight (forward, dgrad, wgrad) x 2 GEMMs per block x 2 FLOPs per MAC, over
// B x s x L x h^2 x ((1 + groups/heads + s/h) x q-projection/h + ffn/h x
// (3/2 for SwiGLU) + padded vocab / (2 L h)). Attention counts the full s x s
// score matrix (no causal halving), as Megatron does.
namespace {

// MoE layers of the model (Note [Megatron MoE layer pattern],
// sim/config/megatron_moe_args.cc).
int64_t MoeLayers(const MegatronSpec& g, int64_t layers) {
  if (g.moe.experts == 0) return 0;
  if (g.moe.layer_pattern.empty()) return layers;
  return static_cast<int64_t>(std::count(g.moe.layer_pattern.begin(), g.moe.layer_pattern.end(), 1));
}

}  // namespace

double MegatronModelFlops(const RunSpec& spec) {
  const ModelSpec& m = spec.model;
  const MegatronSpec& g = spec.megatron;
  const double h = static_cast<double>(m.d_model), s = static_cast<double>(spec.batch.seq_len);
  const double l = static_cast<double>(m.n_layers), a = static_cast<double>(m.n_heads);
  const double q_ratio = static_cast<double>(m.head_dim) * a / h;
  const double gated = g.swiglu ? 1.5 : 1.0;
  const double batch = static_cast<double>(g.global_batch);
  // MoE (training.py, the same function's MoE branch): the MLP term is
  // topk x moe_ffn_hidden_size plus the shared experts' width; the router
  // GEMM is not counted.
  // With --moe-layer-freq (NVIDIA/Megatron-LM 23e00ed, the same function's
  // moe_layer_pattern) the dense layers' width and the MoE layers' are
  // weighted by their share of the layers.
  double ffn = static_cast<double>(m.mlp_dim);
  if (g.moe.experts > 0) {
    const double moe_ffn = static_cast<double>(g.moe.topk * g.moe.ffn + g.moe.shared_ffn);
    const double n_moe = MoeLayers(g, m.n_layers);
    ffn = (moe_ffn * n_moe + static_cast<double>(m.mlp_dim) * (l - n_moe)) / l;
  }
  if (g.mla.present) {
    // The same function's multi_latent_attention branch (NVIDIA/Megatron-LM
    // 23e00ed): per token and layer, 6 x (the projections' weights, the
    // latents' +1 for their norms, and half the s x heads x (d_qk + d_v)
    // attention products).
    const MegatronMlaSpec& x = g.mla;
    const double qk = static_cast<double>(x.qk_head_dim), pe = static_cast<double>(x.qk_pos_dim);
    const double dv = static_cast<double>(x.v_head_dim), rq = static_cast<double>(x.q_lora_rank);
    const double rkv = static_cast<double>(x.kv_lora_rank);
    const double q_term = x.q_lora_rank > 0 ? rq * (h + a * (qk + pe) + 1) : h * a * (qk + pe);
    const double attn = 6.0 * l *
                        (q_term + rkv * (h + a * (qk + dv) + 1) + h * pe + a * dv * h + s * a * (qk + pe) / 2 +
                         s * a * dv / 2);
    return batch * s * (12.0 * l * h * ffn * gated + attn + 6.0 * h * static_cast<double>(m.vocab));
  }
  return 12.0 * batch * s * l * h * h *
         ((1 + static_cast<double>(m.n_kv_heads) / a + s / h) * q_ratio +
          ffn / h * gated + static_cast<double>(m.vocab) / (2 * l * h));
}

int64_t MegatronParamCount(const RunSpec& spec) {
  const ModelSpec& m = spec.model;
  const MegatronSpec& g = spec.megatron;
  const int64_t h = m.d_model, qkv = (m.n_heads + 2 * m.n_kv_heads) * m.head_dim, c = m.n_heads * m.head_dim;
  const int64_t f1 = (g.swiglu ? 2 : 1) * m.mlp_dim, norm = (g.rms_norm ? 1 : 2) * h;
  int64_t layer = h * qkv + c * h + h * f1 + m.mlp_dim * h + 2 * norm;
  if (g.mla.present) {  // Note [Megatron multi-latent attention] (models/gpt_mla.cc)
    const MegatronMlaSpec& x = g.mla;
    const int64_t a = m.n_heads, dqk = x.qk_head_dim + x.qk_pos_dim, rows = g.rms_norm ? 1 : 2;
    const int64_t ln = g.qk_layernorm ? rows : 0;
    const int64_t q = x.q_lora_rank > 0 ? h * x.q_lora_rank + ln * x.q_lora_rank + x.q_lora_rank * a * dqk
                                        : h * a * dqk;
    layer += -(h * qkv + c * h) + q + h * (x.kv_lora_rank + x.qk_pos_dim) + ln * x.kv_lora_rank +
             x.kv_lora_rank * a * (x.qk_head_dim + x.v_head_dim) + a * x.v_head_dim * h;
  }
  if (g.qkv_bias) layer += qkv;
  if (g.qk_layernorm && !g.mla.present) layer += 2 * (g.rms_norm ? 1 : 2) * m.head_dim;  // Note [Megatron QK layernorm]
  if (g.bias_linear) layer += h + f1 + h;
  int64_t moe_extra = 0;
  if (g.moe.experts > 0) {  // the router, every expert and the shared experts instead of the MLP (no biases)
    const int64_t gate = g.swiglu ? 3 : 2;
    moe_extra = -(h * f1 + m.mlp_dim * h) + h * g.moe.experts + g.moe.experts * gate * h * g.moe.ffn +
                gate * h * g.moe.shared_ffn;
  }
  return m.n_layers * layer + MoeLayers(g, m.n_layers) * moe_extra + m.vocab * h * (m.tied_embeddings ? 1 : 2) + norm +
         (g.position == "learned_absolute" ? g.max_position * h : 0);
}

SimTime MegatronPassTime(const Trace& tr, const SimResult& sim, const MegatronSpec& g) {
  SimTime busy(0);
  for (size_t i = 0; i < tr.events.size(); ++i) {
    const TraceEvent& e = tr.events[i];
    if (e.stream != kComputeStream || e.type != EventType::kCompute) continue;
    if (e.phase != Phase::kForward && e.phase != Phase::kBackward) continue;
    busy += sim.end[i] - sim.start[i];
  }
  return SimTime(busy.ns() / (g.microbatches * g.virtual_stages));
}

MegatronRankView PeakRankView(const MegatronReport& r) {
  const MegatronRank& k = r.ranks[r.peak];
  MegatronRankView v;
  v.report = k.report;
  v.own_step = k.report.sim.step_time;
  v.report.sim.step_time = r.step_time;
  v.stage = k.stage;
  v.stages = static_cast<int64_t>(r.ranks.size());
  v.first_rank = k.first_rank;
  v.last_rank = k.last_rank;
  return v;
}

std::string DescribeRankView(const MegatronRankView& v) {
  return absl::StrCat("Megatron-LM launch line: pipeline stage ", v.stage, " of ", v.stages, " (ranks ", v.first_rank,
                      "-", v.last_rank, "), the rank with the largest peak; its own step ",
                      absl::StrFormat("%.4f", v.own_step.seconds()), " s, the step time shown is the pipeline's\n");
}

namespace {

// Note [MoE routing cases] (models/gpt_moe.cc): the rank built again for
// the routing bound; "fits" is the bound's, the balanced one kept beside.
absl::Status SimulateMoeBound(const RunSpec& balanced, MegatronRank* rank) {
  RunSpec s = balanced;
  s.megatron.moe.routing = "bound";
  ASSIGN_OR_RETURN(const StepReport bound, SimulateStep(s));
  rank->moe = true;
  rank->moe_bound_peak = bound.sim.allocator.peak_allocated;
  rank->moe_bound_reserved = bound.sim.allocator.peak_reserved;
  rank->moe_bound_step = bound.sim.step_time;
  rank->moe_balanced_fits = rank->report.fits;
  rank->report.fits = rank->report.fits && bound.fits;
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<MegatronReport> SimulateMegatron(const RunSpec& spec) {
  GPUSIM_CHECK(spec.megatron.present);
  MegatronReport out;
  out.spec = spec;
  const MegatronSpec& g = spec.megatron;
  std::vector<MegatronRankTimes> times;
  for (int64_t r = 0; r < g.pipeline; ++r) {
    RunSpec s = spec;
    s.megatron.stage = r;
    s.megatron.rank_selected = true;
    MegatronRank rank;
    rank.stage = r;
    // Note [Megatron rank order]: the stage's lowest and highest global rank
    // (a contiguous range in the default order, not under the mapping).
    const int64_t t = spec.parallelism.tensor;
    rank.first_rank = MegatronGlobalRank(g, t, {0, 0, 0, r});
    rank.last_rank = MegatronGlobalRank(g, t, {t - 1, g.context - 1, g.data - 1, r});
    rank.embedding = r == 0;
    rank.head = r == g.pipeline - 1;
    rank.warmup = MegatronWarmup(g.pipeline, r, g.virtual_stages, g.microbatches, g.microbatch_group);
    rank.in_flight =
        MaxInFlight(MegatronSchedule(g.pipeline, r, g.virtual_stages, g.microbatches, g.microbatch_group));
    ASSIGN_OR_RETURN(rank.report, SimulateStep(s));
    if (g.moe.experts > 0) RETURN_IF_ERROR(SimulateMoeBound(s, &rank));
    StepReport& rep = rank.report;
    // In double: the int64 product can wrap (each factor is checked alone).
    rep.tokens_per_step = static_cast<double>(g.microbatches) * static_cast<double>(spec.batch.per_device) *
                          static_cast<double>(spec.batch.seq_len);
    rank.compute_per_pass = MegatronPassTime(rep.lowered.trace, rep.sim, g);
    rank.slots = SlotEventsOf(rep.program, rep.lowered);
    times.push_back(RankTimesOf(rank.slots, rep.sim));
    out.ranks.push_back(std::move(rank));
  }
  out.param_count = MegatronParamCount(spec);
  DeviceSpec device = spec.device;
  UseMegatronHostCosts(&device);  // Note [Megatron host costs], as each rank's step
  ASSIGN_OR_RETURN(const MegatronPipelineTimes pipe, SimulatePipeline(times, spec, device));
  out.step_time = pipe.step;
  out.bubble = pipe.bubble;
  for (size_t i = 0; i < out.ranks.size(); ++i) {
    out.ranks[i].send_time = pipe.send_time[i];
    out.ranks[i].send_inter_node = pipe.send_inter_node[i];
    out.ranks[i].pipeline_wait = pipe.rank_wait[i];
    out.ranks[i].pipeline_end = pipe.rank_end[i];
  }
  for (size_t i = 0; i < out.ranks.size(); ++i) {
    const Bytes peak = out.ranks[i].report.sim.allocator.peak_allocated;
    if (peak > out.ranks[out.peak].report.sim.allocator.peak_allocated) out.peak = i;
  }
  for (size_t i = 0; i < out.ranks.size(); ++i) {
    if (out.ranks[i].moe_bound_peak > out.ranks[out.moe_bound_peak].moe_bound_peak) out.moe_bound_peak = i;
  }
  out.last = out.ranks.size() - 1;
  const double t = out.step_time.seconds();
  if (t > 0) {
    out.model_tflops_per_device = MegatronModelFlops(spec) / t / static_cast<double>(g.world_size) / 1e12;
    out.tokens_per_s_per_device =
        static_cast<double>(g.global_batch * spec.batch.seq_len) / t / static_cast<double>(g.world_size);
  }
  return out;
}

}  // namespace gpusim
