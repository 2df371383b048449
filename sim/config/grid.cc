// Typed grid points; see grid.h.
#include "sim/config/grid.h"

#include <filesystem>
#include <map>
#include <mutex>
#include <set>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "sim/base/status.h"
#include "sim/config/megatron_args.h"
#include "sim/config/node.h"
#include "sim/config/overrides.h"
#include "sim/config/schema.h"
#include "sim/config/settings.h"
#include "sim/config/spec_parse.h"

namespace gpusim {

// Note [Typed grid points]
// A grid of N points over a config used to be N YAML parses: each point's
// "path=value" strings went through --set and the whole run tree was
// validated and parsed again. Now the base (the config and its --set
// overrides) is parsed once, each axis value once, and a point is the base
// spec with its values copied in. A value is parsed by the code that parses
// it in a file: the loader's override step checks the path against the
// schema and reads the value as YAML (internal::ApplyOverride), and the
// run-level section reader (internal::ParseRunSettings, the same reads
// ParseRunNode makes) type- and range-checks it into a default spec, from
// which the settings table's setter copies it. Device, model and program
// settings are applied to their section as a whole: their defaults and
// checks span keys (fp16 peak defaults to bf16's, context_reserve below
// cuda_total, n_kv_heads defaults to and divides n_heads), so the section
// is re-parsed with the point's settings of that section, once per
// distinct combination (cached). The checks that span sections
// (CheckModelMagnitudes: model sizes by batch and loop mode) run per point.
// grid_test.cc checks points equal LoadRunSpec with the same --set.

struct GridBase::State {
  RunConfig config;
  std::vector<std::string> base_sets;
  std::string dir;   // the config's directory (device=NAME lookup)
  ConfigNode root;   // resolved, base sets applied
  RunSpec spec;      // root parsed
  bool has_model = false;  // magnitudes are checked per point
  bool maxtext = false;
  bool megatron = false;
  std::string model_at;

  // A section re-parsed with a point's settings of it.
  struct Section {
    DeviceSpec device;
    ModelSpec model;
    ProgramSpec program;
    std::map<std::string, std::string> written;  // under the section
    std::set<std::string> from_model_file;       // model: RunSpec::from_model_file
    std::string at;                              // the section node's location
    RunSpec run;  // maxtext, megatron: the whole run, its block lowered with the settings
  };
  std::mutex mu;
  std::map<std::string, std::shared_ptr<const Section>> sections;  // by section + settings

  absl::StatusOr<std::shared_ptr<const Section>> SectionOf(const std::string& name,
                                                           const std::vector<const GridSetting*>& settings);
};

namespace {

std::vector<std::string> KeysOf(const std::string& path) { return absl::StrSplit(path, '.'); }

// The node at `keys` in `tree`. REQUIRES: ApplyOverride set it.
const ConfigNode& At(const ConfigNode& tree, const std::vector<std::string>& keys) {
  const ConfigNode* n = &tree;
  for (const std::string& k : keys) {
    n = n->Find(k);
    GPUSIM_CHECK(n != nullptr);
  }
  return *n;
}

SourceLocation SetLocation(const std::string& text) {
  SourceLocation loc;
  loc.label = absl::StrCat("--set ", text);
  return loc;
}

}  // namespace

absl::StatusOr<std::shared_ptr<const GridBase::State::Section>> GridBase::State::SectionOf(
    const std::string& name, const std::vector<const GridSetting*>& settings) {
  std::string key = name;
  for (const GridSetting* g : settings) absl::StrAppend(&key, "\n", g->text);
  {
    std::lock_guard<std::mutex> l(mu);
    if (auto it = sections.find(key); it != sections.end()) return it->second;
  }
  if (name == "maxtext") {
    // The block's keys lower into most of the run (sim/config/maxtext.h):
    // the run is parsed whole, once per combination of them.
    std::vector<std::string> sets = base_sets;
    for (const GridSetting* g : settings) sets.push_back(g->text);
    auto s = std::make_shared<Section>();
    ASSIGN_OR_RETURN(s->run, config.Spec(sets));
    std::lock_guard<std::mutex> l(mu);
    return sections.emplace(key, std::move(s)).first->second;
  }
  if (name == "megatron") {
    // The launch line fills most of the run (sim/config/megatron_args.h):
    // the block with the point's keys set (SetMegatronKey), the run parsed
    // whole from it, once per combination.
    auto tree = std::make_shared<ConfigNode>(*config.root_);
    const ConfigEntry* e = tree->FindEntry("megatron");
    GPUSIM_CHECK(e != nullptr);
    ConfigNode block = e->value;
    const SourceLocation block_at = e->key_location;
    for (const GridSetting* g : settings) {
      ASSIGN_OR_RETURN(block, SetMegatronKey(block, g->path.substr(g->path.find('.') + 1),
                                             g->text.substr(g->text.find('=') + 1), SetLocation(g->text)));
    }
    tree->Set("megatron", block_at, std::move(block));
    RunConfig c = config;
    c.root_ = std::move(tree);
    auto s = std::make_shared<Section>();
    ASSIGN_OR_RETURN(s->run, c.Spec(base_sets));
    std::lock_guard<std::mutex> l(mu);
    return sections.emplace(key, std::move(s)).first->second;
  }
  ConfigNode mini = ConfigNode::Map(root.location());
  if (const ConfigEntry* e = root.FindEntry(name)) mini.Set(name, e->key_location, e->value);
  for (const GridSetting* g : settings) {
    const std::vector<std::string> keys = KeysOf(g->path);
    internal::SetPath(mini, keys, SetLocation(g->text), At(*g->tree, keys));
  }
  RETURN_IF_ERROR(ValidateKeys(mini, RunSchema(), ""));
  auto s = std::make_shared<Section>();
  const ConfigNode& node = *mini.Find(name);
  s->at = node.location().ToString();
  if (name == "device") {
    ASSIGN_OR_RETURN(s->device, internal::ParseDeviceNode(node, "device"));
    s->written["device"] = s->at;
  } else if (name == "model") {
    ASSIGN_OR_RETURN(s->model, internal::ParseModelNode(node, "model"));
    internal::RecordWrittenLeaves(node, "model", &s->written);
    internal::RecordModelFileLeaves(node, "model", mini.location().file, &s->from_model_file);
  } else {
    GPUSIM_CHECK(name == "program");
    ASSIGN_OR_RETURN(s->program, internal::ParseProgramNode(mini));
  }
  std::lock_guard<std::mutex> l(mu);
  return sections.emplace(key, std::move(s)).first->second;
}

absl::StatusOr<GridBase> GridBase::Make(const RunConfig& config, const std::vector<std::string>& base_sets) {
  auto state = std::make_shared<State>();
  state->config = config;
  state->base_sets = base_sets;
  state->dir = std::filesystem::path(config.path()).parent_path().string();
  state->root = *config.root_;
  for (const std::string& text : base_sets) RETURN_IF_ERROR(internal::ApplyOverride(state->root, text, state->dir));
  ASSIGN_OR_RETURN(state->spec, config.Spec(base_sets));
  state->maxtext = state->spec.maxtext.present;
  state->megatron = state->spec.megatron.present;
  if (const ConfigNode* m = state->root.Find("model"); m != nullptr && !state->maxtext) {
    state->has_model = true;
    state->model_at = m->location().ToString();
  }
  GridBase g;
  g.state_ = std::move(state);
  return g;
}

const RunSpec& GridBase::spec() const { return state_->spec; }

absl::StatusOr<GridSetting> GridBase::Parse(const std::string& text) const {
  const State& st = *state_;
  if (st.megatron && absl::StartsWith(text, "megatron.")) {
    // megatron is one leaf of the run schema (megatron_args.h checks its
    // keys): SetMegatronKey checks the path, the point's parse the value.
    GridSetting g;
    g.text = text;
    g.path = std::string(absl::StripAsciiWhitespace(absl::string_view(text).substr(0, text.find('='))));
    if (text.find('=') == std::string::npos) {
      return absl::InvalidArgumentError(absl::StrCat("--vary ", text, ": expected PATH=VALUE"));
    }
    g.kind = GridSetting::Kind::kSection;
    g.key = "megatron";
    RETURN_IF_ERROR(state_->SectionOf("megatron", {&g}).status());
    return g;
  }
  ConfigNode probe = ConfigNode::Map(SourceLocation());
  RETURN_IF_ERROR(internal::ApplyOverride(probe, text, st.dir));
  RETURN_IF_ERROR(ValidateKeys(probe, RunSchema(), ""));
  GridSetting g;
  g.text = text;
  g.path = std::string(absl::StripAsciiWhitespace(absl::string_view(text).substr(0, text.find('='))));
  const std::vector<std::string> keys = KeysOf(g.path);
  const std::string& section = keys[0];
  // Refused: the error the whole config gives with this --set, else why a
  // grid cannot vary it.
  auto refuse = [&](absl::string_view why) -> absl::Status {
    std::vector<std::string> sets = st.base_sets;
    sets.push_back(text);
    RETURN_IF_ERROR(st.config.Spec(sets).status());
    return absl::InvalidArgumentError(absl::StrCat("--vary ", g.path, ": not a setting a grid can vary (", why, ")"));
  };
  if (st.maxtext && section == "maxtext") {
    g.kind = GridSetting::Kind::kSection;
    g.key = section;
    RETURN_IF_ERROR(state_->SectionOf(section, {&g}).status());
    return g;
  }
  if (st.maxtext && section != "device" && section != "allocator" && section != "xla" &&
      g.path != "parallelism.gather_dtype") {
    return refuse("beside a maxtext block a grid varies maxtext.*, device, allocator, xla and "
                  "parallelism.gather_dtype");
  }
  if (st.megatron && section != "device" && section != "allocator") {
    return refuse("beside a megatron block a grid varies megatron.world_size, megatron.gpus_per_node, "
                  "megatron.args.NAME, device and allocator");
  }
  if (section == "device" || section == "model" || section == "program") {
    const bool present = section == "device" || (section == "model" ? st.has_model : st.spec.program.present);
    if (!present) return refuse(absl::StrCat("the config has no ", section, " section"));
    g.kind = GridSetting::Kind::kSection;
    g.key = section;
    g.tree = std::make_shared<const ConfigNode>(std::move(probe));
    RETURN_IF_ERROR(state_->SectionOf(section, {&g}).status());
    return g;
  }
  const SettingInfo* info = FindSetting(g.path);
  if (info != nullptr && info->copy != nullptr) {
    g.kind = GridSetting::Kind::kField;
    g.setting = info;
  } else if (section == "allocator" && keys.size() == 2) {
    g.kind = GridSetting::Kind::kOption;
    g.key = keys[1];
  } else {
    return refuse("it chooses what the config describes; give one config per value");
  }
  auto parsed = std::make_shared<RunSpec>();
  RETURN_IF_ERROR(internal::ParseRunSettings(probe, parsed.get()));
  g.parsed = std::move(parsed);
  return g;
}

absl::StatusOr<RunSpec> GridBase::Point(const std::vector<const GridSetting*>& settings) const {
  State& st = *state_;
  // maxtext.* settings first: the run their block lowers to is the start.
  // megatron.* likewise.
  std::vector<const GridSetting*> maxtext, megatron;
  for (const GridSetting* g : settings) {
    if (g->kind == GridSetting::Kind::kSection && g->key == "maxtext") maxtext.push_back(g);
    if (g->kind == GridSetting::Kind::kSection && g->key == "megatron") megatron.push_back(g);
  }
  RunSpec s = st.spec;
  if (!maxtext.empty()) {
    ASSIGN_OR_RETURN(std::shared_ptr<const State::Section> sec, st.SectionOf("maxtext", maxtext));
    s = sec->run;
  }
  if (!megatron.empty()) {
    ASSIGN_OR_RETURN(std::shared_ptr<const State::Section> sec, st.SectionOf("megatron", megatron));
    s = sec->run;
  }
  std::vector<std::string> order;  // sections, in the order first set
  std::map<std::string, std::vector<const GridSetting*>> by_section;
  for (const GridSetting* g : settings) {
    switch (g->kind) {
      case GridSetting::Kind::kField:
        g->setting->copy(*g->parsed, s);
        break;
      case GridSetting::Kind::kOption:
        s.allocator.options[g->key] = g->parsed->allocator.options.at(g->key);
        break;
      case GridSetting::Kind::kSection: {
        if (g->key == "maxtext" || g->key == "megatron") break;
        auto [it, inserted] = by_section.try_emplace(g->key);
        if (inserted) order.push_back(g->key);
        it->second.push_back(g);
        break;
      }
    }
    if (g->parsed != nullptr) {
      for (const auto& [path, at] : g->parsed->written) s.written[path] = at;
    }
  }
  std::string model_at = st.model_at;
  for (const std::string& name : order) {
    ASSIGN_OR_RETURN(std::shared_ptr<const State::Section> sec, st.SectionOf(name, by_section[name]));
    if (name == "device") {
      s.device = sec->device;
    } else if (name == "model") {
      s.model = sec->model;
      model_at = sec->at;
      for (auto it = s.written.begin(); it != s.written.end();) {
        it = absl::StartsWith(it->first, "model.") ? s.written.erase(it) : std::next(it);
      }
      s.from_model_file = sec->from_model_file;
    } else {
      s.program = sec->program;
    }
    for (const auto& [path, at] : sec->written) s.written[path] = at;
  }
  if (st.has_model) {
    absl::Status magnitudes = internal::CheckModelMagnitudes(s);
    if (!magnitudes.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(model_at, ": model: ", magnitudes.message()));
    }
  }
  return s;
}

}  // namespace gpusim
