// Kernel model registry; see kernel_model.h.
#include "sim/device/kernel_model.h"

#include <algorithm>
#include <functional>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "sim/base/status.h"
#include "sim/device/impl/roofline.h"
#include "sim/device/impl/tiled.h"

namespace gpusim {
namespace {

struct Entry {
  KernelModelInfo info;
  std::function<std::unique_ptr<KernelModel>()> make;
};

// The device keys (configs/devices/*.yaml) every model reads: the roofline
// terms and the ring collectives (collective_model.h).
std::vector<ParamDoc> RooflineParams() {
  std::vector<ParamDoc> p;
  for (const char* unit : {"bf16", "fp16", "tf32", "fp32"}) {
    p.push_back({absl::StrCat("flops.", unit), "double", "FLOP/s", "", "> 0", "dense peak of the unit"});
  }
  p.push_back({"hbm_bandwidth", "double", "bytes/s", "", "> 0", "peak HBM bandwidth"});
  p.push_back({"launch_overhead", "duration", "ns", "4us", ">= 0", "added to every kernel"});
  p.push_back({"efficiency.matmul", "double", "fraction", "0.80", "[0, 1]", "achievable share of the matmul peak"});
  p.push_back({"efficiency.attention", "double", "fraction", "0.60", "[0, 1]", "of the peak, attention by its FLOPs"});
  p.push_back({"efficiency.memory", "double", "fraction", "0.85", "[0, 1]", "of HBM bandwidth, streaming ops"});
  p.push_back({"efficiency.collective", "double", "fraction", "0.80", "[0, 1]", "NCCL bus bandwidth of the link"});
  p.push_back({"links.nvlink", "double", "bytes/s", "", ">= 0", "ring collectives within a node"});
  p.push_back({"links.network", "double", "bytes/s", "", ">= 0", "ring collectives across nodes"});
  p.push_back({"links.latency", "duration", "ns", "5us", ">= 0", "per ring step"});
  p.push_back({"links.pcie", "double", "bytes/s", "", ">= 0", "host copies"});
  return p;
}

const std::vector<Entry>& Registry() {
  static const std::vector<Entry>* r = new std::vector<Entry>{
      {{"roofline",
        "max(flops / (peak · efficiency), bytes / (HBM · efficiency.memory)) + launch; ring collectives",
        RooflineParams(),
        {}},
       [] { return std::make_unique<RooflineKernelModel>(); }},
      {{"tiled",
        "roofline with matmul tile and wave quantisation on the SMs, small-K and skinny shapes slower",
        [] {
          std::vector<ParamDoc> p = RooflineParams();
          p.push_back({"sms", "int", "", "", ">= 1", "streaming multiprocessors a matmul's tiles fill in waves"});
          p.push_back({"efficiency.fused_attention", "double", "fraction", "0.78", "[0, 1]",
                       "of the tile model's ideal, fused SDPA kernels (attention.h); 0: by FLOPs"});
          return p;
        }(),
        {}},
       [] { return std::make_unique<TiledKernelModel>(); }},
  };
  return *r;
}

}  // namespace

std::vector<KernelModelInfo> ListKernelModels() {
  std::vector<KernelModelInfo> out;
  for (const Entry& e : Registry()) out.push_back(e.info);
  std::sort(out.begin(), out.end(),
            [](const KernelModelInfo& a, const KernelModelInfo& b) { return a.name < b.name; });
  return out;
}

absl::StatusOr<std::unique_ptr<KernelModel>> MakeKernelModel(std::string_view name) {
  for (const Entry& e : Registry()) {
    if (e.info.name == name) return e.make();
  }
  return absl::NotFoundError(UnknownEntryMessage("kernel_model", "kernel model", std::string(name), ListKernelModels()));
}

const KernelModel& KernelModelOf(const DeviceSpec& d) {
  static const auto* kModels = [] {
    auto* m = new std::map<std::string, std::unique_ptr<KernelModel>, std::less<>>;
    for (const Entry& e : Registry()) (*m)[e.info.name] = e.make();
    return m;
  }();
  auto it = kModels->find(d.kernel_model);
  GPUSIM_CHECK(it != kModels->end());
  return *it->second;
}

const KernelModel& DefaultKernelModel() {
  static const KernelModel* m = new TiledKernelModel();
  return *m;
}

}  // namespace gpusim
