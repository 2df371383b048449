// The capability contract: settings a family does not model are refused
// where they were written; unwritten ones take the family's behaviour.
#include "sim/step/capabilities.h"

#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "sim/config/loader.h"
#include "sim/step/families.h"

namespace gpusim::capabilities_test {
namespace {

constexpr char kLlama[] =
    "framework: jax\n"
    "device: h100-sxm-80gb\n"
    "model: llama2-7b\n"
    "parallelism:\n"
    "  fsdp: 2\n";

std::string Refusal(const std::string& yaml, const std::vector<std::string>& sets = {}) {
  absl::StatusOr<RunSpec> spec = ParseRunSpec(yaml, "run.yaml", sets);
  if (!spec.ok()) return "parse: " + std::string(spec.status().message());
  absl::StatusOr<RunSpec> out = ApplyCapabilities(*spec);
  return out.ok() ? "" : std::string(out.status().message());
}

TEST(CapabilitiesTest, WrittenUnmodelledSettingNamesFileLineAndFamily) {
  const std::string msg = Refusal(std::string(kLlama) + "loop:\n  unroll: 2\n");
  EXPECT_EQ(msg.rfind("run.yaml:7:11: loop.unroll: not modelled for model family 'llama' under framework "
                      "'jax' (this family models: framework, model.d_model",
                      0),
            0u)
      << msg;
}

TEST(CapabilitiesTest, SetIsRefusedByItsFlag) {
  for (const char* set : {"loop.unroll=2", "loop.trip_count=16", "remat.method=block", "remat.num_layers=3"}) {
    const std::string msg = Refusal(kLlama, {set});
    const std::string key = std::string(set).substr(0, std::string(set).find('='));
    EXPECT_EQ(msg.rfind(std::string("--set ") + set + ": " + key + ": not modelled for model family 'llama'", 0), 0u)
        << msg;
  }
}

TEST(CapabilitiesTest, DefaultValuesWrittenOutAreAccepted) {
  EXPECT_EQ(Refusal(std::string(kLlama) + "  tensor: 1\nloop:\n  unroll: 1\n"), "");
}

TEST(CapabilitiesTest, GptRefusesWhatItDoesNotModelAndRunsAsItsFixedValues) {
  const std::string gpt = "framework: pytorch\ndevice: a100-sxm-80gb\nmodel: gpt-22b\n";
  EXPECT_NE(Refusal(gpt, {"parallelism.fsdp=8"}).find("parallelism.fsdp: not modelled for model family 'gpt'"),
            std::string::npos);
  EXPECT_EQ(Refusal(gpt, {"model.attention=flash"}), "");  // modelled (models/gpt_layer.cc)
  EXPECT_EQ(Refusal(gpt, {"model.tied_embeddings=false", "model.n_kv_heads=8"}), "");
  EXPECT_NE(Refusal(gpt, {"loop.mode=rolled"}).find("loop.mode: not modelled"), std::string::npos);
  absl::StatusOr<RunSpec> spec = ParseRunSpec(gpt, "run.yaml");
  ASSERT_TRUE(spec.ok());
  absl::StatusOr<RunSpec> out = ApplyCapabilities(*spec);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->loop.mode, "unrolled");  // not written: what gpt does
  EXPECT_EQ(out->model.attention, "explicit");  // configs/models/gpt-22b.yaml's
}

TEST(CapabilitiesTest, GptRunsExplicitAttentionUnlessItsConfigSaysFlash) {
  // An inline gpt model with no attention: key runs the family's default
  // (ModelFamily::fixed), not the spec's flash.
  const std::string gpt =
      "framework: pytorch\ndevice: a100-sxm-80gb\nmodel:\n  family: gpt\n  n_layers: 2\n  d_model: 256\n"
      "  n_heads: 4\n  head_dim: 64\n  mlp_dim: 1024\n  vocab: 1000\n";
  for (const auto& [sets, want] : std::vector<std::pair<std::vector<std::string>, std::string>>{
           {{}, "explicit"}, {{"model.attention=flash"}, "flash"}, {{"model.attention=explicit"}, "explicit"}}) {
    absl::StatusOr<RunSpec> spec = ParseRunSpec(gpt, "run.yaml", sets);
    ASSERT_TRUE(spec.ok()) << spec.status();
    absl::StatusOr<RunSpec> out = ApplyCapabilities(*spec);
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_EQ(out->model.attention, want);
  }
}

TEST(CapabilitiesTest, MegatronRefusesModelAttentionItsLaunchLineDecides) {
  const std::string mg =
      "framework: pytorch\ndevice: h100-sxm-80gb\nmegatron:\n  world_size: 1\n  args: \"--num-layers 2 "
      "--hidden-size 64 --num-attention-heads 2 --seq-length 32 --micro-batch-size 1 --tokenizer-type "
      "NullTokenizer --vocab-size 100 --bf16 --global-batch-size 1\"\n";
  EXPECT_EQ(Refusal(mg), "");
  EXPECT_NE(Refusal(mg, {"model.attention=explicit"}), "");
  for (const RegistryEntry& e : ListModelFamilies()) {
    if (e.name != "megatron") continue;
    for (const auto& p : e.params) EXPECT_NE(p.name, "model.attention");
    return;
  }
  ADD_FAILURE() << "no megatron family";
}

TEST(CapabilitiesTest, JaxStepRefusesARuntimeAllocatorJaxDoesNotRun) {
  EXPECT_NE(Refusal(kLlama, {"allocator.impl=pytorch_caching"})
                .find("allocator.impl: 'pytorch_caching' not modelled for model family 'llama' under framework 'jax'"),
            std::string::npos);
  EXPECT_EQ(Refusal(kLlama, {"allocator.impl=bfc", "allocator.mem_fraction=0.9"}), "");
  EXPECT_NE(Refusal(kLlama, {"allocator.mem_fraction=0.9"}).find("allocator 'ideal' takes no options"),
            std::string::npos);
  EXPECT_EQ(Refusal(kLlama, {"framework=pytorch", "allocator.impl=pytorch_caching"}), "");
}

}  // namespace
}  // namespace gpusim::capabilities_test
