// The allocator registry: name → factory, with docs and parameters.
#include <functional>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "sim/alloc/allocator.h"
#include "sim/alloc/impl/ideal.h"

namespace gpusim {
namespace {

struct Entry {
  std::string doc;
  std::string parameters;
  std::function<absl::StatusOr<std::unique_ptr<Allocator>>(const AllocatorSpec&, Bytes)> make;
};

const std::map<std::string, Entry>& Registry() {
  static const auto* kRegistry = new std::map<std::string, Entry>{
      {"ideal",
       {"no fragmentation: allocated = reserved = live bytes (the lower bound)", "",
        [](const AllocatorSpec&, Bytes cap) -> absl::StatusOr<std::unique_ptr<Allocator>> {
          return std::unique_ptr<Allocator>(new IdealAllocator(cap));
        }}},
  };
  return *kRegistry;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Allocator>> MakeAllocator(const AllocatorSpec& spec, Bytes capacity) {
  auto it = Registry().find(spec.impl);
  if (it == Registry().end()) {
    std::vector<std::string> names;
    for (const auto& [n, e] : Registry()) names.push_back(n);
    return absl::InvalidArgumentError(absl::StrCat("allocator.impl: unknown allocator '", spec.impl,
                                                   "'; expected one of ", absl::StrJoin(names, ", ")));
  }
  if (it->second.parameters.empty() && !spec.options.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("allocator.", spec.options.begin()->first,
                                                   ": allocator '", spec.impl, "' takes no options"));
  }
  return it->second.make(spec, capacity);
}

std::vector<AllocatorInfo> ListAllocators() {
  std::vector<AllocatorInfo> out;
  for (const auto& [n, e] : Registry()) out.push_back({n, e.doc, e.parameters});
  return out;
}

}  // namespace gpusim
