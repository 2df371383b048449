// One registry shape for every pluggable axis (allocators, remat policies,
// device kernel models, trace importers, model families): each entry is a
// name, a one-line doc and its typed parameters, declared beside the
// implementation; `gpusim list KIND` prints them (text and JSON), and an
// unknown name gets one message style with a did-you-mean.
#ifndef GPUSIM_SIM_BASE_REGISTRY_H_
#define GPUSIM_SIM_BASE_REGISTRY_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"

namespace gpusim {

// One parameter an entry reads.
struct ParamDoc {
  std::string name;           // the key as written: "allocator.mem_fraction", "remat.names"
  std::string type;           // bool | int | double | bytes | string | enum | list
  std::string unit;           // "bytes", "MiB", "fraction", ... ("" = none)
  std::string default_value;  // as written in a config ("" = required or unset)
  std::string range;          // "(0, 1]", "power of 2", "spatial | temporal | best" ("" = any)
  std::string doc;            // one line
};

struct RegistryEntry {
  std::string name;
  std::string doc;  // one line, with its sources
  std::vector<ParamDoc> params;
  // Further labelled lines a listing prints (a family's settings per
  // framework); label → text.
  std::vector<std::pair<std::string, std::string>> notes;
};

// "KEY: unknown WHAT 'x' (did you mean 'y'?); available: a, b" over the
// entries' names; KEY omitted when empty.
std::string UnknownEntryMessage(absl::string_view key, absl::string_view what, absl::string_view name,
                                const std::vector<RegistryEntry>& entries);

// One line per parameter: "name (type, unit; default D; range R): doc".
std::string DescribeParam(const ParamDoc& p);

}  // namespace gpusim

#endif  // GPUSIM_SIM_BASE_REGISTRY_H_
