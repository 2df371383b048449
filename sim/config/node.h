// ConfigNode: the configuration tree as written (scalars, ordered mappings,
// sequences), each node carrying where it was written. Built from YAML files
// or from `--set` values; yaml-cpp stays behind this header so nothing else
// sees its types. The typed parse (spec_parse.h) reads this tree.
#ifndef GPUSIM_SIM_CONFIG_NODE_H_
#define GPUSIM_SIM_CONFIG_NODE_H_

#include <string>
#include "absl/strings/string_view.h"
#include <vector>

#include "absl/status/statusor.h"

namespace gpusim {

// Where a node was written: a file position (1-based line and column), or a
// label such as "--set model.n_layers=2" for values from the command line.
struct SourceLocation {
  std::string file;
  int line = 0;
  int col = 0;
  std::string label;  // when set, printed instead of file:line:col

  // "FILE:LINE:COL", "FILE" when there is no position, or the label.
  std::string ToString() const;
};

struct ConfigEntry;

class ConfigNode {
 public:
  enum class Kind { kNull, kScalar, kMap, kSequence };

  ConfigNode() = default;
  static ConfigNode Null(SourceLocation loc);
  static ConfigNode Scalar(std::string value, SourceLocation loc);
  static ConfigNode Map(SourceLocation loc);
  static ConfigNode Sequence(SourceLocation loc);

  Kind kind() const { return kind_; }
  bool is_null() const { return kind_ == Kind::kNull; }
  bool is_scalar() const { return kind_ == Kind::kScalar; }
  bool is_map() const { return kind_ == Kind::kMap; }
  bool is_sequence() const { return kind_ == Kind::kSequence; }
  const SourceLocation& location() const { return loc_; }

  // REQUIRES: is_scalar().
  const std::string& scalar() const { return scalar_; }
  // Short text for error messages: the scalar, "null", "a mapping" or
  // "a sequence".
  std::string Describe() const;
  // "null", "a scalar", "a mapping", "a sequence": never the value itself
  // (for a whole file that is not YAML, whose content must not be echoed).
  std::string DescribeKind() const;

  // Mappings, in written order. REQUIRES: is_map() for the mutators.
  const std::vector<ConfigEntry>& entries() const { return entries_; }
  const ConfigNode* Find(absl::string_view key) const;
  ConfigNode* FindMutable(absl::string_view key);
  const ConfigEntry* FindEntry(absl::string_view key) const;
  // Replaces the value of `key` (keeping its position) or appends it.
  void Set(std::string key, SourceLocation key_loc, ConfigNode value);
  bool Erase(absl::string_view key);

  // Sequences. REQUIRES: is_sequence() for Append.
  const std::vector<ConfigNode>& items() const { return items_; }
  void Append(ConfigNode item);

 private:
  Kind kind_ = Kind::kNull;
  SourceLocation loc_;
  std::string scalar_;
  std::vector<ConfigEntry> entries_;
  std::vector<ConfigNode> items_;
};

struct ConfigEntry {
  std::string key;
  SourceLocation key_location;
  ConfigNode value;
};

// Reads a YAML file (its first document). Errors: NotFound
// "FILE: cannot open file"; InvalidArgument "FILE:LINE:COL: <yaml message>"
// for syntax errors and "FILE:LINE:COL: duplicate key 'k' (first written at
// LINE:COL)".
absl::StatusOr<ConfigNode> ParseYamlFile(const std::string& path);

// Parses YAML text. Every node's location is `label` when it is non-empty
// (command-line values), else positions within `file`.
absl::StatusOr<ConfigNode> ParseYamlString(absl::string_view text,
                                           const std::string& file,
                                           const std::string& label = "");

// Deep merge: mappings merge key by key (recursively); anything else in
// `over` replaces what is in `base`. A merged mapping keeps base's location.
void DeepMerge(ConfigNode& base, const ConfigNode& over);

}  // namespace gpusim

#endif  // GPUSIM_SIM_CONFIG_NODE_H_
