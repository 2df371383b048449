// The allocator registry: name → (parse, make), with one-line docs and the
// typed parameters each takes, declared beside each implementation
// (`gpusim list allocators`). Options arrive as strings
// (AllocatorSpec::options); the entry's parameter docs are the one list of
// its keys (any other is an error naming `allocator.<key>` and the valid
// keys), `parse` reads and validates them once into the implementation's
// typed options (held in the spec: AllocatorSpec::typed), `make` builds
// from those.
#include <any>
#include <functional>
#include <map>
#include <memory>
#include <string_view>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "sim/alloc/allocator.h"
#include "sim/alloc/impl/best_of.h"
#include "sim/alloc/impl/bfc.h"
#include "sim/alloc/impl/buddy.h"
#include "sim/alloc/impl/fallback.h"
#include "sim/alloc/impl/free_list.h"
#include "sim/alloc/impl/greedy_by_size.h"
#include "sim/alloc/impl/ideal.h"
#include "sim/alloc/impl/pytorch_caching.h"
#include "sim/alloc/impl/xla_best_fit.h"
#include "sim/alloc/offline_planner.h"
#include "sim/alloc/options.h"
#include "sim/base/names.h"
#include "sim/base/status.h"

namespace gpusim {
namespace {

using Made = absl::StatusOr<std::unique_ptr<Allocator>>;
using Parsed = absl::StatusOr<std::any>;

struct Entry {
  std::string doc;
  std::vector<ParamDoc> parameters;
  std::function<Parsed(const AllocatorSpec&)> parse;         // → the typed options
  std::function<Made(const std::any& options, Bytes)> make;  // REQUIRES: options from parse
};

Made Wrap(Allocator* a) { return std::unique_ptr<Allocator>(a); }

// Composite allocators' typed options: their members, parsed.
using Members = std::vector<AllocatorConfig>;

Parsed ParseMembersOption(const AllocatorSpec& spec, size_t min, size_t max) {
  auto it = spec.options.find("members");
  if (it == spec.options.end()) {
    return absl::InvalidArgumentError(absl::StrCat("allocator.members: allocator '", spec.impl,
                                                   "' needs members, e.g. \"pytorch_caching,bfc\""));
  }
  absl::StatusOr<std::vector<AllocatorSpec>> specs = ParseMembers(it->second, "members");
  if (!specs.ok()) return specs.status();
  if (specs->size() < min || specs->size() > max) {
    return absl::InvalidArgumentError(absl::StrCat("allocator.members: allocator '", spec.impl, "' takes ",
                                                   min == max ? absl::StrCat(min) : absl::StrCat(min, " or more"),
                                                   " members, got ", specs->size()));
  }
  Members out;
  for (size_t i = 0; i < specs->size(); ++i) {
    absl::StatusOr<AllocatorConfig> m = ParseAllocator((*specs)[i]);
    if (!m.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("allocator.members[", i, "] (", (*specs)[i].impl, "): ", m.status().message()));
    }
    out.push_back(*std::move(m));
  }
  return std::any(std::move(out));
}

absl::StatusOr<std::vector<std::unique_ptr<Allocator>>> MakeMembers(const std::any& options, Bytes cap) {
  std::vector<std::unique_ptr<Allocator>> out;
  for (const AllocatorConfig& m : std::any_cast<const Members&>(options)) {
    Made a = BuildAllocator(m, cap);
    if (!a.ok()) return a.status();
    out.push_back(*std::move(a));
  }
  return out;
}

const ParamDoc kMembers = {"allocator.members", "string", "", "", "\"a,b{key=value;...},...\"; one or more",
                           "the member allocators, each with its options"};
const ParamDoc kPlannerAlignment = {"allocator.alignment", "int", "bytes", "1", ">= 1",
                                    "offsets rounded up to a multiple of it"};

absl::StatusOr<int64_t> PlannerAlignment(const AllocatorOptions& o) {
  int64_t a = 1;
  if (absl::Status s = ReadIntOption(o, "alignment", &a); !s.ok()) return s;
  if (a < 1) return absl::InvalidArgumentError("allocator.alignment: must be >= 1");
  return a;
}

struct XlaBestFitOptions {
  XlaBestFitOrder order = XlaBestFitOrder::kBest;
  int64_t alignment = 1;
};

// The typed value of a parse, or its error.
template <typename T>
Parsed Typed(absl::StatusOr<T> v) {
  if (!v.ok()) return v.status();
  return std::any(*std::move(v));
}

Parsed ParseArena(const AllocatorSpec& spec) { return Typed(ParseArenaAlignment(spec.impl, spec.options)); }

const std::map<std::string, Entry>& Registry() {
  static const auto* kRegistry = new std::map<std::string, Entry>{
      {"ideal",
       {"no fragmentation: allocated = reserved = live bytes (the lower bound)", {},
        [](const AllocatorSpec&) -> Parsed { return std::any(); },
        [](const std::any&, Bytes cap) -> Made { return Wrap(new IdealAllocator(cap)); }}},
      {"pytorch_caching",
       {"PyTorch v2.5.1 CUDA caching allocator (c10/cuda/CUDACachingAllocator.cpp), exact to the byte and address",
        PyTorchCachingParameters(),
        [](const AllocatorSpec& spec) { return Typed(ParsePyTorchCachingOptions(spec.options)); },
        [](const std::any& o, Bytes cap) -> Made {
          return Wrap(new PyTorchCachingAllocator(cap, std::any_cast<const PyTorchCachingOptions&>(o)));
        }}},
      {"bfc",
       {"TF/XLA best-fit-with-coalescing allocator (xla/tsl/framework/bfc_allocator.cc) as JAX configures it",
        BfcParameters(), [](const AllocatorSpec& spec) { return Typed(ParseBfcOptions(spec.options)); },
        [](const std::any& o, Bytes cap) -> Made {
          return Wrap(new BfcAllocator(cap, std::any_cast<const BfcOptions&>(o)));
        }}},
      {"first_fit",
       {"address-ordered first fit over one device-sized arena", ArenaParameters(), ParseArena,
        [](const std::any& o, Bytes cap) -> Made {
          return Wrap(new FreeListAllocator(cap, FitPolicy::kFirstFit, std::any_cast<int64_t>(o)));
        }}},
      {"best_fit",
       {"best fit (smallest hole, lowest address) over one device-sized arena", ArenaParameters(), ParseArena,
        [](const std::any& o, Bytes cap) -> Made {
          return Wrap(new FreeListAllocator(cap, FitPolicy::kBestFit, std::any_cast<int64_t>(o)));
        }}},
      {"buddy",
       {"binary buddy system (power-of-two blocks) over one device-sized arena", BuddyParameters(),
        [](const AllocatorSpec& spec) { return Typed(ParseBuddyMinBlock(spec.options)); },
        [](const std::any& o, Bytes cap) -> Made { return Wrap(new BuddyAllocator(cap, std::any_cast<int64_t>(o))); }}},
      {"best_of",
       {"runs every member on the same calls; reports the one with the smallest peak reserved",
        {kMembers},
        [](const AllocatorSpec& spec) { return ParseMembersOption(spec, 1, SIZE_MAX); },
        [](const std::any& o, Bytes cap) -> Made {
          auto m = MakeMembers(o, cap);
          if (!m.ok()) return m.status();
          return Wrap(new BestOfAllocator(*std::move(m)));
        }}},
      {"fallback",
       {"runs the first member; on its OOM replays the recorded calls into the second and continues there",
        {{"allocator.members", "string", "", "", "two members: primary,secondary (each as in best_of)",
          "the allocator run first and the one its calls replay into on OOM"}},
        [](const AllocatorSpec& spec) { return ParseMembersOption(spec, 2, 2); },
        [](const std::any& o, Bytes cap) -> Made {
          auto m = MakeMembers(o, cap);
          if (!m.ok()) return m.status();
          return Wrap(new FallbackAllocator(std::move((*m)[0]), std::move((*m)[1])));
        }}},
      {"xla_best_fit",
       {"offline: XLA GlobalDecreasingSizeBestFitHeap over whole lifetimes (planned at the end)",
        {{"allocator.order", "enum", "", "best", "spatial | temporal | best",
          "XLA's sort order (GlobalDecreasingSizeBestFitHeap), best = the smaller heap of both"},
         kPlannerAlignment},
        [](const AllocatorSpec& spec) -> Parsed {
          XlaBestFitOptions o;
          if (auto it = spec.options.find("order"); it != spec.options.end()) {
            if (it->second == "spatial") {
              o.order = XlaBestFitOrder::kSpatial;
            } else if (it->second == "temporal") {
              o.order = XlaBestFitOrder::kTemporal;
            } else if (it->second != "best") {
              return absl::InvalidArgumentError(
                  absl::StrCat("allocator.order: expected spatial, temporal or best, got '", it->second, "'"));
            }
          }
          absl::StatusOr<int64_t> a = PlannerAlignment(spec.options);
          if (!a.ok()) return a.status();
          o.alignment = *a;
          return std::any(o);
        },
        [](const std::any& any, Bytes cap) -> Made {
          const auto& o = std::any_cast<const XlaBestFitOptions&>(any);
          return Wrap(new PlannedAllocator(std::make_unique<XlaBestFitPlanner>(o.order), cap, o.alignment));
        }}},
      {"greedy_by_size",
       {"offline: greedy by size for offset calculation (Pisarchyk & Lee 2020), planned at the end",
        {kPlannerAlignment},
        [](const AllocatorSpec& spec) -> Parsed {
          return Typed(PlannerAlignment(spec.options));
        },
        [](const std::any& o, Bytes cap) -> Made {
          return Wrap(new PlannedAllocator(std::make_unique<GreedyBySizePlanner>(), cap, std::any_cast<int64_t>(o)));
        }}},
  };
  return *kRegistry;
}

}  // namespace

absl::StatusOr<AllocatorConfig> ParseAllocator(const AllocatorSpec& spec) {
  if (spec.typed != nullptr) {
    const AllocatorConfig* parsed = std::any_cast<AllocatorConfig>(spec.typed.get());
    if (parsed != nullptr && parsed->spec.impl == spec.impl && parsed->spec.options == spec.options) return *parsed;
  }
  auto it = Registry().find(spec.impl);
  if (it == Registry().end()) {
    return absl::InvalidArgumentError(UnknownEntryMessage("allocator.impl", "allocator", spec.impl, ListAllocators()));
  }
  // The entry's parameter docs are the one list of its keys.
  std::vector<std::string> keys;
  for (const ParamDoc& p : it->second.parameters) keys.push_back(p.name.substr(std::string_view("allocator.").size()));
  if (absl::Status s = CheckOptionKeys(spec.impl, spec.options, keys); !s.ok()) return s;
  Parsed options = it->second.parse(spec);
  if (!options.ok()) return options.status();
  AllocatorConfig c;
  c.spec = spec;
  c.options = *std::move(options);
  return c;
}

absl::Status ParseAllocatorOptions(RunSpec* run) {
  absl::StatusOr<AllocatorConfig> c = ParseAllocator(run->allocator);
  if (!c.ok()) {
    // Messages start at the key ("allocator.mem_fraction: ...",
    // "allocator.members[1] (bfc): ..."): prefix where it was written.
    const absl::string_view msg = c.status().message();
    if (!absl::StartsWith(msg, "allocator.")) return c.status();
    const size_t end = msg.find_first_of(":[ ");
    auto at = run->written.find(std::string(msg.substr(0, end)));
    if (at == run->written.end()) at = run->written.find("allocator.impl");
    if (at == run->written.end() || at->second.empty()) return c.status();
    return absl::InvalidArgumentError(absl::StrCat(at->second, ": ", msg));
  }
  c->spec.typed = nullptr;
  run->allocator.typed = std::make_shared<const std::any>(*std::move(c));
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<Allocator>> BuildAllocator(const AllocatorConfig& config, Bytes capacity) {
  if (capacity.value() <= 0 || capacity.value() >= kMaxRequestBytes) {
    return absl::InvalidArgumentError(absl::StrCat("allocator: device capacity must be > 0 and below 2^46 bytes (64 TiB), got ",
                                                   capacity.value()));
  }
  auto it = Registry().find(config.spec.impl);
  GPUSIM_CHECK(it != Registry().end());
  return it->second.make(config.options, capacity);
}

absl::StatusOr<std::unique_ptr<Allocator>> MakeAllocator(const AllocatorSpec& spec, Bytes capacity) {
  absl::StatusOr<AllocatorConfig> c = ParseAllocator(spec);
  if (!c.ok()) return c.status();
  return BuildAllocator(*c, capacity);
}

std::vector<AllocatorInfo> ListAllocators() {
  std::vector<AllocatorInfo> out;
  for (const auto& [n, e] : Registry()) {
    AllocatorInfo info;
    info.name = n;
    info.doc = e.doc;
    info.params = e.parameters;
    out.push_back(std::move(info));
  }
  return out;
}

std::string FoldAllocatorName(const std::string& name) { return FoldRegistryName(name, Registry()); }

}  // namespace gpusim
