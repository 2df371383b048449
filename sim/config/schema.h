// The configuration schema: which keys exist at each level of a run config,
// a device file and a model file. Used to reject unknown keys (with a
// nearest-key suggestion) and to refuse `--set` paths that do not exist; the
// typed parse (spec_parse.cc) CHECKs that every key it reads is declared here.
#ifndef GPUSIM_SIM_CONFIG_SCHEMA_H_
#define GPUSIM_SIM_CONFIG_SCHEMA_H_

#include <memory>
#include <string>
#include "absl/strings/string_view.h"
#include <vector>

#include "absl/status/status.h"
#include "sim/config/node.h"

namespace gpusim {

struct SchemaField;

class Schema {
 public:
  enum class Kind {
    kLeaf,     // a scalar or a sequence of scalars
    kMap,      // exactly the declared keys
    kOpenMap,  // the declared keys plus any scalar key (allocator options)
    kRef,      // device/model in a run config: a name, a path, or a mapping
               // of the declared keys plus `from:`
    kFreeMap,  // any key (user-chosen names); every value follows element()
    kList,     // a sequence; every item follows element()
  };

  static Schema Leaf();
  static Schema Map(Kind kind, std::vector<SchemaField> fields);
  static Schema FreeMap(Schema value);
  static Schema List(Schema item);

  Kind kind() const { return kind_; }
  // A mapping whose keys a path may name (not a leaf or a list).
  bool is_map_like() const {
    return kind_ != Kind::kLeaf && kind_ != Kind::kList;
  }
  // The declared child (any key of a kFreeMap: its element), or nullptr.
  const Schema* Find(absl::string_view key) const;
  // The declared keys; none for a kFreeMap.
  std::vector<std::string> Keys() const;
  // The value schema of a kFreeMap, the item schema of a kList; else nullptr.
  const Schema* element() const { return element_.get(); }

 private:
  Kind kind_ = Kind::kLeaf;
  std::vector<SchemaField> fields_;
  std::shared_ptr<const Schema> element_;
};

struct SchemaField {
  std::string key;
  Schema schema;
};

const Schema& DeviceSchema();
const Schema& ModelSchema();
// Top level of a run config; `device` and `model` are kRef. In `program`,
// `inputs` and the scan's `carry`, `xs` and `carry_out` are kFreeMap (their
// keys are the user's names) and `scan.body` is a kList of op mappings.
const Schema& RunSchema();

namespace internal {

// Levenshtein distance.
int EditDistance(absl::string_view a, absl::string_view b);

// The nearest of `candidates` to `key`, or "" when none is within
// max(2, key.size() / 2) edits. Ties go to the earlier candidate.
std::string NearestKey(absl::string_view key,
                       const std::vector<std::string>& candidates);

// "unknown key 'x' (did you mean 'y'?)", the suggestion omitted when none is
// close.
std::string UnknownKeyMessage(absl::string_view key, const Schema& level);

// "a.b" from a parent path and a key; `parent` may be empty.
std::string JoinPath(absl::string_view parent, absl::string_view key);

}  // namespace internal

// Checks every mapping key under `node` against `schema`. `path` is the key
// path of `node` in the run config ("" at the top, "device" for a device
// file read on its own within a run); items of a kList are "PATH[i]". Type
// mismatches are left to the typed parse. Error: "LOC: PATH: unknown key 'x'
// (did you mean 'y'?)" where LOC is the key's location and "PATH: " is
// omitted at the top level.
absl::Status ValidateKeys(const ConfigNode& node, const Schema& schema,
                          const std::string& path);

}  // namespace gpusim

#endif  // GPUSIM_SIM_CONFIG_SCHEMA_H_
