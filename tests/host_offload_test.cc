// Host offload of remat residuals (Note [Host offload] in models/llama.cc):
// pinned-host byte accounting, PCIe copy time on a hand-computed case, device
// memory below the non-offloaded equivalent, and the offloading / combining
// policies' rules (jax/_src/ad_checkpoint.py).
#include <set>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "models/gpt.h"
#include "models/llama.h"
#include "sim/config/loader.h"
#include "sim/lower/lower.h"
#include "sim/step/step.h"
#include "sim/step/model_program.h"

namespace gpusim::host_offload_test {
namespace {

// A small Llama: D 256, 4 heads of 64, MLP 512, 3 layers, 2 x 128 tokens,
// one device, param_scan_axis 0; PCIe at exactly 1 byte/ns and no launch
// overhead so copy times are byte counts.
constexpr int64_t kB = 2, kS = 128, kD = 256, kM = 512, kL = 3;

std::vector<std::string> Small(std::vector<std::string> extra) {
  std::vector<std::string> o = {"model.d_model=256",        "model.n_heads=4",         "model.n_kv_heads=4",
                                "model.head_dim=64",        "model.mlp_dim=512",       "model.n_layers=3",
                                "model.vocab=1000",         "model.param_scan_axis=0", "parallelism.fsdp=1",
                                "batch.per_device=2",       "batch.seq_len=128",       "device.links.pcie=1GB/s",
                                "device.launch_overhead=0us"};
  o.insert(o.end(), extra.begin(), extra.end());
  return o;
}

RunSpec Spec(const std::vector<std::string>& sets) {
  auto spec = LoadRunSpec(GPUSIM_SOURCE_DIR "/configs/llama7b.yaml", Small(sets));
  EXPECT_TRUE(spec.ok()) << spec.status();
  return *spec;
}

StepReport Simulate(const std::vector<std::string>& sets) {
  auto r = SimulateStep(Spec(sets));
  EXPECT_TRUE(r.ok()) << r.status();
  return *r;
}

// Names of the host-memory residuals (stacks when rolled).
std::set<std::string> HostNames(const Program& p) {
  std::set<std::string> out;
  for (const Tensor& t : p.tensors) {
    if (!t.host) continue;
    const size_t dot = t.name.rfind('.');
    out.insert(t.name.substr(dot + 1));
  }
  return out;
}

// Per-layer bytes of every dot output without batch dims that the backward
// pass needs: q and k before RoPE, v, out_proj, mlpwi_0, mlpwi_1 (bf16).
constexpr int64_t kMinimalOffloadPerLayer = kB * kS * (kD + kD + kD + kD + kM + kM) * 2;

TEST(HostOffloadTest, HostBytesAreTheOffloadedResidualsTimesTripCount) {
  for (const char* mode : {"rolled", "unrolled"}) {
    SCOPED_TRACE(mode);
    const StepReport r = Simulate({"remat.policy=minimal_offloaded", std::string("loop.mode=") + mode});
    EXPECT_EQ(HostNames(r.program),
              (std::set<std::string>{"q_lin", "k_lin", "value_proj", "out_proj", "mlpwi_0", "mlpwi_1"}));
    EXPECT_EQ(r.lowered.host_bytes.value(), kL * kMinimalOffloadPerLayer);
    // Every byte goes out once and comes back once.
    EXPECT_EQ(r.sim.bytes_to_host.value(), kL * kMinimalOffloadPerLayer);
    EXPECT_EQ(r.sim.bytes_to_device.value(), kL * kMinimalOffloadPerLayer);
    // No device buffer is a host tensor.
    for (const BufferInfo& b : r.lowered.buffers) EXPECT_EQ(b.name.rfind("host", 0), std::string::npos) << b.name;
  }
  // The offloaded set is exactly what `minimal` saves on the device.
  const StepReport minimal = Simulate({"remat.policy=minimal"});
  EXPECT_EQ(minimal.lowered.host_bytes.value(), 0);
  Bytes stacks(0);
  for (const Tensor& t : minimal.program.tensors) {
    if (t.name.rfind("residual_stack.", 0) == 0 && t.name.rfind("residual_stack.params.", 0) != 0 &&
        t.name != "residual_stack.x") {
      stacks += t.bytes();
    }
  }
  EXPECT_EQ(stacks.value(), kL * kMinimalOffloadPerLayer);
}

TEST(HostOffloadTest, CopyTimeIsBytesOverPcie) {
  // qkv_proj_offloaded: query_proj, key_proj, value_proj, each [2,128,4,64]
  // bf16 = 131,072 B per layer, 3 layers; at 1 byte/ns with no launch
  // overhead each copy takes its byte count in ns.
  const StepReport r = Simulate({"remat.policy=qkv_proj_offloaded"});
  const int64_t per_copy = kB * kS * 4 * 64 * 2;
  EXPECT_EQ(per_copy, 131072);
  EXPECT_EQ(r.lowered.host_bytes.value(), 3 * kL * per_copy);
  EXPECT_EQ(r.sim.copy_to_host.ns(), 3 * kL * per_copy);
  EXPECT_EQ(r.sim.copy_to_device.ns(), 3 * kL * per_copy);
  EXPECT_EQ(r.sim.copy_busy.ns(), 2 * 3 * kL * per_copy);
  EXPECT_LE(r.sim.exposed_copy, r.sim.copy_busy);
  // A forward iteration ends when its copies to host are done: the head's
  // first kernel starts after the last layer's last copy ends.
  const Trace& tr = r.lowered.trace;
  SimTime last_d2h(0), head_start(-1), first_h2d_start(-1);
  for (size_t i = 0; i < tr.events.size(); ++i) {
    const TraceEvent& e = tr.events[i];
    if (e.type == EventType::kCopy && e.kind == OpKind::kDeviceToHost) last_d2h = Max(last_d2h, r.sim.end[i]);
    if (e.name == "final_norm" && e.type == EventType::kCompute) head_start = r.sim.start[i];
    if (e.type == EventType::kCopy && e.kind == OpKind::kHostToDevice && first_h2d_start.ns() < 0) {
      first_h2d_start = r.sim.start[i];
    }
  }
  ASSERT_GE(head_start.ns(), 0);
  EXPECT_GE(head_start, last_d2h);
  // Copies back are issued at the start of their backward iteration, not
  // prefetched during the forward pass.
  EXPECT_GT(first_h2d_start, head_start);
}

TEST(HostOffloadTest, DeviceMemoryBelowTheSavedEquivalent) {
  // Many tokens, so residual stacks dominate the temp heap.
  const std::vector<std::string> big = {"batch.per_device=16", "model.n_layers=4"};
  auto with = [&](const char* policy) {
    std::vector<std::string> s = big;
    s.push_back(std::string("remat.policy=") + policy);
    return Simulate(s);
  };
  const StepReport saved = with("save_qkv_proj"), offloaded = with("qkv_proj_offloaded");
  const StepReport minimal = with("minimal"), minimal_off = with("minimal_offloaded");
  EXPECT_LT(offloaded.temp, saved.temp);
  EXPECT_LT(offloaded.peak, saved.peak);
  EXPECT_LT(minimal_off.temp, minimal.temp);
  // What left the device is on the host: the difference in residual stacks.
  EXPECT_EQ(offloaded.lowered.host_bytes.value(), 4 * 16 * kS * 3 * kD * 2);
  // Offloading trades recompute for PCIe time.
  EXPECT_LT(minimal_off.sim.recompute_busy, with("full").sim.recompute_busy);
  EXPECT_GT(minimal_off.sim.copy_busy.ns(), 0);
}

std::set<std::string> DeviceSaved(const Program& p) {
  std::set<std::string> out;
  const std::string prefix = "residual_stack.";
  for (const Tensor& t : p.tensors) {
    if (t.name.rfind(prefix, 0) == 0 && t.name.rfind("residual_stack.params.", 0) != 0) {
      out.insert(t.name.substr(prefix.size()));
    }
  }
  return out;
}

TEST(HostOffloadTest, SaveAndOffloadOnlyTheseNames) {
  for (const char* policy : {"save_and_offload_only_these_names", "custom"}) {
    SCOPED_TRACE(policy);
    auto p = BuildModelProgram(Spec({std::string("remat.policy=") + policy, "remat.names=[query_proj]",
                                       "remat.offload_names=[key_proj, value_proj]"}));
    ASSERT_TRUE(p.ok()) << p.status();
    EXPECT_EQ(DeviceSaved(*p), (std::set<std::string>{"x", "query_proj"}));
    EXPECT_EQ(HostNames(*p), (std::set<std::string>{"key_proj", "value_proj"}));
  }
  // ad_checkpoint.py: the two name sets must not intersect.
  auto bad = BuildModelProgram(Spec({"remat.policy=save_and_offload_only_these_names", "remat.names=[key_proj]",
                                       "remat.offload_names=[key_proj]"}));
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(HostOffloadTest, SaveFromBothPolicies) {
  auto both = BuildModelProgram(Spec({"remat.policy=save_from_both_policies",
                                        "remat.policies=[dots_with_no_batch_dims_saveable, save_only_these_names]",
                                        "remat.names=[context]"}));
  ASSERT_TRUE(both.ok()) << both.status();
  auto flash = BuildModelProgram(Spec({"remat.policy=minimal_flash"}));
  ASSERT_TRUE(flash.ok()) << flash.status();
  // minimal's saved set plus the attention output (tagged `context`).
  EXPECT_EQ(DeviceSaved(*both), (std::set<std::string>{"x", "q_lin", "k_lin", "value_proj", "attn_out", "attn_lse",
                                                        "out_proj", "mlpwi_0", "mlpwi_1"}));
  EXPECT_EQ(DeviceSaved(*both), DeviceSaved(*flash));
  // Only boolean policies combine (JAX raises ValueError otherwise).
  for (const char* bad : {"[minimal_offloaded, dots_saveable]", "[dots_saveable]", "[nope, dots_saveable]"}) {
    auto p = BuildModelProgram(Spec({"remat.policy=save_from_both_policies", std::string("remat.policies=") + bad}));
    EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument) << bad;
  }
}

// PyTorch (gpt family): torch.autograd.graph.save_on_cpu copies on the
// current stream, so nothing overlaps them.
TEST(HostOffloadTest, EagerOffloadCopiesOnTheComputeStream) {
  auto spec = LoadRunSpec(GPUSIM_SOURCE_DIR "/examples/gpt22b_korthikanti.yaml",
                          {"model.n_layers=2", "model.d_model=512", "model.n_heads=8", "model.head_dim=64",
                           "model.mlp_dim=2048", "model.vocab=1024", "batch.seq_len=256", "batch.per_device=1",
                           "remat.policy=save_and_offload_only_these_names", "remat.offload_names=[qkv]"});
  ASSERT_TRUE(spec.ok()) << spec.status();
  auto r = SimulateStep(*spec);
  ASSERT_TRUE(r.ok()) << r.status();
  // qkv [s, b, 3h/t] bf16 per layer.
  EXPECT_EQ(r->lowered.host_bytes.value(), 2 * 256 * 1 * 3 * 512 / 8 * 2);
  EXPECT_GT(r->sim.copy_busy.ns(), 0);
  EXPECT_EQ(r->sim.exposed_copy, r->sim.copy_busy);
  // The offloaded value is no longer a device residual of the layer.
  auto saved = LoadRunSpec(GPUSIM_SOURCE_DIR "/examples/gpt22b_korthikanti.yaml",
                           {"model.n_layers=2", "model.d_model=512", "model.n_heads=8", "model.head_dim=64",
                            "model.mlp_dim=2048", "model.vocab=1024", "batch.seq_len=256", "batch.per_device=1",
                            "remat.policy=none"});
  ASSERT_TRUE(saved.ok());
  auto ps = BuildModelProgram(*saved);
  ASSERT_TRUE(ps.ok());
  EXPECT_LT(GptLayerActivationBytes(r->program, 1), GptLayerActivationBytes(*ps, 1));
}

}  // namespace
}  // namespace gpusim::host_offload_test
