// Option parsing for pytorch_caching, mirroring the validation in PyTorch
// v2.5.1 c10/cuda/CUDAAllocatorConfig.cpp (parseArgs and its helpers) and
// torch/cuda/memory.py set_per_process_memory_fraction.
#include <bit>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "sim/alloc/impl/pytorch_caching.h"

namespace gpusim {

// PYTORCH_CUDA_ALLOC_CONF keys (c10/cuda/CUDAAllocatorConfig.cpp) and
// torch.cuda.set_per_process_memory_fraction.
const std::vector<ParamDoc>& PyTorchCachingParameters() {
  static const auto* p = new std::vector<ParamDoc>{
      {"allocator.max_split_size_mb", "int", "MiB", "unlimited", "> 20",
       "blocks larger than this are never split (max_split_size_mb)"},
      {"allocator.max_non_split_rounding_mb", "int", "MiB", "20", ">= 20",
       "an unsplittable cached block at most this much larger serves a request"},
      {"allocator.roundup_power2_divisions", "string", "", "off", "power of 2, or [MB:div,...,>:div]",
       "round request sizes up to power-of-two divisions"},
      {"allocator.garbage_collection_threshold", "double", "fraction", "off",
       "(0, 1); needs per_process_memory_fraction", "free cached blocks past this share of the cap"},
      {"allocator.expandable_segments", "bool", "", "false", "", "grow segments by mapping pages"},
      {"allocator.per_process_memory_fraction", "double", "fraction", "unset", "(0, 1]",
       "cap on reserved memory as a share of the device"},
  };
  return *p;
}

namespace {

constexpr int64_t kMiB = 1 << 20;
constexpr int64_t kLargeBufferMiB = 20;  // kLargeBuffer / MiB, CUDACachingAllocator.cpp

absl::Status Bad(const std::string& key, const std::string& why) {
  return absl::InvalidArgumentError(absl::StrCat("allocator.", key, ": ", why));
}

bool IsPowerOf2(int64_t v) { return v > 0 && std::has_single_bit(static_cast<uint64_t>(v)); }
int Log2Floor(int64_t v) { return 63 - std::countl_zero(static_cast<uint64_t>(v)); }

// parseRoundUpPower2Divisions: a single power of two for every band, or a
// list of `MB:divisions` (MB a power of two naming the band of sizes
// [MB, 2·MB) MiB) and `>:divisions`. The first entry also fills every band
// below it; `>` fills from the previous entry's band (inclusive) to the end.
absl::Status ParseRoundup(const std::string& key, const std::string& value,
                          std::array<int64_t, PyTorchCachingOptions::kRoundUpPowerOfTwoIntervals>* out) {
  auto& div = *out;
  if (value.empty() || value.front() != '[') {
    int64_t v = 0;
    if (!absl::SimpleAtoi(value, &v) || !IsPowerOf2(v)) {
      return Bad(key, absl::StrCat("For roundups, the divisions has to be power of 2, got '", value, "'"));
    }
    div.fill(v);
    return absl::OkStatus();
  }
  if (value.back() != ']') return Bad(key, "expected a closing ']'");
  const std::string body = value.substr(1, value.size() - 2);
  bool first = true;
  size_t last_index = 0;
  for (const std::string& item : SplitTopLevel(body, ',')) {
    const size_t colon = item.find(':');
    if (colon == std::string::npos) return Bad(key, absl::StrCat("expected MB:divisions, got '", item, "'"));
    const std::string band = item.substr(0, colon);
    int64_t d = 0;
    if (!absl::SimpleAtoi(item.substr(colon + 1), &d) || (d != 0 && !IsPowerOf2(d))) {
      return Bad(key, absl::StrCat("For roundups, the divisions has to be power of 2 or 0 to disable roundup, got '",
                                   item, "'"));
    }
    if (band == ">") {
      for (size_t i = last_index; i < div.size(); ++i) div[i] = d;
      continue;
    }
    int64_t mb = 0;
    if (!absl::SimpleAtoi(band, &mb) || !IsPowerOf2(mb)) {
      return Bad(key, absl::StrCat("For roundups, the intervals have to be power of 2, got '", band, "'"));
    }
    const size_t index = std::min<size_t>(Log2Floor(mb), div.size() - 1);
    if (first) {
      for (size_t i = 0; i < index; ++i) div[i] = d;
      first = false;
    }
    div[index] = d;
    last_index = index;
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<PyTorchCachingOptions> ParsePyTorchCachingOptions(const AllocatorOptions& options) {
  if (absl::Status s = CheckOptionKeys("pytorch_caching", options,
                                       {"max_split_size_mb", "max_non_split_rounding_mb", "roundup_power2_divisions",
                                        "garbage_collection_threshold", "expandable_segments",
                                        "per_process_memory_fraction"});
      !s.ok()) {
    return s;
  }
  PyTorchCachingOptions o;
  int64_t mb = -1;
  if (absl::Status s = ReadIntOption(options, "max_split_size_mb", &mb); !s.ok()) return s;
  if (mb != -1) {
    if (mb <= kLargeBufferMiB) {
      return Bad("max_split_size_mb", absl::StrCat("CachingAllocator option max_split_size_mb too small, must be > ",
                                                   kLargeBufferMiB));
    }
    o.max_split_size = mb >= PyTorchCachingOptions::kNoLimit / kMiB ? PyTorchCachingOptions::kNoLimit : mb * kMiB;
  }
  mb = -1;
  if (absl::Status s = ReadIntOption(options, "max_non_split_rounding_mb", &mb); !s.ok()) return s;
  if (mb != -1) {
    if (mb < kLargeBufferMiB) {
      return Bad("max_non_split_rounding_mb",
                 absl::StrCat("CachingAllocator option max_non_split_rounding_mb too small, must be >= ",
                              kLargeBufferMiB));
    }
    o.max_non_split_rounding =
        mb >= PyTorchCachingOptions::kNoLimit / kMiB ? PyTorchCachingOptions::kNoLimit : mb * kMiB;
  }
  if (auto it = options.find("roundup_power2_divisions"); it != options.end()) {
    if (absl::Status s = ParseRoundup(it->first, it->second, &o.roundup_power2_divisions); !s.ok()) return s;
  }
  if (absl::Status s = ReadDoubleOption(options, "garbage_collection_threshold", &o.garbage_collection_threshold);
      !s.ok()) {
    return s;
  }
  if (options.contains("garbage_collection_threshold") &&
      !(o.garbage_collection_threshold > 0 && o.garbage_collection_threshold < 1)) {
    return Bad("garbage_collection_threshold", "garbage_collect_threshold must be in (0.0, 1.0)");
  }
  if (absl::Status s = ReadBoolOption(options, "expandable_segments", &o.expandable_segments); !s.ok()) return s;
  if (absl::Status s = ReadDoubleOption(options, "per_process_memory_fraction", &o.per_process_memory_fraction);
      !s.ok()) {
    return s;
  }
  if (options.contains("per_process_memory_fraction") &&
      !(o.per_process_memory_fraction >= 0 && o.per_process_memory_fraction <= 1)) {
    return Bad("per_process_memory_fraction", "Invalid fraction value: must be in [0, 1]");
  }
  return o;
}

}  // namespace gpusim
