// Typed reading of an allocator's string options (AllocatorSpec::options,
// the YAML keys under `allocator:` other than `impl`). Every error names the
// key as `allocator.<key>`; an unknown key also lists the valid ones.
//
// Composite allocators name their members in one option string:
//
//   members: "pytorch_caching{max_split_size_mb=256;expandable_segments=true},bfc"
//
// i.e. comma-separated `impl` names, each optionally followed by
// `{key=value;key=value}` with that member's own options. Commas and
// semicolons inside [...] or {...} do not separate, so list values
// (`roundup_power2_divisions=[256:1,>:8]`) and nested composites
// (`fallback{members=bfc,first_fit}`) pass through.
#ifndef GPUSIM_SIM_ALLOC_OPTIONS_H_
#define GPUSIM_SIM_ALLOC_OPTIONS_H_

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "sim/config/spec.h"

namespace gpusim {

using AllocatorOptions = std::map<std::string, std::string>;

// Fails on the first key of `options` not in `valid`.
absl::Status CheckOptionKeys(std::string_view impl, const AllocatorOptions& options,
                             const std::vector<std::string>& valid);

// Each reader leaves *out unchanged when `key` is absent.
absl::Status ReadIntOption(const AllocatorOptions& options, const std::string& key, int64_t* out);
absl::Status ReadDoubleOption(const AllocatorOptions& options, const std::string& key, double* out);
// true/True/1 or false/False/0 (PyTorch's config accepts True and False).
absl::Status ReadBoolOption(const AllocatorOptions& options, const std::string& key, bool* out);

// Splits `s` at top-level occurrences of `sep` (outside [...] and {...}).
std::vector<std::string> SplitTopLevel(std::string_view s, char sep);
// Parses the `members` syntax above. REQUIRES: nothing; errors name `key`.
absl::StatusOr<std::vector<AllocatorSpec>> ParseMembers(std::string_view value, const std::string& key);

}  // namespace gpusim

#endif  // GPUSIM_SIM_ALLOC_OPTIONS_H_
