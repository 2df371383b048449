// Tensor and sequence parallelism of the llama family (Note [Llama tensor
// parallelism] in models/llama.cc): per-rank parameter and activation bytes
// against Korthikanti et al. 2022 (arXiv 2205.05198) Sec. 4 / Table 2 applied
// to the Llama layer, the collectives Megatron-LM and MaxText's sharding
// put in a layer, and the step they change.
#include <map>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "models/llama.h"
#include "sim/config/loader.h"
#include "sim/step/step.h"
#include "sim/step/model_program.h"

namespace gpusim::llama_tp_test {
namespace {

RunSpec Spec(std::vector<std::string> sets) {
  sets.insert(sets.begin(), "model.n_layers=2");
  auto spec = LoadRunSpec(GPUSIM_SOURCE_DIR "/configs/llama7b.yaml", sets);
  EXPECT_TRUE(spec.ok()) << spec.status();
  return *spec;
}

Program Build(const std::vector<std::string>& sets) {
  auto p = BuildModelProgram(Spec(sets));
  EXPECT_TRUE(p.ok()) << p.status();
  return p.ok() ? *p : Program{};
}

int64_t ParamBytes(const Program& p) {
  int64_t n = 0;
  for (const Tensor& t : p.tensors) {
    if (t.entry_parameter && t.role == Role::kParameter) n += t.bytes().value();
  }
  return n;
}

// llama2-7b: 6,738,415,616 parameters, of which 2·32 + 1 RMSNorm scales of 4096.
constexpr int64_t kParams = 6738415616, kNormParams = 65 * 4096;

TEST(LlamaTensorParallelTest, ParametersPerRankAreSplitOverTensorAndFsdp) {
  // Two layers: the whole model's count less 30 layers.
  const int64_t layer = 202383360;
  const int64_t params = kParams - 30 * layer, norms = kNormParams - 30 * 2 * 4096;
  // t = 1, FSDP 2: every fp32 parameter over 2 devices.
  EXPECT_EQ(ParamBytes(Build({})), params * 4 / 2);
  // jax: vocab, heads, kv_heads, mlp and norm all map to the tensor axis
  // (MaxText base.yml logical_axis_rules), embed to fsdp: 1/(2·2) of each.
  EXPECT_EQ(ParamBytes(Build({"parallelism.tensor=2"})), params * 4 / 4);
  EXPECT_EQ(ParamBytes(Build({"parallelism.tensor=2", "parallelism.sequence_parallel=true"})), params * 4 / 4);
  // pytorch (Megatron-LM): the norm scales are replicated over the group.
  EXPECT_EQ(ParamBytes(Build({"framework=pytorch", "parallelism.tensor=2"})),
            (params - norms) * 4 / 4 + norms * 4 / 2);
}

TEST(LlamaTensorParallelTest, GatheredWeightsAreThisRanksColumnsOrRows) {
  const Program p = Build({"parallelism.tensor=2"});
  std::map<std::string, std::vector<int64_t>> shape;
  for (const Tensor& t : p.tensors) shape[t.name] = t.shape;
  // ColumnParallelLinear: the output dim split; RowParallelLinear: the input.
  EXPECT_EQ(shape.at("layer0.wq.gathered"), (std::vector<int64_t>{4096, 2048}));
  EXPECT_EQ(shape.at("layer0.wo.gathered"), (std::vector<int64_t>{2048, 4096}));
  EXPECT_EQ(shape.at("layer0.wi_0.gathered"), (std::vector<int64_t>{4096, 5504}));
  EXPECT_EQ(shape.at("layer0.wo_mlp.gathered"), (std::vector<int64_t>{5504, 4096}));
  EXPECT_EQ(shape.at("logits_dense.gathered"), (std::vector<int64_t>{4096, 16000}));
}

// Per-layer bytes a rank saves for the backward pass with every value saved
// (remat none), flash attention, bf16 activations, in the manner of
// Korthikanti et al. Table 2: the residual-stream values (the two norms'
// inputs x and x1 and the GEMM inputs h1 and h2, 8sbh in all, the paper's
// 10sbh less the two dropout masks) are replicated over the group unless
// the stream is sharded (sequence parallelism, or MaxText's embed-sharded
// stream); q, k, v, the attention output, its log-sum-exp and the three
// SwiGLU activations are split over t.
int64_t LayerActivationBytes(int64_t t, bool stream_sharded) {
  const int64_t s = 4096, b = 1, h = 4096, heads = 32, kv_heads = 32, dh = 128, mlp = 11008;
  const int64_t stream = 4 * 2 * s * b * h / (stream_sharded ? t : 1);
  const int64_t attention = (2 * 2 * s * b * heads * dh + 2 * 2 * s * b * kv_heads * dh + 4 * b * heads * s) / t;
  const int64_t swiglu = 3 * 2 * s * b * mlp / t;
  return stream + attention + swiglu;
}

// The saved set's bytes per layer: what the rolled layer scan stacks per
// layer (jax), or, where layers are not scanned (pytorch, Note [Framework
// semantics] in sim/lower/semantics.h), layer 1's saved values and its
// input, layer 0's output.
int64_t SavedBytesPerLayer(const std::vector<std::string>& sets) {
  std::vector<std::string> all = {"remat.policy=none"};
  all.insert(all.end(), sets.begin(), sets.end());
  const Program p = Build(all);
  int64_t stacked = 0, layer1 = 0;
  for (const Tensor& t : p.tensors) {
    if (t.name.rfind("residual_stack.", 0) == 0 && t.name.rfind("residual_stack.params.", 0) != 0) {
      stacked += t.bytes().value();
    }
    if ((t.name.rfind("layer1.", 0) == 0 && t.role == Role::kResidual) || t.name == "layer0.y") {
      layer1 += t.bytes().value();
    }
  }
  return stacked > 0 ? stacked / 2 : layer1;
}

TEST(LlamaTensorParallelTest, ActivationsPerRankFollowKorthikantiTable2) {
  EXPECT_EQ(SavedBytesPerLayer({}), LayerActivationBytes(1, false));
  // Megatron without SP: the stream is replicated, the rest split.
  EXPECT_EQ(SavedBytesPerLayer({"framework=pytorch", "parallelism.tensor=2"}), LayerActivationBytes(2, false));
  // Megatron with SP: everything split (the paper's sbh/t (34 + 5as/h)).
  EXPECT_EQ(SavedBytesPerLayer({"framework=pytorch", "parallelism.tensor=2", "parallelism.sequence_parallel=true"}),
            LayerActivationBytes(1, false) / 2);
  EXPECT_EQ(LayerActivationBytes(2, true), LayerActivationBytes(1, false) / 2);
  // MaxText: activation_embed -> tensor shards the stream on embed;
  // tensor_sequence shards it on length. Either way 1/t of every value.
  EXPECT_EQ(SavedBytesPerLayer({"parallelism.tensor=2"}), LayerActivationBytes(2, true));
  EXPECT_EQ(SavedBytesPerLayer({"parallelism.tensor=2", "parallelism.sequence_parallel=true"}),
            LayerActivationBytes(2, true));
  EXPECT_EQ(SavedBytesPerLayer({"parallelism.tensor=4"}), LayerActivationBytes(4, true));
}

// Collectives over the tensor-parallel group in the ops named for layer 0,
// by phase and kind (FSDP off, so every collective is a TP one).
std::map<std::string, int> LayerCollectives(const std::vector<std::string>& sets) {
  std::vector<std::string> all = {"remat.policy=none", "parallelism.fsdp=1"};
  all.insert(all.end(), sets.begin(), sets.end());
  const Program p = Build(all);
  std::map<std::string, int> n;
  for (const Op& op : p.ops) {
    if (!IsCollective(op.kind) || op.name.rfind("layer0.", 0) != 0) continue;
    EXPECT_EQ(op.group, 2) << op.name;
    const std::string kind = op.kind == OpKind::kAllReduce       ? "AR"
                             : op.kind == OpKind::kAllGather     ? "AG"
                             : op.kind == OpKind::kReduceScatter ? "RS"
                                                                 : "other";
    ++n[std::string(op.phase == Phase::kForward ? "fwd " : "bwd ") + kind];
  }
  return n;
}

TEST(LlamaTensorParallelTest, CollectivesPerLayer) {
  using Counts = std::map<std::string, int>;
  // Megatron, no SP: g all-reduces after the two row-parallel GEMMs, f
  // all-reduces the two column-parallel input gradients.
  EXPECT_EQ(LayerCollectives({"framework=pytorch", "parallelism.tensor=2"}), (Counts{{"fwd AR", 2}, {"bwd AR", 2}}));
  // Megatron SP: all-gather / reduce-scatter pairs, the backward's gathers
  // of dy and of the saved inputs for dW, and the norm-scale all-reduces.
  EXPECT_EQ(LayerCollectives({"framework=pytorch", "parallelism.tensor=2", "parallelism.sequence_parallel=true"}),
            (Counts{{"fwd AG", 2}, {"fwd RS", 2}, {"bwd AG", 4}, {"bwd RS", 2}, {"bwd AR", 2}}));
  // MaxText, embed-sharded stream: the RMSNorm statistics are all-reduced
  // as well.
  EXPECT_EQ(LayerCollectives({"parallelism.tensor=2"}),
            (Counts{{"fwd AR", 2}, {"fwd AG", 2}, {"fwd RS", 2}, {"bwd AR", 2}, {"bwd AG", 4}, {"bwd RS", 2}}));
  // MaxText tensor_sequence: the norm scales are gathered for use and their
  // gradients reduce-scattered.
  EXPECT_EQ(LayerCollectives({"parallelism.tensor=2", "parallelism.sequence_parallel=true"}),
            (Counts{{"fwd AG", 4}, {"fwd RS", 2}, {"bwd AG", 6}, {"bwd RS", 4}}));
  EXPECT_TRUE(LayerCollectives({}).empty());
}

TEST(LlamaTensorParallelTest, TensorAndSequenceParallelismChangeTheStep) {
  auto base = SimulateStep(Spec({}));
  auto tp = SimulateStep(Spec({"parallelism.tensor=2"}));
  auto sp = SimulateStep(Spec({"parallelism.tensor=2", "parallelism.sequence_parallel=true"}));
  ASSERT_TRUE(base.ok() && tp.ok() && sp.ok()) << base.status() << tp.status() << sp.status();
  EXPECT_LT(tp->temp, base->temp);
  EXPECT_LT(tp->argument, base->argument);
  // Half the FSDP weight gathers per rank, plus the layer's TP collectives.
  EXPECT_NE(tp->sim.collective_busy, base->sim.collective_busy);
  EXPECT_NE(tp->sim.step_time, base->sim.step_time);
  EXPECT_LT(tp->sim.model_flops, base->sim.model_flops);
  // A group of 2 devices shares one replica's 4096 tokens.
  EXPECT_EQ(tp->tokens_per_step, 2048);
  EXPECT_NE(sp->sim.step_time, tp->sim.step_time);
}

TEST(LlamaTensorParallelTest, RefusesWhatItCannotSplit) {
  auto sp1 = BuildModelProgram(Spec({"parallelism.sequence_parallel=true"}));
  ASSERT_FALSE(sp1.ok());
  EXPECT_EQ(sp1.status().message().rfind("--set parallelism.sequence_parallel=true: parallelism.sequence_parallel: "
                                         "true needs parallelism.tensor > 1",
                                         0),
            0u)
      << sp1.status();
  auto t3 = BuildModelProgram(Spec({"parallelism.tensor=3"}));
  ASSERT_FALSE(t3.ok());
  EXPECT_EQ(t3.status().message().rfind("--set parallelism.tensor=3: parallelism.tensor: 3 must divide", 0), 0u)
      << t3.status();
}

}  // namespace
}  // namespace gpusim::llama_tp_test
