// ConfigNode and its construction from yaml-cpp; see node.h.
#include "sim/config/node.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "sim/base/status.h"
#include "yaml-cpp/eventhandler.h"
#include "yaml-cpp/parser.h"
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
      // A long or multi-line scalar is what a non-YAML file (a binary, a
      // password file) parses to: described, never echoed.
      if (scalar_.size() > 80 || scalar_.find_first_of("\n\r") != std::string::npos) {
        return absl::StrCat("a scalar of ", scalar_.size(), " characters");
      }
      return absl::StrCat("'", scalar_, "'");
    case Kind::kMap:
      return "a mapping";
    case Kind::kSequence:
      return "a sequence";
  }
  return "";
}

std::string ConfigNode::DescribeKind() const {
  return kind_ == Kind::kScalar ? "a scalar" : Describe();
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

// Note [Alias budget]: yaml-cpp loads an alias as a shared node, so a few
// hundred bytes of nested anchors (`b: [*a, *a, ...]`, `c: [*b, *b, ...]`)
// load quickly but expand exponentially when copied into ConfigNodes (a 342-
// byte file grew past 6 GB, issue 17). Before loading, one pass over the
// parser's events computes each anchored node's expanded size (nodes
// counted, an alias adding its anchor's size) and refuses a document whose
// expansion exceeds kMaxYamlNodes, naming the alias that crossed it. Sizes
// saturate at the budget, so the count itself cannot overflow.
constexpr int64_t kMaxYamlNodes = 100000;

class ExpandedSizeCounter : public YAML::EventHandler {
 public:
  bool exceeded() const { return exceeded_; }
  const YAML::Mark& where() const { return where_; }

  const YAML::Mark& document_start() const { return document_start_; }

  void OnDocumentStart(const YAML::Mark& m) override {
    document_start_ = m;
    open_.push_back({0, YAML::NullAnchor, m});
  }
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark& m, YAML::anchor_t a) override { Done(m, 1, a); }
  void OnAlias(const YAML::Mark& m, YAML::anchor_t a) override {
    Done(m, a < sizes_.size() ? sizes_[a] : 1, YAML::NullAnchor);
  }
  void OnScalar(const YAML::Mark& m, const std::string&, YAML::anchor_t a, const std::string&) override {
    Done(m, 1, a);
  }
  void OnSequenceStart(const YAML::Mark& m, const std::string&, YAML::anchor_t a,
                       YAML::EmitterStyle::value) override {
    open_.push_back({1, a, m});
  }
  void OnSequenceEnd() override { Close(); }
  void OnMapStart(const YAML::Mark& m, const std::string&, YAML::anchor_t a, YAML::EmitterStyle::value) override {
    open_.push_back({1, a, m});
  }
  void OnMapEnd() override { Close(); }

 private:
  YAML::Mark document_start_;
  struct Open {
    int64_t size;
    YAML::anchor_t anchor;
    YAML::Mark mark;
  };
  void Done(const YAML::Mark& m, int64_t size, YAML::anchor_t anchor) {
    if (anchor != YAML::NullAnchor) {
      if (sizes_.size() <= anchor) sizes_.resize(anchor + 1, 1);
      sizes_[anchor] = size;
    }
    if (open_.empty()) return;
    int64_t& parent = open_.back().size;
    parent = std::min(parent + size, kMaxYamlNodes + 1);
    if (parent > kMaxYamlNodes && !exceeded_) {
      exceeded_ = true;
      where_ = m;
    }
  }
  void Close() {
    const Open o = open_.back();
    open_.pop_back();
    Done(o.mark, o.size, o.anchor);
  }
  std::vector<Open> open_;
  std::vector<int64_t> sizes_;  // by anchor id (yaml-cpp numbers them 1, 2, ...)
  bool exceeded_ = false;
  YAML::Mark where_ = YAML::Mark::null_mark();
};

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
    std::istringstream events{std::string(text)};
    YAML::Parser parser(events);
    ExpandedSizeCounter counter;
    parser.HandleNextDocument(counter);
    if (counter.exceeded()) {
      return absl::InvalidArgumentError(absl::StrCat(
          LocationOf(counter.where(), file, label).ToString(), ": the document expands to more than ",
          kMaxYamlNodes, " YAML nodes once its aliases are expanded (nested anchors and aliases?)"));
    }
    // One document per file: YAML::Load reads the first and would drop a
    // second silently (issue 27), so a second one (even empty, after a
    // `---`) is refused at its start.
    ExpandedSizeCounter second;
    if (parser.HandleNextDocument(second)) {
      return absl::InvalidArgumentError(absl::StrCat(
          LocationOf(second.document_start(), file, label).ToString(),
          ": a second YAML document; a config is one document (remove the '---' and what follows, or merge it)"));
    }
    root = YAML::Load(std::string(text));
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat(LocationOf(e.mark, file, label).ToString(), ": ", e.msg));
  }
  return Convert(root, file, label);
}

absl::StatusOr<ConfigNode> ParseYamlFile(const std::string& path) {
  struct stat st;
  if (stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": ", S_ISDIR(st.st_mode) ? "is a directory" : "is not a regular file", ", expected a YAML file"));
  }
  // A config is small: kMaxYamlNodes nodes at most (Note [Alias budget]);
  // 16 MiB holds that many at 160 bytes each. A larger file is refused
  // before it is read (issue 27: a 1 GB input was read whole first).
  constexpr int64_t kMaxYamlFileBytes = int64_t{16} << 20;
  if (stat(path.c_str(), &st) == 0 && st.st_size > kMaxYamlFileBytes) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", st.st_size, " bytes; a YAML config is at most ",
                                                   kMaxYamlFileBytes, " bytes (16 MiB)"));
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot open file: ", std::strerror(errno)));
  std::stringstream buf;
  buf << in.rdbuf();
  if (in.bad()) return absl::UnavailableError(absl::StrCat(path, ": read error: ", std::strerror(errno)));
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
