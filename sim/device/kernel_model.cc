// Kernel model registry; see kernel_model.h.
#include "sim/device/kernel_model.h"

#include <algorithm>
#include <functional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "sim/device/impl/roofline.h"
#include "sim/device/impl/tiled.h"

namespace gpusim {
namespace {

struct Entry {
  KernelModelInfo info;
  std::function<std::unique_ptr<KernelModel>()> make;
};

const std::vector<Entry>& Registry() {
  static const std::vector<Entry>* r = new std::vector<Entry>{
      {{"roofline",
        "max(flops / (peak · efficiency), bytes / (HBM · efficiency.memory)) + launch; ring collectives"},
       [] { return std::make_unique<RooflineKernelModel>(); }},
      {{"tiled",
        "roofline with matmul tile and wave quantisation on the SMs, small-K and skinny shapes slower"},
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
  std::vector<std::string> names;
  for (const Entry& e : Registry()) {
    if (e.info.name == name) return e.make();
    names.push_back(e.info.name);
  }
  return absl::NotFoundError(absl::StrCat("unknown kernel model '", std::string(name),
                                          "'; available: ", absl::StrJoin(names, ", ")));
}

const KernelModel& DefaultKernelModel() {
  static const KernelModel* m = new TiledKernelModel();
  return *m;
}

}  // namespace gpusim
