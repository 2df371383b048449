// Name resolution, `from:` merging and `--set` overrides; see loader.h.
#include "sim/config/loader.h"

#include "sim/base/names.h"

#include <algorithm>
#include <filesystem>
#include <set>
#include "absl/strings/string_view.h"
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "sim/base/data_dir.h"
#include "sim/base/file_util.h"
#include "sim/base/status.h"
#include "sim/config/node.h"
#include "sim/config/overrides.h"
#include "sim/config/schema.h"
#include "sim/config/spec_parse.h"

namespace gpusim {
namespace {

namespace fs = std::filesystem;

// How `from:` chains may nest (a device file starting from another).
constexpr int kMaxFromDepth = 8;

// The two things a run config refers to by name.
struct RefKind {
  absl::string_view key;     // "device": the run-config key and the noun
  absl::string_view subdir;  // "devices": the folder of NAME.yaml files
};
constexpr RefKind kDevice{"device", "devices"};
constexpr RefKind kModel{"model", "models"};

// Where relative references are resolved from.
struct Bases {
  std::string names;  // directory of the including file, for NAME lookup
  std::string paths;  // directory relative PATHs are resolved against
  std::string first;  // searched for NAMEs before the rest: the folder of a
                      // device file that starts `from:` a sibling
};

absl::Status Error(const SourceLocation& loc, absl::string_view path,
                   absl::string_view msg) {
  std::string text = loc.ToString();
  if (!text.empty()) text += ": ";
  if (!path.empty()) absl::StrAppend(&text, path, ": ");
  return absl::InvalidArgumentError(absl::StrCat(text, msg));
}

std::string Join(const std::string& dir, absl::string_view name) {
  fs::path p{std::string(name)};
  if (dir.empty() || p.is_absolute()) return p.lexically_normal().string();
  return (fs::path(dir) / p).lexically_normal().string();
}

std::string DirName(const std::string& file) {
  return fs::path(file).parent_path().string();
}

bool IsFile(const std::string& path) {
  std::error_code ec;
  return fs::is_regular_file(path, ec);
}

std::vector<std::string> SearchDirs(const RefKind& kind,
                                    const std::string& base_dir,
                                    const std::string& first = "") {
  std::vector<std::string> dirs;
  if (!first.empty()) dirs.push_back(first);
  if (!base_dir.empty()) {
    dirs.push_back(Join(base_dir, kind.subdir));
    dirs.push_back(Join(base_dir, absl::StrCat("../configs/", kind.subdir)));
  }
  dirs.push_back(Join(DataDir(), absl::StrCat("configs/", kind.subdir)));  // installed or source tree
  return dirs;
}

std::vector<std::string> ListNames(const std::vector<std::string>& dirs) {
  std::set<std::string> names;
  for (const std::string& dir : dirs) {
    std::error_code ec;
    for (fs::directory_iterator it(dir, ec), end; !ec && it != end;
         it.increment(ec)) {
      if (it->path().extension() == ".yaml" && IsFile(it->path().string())) {
        names.insert(it->path().stem().string());
      }
    }
  }
  return {names.begin(), names.end()};
}

bool LooksLikePath(absl::string_view s) {
  return absl::StrContains(s, '/') || absl::EndsWith(s, ".yaml") ||
         absl::EndsWith(s, ".yml");
}

absl::StatusOr<std::string> FindFile(const std::string& name,
                                     const RefKind& kind, const Bases& bases,
                                     const SourceLocation& loc,
                                     absl::string_view path) {
  if (LooksLikePath(name)) {
    std::string file = Join(bases.paths, name);
    if (IsFile(file)) return file;
    return Error(loc, path, absl::StrCat("no such file '", file, "'"));
  }
  std::vector<std::string> dirs = SearchDirs(kind, bases.names, bases.first);
  for (const std::string& dir : dirs) {
    std::string file = Join(dir, absl::StrCat(name, ".yaml"));
    if (IsFile(file)) return file;
  }
  std::vector<std::string> names = ListNames(dirs);
  // Case folded: `H100-SXM-80GB` is the file h100-sxm-80gb.yaml (the one
  // name equal but for case; the search order above decides among dirs).
  if (const std::string folded = CaseFoldedName(name, names); !folded.empty()) {
    for (const std::string& dir : dirs) {
      std::string file = Join(dir, absl::StrCat(folded, ".yaml"));
      if (IsFile(file)) return file;
    }
  }
  std::vector<std::string> searched;
  for (const std::string& d : dirs) {
    if (std::find(searched.begin(), searched.end(), d) == searched.end()) searched.push_back(d);
  }
  return Error(loc, path,
               absl::StrCat(names.empty() ? absl::StrCat("unknown ", kind.key, " '", name, "'; available: (none)")
                                          : UnknownNameMessage(kind.key, name, names),
                            " (searched ", absl::StrJoin(searched, ", "), ")"));
}

absl::StatusOr<ConfigNode> ResolveRef(const ConfigNode& ref,
                                      const RefKind& kind, const Bases& bases,
                                      const std::string& path, int depth);

// Reads NAME_OR_PATH; a file that itself starts with `from:` is resolved
// relative to its own directory, NAMEs first among its siblings.
absl::StatusOr<ConfigNode> LoadRefFile(const std::string& name,
                                       const RefKind& kind, const Bases& bases,
                                       const SourceLocation& loc,
                                       const std::string& path, int depth) {
  if (depth > kMaxFromDepth) {
    return Error(loc, path, absl::StrCat("'from:' chain deeper than ",
                                         kMaxFromDepth, " files (a cycle?)"));
  }
  ASSIGN_OR_RETURN(std::string file, FindFile(name, kind, bases, loc, path));
  ASSIGN_OR_RETURN(ConfigNode node, ParseYamlFile(file));
  if (!node.is_map()) {
    return Error(node.location(), path,
                 absl::StrCat("expected a mapping of ", kind.key,
                              " keys at the top of the file, got ",
                              node.DescribeKind()));
  }
  if (node.Find("from") == nullptr) return node;
  std::string dir = DirName(file);
  return ResolveRef(node, kind, Bases{dir, dir, dir}, path, depth + 1);
}

absl::StatusOr<ConfigNode> ResolveRef(const ConfigNode& ref,
                                      const RefKind& kind, const Bases& bases,
                                      const std::string& path, int depth) {
  if (ref.is_scalar()) {
    return LoadRefFile(ref.scalar(), kind, bases, ref.location(), path, depth);
  }
  if (!ref.is_map()) {
    return Error(ref.location(), path,
                 absl::StrCat("expected a ", kind.key,
                              " name, a path to a .yaml file, or a mapping "
                              "with 'from:', got ",
                              ref.Describe()));
  }
  const ConfigNode* from = ref.Find("from");
  if (from == nullptr) return ref;  // written inline in full
  if (!from->is_scalar()) {
    return Error(from->location(), internal::JoinPath(path, "from"),
                 absl::StrCat("expected a ", kind.key,
                              " name or a path to a .yaml file, got ",
                              from->Describe()));
  }
  ASSIGN_OR_RETURN(ConfigNode base, LoadRefFile(from->scalar(), kind, bases,
                                                from->location(), path, depth));
  ConfigNode over = ref;
  over.Erase("from");
  DeepMerge(base, over);
  return base;
}

}  // namespace

namespace internal {

void SetPath(ConfigNode& root, const std::vector<std::string>& keys,
             const SourceLocation& loc, ConfigNode value) {
  if (!root.is_map()) root = ConfigNode::Map(root.location());
  ConfigNode* node = &root;
  for (size_t i = 0; i + 1 < keys.size(); ++i) {
    ConfigNode* child = node->FindMutable(keys[i]);
    if (child == nullptr || !child->is_map()) {
      node->Set(keys[i], loc, ConfigNode::Map(loc));
      child = node->FindMutable(keys[i]);
    }
    node = child;
  }
  node->Set(keys.back(), loc, std::move(value));
}

absl::Status ApplyOverride(ConfigNode& root, const std::string& text,
                           const std::string& config_dir) {
  SourceLocation loc;
  loc.label = absl::StrCat("--set ", text);
  size_t eq = text.find('=');
  std::string path(absl::StripAsciiWhitespace(
      absl::string_view(text).substr(0, eq == std::string::npos ? 0 : eq)));
  std::vector<std::string> keys = absl::StrSplit(path, '.');
  if (eq == std::string::npos || path.empty() ||
      std::any_of(keys.begin(), keys.end(),
                  [](const std::string& k) { return k.empty(); })) {
    return Error(loc, "",
                 "expected PATH=VALUE such as --set model.n_layers=2");
  }
  // The path must exist in the schema, written in the file or not.
  static const Schema* const kOption = new Schema(Schema::Leaf());
  const Schema* schema = &RunSchema();
  std::string walked;
  for (size_t i = 0; i < keys.size(); ++i) {
    if (!schema->is_map_like()) {
      const bool list = schema->kind() == Schema::Kind::kList;
      return Error(loc, walked,
                   absl::StrCat(list ? "is a sequence (set it whole)"
                                     : "is a single value",
                                "; it has no key '", keys[i], "'"));
    }
    const Schema* child = schema->Find(keys[i]);
    if (child == nullptr && schema->kind() == Schema::Kind::kOpenMap &&
        i + 1 == keys.size()) {
      child = kOption;
    }
    if (child == nullptr) {
      return Error(loc, walked, internal::UnknownKeyMessage(keys[i], *schema));
    }
    walked = internal::JoinPath(walked, keys[i]);
    schema = child;
  }
  ASSIGN_OR_RETURN(ConfigNode value,
                   ParseYamlString(text.substr(eq + 1), "", loc.label));
  if (schema->kind() == Schema::Kind::kRef) {  // device=NAME, model=NAME
    const RefKind& kind = keys[0] == kDevice.key ? kDevice : kModel;
    ASSIGN_OR_RETURN(value, ResolveRef(value, kind, Bases{config_dir, "", ""},
                                       keys[0], 0));
  }
  SetPath(root, keys, loc, std::move(value));
  return absl::OkStatus();
}

}  // namespace internal

namespace {

// Resolves, validates and parses a single device or model.
template <typename Spec, typename ParseFn>
absl::StatusOr<Spec> LoadOne(const std::string& name_or_path,
                             const std::string& base_dir, const RefKind& kind,
                             const Schema& schema, ParseFn parse) {
  SourceLocation loc;
  ConfigNode ref = ConfigNode::Scalar(name_or_path, loc);
  ASSIGN_OR_RETURN(ConfigNode node,
                   ResolveRef(ref, kind, Bases{base_dir, base_dir, ""}, "", 0));
  RETURN_IF_ERROR(ValidateKeys(node, schema, ""));
  return parse(node, "");
}

// The run config `root` read from `path`: resolves device/model, applies
// `overrides`, parses strictly.
absl::StatusOr<RunSpec> RunSpecFromNode(ConfigNode root, const std::string& path,
                                        const std::vector<std::string>& overrides);

}  // namespace

namespace {

thread_local const ScopedRunConfigText* innermost_text = nullptr;

// The top-level run config at `path`: registered text (Note [Run configs
// given as text]) or the file.
absl::StatusOr<ConfigNode> ParseRunConfigFile(const std::string& path) {
  if (const ScopedRunConfigText* t = ScopedRunConfigText::Find(path)) return ParseYamlString(t->yaml(), path);
  return ParseYamlFile(path);
}

}  // namespace

ScopedRunConfigText::ScopedRunConfigText(std::string label, std::string yaml)
    : previous_(innermost_text), label_(std::move(label)), yaml_(std::move(yaml)) {
  innermost_text = this;
}

ScopedRunConfigText::~ScopedRunConfigText() { innermost_text = previous_; }

const ScopedRunConfigText* ScopedRunConfigText::Find(const std::string& label) {
  for (const ScopedRunConfigText* t = innermost_text; t != nullptr; t = t->previous_) {
    if (t->label_ == label) return t;
  }
  return nullptr;
}

bool IsRunConfigText(const std::string& path) { return ScopedRunConfigText::Find(path) != nullptr; }

absl::StatusOr<std::string> ReadRunConfigBytes(const std::string& path) {
  if (const ScopedRunConfigText* t = ScopedRunConfigText::Find(path)) return t->yaml();
  return ReadFileToString(path);
}

absl::StatusOr<RunSpec> LoadRunSpec(const std::string& path,
                                    const std::vector<std::string>& overrides) {
  ASSIGN_OR_RETURN(ConfigNode root, ParseRunConfigFile(path));
  return RunSpecFromNode(std::move(root), path, overrides);
}

absl::StatusOr<RunSpec> ParseRunSpec(absl::string_view yaml, const std::string& path,
                                     const std::vector<std::string>& overrides) {
  ASSIGN_OR_RETURN(ConfigNode root, ParseYamlString(yaml, path));
  return RunSpecFromNode(std::move(root), path, overrides);
}

namespace {

// `root` with device and model references resolved.
absl::StatusOr<ConfigNode> Resolve(ConfigNode root, const std::string& path) {
  if (root.is_null()) root = ConfigNode::Map(root.location());
  if (!root.is_map()) {
    return Error(root.location(), "",
                 absl::StrCat("expected a mapping of run keys at the top of "
                              "the file, got ",
                              root.DescribeKind()));
  }
  const std::string dir = DirName(path);
  for (const RefKind* kind : {&kDevice, &kModel}) {
    if (ConfigNode* ref = root.FindMutable(kind->key)) {
      ASSIGN_OR_RETURN(*ref, ResolveRef(*ref, *kind, Bases{dir, dir, ""},
                                        std::string(kind->key), 0));
    }
  }
  return root;
}

// A resolved `root` with `overrides` applied, validated and parsed.
absl::StatusOr<RunSpec> SpecFromResolved(ConfigNode root, const std::string& path,
                                         const std::vector<std::string>& overrides) {
  const std::string dir = DirName(path);
  for (const std::string& text : overrides) {
    RETURN_IF_ERROR(internal::ApplyOverride(root, text, dir));
  }
  RETURN_IF_ERROR(ValidateKeys(root, RunSchema(), ""));
  return internal::ParseRunNode(root);
}

absl::StatusOr<RunSpec> RunSpecFromNode(ConfigNode root, const std::string& path,
                                        const std::vector<std::string>& overrides) {
  ASSIGN_OR_RETURN(ConfigNode resolved, Resolve(std::move(root), path));
  return SpecFromResolved(std::move(resolved), path, overrides);
}

}  // namespace

absl::StatusOr<DeviceSpec> LoadDeviceSpec(const std::string& name_or_path,
                                          const std::string& base_dir) {
  return LoadOne<DeviceSpec>(name_or_path, base_dir, kDevice, DeviceSchema(),
                             internal::ParseDeviceNode);
}

absl::StatusOr<ModelSpec> LoadModelSpec(const std::string& name_or_path,
                                        const std::string& base_dir) {
  return LoadOne<ModelSpec>(name_or_path, base_dir, kModel, ModelSchema(),
                            internal::ParseModelNode);
}

absl::StatusOr<RunConfig> RunConfig::Read(const std::string& path) {
  ASSIGN_OR_RETURN(ConfigNode root, ParseRunConfigFile(path));
  ASSIGN_OR_RETURN(ConfigNode resolved, Resolve(std::move(root), path));
  RunConfig c;
  c.root_ = std::make_shared<const ConfigNode>(std::move(resolved));
  c.path_ = path;
  return c;
}

absl::StatusOr<RunSpec> RunConfig::Spec(const std::vector<std::string>& overrides) const {
  return SpecFromResolved(*root_, path_, overrides);
}

std::vector<std::string> ListDeviceNames() {
  return ListNames(SearchDirs(kDevice, ""));
}

std::vector<std::string> ListModelNames() {
  return ListNames(SearchDirs(kModel, ""));
}

std::vector<std::string> ListRunConfigNames() { return ListNames({Join(DataDir(), "configs")}); }

absl::StatusOr<std::string> ResolveRunConfig(const std::string& arg) {
  if (IsRunConfigText(arg)) return arg;
  std::error_code ec;
  const bool is_name = !arg.empty() && std::all_of(arg.begin(), arg.end(), [](char c) {
    return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-';
  });
  if (!is_name || fs::exists(arg, ec)) return arg;
  const std::string dir = Join(DataDir(), "configs");
  const std::string file = Join(dir, absl::StrCat(arg, ".yaml"));
  if (IsFile(file)) return file;
  const std::vector<std::string> names = ListRunConfigNames();
  return absl::NotFoundError(absl::StrCat(
      arg, ": no such file, and no bundled run config of that name; bundled: ",
      names.empty() ? "(none)" : absl::StrJoin(names, ", "), " (", dir, "/NAME.yaml)"));
}

}  // namespace gpusim
