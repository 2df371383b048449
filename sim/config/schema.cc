// Schema tables and key validation; see schema.h.
#include "sim/config/schema.h"

#include "sim/base/names.h"
#include "sim/config/maxtext.h"

#include <algorithm>
#include <cctype>
#include <utility>

#include "absl/strings/str_cat.h"

namespace gpusim {

Schema Schema::Leaf() { return Schema(); }

Schema Schema::Map(Kind kind, std::vector<SchemaField> fields) {
  Schema s;
  s.kind_ = kind;
  s.fields_ = std::move(fields);
  return s;
}

Schema Schema::FreeMap(Schema value) {
  Schema s;
  s.kind_ = Kind::kFreeMap;
  s.element_ = std::make_shared<const Schema>(std::move(value));
  return s;
}

Schema Schema::List(Schema item) {
  Schema s;
  s.kind_ = Kind::kList;
  s.element_ = std::make_shared<const Schema>(std::move(item));
  return s;
}

const Schema* Schema::Find(absl::string_view key) const {
  if (kind_ == Kind::kFreeMap) return element_.get();
  for (const SchemaField& f : fields_) {
    if (f.key == key) return &f.schema;
  }
  return nullptr;
}

std::vector<std::string> Schema::Keys() const {
  std::vector<std::string> keys;
  for (const SchemaField& f : fields_) keys.push_back(f.key);
  return keys;
}

namespace {

SchemaField L(std::string key) { return {std::move(key), Schema::Leaf()}; }

SchemaField M(std::string key, std::vector<SchemaField> fields) {
  return {std::move(key), Schema::Map(Schema::Kind::kMap, std::move(fields))};
}

// MaxText's base.yml keys (sim/config/maxtext.h); values are leaves.
std::vector<SchemaField> MaxTextFields() {
  std::vector<SchemaField> fields;
  for (std::string& key : MaxTextKeys()) fields.push_back(L(std::move(key)));
  return fields;
}

std::vector<SchemaField> DeviceFields() {
  return {L("name"),
          L("description"),
          L("sms"),
          L("compute_capability"),
          L("max_threads_per_sm"),
          M("memory", {L("cuda_total"), L("context_reserve")}),
          L("hbm_bandwidth"),
          L("l2"),
          M("flops", {L("bf16"), L("fp16"), L("tf32"), L("fp32"), L("fp8")}),
          M("links", {L("nvlink"), L("pcie"), L("network"), L("latency")}),
          L("launch_overhead"),
          M("efficiency",
            {L("matmul"), L("attention"), L("fused_attention"), L("memory"), L("collective")}),
          M("allocator_cost",
            {L("malloc"), L("free"), L("map_page"), L("unmap_page")}),
          M("host", {L("op"), L("module"), L("megatron_op"), L("megatron_module"), L("dispatch"), L("node"),
                     L("python_module")}),
          L("kernel_model")};
}

std::vector<SchemaField> ModelFields() {
  return {L("name"),          L("family"),          L("d_model"),
          L("n_layers"),      L("n_heads"),         L("n_kv_heads"),
          L("head_dim"),      L("mlp_dim"),         L("vocab"),
          L("tied_embeddings"), L("weight_dtype"),  L("compute_dtype"),
          L("logits_dtype"),  L("attention"),       L("param_scan_axis"),
          L("scan_layers"),   L("experts"),         L("experts_per_token")};
}

SchemaField F(std::string key, Schema schema) {
  return {std::move(key), std::move(schema)};
}

Schema Strict(std::vector<SchemaField> fields) {
  return Schema::Map(Schema::Kind::kMap, std::move(fields));
}

std::vector<SchemaField> ProgramFields() {
  Schema names = Schema::FreeMap(Schema::Leaf());  // body name -> name
  return {L("name"),
          F("inputs", Schema::FreeMap(
                          Strict({L("shape"), L("dtype"), L("donate")}))),
          M("scan", {F("carry", names),
                     F("xs", names),
                     F("consts", names),
                     F("body", Schema::List(
                                   Strict({L("op"), L("out"), L("in")}))),
                     F("carry_out", names)}),
          L("loss"),
          L("grad")};
}

}  // namespace

const Schema& DeviceSchema() {
  static const Schema* s =
      new Schema(Schema::Map(Schema::Kind::kMap, DeviceFields()));
  return *s;
}

const Schema& ModelSchema() {
  static const Schema* s =
      new Schema(Schema::Map(Schema::Kind::kMap, ModelFields()));
  return *s;
}

const Schema& RunSchema() {
  static const Schema* s = new Schema(Schema::Map(
      Schema::Kind::kMap,
      {L("framework"),
       {"device", Schema::Map(Schema::Kind::kRef, DeviceFields())},
       {"model", Schema::Map(Schema::Kind::kRef, ModelFields())},
       M("program", ProgramFields()),
       L("program_hlo"),
       L("megatron"),  // sim/config/megatron_args.h checks its keys and arguments
       M("maxtext", MaxTextFields()),
       M("optimizer", {L("kind"), L("moment_dtype"), L("clip_grad_norm")}),
       M("loop", {L("mode"), L("trip_count"), L("unroll")}),
       M("remat", {L("policy"), L("names"), L("offload_names"), L("policies"), L("method"), L("num_layers")}),
       M("parallelism", {L("fsdp"), L("tensor"), L("sequence_parallel"),
                         L("gather_dtype")}),
       M("batch", {L("per_device"), L("seq_len")}),
       M("xla", {L("dynamic_slice_fusion")}),
       {"allocator", Schema::Map(Schema::Kind::kOpenMap, {L("impl")})}}));
  return *s;
}

namespace internal {

int EditDistance(absl::string_view a, absl::string_view b) {
  return gpusim::EditDistance(a, b);
}

std::string NearestKey(absl::string_view key,
                       const std::vector<std::string>& candidates) {
  return NearestName(key, candidates);
}

std::string UnknownKeyMessage(absl::string_view key, const Schema& level) {
  // A key that no schema could hold (a line of a file that is not a config,
  // e.g. a password file) is described, never echoed.
  const bool key_like = key.size() <= 64 && std::all_of(key.begin(), key.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.';
  });
  if (!key_like) {
    return absl::StrCat("unknown key of ", key.size(),
                        " characters that is not a key name (is this file a gpusim YAML config?)");
  }
  std::string msg = absl::StrCat("unknown key '", key, "'");
  std::string nearest = NearestKey(key, level.Keys());
  if (!nearest.empty()) absl::StrAppend(&msg, " (did you mean '", nearest, "'?)");
  return msg;
}

std::string JoinPath(absl::string_view parent, absl::string_view key) {
  return parent.empty() ? std::string(key) : absl::StrCat(parent, ".", key);
}

}  // namespace internal

absl::Status ValidateKeys(const ConfigNode& node, const Schema& schema,
                          const std::string& path) {
  if (schema.kind() == Schema::Kind::kList) {
    if (!node.is_sequence()) return absl::OkStatus();
    for (size_t i = 0; i < node.items().size(); ++i) {
      absl::Status st = ValidateKeys(node.items()[i], *schema.element(),
                                     absl::StrCat(path, "[", i, "]"));
      if (!st.ok()) return st;
    }
    return absl::OkStatus();
  }
  if (!node.is_map() || !schema.is_map_like()) return absl::OkStatus();
  for (const ConfigEntry& e : node.entries()) {
    const Schema* child = schema.Find(e.key);
    if (child == nullptr) {
      if (schema.kind() == Schema::Kind::kOpenMap) continue;
      if (schema.kind() == Schema::Kind::kRef && e.key == "from") continue;
      std::string prefix = path.empty() ? "" : absl::StrCat(path, ": ");
      return absl::InvalidArgumentError(
          absl::StrCat(e.key_location.ToString(), ": ", prefix,
                       internal::UnknownKeyMessage(e.key, schema)));
    }
    absl::Status st =
        ValidateKeys(e.value, *child, internal::JoinPath(path, e.key));
    if (!st.ok()) return st;
  }
  return absl::OkStatus();
}

}  // namespace gpusim
