// Mixture of experts in a Megatron-LM launch line: the MoE arguments gpusim
// models, accepts or refuses, and their checks. See
// megatron_args_internal.h; the layer is built by models/gpt_moe.cc.
//
// Note [Megatron MoE arguments]: names, defaults and checks from
// NVIDIA/Megatron-LM (core_r0.12, 2025) megatron/training/arguments.py
// _add_moe_args and validate_args, and megatron/core/transformer/
// transformer_config.py TransformerConfig.__post_init__:
//  - --moe-router-topk 2; --moe-token-dispatcher-type allgather;
//    --moe-router-load-balancing-type aux_loss; --moe-aux-loss-coeff 0.0;
//    --moe-ffn-hidden-size: --ffn-hidden-size; --expert-tensor-parallel-size:
//    TP (validate_args);
//  - num_experts % EP == 0; topk <= num_experts;
//  - EP > 1 with TP > 1 needs --sequence-parallel;
//  - --moe-expert-capacity-factor only with the alltoall dispatcher;
//    --moe-pad-expert-input-to-capacity only with a capacity factor;
//  - the expert data-parallel size is world / (PP x ETP x EP)
//    (parallel_state.initialize_model_parallel's expert RankGenerator).
#include <algorithm>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"

#include "absl/strings/str_cat.h"
#include "sim/base/status.h"
#include "sim/config/megatron_args_internal.h"

namespace gpusim {
namespace megatron_internal {

const std::vector<MoeArgRule>& MoeArgRules() {
  using K = MoeArgKind;
  static const std::vector<MoeArgRule>* const kRules = new std::vector<MoeArgRule>{
      {"num-experts", K::kModelled, "experts per MoE layer (models/gpt_moe.cc)"},
      {"moe-router-topk", K::kModelled, "experts per token"},
      {"expert-model-parallel-size", K::kModelled, "EP: experts sharded over the EP group, tokens dispatched over it"},
      {"expert-tensor-parallel-size", K::kModelled, "ETP: each expert's GEMMs split over the ETP group"},
      {"moe-grouped-gemm", K::kModelled, "one grouped GEMM for a rank's experts (else one GEMM per expert)"},
      {"moe-ffn-hidden-size", K::kModelled, "expert MLP width"},
      {"moe-shared-expert-intermediate-size", K::kModelled, "shared experts: a dense MLP beside the routed ones"},
      {"moe-token-dispatcher-type", K::kModelled, "allgather | alltoall (their buffers and collectives)"},
      {"moe-expert-capacity-factor", K::kModelled, "capacity per expert (tokens beyond it dropped)"},
      {"moe-pad-expert-input-to-capacity", K::kModelled, "every expert's input padded to its capacity"},
      {"moe-router-load-balancing-type", K::kModelled,
       "aux_loss | seq_aux_loss | none (the aux loss's saved scores) | sinkhorn (Note [Sinkhorn routing])"},
      {"moe-aux-loss-coeff", K::kModelled, "> 0: the load-balancing loss is computed (its saved scores)"},
      {"moe-layer-freq", K::kModelled, "which layers are MoE layers, the others dense (Note [Megatron MoE layer pattern])"},
      {"moe-token-drop-policy", K::kNoEffect, "which tokens are dropped, not how many"},
      {"moe-router-topk-scaling-factor", K::kNoEffect, "routing weights' values"},
      {"moe-router-pre-softmax", K::kModelled, "the softmax over every expert before top-k: its fp32 [T, E] result saved"},
      {"moe-per-layer-logging", K::kNoEffect, "logging"},
      {"moe-router-dtype", K::kModelled, "fp32: fp32 logits and the router backward's fp32 copies "
                                         "(Note [Megatron fp32 router]); fp64 is refused"},
      // core/transformer/moe/router.py TopKRouter (NVIDIA/Megatron-LM 57a02672):
      // softmax is the default score function; sigmoid is refused by value
      // in ApplyMoeOptions.
      {"moe-router-score-function", K::kModelled,
       "softmax (Megatron's default) or sigmoid: the fp32 scores saved (Note [Megatron MoE router])"},
      {"moe-router-num-groups", K::kModelled, "group-limited routing: its saved expert mask (Note [Megatron MoE router])"},
      {"moe-router-group-topk", K::kModelled, "group-limited routing: its saved expert mask (Note [Megatron MoE router])"},
      {"moe-router-enable-expert-bias", K::kModelled,
       "aux-loss-free expert bias: two fp32 [E] buffers per MoE layer and the step's token-count all-reduce"},
      {"moe-router-bias-update-rate", K::kNoEffect, "the expert bias's step size (values)"},
      {"moe-router-force-load-balancing", K::kRefused, "forced balanced routing is not modelled"},
      {"moe-z-loss-coeff", K::kRefused, "the router z-loss is not modelled"},
      {"moe-input-jitter-eps", K::kRefused, "router input jitter is not modelled"},
      {"moe-shared-expert-overlap", K::kRefused, "shared experts overlapped with dispatch are not modelled"},
      {"moe-use-legacy-grouped-gemm", K::kRefused, "the legacy GroupedMLP is not modelled (TE's grouped GEMM is)"},
      {"moe-layer-recompute", K::kRefused, "MoE-layer recompute is not modelled"},
      {"moe-extended-tp", K::kRefused, "extended tensor parallelism for experts is not modelled"},
      {"moe-use-upcycling", K::kRefused, "upcycling is not modelled"},
      {"moe-permute-fusion", K::kModelled, "TE's fused permute: its row_id_map saved instead of sorted indices"},
      {"moe-enable-deepep", K::kRefused, "the DeepEP (flex) dispatcher is not modelled"},
      {"moe-deepep-num-sms", K::kRefused, "the DeepEP (flex) dispatcher is not modelled"},
      {"moe-apply-probs-on-input", K::kRefused, "routing weights applied on the input are not modelled"},
      {"overlap-moe-expert-parallel-comm", K::kRefused, "EP communication overlap is not modelled"},
      {"moe-router-padding-for-fp8", K::kRefused, "fp8 training is not modelled"},
  };
  return *kRules;
}

namespace {

// Note [Megatron MoE layer pattern]: --moe-layer-freq (NVIDIA/Megatron-LM
// 23e00ed megatron/training/arguments.py moe_freq_type and _eval_pattern;
// megatron/core/models/gpt/gpt_layer_specs.py get_gpt_decoder_block_spec):
// an integer N makes layer i (from 0) an MoE layer when i % N == 0, the
// others dense layers (the dense MLP of --ffn-hidden-size); a string holding
// '[' is a Python list expression over digits, ',', '[', ']', '(', ')', '+'
// and '*' (the only characters _eval_pattern lets through to eval), whose
// value must be a list of 0 and 1 of --num-layers entries. The evaluator
// below covers that grammar: list displays, integers, parentheses, list +
// list, list * int (either side) and int arithmetic.
class PatternEval {
 public:
  explicit PatternEval(const std::string& text) : s_(text) {}
  // A list of ints, or an error message.
  absl::StatusOr<std::vector<int64_t>> List() {
    ASSIGN_OR_RETURN(Value v, Sum());
    if (pos_ != s_.size()) return Fail("unexpected character");
    if (!v.is_list) return absl::InvalidArgumentError("the expression is an integer, not a list");
    return v.list;
  }

 private:
  struct Value {
    bool is_list = false;
    int64_t n = 0;
    std::vector<int64_t> list;
  };
  static constexpr int64_t kMaxElements = 1 << 20;
  absl::Status Fail(const std::string& what) const {
    return absl::InvalidArgumentError(absl::StrCat(what, " at character ", pos_ + 1));
  }
  bool Eat(char c) {
    if (pos_ < s_.size() && s_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  absl::StatusOr<Value> Sum() {
    ASSIGN_OR_RETURN(Value v, Product());
    while (Eat('+')) {
      ASSIGN_OR_RETURN(Value r, Product());
      if (v.is_list != r.is_list) return Fail("a list and an integer added");
      if (v.is_list) {
        if (static_cast<int64_t>(v.list.size() + r.list.size()) > kMaxElements) return Fail("list too long");
        v.list.insert(v.list.end(), r.list.begin(), r.list.end());
      } else {
        if (v.n > kMaxElements || r.n > kMaxElements) return Fail("integer too large");
        v.n += r.n;
      }
    }
    return v;
  }
  absl::StatusOr<Value> Product() {
    ASSIGN_OR_RETURN(Value v, Atom());
    while (Eat('*')) {
      ASSIGN_OR_RETURN(Value r, Atom());
      if (v.is_list && r.is_list) return Fail("two lists multiplied");
      if (!v.is_list && !r.is_list) {
        if (v.n > kMaxElements || r.n > kMaxElements) return Fail("integer too large");
        v.n *= r.n;
        continue;
      }
      const Value& l = v.is_list ? v : r;
      const int64_t times = v.is_list ? r.n : v.n;
      if (times > 0 && static_cast<int64_t>(l.list.size()) * times > kMaxElements) return Fail("list too long");
      Value out;
      out.is_list = true;
      for (int64_t i = 0; i < times; ++i) out.list.insert(out.list.end(), l.list.begin(), l.list.end());
      v = std::move(out);
    }
    return v;
  }
  absl::StatusOr<Value> Atom() {
    if (++depth_ > 64) return Fail("nested too deeply");
    absl::StatusOr<Value> v = AtomInner();
    --depth_;
    return v;
  }
  absl::StatusOr<Value> AtomInner() {
    Value v;
    if (Eat('(')) {
      ASSIGN_OR_RETURN(v, Sum());
      if (!Eat(')')) return Fail("expected ')'");
      return v;
    }
    if (Eat('[')) {
      v.is_list = true;
      if (Eat(']')) return v;
      do {
        if (pos_ < s_.size() && s_[pos_] == ']') break;  // a trailing comma
        ASSIGN_OR_RETURN(Value e, Sum());
        if (e.is_list) return Fail("a list inside a list");
        if (static_cast<int64_t>(v.list.size()) >= kMaxElements) return Fail("list too long");
        v.list.push_back(e.n);
      } while (Eat(','));
      if (!Eat(']')) return Fail("expected ']' or ','");
      return v;
    }
    const size_t start = pos_;
    while (pos_ < s_.size() && absl::ascii_isdigit(static_cast<unsigned char>(s_[pos_]))) ++pos_;
    if (pos_ == start) return Fail("expected an integer, '[' or '('");
    if (pos_ - start > 9) return Fail("integer too large");
    v.n = std::stoll(s_.substr(start, pos_ - start));
    return v;
  }
  const std::string& s_;
  size_t pos_ = 0;
  int depth_ = 0;
};

// --moe-layer-freq into one entry per layer (Note [Megatron MoE layer
// pattern]); empty when every layer is an MoE layer.
absl::Status ParseMoeLayerFreq(const Args& g, int64_t layers, std::vector<int>* pattern) {
  const MegatronArg* f = g.Get("moe-layer-freq");
  pattern->clear();
  if (f == nullptr) return absl::OkStatus();
  std::vector<int64_t> list;
  if (absl::StrContains(f->value, "[")) {
    for (char c : f->value) {
      if (!absl::ascii_isdigit(static_cast<unsigned char>(c)) && std::string_view(",[]()+*").find(c) == std::string_view::npos) {
        return g.Error("moe-layer-freq", absl::StrCat("invalid pattern '", f->value,
                                                      "': only digits and , [ ] ( ) + * are allowed (_eval_pattern)"));
      }
    }
    absl::StatusOr<std::vector<int64_t>> v = PatternEval(f->value).List();
    if (!v.ok()) return g.Error("moe-layer-freq", absl::StrCat("invalid pattern '", f->value, "': ", v.status().message()));
    list = *std::move(v);
    if (static_cast<int64_t>(list.size()) != layers) {
      return g.Error("moe-layer-freq", absl::StrCat("the pattern '", f->value, "' has ", list.size(),
                                                    " entries; --num-layers is ", layers,
                                                    " (get_gpt_decoder_block_spec asserts they match)"));
    }
    for (int64_t x : list) {
      if (x != 0 && x != 1) {
        return g.Error("moe-layer-freq", absl::StrCat("the pattern '", f->value, "' holds ", x,
                                                      "; entries are 1 (MoE layer) or 0 (dense layer)"));
      }
    }
  } else {
    int64_t n = 0;
    if (!ParseInt64(f->value, &n) || n < 1) {
      return g.Error("moe-layer-freq", absl::StrCat("expected an integer >= 1 or a list pattern, got '", f->value, "'"));
    }
    for (int64_t i = 0; i < layers; ++i) list.push_back(i % n == 0 ? 1 : 0);
  }
  if (std::all_of(list.begin(), list.end(), [](int64_t x) { return x == 1; })) return absl::OkStatus();
  if (std::none_of(list.begin(), list.end(), [](int64_t x) { return x == 1; })) {
    return g.Error("moe-layer-freq", "makes every layer dense: give no --num-experts for a dense model");
  }
  pattern->assign(list.begin(), list.end());
  return absl::OkStatus();
}

// The MoE layer's options: widths, dispatcher, capacity, aux loss.
absl::Status ApplyMoeOptions(const Args& g, const RunSpec& run, MegatronMoeSpec* moe) {
  moe->ffn = run.model.mlp_dim;
  RETURN_IF_ERROR(g.Int("moe-ffn-hidden-size", &moe->ffn));
  RETURN_IF_ERROR(g.Int("moe-shared-expert-intermediate-size", &moe->shared_ffn));
  RETURN_IF_ERROR(g.Flag("moe-grouped-gemm", &moe->grouped_gemm));
  RETURN_IF_ERROR(g.Choice("moe-token-dispatcher-type", &moe->dispatcher, {"allgather", "alltoall"}));
  RETURN_IF_ERROR(g.Float("moe-expert-capacity-factor", &moe->capacity_factor, 1e-6, 1e6));
  RETURN_IF_ERROR(g.Flag("moe-pad-expert-input-to-capacity", &moe->pad_to_capacity));
  if (moe->capacity_factor > 0 && moe->dispatcher != "alltoall") {
    return g.Error("moe-expert-capacity-factor", "works with --moe-token-dispatcher-type alltoall only "
                                                 "(transformer_config.py)");
  }
  if (moe->pad_to_capacity && moe->capacity_factor == 0) {
    return g.Error("moe-pad-expert-input-to-capacity", "needs --moe-expert-capacity-factor");
  }
  std::string score = "softmax";
  RETURN_IF_ERROR(g.Choice("moe-router-score-function", &score, {"softmax", "sigmoid"}));
  moe->sigmoid = score == "sigmoid";
  std::string router_dtype;
  RETURN_IF_ERROR(g.Choice("moe-router-dtype", &router_dtype, {"fp32", "fp64"}));
  if (router_dtype == "fp64") {
    return g.Error("moe-router-dtype", "not modelled: fp64 (torch.mm in fp64; fp32 is modelled)");
  }
  moe->router_fp32 = router_dtype == "fp32";
  RETURN_IF_ERROR(g.Flag("moe-router-enable-expert-bias", &moe->expert_bias));
  if (moe->expert_bias && !moe->sigmoid) {
    return g.Error("moe-router-enable-expert-bias", "supports --moe-router-score-function sigmoid only "
                                                    "(transformer_config.py __post_init__)");
  }
  std::string balance = "aux_loss";
  RETURN_IF_ERROR(
      g.Choice("moe-router-load-balancing-type", &balance, {"aux_loss", "seq_aux_loss", "none", "sinkhorn"}));
  double coeff = 0;
  RETURN_IF_ERROR(g.Float("moe-aux-loss-coeff", &coeff, 0, 1e6));
  if (balance == "sinkhorn" && coeff > 0) {
    return g.Error("moe-aux-loss-coeff", "must be 0 with sinkhorn routing (router.py sinkhorn_load_balancing asserts it)");
  }
  moe->aux_loss = (balance == "aux_loss" || balance == "seq_aux_loss") && coeff > 0;
  RETURN_IF_ERROR(ParseMoeLayerFreq(g, run.model.n_layers, &moe->layer_pattern));
  RETURN_IF_ERROR(g.Flag("moe-router-pre-softmax", &moe->pre_softmax));
  RETURN_IF_ERROR(g.Flag("moe-permute-fusion", &moe->permute_fusion));
  if (moe->topk == 1 && !moe->pre_softmax && !moe->sigmoid && balance != "sinkhorn") {
    return g.Error("moe-router-topk", "1 needs --moe-router-pre-softmax with softmax routing (transformer_config.py "
                                      "__post_init__)");
  }
  // Group-limited routing (NVIDIA/Megatron-LM 23e00ed transformer_config.py
  // __post_init__; moe_utils.py group_limited_topk views the scores as
  // [T, groups, E / groups] and takes top-(topk / group_topk) per group).
  RETURN_IF_ERROR(g.Int("moe-router-num-groups", &moe->router_groups));
  RETURN_IF_ERROR(g.Int("moe-router-group-topk", &moe->group_topk));
  if (moe->group_topk > 0 && moe->router_groups == 0) {
    return g.Error("moe-router-group-topk", "needs --moe-router-num-groups (transformer_config.py)");
  }
  if (moe->router_groups > 0 && moe->group_topk == 0) {
    return g.Error("moe-router-num-groups", "without --moe-router-group-topk routing is not group-limited: give both");
  }
  if (moe->router_groups > 0) {
    if (moe->experts % moe->router_groups != 0) {
      return g.Error("moe-router-num-groups", "must divide --num-experts (group_limited_topk views the scores by group)");
    }
    if (moe->group_topk > moe->router_groups || moe->topk / moe->group_topk > moe->experts / moe->router_groups ||
        moe->topk > moe->group_topk * (moe->experts / moe->router_groups)) {
      return g.Error("moe-router-group-topk",
                     absl::StrCat("must be at most --moe-router-num-groups, with top-(topk / group_topk) within a "
                                  "group's ", moe->experts / moe->router_groups, " experts and top-k within the ",
                                  "chosen groups' (group_limited_topk's topk calls)"));
    }
  }
  if (run.megatron.bias_linear) {
    return g.Error("num-experts", "biases in the expert linears are not modelled: give --disable-bias-linear");
  }
  // Under --use-tp-pp-dp-mapping the expert ranks follow the same order
  // (Note [Megatron expert ranks], models/megatron_ranks.cc), and
  // parallel_state.initialize_model_parallel asserts that the attention and
  // MoE layers then share their data-parallel size when PP > 1.
  if (run.megatron.tp_pp_dp_mapping && run.megatron.pipeline > 1 && moe->edp != run.megatron.data) {
    return g.Error("use-tp-pp-dp-mapping",
                   absl::StrCat("with PP > 1 needs the expert data-parallel size (", moe->edp,
                                ") equal to the data-parallel size (", run.megatron.data,
                                "): Megatron's initialize_model_parallel asserts it when the order does not end "
                                "with pp"));
  }
  return absl::OkStatus();
}

// Note [Sinkhorn routing]: NVIDIA/Megatron-LM (57a02672) megatron/core/
// transformer/moe/router.py TopKRouter.sinkhorn_load_balancing, in training:
// under no_grad, moe_utils.py sinkhorn(logits in fp32) (a while loop until
// the mean change of its column scaling is under 1e-4; each test of the loop
// condition is a host sync) and top-k of the result; then the activation
// (sigmoid for top-1, else softmax in fp32 cast back) and scores = activation
// x the one-hot routing map. There is no aux loss (asserted). Memory: the
// no_grad [T, E] fp32 tensors are transient; the saved activation is the
// router_probs value of models/gpt_moe.cc ([T, E] fp32; top-1's sigmoid keeps
// it in the compute dtype, T x E x 2 B less, not modelled). Time: the loop's
// data-dependent iterations and syncs are not in the step time, and the
// argument says so in megatron.args.
void MarkSinkhornTime(const Args& g, RunSpec* run) {
  const MegatronArg* b = g.Get("moe-router-load-balancing-type");
  if (b == nullptr || b->value != "sinkhorn") return;
  for (auto& [name, what] : run->megatron.args) {
    if (name == "moe-router-load-balancing-type") {
      what = "not modelled (costs time): sinkhorn routing's iterations, each a host sync (Note [Sinkhorn routing])";
    }
  }
}

}  // namespace

absl::Status ApplyMoeArgs(const Args& g, RunSpec* run) {
  MegatronMoeSpec& moe = run->megatron.moe;
  for (const MoeArgRule& r : MoeArgRules()) {
    if (r.kind == MoeArgKind::kModelled && g.Has(r.name) && !g.Has("num-experts") &&
        std::string(r.name) != "num-experts") {
      // Megatron builds the expert groups of a dense model too
      // (core/parallel_state.py initialize_model_parallel takes
      // expert_tensor_parallel_size either way); no expert uses them.
      if (std::string(r.name) == "expert-tensor-parallel-size" || std::string(r.name) == "expert-model-parallel-size") {
        for (auto& [name, how] : run->megatron.args) {
          if (name == r.name) how = "no effect on memory or time: a dense model has no experts to split";
        }
        run->megatron.no_effect.push_back(r.name);
        continue;
      }
      return g.Error(r.name, "needs --num-experts (a mixture-of-experts model)");
    }
  }
  if (!g.Has("num-experts")) return absl::OkStatus();
  const int64_t tp = run->parallelism.tensor;
  RETURN_IF_ERROR(g.Int("num-experts", &moe.experts));
  RETURN_IF_ERROR(g.Int("moe-router-topk", &moe.topk));
  RETURN_IF_ERROR(g.Int("expert-model-parallel-size", &moe.ep));
  moe.etp = tp;
  RETURN_IF_ERROR(g.Int("expert-tensor-parallel-size", &moe.etp));
  if (moe.topk > moe.experts) return g.Error("moe-router-topk", "must be at most --num-experts");
  if (moe.experts % moe.ep != 0) return g.Error("expert-model-parallel-size", "must divide --num-experts");
  if (moe.ep > 1 && tp > 1 && !run->parallelism.sequence_parallel) {
    return g.Error("expert-model-parallel-size", "with TP > 1 needs --sequence-parallel (Megatron's validate_args)");
  }
  if (tp > 1 && !run->parallelism.sequence_parallel) {
    return g.Error("num-experts", "MoE with TP > 1 and no --sequence-parallel is not modelled");
  }
  const MegatronSpec& mg = run->megatron;
  const int64_t stage_ranks = mg.world_size / mg.pipeline;  // TP x CP x DP
  if (moe.ep * moe.etp > stage_ranks || stage_ranks % (moe.ep * moe.etp) != 0) {
    return g.Error("expert-model-parallel-size",
                   absl::StrCat("EP x ETP (", moe.ep, " x ", moe.etp, ") must divide TP x CP x DP (", stage_ranks, ")"));
  }
  moe.edp = stage_ranks / (moe.ep * moe.etp);
  RETURN_IF_ERROR(ApplyMoeOptions(g, *run, &moe));
  MarkSinkhornTime(g, run);
  if (moe.ffn % moe.etp != 0) {
    return g.Error("expert-tensor-parallel-size", "must divide --moe-ffn-hidden-size");
  }
  if (moe.shared_ffn % tp != 0) {
    return g.Error("moe-shared-expert-intermediate-size", "must be a multiple of TP");
  }
  return absl::OkStatus();
}

}  // namespace megatron_internal
}  // namespace gpusim
