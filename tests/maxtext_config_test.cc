// MaxText configs (sim/config/maxtext.h): a `maxtext:` block lowers to the
// gpusim keys of the same step, every base.yml key is modelled, declared
// without effect or refused by name, and the report's MaxText TFLOP figure
// is MaxText's formula.
#include "sim/config/maxtext.h"

#include <filesystem>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "sim/config/loader.h"
#include "sim/config/maxtext_keys.h"
#include "sim/step/step.h"

namespace gpusim::maxtext_config_test {
namespace {

namespace fs = std::filesystem;

const char kSeed[] = R"(device: h100-sxm-80gb
maxtext:
  model_name: llama2-7b
  per_device_batch_size: 1
  max_target_length: 4096
  remat_policy: minimal_flash
  attention: cudnn_flash_te
  param_scan_axis: 1
  ici_fsdp_parallelism: 2
parallelism: {gather_dtype: compute}
allocator: {impl: ideal}
)";

absl::StatusOr<RunSpec> Parse(const std::string& yaml, const std::vector<std::string>& set = {}) {
  return ParseRunSpec(yaml, GPUSIM_SOURCE_DIR "/configs/maxtext_test.yaml", set);
}

// The error of a block with `extra` lines added under `maxtext:`.
std::string ErrorWith(const std::string& extra, const std::vector<std::string>& set = {}) {
  std::string yaml = kSeed;
  yaml.insert(yaml.find("  model_name"), extra);
  auto s = Parse(yaml, set);
  return s.ok() ? "ok" : std::string(s.status().message());
}

TEST(MaxTextConfig, SeedBlockIsConfigsLlama7b) {
  auto mx = Parse(kSeed);
  ASSERT_TRUE(mx.ok()) << mx.status();
  auto native = LoadRunSpec(GPUSIM_SOURCE_DIR "/configs/llama7b.yaml", {});
  ASSERT_TRUE(native.ok()) << native.status();
  for (const char* axis : {"0", "1"}) {
    SCOPED_TRACE(axis);
    auto a = Parse(kSeed, {absl::StrCat("maxtext.param_scan_axis=", axis)});
    auto b = LoadRunSpec(GPUSIM_SOURCE_DIR "/configs/llama7b.yaml", {absl::StrCat("model.param_scan_axis=", axis)});
    ASSERT_TRUE(a.ok() && b.ok());
    auto ra = SimulateStep(*a);
    auto rb = SimulateStep(*b);
    ASSERT_TRUE(ra.ok() && rb.ok());
    EXPECT_EQ(ra->argument, rb->argument);
    EXPECT_EQ(ra->output, rb->output);
    EXPECT_EQ(ra->alias, rb->alias);
    EXPECT_EQ(ra->temp, rb->temp);
    EXPECT_EQ(ra->peak, rb->peak);
    EXPECT_EQ(ra->sim.step_time, rb->sim.step_time);
  }
  EXPECT_EQ(mx->model.d_model, 4096);
  EXPECT_EQ(mx->model.mlp_dim, 11008);
  EXPECT_EQ(mx->remat.policy, "minimal_flash");
  EXPECT_EQ(mx->parallelism.fsdp, 2);
  EXPECT_TRUE(mx->optimizer.clip_grad_norm);  // gradient_clipping_threshold 1.0
  EXPECT_EQ(mx->model.logits_dtype, DType::kF32);
  EXPECT_EQ(mx->loop.mode, "rolled");
}

// calculate_tflops_training_per_device at 4bf3beaa, by hand for Llama2-7B,
// B = 1, S = 4096: FFN 2·S·M·D·3, QKV 2·S·D·96·128, attention 4·S²·32·128,
// projection 2·S·D², embedding 2·S·D·V.
TEST(MaxTextConfig, TflopsAreMaxTextsFormula) {
  auto s = Parse(kSeed);
  ASSERT_TRUE(s.ok()) << s.status();
  const double S = 4096, D = 4096, M = 11008, V = 32000;
  const double ffn = 2 * S * M * D * 3, qkv = 2 * S * D * 96 * 128, att = 4 * S * S * 32 * 128;
  const double proj = 2 * S * D * D, emb = 2 * S * D * V;
  const double learnable = ((ffn + qkv + proj) * 32 + emb) * 3 / 1e12, attention = att * 32 * 3 / 1e12;
  EXPECT_DOUBLE_EQ(s->maxtext.learnable_weight_tflops, learnable);
  EXPECT_DOUBLE_EQ(s->maxtext.attention_tflops, attention);
  EXPECT_NEAR(s->maxtext.tflops_per_device_step, 188.764, 0.001);
  EXPECT_EQ(s->maxtext.tokens_per_device_step, 4096);
  EXPECT_EQ(s->maxtext.commit, "4bf3beaa");
  // Linear in the batch: the formula's figure for per_device_batch_size 2.
  auto b2 = Parse(kSeed, {"maxtext.per_device_batch_size=2"});
  ASSERT_TRUE(b2.ok());
  EXPECT_DOUBLE_EQ(b2->maxtext.tflops_per_device_step, 2 * s->maxtext.tflops_per_device_step);
}

// Note [MaxText tensor parallelism]: the mesh's tensor axis is the llama
// family's tensor group; a group of t devices shares one replica's batch of
// per_device_batch_size x t sequences.
TEST(MaxTextConfig, IciTensorParallelismIsLlamaTensorParallelism) {
  auto mx = Parse(kSeed, {"maxtext.ici_tensor_parallelism=4"});
  ASSERT_TRUE(mx.ok()) << mx.status();
  EXPECT_EQ(mx->parallelism.tensor, 4);
  EXPECT_FALSE(mx->parallelism.sequence_parallel);
  EXPECT_EQ(mx->batch.per_device, 4);
  auto native = LoadRunSpec(GPUSIM_SOURCE_DIR "/configs/llama7b.yaml",
                            {"parallelism.tensor=4", "batch.per_device=4"});
  ASSERT_TRUE(native.ok()) << native.status();
  auto ra = SimulateStep(*mx);
  auto rb = SimulateStep(*native);
  ASSERT_TRUE(ra.ok() && rb.ok()) << ra.status() << rb.status();
  EXPECT_EQ(ra->argument, rb->argument);
  EXPECT_EQ(ra->temp, rb->temp);
  EXPECT_EQ(ra->peak, rb->peak);
  // MaxText's per-device figure does not change with the mesh.
  auto base = Parse(kSeed);
  ASSERT_TRUE(base.ok());
  EXPECT_DOUBLE_EQ(mx->maxtext.tflops_per_device_step, base->maxtext.tflops_per_device_step);
  auto sq = Parse(kSeed, {"maxtext.ici_tensor_sequence_parallelism=2"});
  ASSERT_TRUE(sq.ok()) << sq.status();
  EXPECT_EQ(sq->parallelism.tensor, 2);
  EXPECT_TRUE(sq->parallelism.sequence_parallel);
  // A split that does not divide the heads is refused at the maxtext key.
  auto three = Parse(kSeed, {"maxtext.ici_tensor_parallelism=3"});
  ASSERT_TRUE(three.ok()) << three.status();
  auto bad = SimulateStep(*three);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("must divide model.n_heads"), std::string::npos) << bad.status();
}

TEST(MaxTextConfig, ModelShapesFromMaxTextModelFiles) {
  auto s = Parse(kSeed, {"maxtext.model_name=llama3-8b"});
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->model.n_kv_heads, 8);
  EXPECT_EQ(s->model.mlp_dim, 14336);
  EXPECT_EQ(s->model.vocab, 128256);
  auto m = Parse(kSeed, {"maxtext.model_name=mistral-7b"});
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->model.n_kv_heads, 8);
  EXPECT_EQ(m->model.vocab, 32000);
  // model_name default: base.yml's base_* keys, scaled by global_parameter_scale
  // (pyconfig.get_individual_scales: 8 = 2^3 doubles heads/MLP, embedding, layers).
  auto d = Parse(kSeed, {"maxtext.model_name=default", "maxtext.global_parameter_scale=8"});
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->model.d_model, 4096);
  EXPECT_EQ(d->model.n_heads, 32);
  EXPECT_EQ(d->model.mlp_dim, 14336);
  EXPECT_EQ(d->model.n_layers, 32);
}

TEST(MaxTextConfig, KeysRefusedByName) {
  EXPECT_NE(ErrorWith("  base_emb_dim: 1024\n").find("maxtext.base_emb_dim: also set by model_name llama2-7b"),
            std::string::npos);
  EXPECT_NE(ErrorWith("", {"maxtext.model_name=mixtral-8x7b"}).find("maxtext.megablox: true with sparse_matmul true"),
            std::string::npos);
  EXPECT_NE(ErrorWith("", {"maxtext.model_name=gemma-7b"}).find("its decoder block is not modelled"),
            std::string::npos);
  EXPECT_NE(ErrorWith("  gradient_accumulation_steps: 4\n").find("gradient accumulation"), std::string::npos);
  EXPECT_NE(ErrorWith("  ici_data_parallelism: 2\n").find("maxtext.ici_data_parallelism: '2' is not modelled"),
            std::string::npos);
  EXPECT_NE(ErrorWith("  ici_tensor_parallelism: 2\n  ici_tensor_sequence_parallelism: 2\n")
                .find("two tensor axes of one mesh"),
            std::string::npos);
  EXPECT_NE(ErrorWith("", {"maxtext.attention=flash"}).find("Pallas"), std::string::npos);
  EXPECT_NE(ErrorWith("", {"maxtext.ici_fsdp_parallelism=-1"}).find("needs the number of devices"),
            std::string::npos);
  EXPECT_NE(ErrorWith("", {"maxtext.per_device_batch_size=0.5"}).find("fractional"), std::string::npos);
  // Magnitudes a config can write are refused, not overflowed (issue 17).
  EXPECT_NE(ErrorWith("", {"maxtext.per_device_batch_size=1e300"}).find("per_device_batch_size"), std::string::npos);
  EXPECT_NE(ErrorWith("", {"maxtext.model_name=default", "maxtext.global_parameter_scale=1099511627776"})
                .find("at most 2^30"),
            std::string::npos);
  EXPECT_NE(ErrorWith("", {"maxtext.model_name=default", "maxtext.base_emb_dim=999999999999999"}).find("model:"),
            std::string::npos);
  EXPECT_NE(ErrorWith("", {"maxtext.num_slices=1e300"}).find("maxtext.num_slices"), std::string::npos);
  EXPECT_NE(ErrorWith("  remat_polcy: full\n").find("unknown key 'remat_polcy' (did you mean 'remat_policy'?)"),
            std::string::npos);
  EXPECT_NE(ErrorWith("  opt_type: adam_pax\n").find("maxtext.opt_type: 'adam_pax' is not modelled"),
            std::string::npos);
  // Where it was written: the line of the key.
  EXPECT_NE(ErrorWith("  use_iota_embed: true\n").find("maxtext_test.yaml:3:"), std::string::npos)
      << ErrorWith("  use_iota_embed: true\n");
  // gpusim keys the block sets are refused beside it.
  auto both = Parse(std::string(kSeed) + "batch: {per_device: 2}\n");
  ASSERT_FALSE(both.ok());
  EXPECT_NE(both.status().message().find("batch: set by the maxtext block; write per_device_batch_size"),
            std::string::npos)
      << both.status();
}

TEST(MaxTextConfig, KeysWithoutEffectAreAcceptedAndListed) {
  auto s = Parse(kSeed, {"maxtext.steps=10", "maxtext.dataset_type=synthetic", "maxtext.learning_rate=1e-4"});
  ASSERT_TRUE(s.ok()) << s.status();
  // In base.yml order.
  EXPECT_EQ(s->maxtext.no_effect, (std::vector<std::string>{"dataset_type", "steps", "learning_rate"}));
  // A default-only key written at its default is accepted.
  EXPECT_EQ(ErrorWith("  gradient_accumulation_steps: 1\n  quantization: ''\n"), "ok");
}

TEST(MaxTextConfig, CustomRematTags) {
  auto s = Parse(kSeed, {"maxtext.remat_policy=custom", "maxtext.query_proj=device", "maxtext.mlpwo=offload"});
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->remat.policy, "custom");
  EXPECT_EQ(s->remat.names, (std::vector<std::string>{"query_proj"}));
  EXPECT_EQ(s->remat.offload_names, (std::vector<std::string>{"mlpwo"}));
  EXPECT_NE(ErrorWith("", {"maxtext.decoder_layer_input=remat"}).find("scan carry"), std::string::npos);
}

TEST(MaxTextConfig, EveryBaseYmlKeyHasAKind) {
  const auto& table = internal::MaxTextKeyTable();
  EXPECT_EQ(table.size(), 289u);  // top-level keys of base.yml at 4bf3beaa
  for (const internal::MaxTextKey& k : table) {
    if (k.kind == internal::MaxTextKeyKind::kNoEffect) {
      ASSERT_GE(k.reason, 0) << k.key;
      ASSERT_LT(k.reason, static_cast<int>(internal::MaxTextNoEffectReasons().size())) << k.key;
    }
  }
}

TEST(MaxTextConfig, ExamplesRun) {
  for (const fs::directory_entry& e : fs::directory_iterator(GPUSIM_SOURCE_DIR "/examples/maxtext")) {
    SCOPED_TRACE(e.path().string());
    auto s = LoadRunSpec(e.path().string(), {});
    ASSERT_TRUE(s.ok()) << s.status();
    EXPECT_TRUE(s->maxtext.present);
    auto r = SimulateStep(*s);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_GT(r->sim.step_time.seconds(), 0);
  }
}

}  // namespace
}  // namespace gpusim::maxtext_config_test
