#include "sim/lower/eager/device_memory_sdpa.h"

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "sim/config/loader.h"
#include "sim/lower/eager/device_memory.h"

namespace gpusim::device_memory_sdpa_test {
namespace {

DeviceSpec Device(const std::string& name) {
  absl::StatusOr<DeviceSpec> d = LoadDeviceSpec(name, "");
  EXPECT_TRUE(d.ok()) << d.status();
  return *d;
}

// The 17 facts of one call: bf16 unless `elem` says otherwise, backend codes
// for 7.x, 8.0, 9.0, 10.0 as torch 2.11 chose them for the H200 probes
// (efficient on 7.x, flash on 8.0, cuDNN on 9.0 and 10.0), cuDNN 9.19.
std::vector<int64_t> Facts(int64_t b, int64_t hq, int64_t hkv, int64_t sq, int64_t skv, int64_t d, int64_t elem = 2,
                           int64_t dropout_ppm = 0) {
  return {b, hq, hkv, sq, skv, d, d, elem, 1, dropout_ppm, 1, 0, 2, 1, 3, 3, 91900};
}

SdpaFacts Parsed(const std::vector<int64_t>& dims) {
  absl::StatusOr<SdpaFacts> f = ParseSdpaFacts(dims);
  EXPECT_TRUE(f.ok()) << f.status();
  return f.ok() ? *f : SdpaFacts{};
}

// The steps as the caching allocator's history shows them: "+SIZE" for an
// alloc, "-SIZE" for a free, "kernel" between before and after.
std::vector<std::string> History(const OpTemporaries& t) {
  std::vector<std::string> out;
  std::map<int, int64_t> sizes;
  auto add = [&](const std::vector<TempStep>& steps) {
    for (const TempStep& s : steps) {
      if (s.alloc) sizes[s.slot] = s.size.value();
      out.push_back(absl::StrCat(s.alloc ? "+" : "-", sizes[s.slot]));
    }
  };
  add(t.before);
  out.push_back("kernel");
  add(t.after);
  return out;
}

std::vector<std::string> Steps(SdpaBackend backend, bool backward, const std::vector<int64_t>& dims,
                               const std::string& device = "h200-sxm-141gb", bool deterministic = false) {
  return History(SdpaWorkspaces(Parsed(dims), backward, backend, Device(device), deterministic));
}

using V = std::vector<std::string>;

// The ops of the fused SDPA events, in order: a re-targeted or forced event
// is named for the backend that runs, whose kernels the kernel model times
// (sim/device/impl/attention.h).
V SdpaOps(const Trace& t) {
  V out;
  for (const TraceEvent& e : t.events) {
    if (e.op.starts_with("_scaled_dot_product_")) out.push_back(e.op);
  }
  return out;
}

// validation/h200_2026-12-04/probes.json (main branch), key "sdpa": the
// caching allocator's alloc/free_completed entries of each forced or default
// cuDNN call (H200, torch 2.11.0+cu130, cuDNN 9.19) after the op's results.
TEST(SdpaWorkspace, CudnnMatchesTheH200Probes) {
  const SdpaBackend c = SdpaBackend::kCudnn;
  struct Case {
    int64_t hkv, sq, skv, d, backward_bytes;
  };
  const Case cases[] = {
      {8, 256, 256, 32, 540928},   {8, 256, 256, 64, 1065216},   {8, 256, 256, 80, 1327360},
      {8, 256, 256, 96, 1589504},  {8, 256, 256, 128, 2113792},  {8, 256, 256, 192, 3162368},
      {8, 256, 256, 256, 4210944}, {8, 127, 127, 64, 528576},    {8, 1, 256, 64, 4416},
      {8, 128, 256, 64, 532736},   {8, 2048, 2048, 64, 8519936}, {8, 1000, 1000, 128, 8256256},
      {2, 256, 256, 64, 2113792},  {1, 256, 256, 64, 2113792},   {2, 256, 256, 128, 4210944},
  };
  for (const Case& k : cases) {
    const std::vector<int64_t> f = Facts(2, 8, k.hkv, k.sq, k.skv, k.d);
    SCOPED_TRACE(absl::StrCat("Hkv ", k.hkv, " Sq ", k.sq, " Skv ", k.skv, " D ", k.d));
    const std::string w = absl::StrCat(k.backward_bytes);
    EXPECT_EQ(Steps(c, true, f), (V{"+" + w, "kernel", "-" + w}));
    // The forward's 256 B: every probe but the one-query one.
    EXPECT_EQ(Steps(c, false, f), (k.sq == 1 ? V{"kernel"} : V{"+256", "kernel", "-256"}));
  }
  // Dropout, masks and fp16 change nothing (probes 8, 11, 18-27).
  EXPECT_EQ(Steps(c, true, Facts(2, 8, 8, 256, 256, 64, 2, 100000)), (V{"+1065216", "kernel", "-1065216"}));
  // cuDNN <= 9.15 adds the frontend's padding-mask workaround when Skv is
  // not a multiple of 128: B * 2 int32.
  std::vector<int64_t> old = Facts(2, 8, 8, 127, 127, 64);
  old[16] = 91500;
  EXPECT_EQ(Steps(c, true, old), (V{"+528592", "kernel", "-528592"}));
}

TEST(SdpaWorkspace, FlashMatchesTheH200Probes) {
  const SdpaBackend fl = SdpaBackend::kFlash;
  // Probes 35, 36: softmax_d, then dq_accum, freed in reverse; with dropout
  // the forward replaces its 16 B rng_state before the kernel.
  EXPECT_EQ(Steps(fl, true, Facts(2, 8, 8, 256, 256, 64)), (V{"+16384", "+1048576", "kernel", "-1048576", "-16384"}));
  EXPECT_EQ(Steps(fl, true, Facts(2, 8, 8, 256, 256, 64, 2, 100000)),
            (V{"+16384", "+1048576", "kernel", "-1048576", "-16384"}));
  EXPECT_EQ(Steps(fl, false, Facts(2, 8, 8, 256, 256, 64)), (V{"kernel"}));
  EXPECT_EQ(Steps(fl, false, Facts(2, 8, 8, 256, 256, 64, 2, 100000)), (V{"+16", "-16", "kernel"}));
  // Probe 37: Sq = 1000 rounds to 1024 in both.
  EXPECT_EQ(Steps(fl, true, Facts(2, 8, 8, 1000, 1000, 128)),
            (V{"+65536", "+8388608", "kernel", "-8388608", "-65536"}));
  // From flash_api.cpp mha_bwd (no probe): head dim 80 rounds to 96 in
  // dq_accum; GQA adds dk/dv expanded to all query heads; deterministic
  // algorithms give dq_accum ceil(SMs / (B*Hq)) splits (H200: 132 SMs).
  EXPECT_EQ(Steps(fl, true, Facts(2, 8, 8, 256, 256, 80))[1], "+1572864");  // 2*256*8*96*4
  EXPECT_EQ(Steps(fl, true, Facts(2, 8, 2, 256, 256, 64)),
            (V{"+16384", "+1048576", "+524288", "+524288", "kernel", "-524288", "-524288", "-1048576", "-16384"}));
  const DeviceSpec h200 = Device("h200-sxm-141gb");
  EXPECT_EQ(Steps(fl, true, Facts(2, 8, 8, 256, 256, 64), "h200-sxm-141gb", true)[1],
            absl::StrCat("+", (h200.sms + 15) / 16 * 1048576));
}

TEST(SdpaWorkspace, EfficientMatchesTheH200Probes) {
  const SdpaBackend ef = SdpaBackend::kEfficient;
  // Probes 39-42 (bf16): delta, the 64x64 k64 kernel's workspace; freed in
  // that order.
  EXPECT_EQ(Steps(ef, true, Facts(2, 8, 8, 256, 256, 64)), (V{"+16384", "+1049600", "kernel", "-16384", "-1049600"}));
  EXPECT_EQ(Steps(ef, false, Facts(2, 8, 8, 256, 256, 64)), (V{"kernel"}));
  // Probe 41: S = 1000, D = 128 (128x128 k128).
  EXPECT_EQ(Steps(ef, true, Facts(2, 8, 8, 1000, 1000, 128)),
            (V{"+64000", "+8390656", "kernel", "-64000", "-8390656"}));
  // Probe 7: D = 512 (128x64 k65536: dK/dV accumulated in the workspace over
  // 4 key splits; the forward's float output accumulator).
  EXPECT_EQ(Steps(ef, true, Facts(2, 8, 8, 256, 256, 512)),
            (V{"+16384", "+25169920", "kernel", "-16384", "-25169920"}));
  EXPECT_EQ(Steps(ef, false, Facts(2, 8, 8, 256, 256, 512)), (V{"+8388608", "kernel", "-8388608"}));
  // Probe 9 (fp32): delta computed outside the kernel (product, row sums,
  // the contiguous delta), then the same workspace.
  EXPECT_EQ(Steps(ef, true, Facts(2, 8, 8, 256, 256, 64, 4)),
            (V{"+1048576", "+16384", "+16384", "-16384", "-1048576", "+1049600", "kernel", "-16384", "-1049600"}));
  EXPECT_EQ(Steps(ef, false, Facts(2, 8, 8, 256, 256, 512, 4)), (V{"kernel"}));
  // Deterministic: one key split (the D = 512 workspace's dK/dV part shrinks 4x).
  EXPECT_EQ(Steps(ef, true, Facts(2, 8, 8, 256, 256, 512), "h200-sxm-141gb", true)[1],
            absl::StrCat("+", 16 * 4 * (2 * 64 * 512 + 2 * 8 * (128 * 64 + 4))));
}

TEST(SdpaWorkspace, CapabilityClassesAndNames) {
  DeviceSpec d = Device("a100-sxm-80gb");
  for (auto [major, minor, cls] : {std::tuple{7, 0, 0}, {7, 5, 0}, {8, 0, 1}, {8, 6, 1}, {9, 0, 2}, {10, 0, 3},
                                   {12, 0, 3}}) {
    d.cc_major = major;
    d.cc_minor = minor;
    absl::StatusOr<int> c = SdpaCapabilityClass(d);
    ASSERT_TRUE(c.ok()) << major << "." << minor;
    EXPECT_EQ(*c, cls) << major << "." << minor;
  }
  d.cc_major = 6;
  EXPECT_FALSE(SdpaCapabilityClass(d).ok());
  d.cc_major = 0;
  EXPECT_FALSE(SdpaCapabilityClass(d).ok());
  EXPECT_EQ(SdpaOpOf("_scaled_dot_product_flash_attention_backward")->backend, SdpaBackend::kFlash);
  EXPECT_TRUE(SdpaOpOf("_scaled_dot_product_flash_attention_backward")->backward);
  EXPECT_FALSE(SdpaOpOf("_scaled_dot_product_cudnn_attention")->backward);
  EXPECT_EQ(SdpaOpOf("_scaled_dot_product_efficient_attention")->backend, SdpaBackend::kEfficient);
  EXPECT_FALSE(SdpaOpOf("_scaled_dot_product_attention_math").has_value());
  EXPECT_FALSE(SdpaOpOf("mm").has_value());
  absl::StatusOr<SdpaBackend> bad = ParseSdpaBackend("fast");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("expected flash, efficient, cudnn or math"), std::string::npos);
}

TraceEvent Compute(std::string name, std::string op, std::vector<int64_t> dims, Phase phase) {
  TraceEvent e;
  e.type = EventType::kCompute;
  e.name = std::move(name);
  e.op = std::move(op);
  e.dims = std::move(dims);
  e.phase = phase;
  return e;
}

// A recorded step with one cuDNN SDPA call, forward and backward.
Trace SdpaStep(std::vector<int64_t> dims = Facts(2, 8, 8, 256, 256, 64)) {
  Trace t;
  t.meta = {{"framework", "pytorch"}, {"torch_version", "2.11.0"}, {"warmup_steps", "1"}};
  TraceEvent start, step;
  start.type = step.type = EventType::kMarker;
  start.name = "start_state";
  step.name = "step";
  t.events = {start, step,
              Compute("attn:sdpa", "_scaled_dot_product_cudnn_attention", dims, Phase::kForward),
              Compute("attn:sdpa_backward", "_scaled_dot_product_cudnn_attention_backward", dims, Phase::kBackward)};
  return t;
}

// Each event as "+SIZE NAME", "-", or the compute event's name.
std::vector<std::string> Events(const Trace& t) {
  std::vector<std::string> out;
  for (const TraceEvent& e : t.events) {
    if (e.type == EventType::kAlloc) out.push_back(absl::StrCat("+", e.size.value(), " ", e.name));
    if (e.type == EventType::kFree) out.push_back("-");
    if (e.type == EventType::kCompute) out.push_back(e.name);
  }
  return out;
}

TEST(SdpaWorkspace, RecordedChoiceOnTheRecordingsClass) {
  EagerDeviceMemory report;
  absl::StatusOr<Trace> out = AddEagerDeviceMemory(SdpaStep(), Device("h100-sxm-80gb"), &report);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(Events(*out), (V{"+256 attn:sdpa cuDNN SDPA forward workspace", "attn:sdpa", "-",
                             "+1065216 attn:sdpa_backward cuDNN SDPA backward workspace", "attn:sdpa_backward", "-"}));
  ASSERT_EQ(report.sdpa.size(), 2u);
  EXPECT_EQ(report.sdpa[0].op, "_scaled_dot_product_cudnn_attention");
  EXPECT_EQ(report.sdpa[0].count, 1);
  EXPECT_EQ(report.sdpa[0].backend, "cudnn");
  EXPECT_EQ(report.sdpa[0].why, "recorded choice (sdp_utils.cpp select_sdp_backend)");
  bool listed = false;
  for (const DeviceAddition& a : report.added) {
    if (a.what != "cuDNN SDPA backward workspace") continue;
    listed = true;
    EXPECT_EQ(a.largest, Bytes(1065216));
    EXPECT_NE(a.source.find("MHA.cpp run_cudnn_SDP_fprop/bprop"), std::string::npos) << a.source;
  }
  EXPECT_TRUE(listed);
}

TEST(SdpaWorkspace, RetargetedToTheReplayDevicesChoice) {
  // Recorded as cuDNN (the 9.0 choice); an A100 (8.0) runs flash.
  EagerDeviceMemory report;
  absl::StatusOr<Trace> out = AddEagerDeviceMemory(SdpaStep(), Device("a100-sxm-80gb"), &report);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(Events(*out), (V{"attn:sdpa", "+16384 attn:sdpa_backward flash softmax_d",
                             "+1048576 attn:sdpa_backward flash dq_accum", "attn:sdpa_backward", "-", "-"}));
  ASSERT_EQ(report.sdpa.size(), 2u);
  EXPECT_EQ(report.sdpa[1].backend, "flash");
  EXPECT_EQ(SdpaOps(*out), (V{"_scaled_dot_product_flash_attention", "_scaled_dot_product_flash_attention_backward"}));
  // The recording's own class keeps the recorded names.
  absl::StatusOr<Trace> same = AddEagerDeviceMemory(SdpaStep(), Device("h200-sxm-141gb"), &report);
  ASSERT_TRUE(same.ok()) << same.status();
  EXPECT_EQ(SdpaOps(*same), (V{"_scaled_dot_product_cudnn_attention", "_scaled_dot_product_cudnn_attention_backward"}));
  EXPECT_EQ(report.sdpa[1].why.substr(0, 15), "recorded choice");
  report = {};
  out = AddEagerDeviceMemory(SdpaStep(), Device("a100-sxm-80gb"), &report);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(report.sdpa[1].why,
            "re-targeted: recorded as cudnn for the recording's target; on a100-sxm-80gb (compute capability 8.0) "
            "the rules choose flash; the saved tensors taken as recorded");
}

TEST(SdpaWorkspace, MathOrNoKernelOnTheReplayDeviceIsRefused) {
  for (int64_t code : {0, 4}) {
    std::vector<int64_t> f = Facts(2, 8, 8, 256, 256, 64);
    f[13] = code;  // the 8.0 class
    EagerDeviceMemory report;
    absl::StatusOr<Trace> out = AddEagerDeviceMemory(SdpaStep(f), Device("a100-sxm-80gb"), &report);
    ASSERT_FALSE(out.ok());
    const std::string m(out.status().message());
    EXPECT_NE(m.find("event 2 (compute attn:sdpa, op=_scaled_dot_product_cudnn_attention)"), std::string::npos) << m;
    EXPECT_NE(m.find(code == 0 ? "the math fallback" : "no kernel"), std::string::npos) << m;
    EXPECT_NE(m.find("record for that device (`python3 -m gpusim_torch record STEP.py --device a100-sxm-80gb`)"),
              std::string::npos)
        << m;
    // The recording's own class still replays.
    EXPECT_TRUE(AddEagerDeviceMemory(SdpaStep(f), Device("h100-sxm-80gb"), &report).ok());
  }
}

TEST(SdpaWorkspace, ForcedBackendAndItsRefusals) {
  const DeviceSpec h100 = Device("h100-sxm-80gb");
  EagerDeviceMemory report;
  absl::StatusOr<Trace> out = AddEagerDeviceMemory(SdpaStep(), h100, &report, {"", "efficient"});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(Events(*out), (V{"attn:sdpa", "+16384 attn:sdpa_backward efficient delta",
                             "+1049600 attn:sdpa_backward efficient backward workspace", "attn:sdpa_backward", "-",
                             "-"}));
  ASSERT_EQ(report.sdpa.size(), 2u);
  EXPECT_EQ(report.sdpa[0].why, "forced (--sdpa-backend efficient; recorded as cudnn)");
  EXPECT_EQ(SdpaOps(*out),
            (V{"_scaled_dot_product_efficient_attention", "_scaled_dot_product_efficient_attention_backward"}));
  // math: the recording has no decomposition to run.
  out = AddEagerDeviceMemory(SdpaStep(), h100, &report, {"", "math"});
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find(
                "--sdpa-backend math: the recording holds the fused op _scaled_dot_product_cudnn_attention, not its "
                "math decomposition; record with `python3 -m gpusim_torch record STEP.py --sdpa-backend math`"),
            std::string::npos)
      << out.status();
  out = AddEagerDeviceMemory(SdpaStep(), h100, &report, {"", "fast"});
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("expected flash, efficient, cudnn or math"), std::string::npos);
  // No SDPA events: refused by name, as --cudnn-workspace without convolutions.
  Trace none = SdpaStep();
  none.events.resize(2);
  out = AddEagerDeviceMemory(none, h100, &report, {"", "flash"});
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("--sdpa-backend flash: the step has no fused SDPA events"),
            std::string::npos);
  EXPECT_TRUE(AddEagerDeviceMemory(none, h100, &report).ok());
  EXPECT_TRUE(report.sdpa.empty());
  Trace jax = SdpaStep();
  jax.meta[0].second = "jax";
  out = AddEagerDeviceMemory(jax, h100, &report, {"", "flash"});
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("--sdpa-backend applies to a step recorded from PyTorch"), std::string::npos);
}

TEST(SdpaWorkspace, MalformedFactsNameTheEvent) {
  const DeviceSpec h100 = Device("h100-sxm-80gb");
  struct Case {
    int at;  // -1: drop the last fact
    int64_t value;
    std::string expect;
  };
  const Case cases[] = {{-1, 0, "expected 17 SDPA facts"},
                        {0, 0, "[0] B = 0: expected 1 to 2^24"},
                        {4, -3, "[4] Skv = -3"},
                        {7, 3, "[7] element size = 3"},
                        {8, 2, "[8] = 2: expected 0 or 1"},
                        {9, 2000000, "dropout"},
                        {14, 7, "[14] backend code = 7"},
                        {2, 3, "Hq = 8 is not a multiple of Hkv = 3"},
                        {5, int64_t{1} << 24, "above 2^50 bytes"}};
  for (const Case& c : cases) {
    std::vector<int64_t> f = Facts(int64_t{1} << 10, 8, 8, 1 << 20, 1 << 20, 64);
    if (c.at != 5) f = Facts(2, 8, 8, 256, 256, 64);
    if (c.at < 0) {
      f.pop_back();
    } else {
      f[static_cast<size_t>(c.at)] = c.value;
    }
    EagerDeviceMemory report;
    absl::StatusOr<Trace> out = AddEagerDeviceMemory(SdpaStep(f), h100, &report);
    ASSERT_FALSE(out.ok()) << c.expect;
    const std::string m(out.status().message());
    EXPECT_NE(m.find("event 2 (compute attn:sdpa, op=_scaled_dot_product_cudnn_attention): dims="), std::string::npos)
        << m;
    EXPECT_NE(m.find(c.expect), std::string::npos) << m;
  }
}

}  // namespace
}  // namespace gpusim::device_memory_sdpa_test
