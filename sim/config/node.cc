// ConfigNode and its construction from yaml-cpp; see node.h.
#include "sim/config/node.h"

#include <fstream>
#include <sstream>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "sim/base/status.h"
#include "yaml-cpp/yaml.h"

namespace gpusim {

std::string SourceLocation::ToString() const {
  if (!label.empty()) return label;
  if (line <= 0) return file;
  return absl::StrCat(file, ":", line, ":", col);
}

ConfigNode ConfigNode::Null(SourceLocation loc) {
  ConfigNode n;
  n.loc_ = std::move(loc);
  return n;
}

ConfigNode ConfigNode::Scalar(std::string value, SourceLocation loc) {
  ConfigNode n;
  n.kind_ = Kind::kScalar;
  n.scalar_ = std::move(value);
  n.loc_ = std::move(loc);
  return n;
}

ConfigNode ConfigNode::Map(SourceLocation loc) {
  ConfigNode n;
  n.kind_ = Kind::kMap;
  n.loc_ = std::move(loc);
  return n;
}

ConfigNode ConfigNode::Sequence(SourceLocation loc) {
  ConfigNode n;
  n.kind_ = Kind::kSequence;
  n.loc_ = std::move(loc);
  return n;
}

std::string ConfigNode::Describe() const {
  switch (kind_) {
    case Kind::kNull:
      return "null";
    case Kind::kScalar:
      return absl::StrCat("'", scalar_, "'");
    case Kind::kMap:
      return "a mapping";
    case Kind::kSequence:
      return "a sequence";
  }
  return "";
}

const ConfigEntry* ConfigNode::FindEntry(absl::string_view key) const {
  for (const ConfigEntry& e : entries_) {
    if (e.key == key) return &e;
  }
  return nullptr;
}

const ConfigNode* ConfigNode::Find(absl::string_view key) const {
  const ConfigEntry* e = FindEntry(key);
  return e == nullptr ? nullptr : &e->value;
}

ConfigNode* ConfigNode::FindMutable(absl::string_view key) {
  for (ConfigEntry& e : entries_) {
    if (e.key == key) return &e.value;
  }
  return nullptr;
}

void ConfigNode::Set(std::string key, SourceLocation key_loc,
                     ConfigNode value) {
  GPUSIM_CHECK(is_map());
  for (ConfigEntry& e : entries_) {
    if (e.key == key) {
      e.key_location = std::move(key_loc);
      e.value = std::move(value);
      return;
    }
  }
  entries_.push_back({std::move(key), std::move(key_loc), std::move(value)});
}

bool ConfigNode::Erase(absl::string_view key) {
  for (auto it = entries_.begin(); it != entries_.end(); ++it) {
    if (it->key == key) {
      entries_.erase(it);
      return true;
    }
  }
  return false;
}

void ConfigNode::Append(ConfigNode item) {
  GPUSIM_CHECK(is_sequence());
  items_.push_back(std::move(item));
}

namespace {

SourceLocation LocationOf(const YAML::Mark& mark, const std::string& file,
                          const std::string& label) {
  SourceLocation loc;
  loc.file = file;
  loc.label = label;
  if (!mark.is_null()) {
    loc.line = mark.line + 1;
    loc.col = mark.column + 1;
  }
  return loc;
}

absl::StatusOr<ConfigNode> Convert(const YAML::Node& y,
                                   const std::string& file,
                                   const std::string& label) {
  SourceLocation loc = LocationOf(y.Mark(), file, label);
  switch (y.Type()) {
    case YAML::NodeType::Undefined:
    case YAML::NodeType::Null:
      return ConfigNode::Null(loc);
    case YAML::NodeType::Scalar:
      return ConfigNode::Scalar(y.Scalar(), loc);
    case YAML::NodeType::Sequence: {
      ConfigNode seq = ConfigNode::Sequence(loc);
      for (const YAML::Node& item : y) {
        ASSIGN_OR_RETURN(ConfigNode child, Convert(item, file, label));
        seq.Append(std::move(child));
      }
      return seq;
    }
    case YAML::NodeType::Map: {
      ConfigNode map = ConfigNode::Map(loc);
      for (auto it = y.begin(); it != y.end(); ++it) {
        SourceLocation key_loc = LocationOf(it->first.Mark(), file, label);
        if (!it->first.IsScalar()) {
          return absl::InvalidArgumentError(absl::StrCat(
              key_loc.ToString(), ": expected a plain key, got a ",
              it->first.IsMap() ? "mapping" : "sequence"));
        }
        std::string key = it->first.Scalar();
        if (const ConfigEntry* prev = map.FindEntry(key)) {
          return absl::InvalidArgumentError(absl::StrCat(
              key_loc.ToString(), ": duplicate key '", key,
              "' (first written at ", prev->key_location.line, ":",
              prev->key_location.col, ")"));
        }
        ASSIGN_OR_RETURN(ConfigNode child, Convert(it->second, file, label));
        if (child.is_null() && label.empty()) {
          // yaml-cpp marks an empty value (`key:`) at the next token, or not
          // at all; point at the key instead.
          child = ConfigNode::Null(key_loc);
        }
        map.Set(std::move(key), std::move(key_loc), std::move(child));
      }
      return map;
    }
  }
  return ConfigNode::Null(loc);
}

}  // namespace

absl::StatusOr<ConfigNode> ParseYamlString(absl::string_view text,
                                           const std::string& file,
                                           const std::string& label) {
  YAML::Node root;
  try {
    root = YAML::Load(std::string(text));
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat(LocationOf(e.mark, file, label).ToString(), ": ", e.msg));
  }
  return Convert(root, file, label);
}

absl::StatusOr<ConfigNode> ParseYamlFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot open file"));
  std::stringstream buf;
  buf << in.rdbuf();
  return ParseYamlString(buf.str(), path);
}

void DeepMerge(ConfigNode& base, const ConfigNode& over) {
  if (!base.is_map() || !over.is_map()) {
    base = over;
    return;
  }
  for (const ConfigEntry& e : over.entries()) {
    ConfigNode* existing = base.FindMutable(e.key);
    if (existing != nullptr && existing->is_map() && e.value.is_map()) {
      DeepMerge(*existing, e.value);
    } else {
      base.Set(e.key, e.key_location, e.value);
    }
  }
}

}  // namespace gpusim
