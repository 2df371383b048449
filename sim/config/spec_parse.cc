// Typed parse of a resolved config tree; see spec_parse.h.
#include "sim/config/spec_parse.h"

#include <charconv>
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "sim/base/status.h"
#include "sim/config/schema.h"
#include "sim/config/units_parse.h"

namespace gpusim {
namespace internal {
namespace {

constexpr int64_t kNoMin = std::numeric_limits<int64_t>::min();
constexpr int64_t kNoMax = std::numeric_limits<int64_t>::max();
enum Need { kOptional, kRequired };

bool ParseInt(const std::string& s, int64_t* out) {
  const char* begin = s.data();
  const char* end = s.data() + s.size();
  if (begin != end && *begin == '+') ++begin;
  if (begin == end) return false;
  auto [ptr, ec] = std::from_chars(begin, end, *out);
  return ec == std::errc() && ptr == end;
}

bool ParseDouble(const std::string& s, double* out) {
  const char* begin = s.data();
  const char* end = s.data() + s.size();
  if (begin != end && *begin == '+') ++begin;
  if (begin == end) return false;
  auto [ptr, ec] = std::from_chars(begin, end, *out);
  return ec == std::errc() && ptr == end && std::isfinite(*out);
}

// Reads the keys of one mapping. The first error is kept in a status shared
// by a reader and its sub-readers; after it every read is a no-op, so parse
// code reads straight through and checks status() once.
class Reader {
 public:
  Reader(const ConfigNode* map, const Schema* schema, std::string path,
         SourceLocation anchor, absl::Status* status)
      : map_(map), schema_(schema), path_(std::move(path)),
        anchor_(std::move(anchor)), status_(status) {}

  // A reader over `node`, which must be a mapping (null reads as empty).
  static Reader Top(const ConfigNode& node, const Schema& schema,
                    const std::string& path, absl::Status* status) {
    Reader r(nullptr, &schema, path, node.location(), status);
    if (node.is_map()) {
      r.map_ = &node;
    } else if (!node.is_null()) {
      r.Fail(node, "", absl::StrCat("expected a mapping, got ", node.Describe()));
    }
    return r;
  }

  bool ok() const { return status_->ok(); }
  const std::string& path() const { return path_; }

  // The value written for `key`, or nullptr. `key` must be in the schema.
  const ConfigNode* Get(absl::string_view key) const {
    GPUSIM_CHECK(schema_->Find(key) != nullptr);
    return map_ == nullptr ? nullptr : map_->Find(key);
  }

  void Fail(const ConfigNode& at, absl::string_view key, absl::string_view msg) {
    Fail(at.location(), key, msg);
  }
  void Fail(const SourceLocation& loc, absl::string_view key,
            absl::string_view msg) {
    if (!ok()) return;
    std::string path = JoinPath(path_, key);
    *status_ = absl::InvalidArgumentError(absl::StrCat(
        loc.ToString(), ": ", path.empty() ? "" : absl::StrCat(path, ": "),
        msg));
  }

  Reader Map(absl::string_view key) {
    const ConfigNode* n = Get(key);
    Reader sub(nullptr, schema_->Find(key), JoinPath(path_, key), anchor(),
               status_);
    if (n == nullptr || !ok()) return sub;
    sub.anchor_ = n->location();
    if (n->is_map()) {
      sub.map_ = n;
    } else if (!n->is_null()) {
      Fail(*n, key, absl::StrCat("expected a mapping, got ", n->Describe()));
    }
    return sub;
  }

  // The scalar for `key`; nullptr when absent (an error if required) or not
  // a scalar (an error naming `what`).
  const ConfigNode* Scalar(absl::string_view key, Need need,
                           absl::string_view what) {
    if (!ok()) return nullptr;
    const ConfigNode* n = Get(key);
    if (n == nullptr) {
      if (need == kRequired) Fail(anchor(), key, "missing required key");
      return nullptr;
    }
    if (!n->is_scalar()) {
      Fail(*n, key, absl::StrCat("expected ", what, ", got ", n->Describe()));
      return nullptr;
    }
    return n;
  }

  void Int(absl::string_view key, int64_t* out, Need need,
           int64_t min = kNoMin, int64_t max = kNoMax) {
    const ConfigNode* n = Scalar(key, need, "an integer");
    if (n == nullptr) return;
    int64_t v = 0;
    if (!ParseInt(n->scalar(), &v)) {
      Fail(*n, key, absl::StrCat("expected an integer, got ", n->Describe()));
    } else if (v < min || v > max) {
      std::string range =
          max == kNoMax ? absl::StrCat(">= ", min)
                        : absl::StrCat("in [", min, ", ", max, "]");
      Fail(*n, key, absl::StrCat("expected an integer ", range, ", got ",
                                 n->Describe()));
    } else {
      *out = v;
    }
  }
  void Int(absl::string_view key, int* out, Need need, int64_t min = 0) {
    int64_t v = *out;
    Int(key, &v, need, min, std::numeric_limits<int>::max());
    *out = static_cast<int>(v);
  }

  // A fraction in (0, 1].
  void Fraction(absl::string_view key, double* out) {
    const ConfigNode* n = Scalar(key, kOptional, "a number in (0, 1]");
    if (n == nullptr) return;
    double v = 0;
    if (!ParseDouble(n->scalar(), &v) || v <= 0 || v > 1) {
      Fail(*n, key,
           absl::StrCat("expected a number in (0, 1], got ", n->Describe()));
    } else {
      *out = v;
    }
  }

  void Bool(absl::string_view key, bool* out, Need need = kOptional) {
    const ConfigNode* n = Scalar(key, need, "true or false");
    if (n == nullptr) return;
    const std::string& s = n->scalar();
    if (s == "true" || s == "True" || s == "TRUE") {
      *out = true;
    } else if (s == "false" || s == "False" || s == "FALSE") {
      *out = false;
    } else {
      Fail(*n, key, absl::StrCat("expected true or false, got ", n->Describe()));
    }
  }

  void DTypeField(absl::string_view key, DType* out) {
    static constexpr char kWhat[] =
        "a dtype (f32, bf16, f16, f8, i32, i64, u8, pred)";
    const ConfigNode* n = Scalar(key, kOptional, kWhat);
    if (n == nullptr) return;
    std::optional<DType> t = ParseDType(n->scalar());
    if (!t.has_value()) {
      Fail(*n, key, absl::StrCat("expected ", kWhat, ", got ", n->Describe()));
    } else {
      *out = *t;
    }
  }

  void String(absl::string_view key, std::string* out, Need need,
              bool allow_empty = false) {
    const ConfigNode* n = Scalar(key, need, "a string");
    if (n == nullptr) return;
    if (n->scalar().empty() && !allow_empty) {
      Fail(*n, key, "expected a non-empty string, got ''");
    } else {
      *out = n->scalar();
    }
  }

  void Enum(absl::string_view key, std::string* out,
            std::initializer_list<absl::string_view> choices,
            Need need = kOptional) {
    std::string what = absl::StrCat("one of ", absl::StrJoin(choices, "|"));
    const ConfigNode* n = Scalar(key, need, what);
    if (n == nullptr) return;
    for (absl::string_view c : choices) {
      if (n->scalar() == c) {
        *out = n->scalar();
        return;
      }
    }
    Fail(*n, key, absl::StrCat("expected ", what, ", got ", n->Describe()));
  }

  void StringList(absl::string_view key, std::vector<std::string>* out) {
    const ConfigNode* n = Get(key);
    if (n == nullptr || !ok()) return;
    out->clear();
    if (n->is_null()) return;
    bool good = n->is_sequence();
    if (good) {
      for (const ConfigNode& item : n->items()) good &= item.is_scalar();
    }
    if (!good) {
      Fail(*n, key, absl::StrCat("expected a sequence of names such as "
                                 "[attn_out, mlp_in], got ",
                                 n->Describe()));
      return;
    }
    for (const ConfigNode& item : n->items()) out->push_back(item.scalar());
  }

  // Fields parsed by a units_parse.h function; `positive` rejects zero.
  template <typename T, typename ParseFn>
  void Unit(absl::string_view key, T* out, Need need, ParseFn parse,
            absl::string_view what, bool positive = false) {
    const ConfigNode* n = Scalar(key, need, what);
    if (n == nullptr) return;
    absl::StatusOr<T> v = parse(n->scalar());
    if (!v.ok()) {
      Fail(*n, key, v.status().message());
    } else if (positive && !(T() < *v)) {
      Fail(*n, key, absl::StrCat("expected a positive value, got ",
                                 n->Describe()));
    } else {
      *out = *v;
    }
  }

 private:
  const SourceLocation& anchor() const { return anchor_; }

  const ConfigNode* map_;
  const Schema* schema_;
  std::string path_;
  SourceLocation anchor_;  // the mapping, or the nearest written ancestor
  absl::Status* status_;
};

constexpr char kBytesWhat[] = "a byte size such as 80GiB";
constexpr char kRateWhat[] = "a bandwidth such as 3350GB/s";
constexpr char kFlopWhat[] = "a FLOP rate such as 989TFLOP/s";
constexpr char kTimeWhat[] = "a duration such as 5us";

}  // namespace

absl::StatusOr<DeviceSpec> ParseDeviceNode(const ConfigNode& node,
                                           const std::string& path) {
  absl::Status status;
  DeviceSpec d;
  d.source_file = node.location().file;
  d.link_latency = SimTime(5000);
  d.launch_overhead = SimTime(4000);
  d.matmul_efficiency = 0.80;
  d.attention_efficiency = 0.60;
  d.memory_efficiency = 0.85;
  d.collective_efficiency = 0.80;

  Reader r = Reader::Top(node, DeviceSchema(), path, &status);
  r.String("name", &d.name, kRequired);
  r.String("description", &d.description, kOptional, /*allow_empty=*/true);
  r.Int("sms", &d.sms, kRequired, /*min=*/1);
  Reader mem = r.Map("memory");
  mem.Unit("cuda_total", &d.cuda_total, kRequired, ParseBytes, kBytesWhat,
           /*positive=*/true);
  mem.Unit("context_reserve", &d.context_reserve, kRequired, ParseBytes,
           kBytesWhat);
  if (status.ok() && d.context_reserve >= d.cuda_total) {
    mem.Fail(*mem.Get("context_reserve"), "context_reserve",
             absl::StrCat("expected less than memory.cuda_total (",
                          d.cuda_total.value(), " bytes), got ",
                          mem.Get("context_reserve")->Describe()));
  }
  r.Unit("hbm_bandwidth", &d.hbm_bandwidth, kRequired, ParseRate, kRateWhat,
         /*positive=*/true);
  r.Unit("l2", &d.l2, kOptional, ParseBytes, kBytesWhat);
  Reader flops = r.Map("flops");
  flops.Unit("bf16", &d.peak_bf16, kRequired, ParseFlopRate, kFlopWhat, true);
  d.peak_fp16 = d.peak_bf16;
  d.peak_tf32 = d.peak_bf16 / 2;
  flops.Unit("fp16", &d.peak_fp16, kOptional, ParseFlopRate, kFlopWhat, true);
  flops.Unit("tf32", &d.peak_tf32, kOptional, ParseFlopRate, kFlopWhat, true);
  flops.Unit("fp32", &d.peak_fp32, kRequired, ParseFlopRate, kFlopWhat, true);
  Reader links = r.Map("links");
  links.Unit("nvlink", &d.nvlink_bandwidth, kOptional, ParseRate, kRateWhat);
  links.Unit("pcie", &d.pcie_bandwidth, kOptional, ParseRate, kRateWhat);
  links.Unit("network", &d.network_bandwidth, kOptional, ParseRate, kRateWhat);
  links.Unit("latency", &d.link_latency, kOptional, ParseDuration, kTimeWhat);
  r.Unit("launch_overhead", &d.launch_overhead, kOptional, ParseDuration,
         kTimeWhat);
  Reader eff = r.Map("efficiency");
  eff.Fraction("matmul", &d.matmul_efficiency);
  eff.Fraction("attention", &d.attention_efficiency);
  eff.Fraction("memory", &d.memory_efficiency);
  eff.Fraction("collective", &d.collective_efficiency);
  RETURN_IF_ERROR(status);
  return d;
}

absl::StatusOr<ModelSpec> ParseModelNode(const ConfigNode& node,
                                         const std::string& path) {
  absl::Status status;
  ModelSpec m;
  Reader r = Reader::Top(node, ModelSchema(), path, &status);
  r.String("name", &m.name, kOptional);
  r.Enum("family", &m.family, {"llama", "gpt"}, kRequired);
  r.Int("d_model", &m.d_model, kRequired, 1);
  r.Int("n_layers", &m.n_layers, kRequired, 1);
  r.Int("n_heads", &m.n_heads, kRequired, 1);
  m.n_kv_heads = m.n_heads;
  r.Int("n_kv_heads", &m.n_kv_heads, kOptional, 1);
  if (status.ok() && m.n_heads % m.n_kv_heads != 0) {
    r.Fail(*r.Get("n_kv_heads"), "n_kv_heads",
           absl::StrCat("expected a divisor of n_heads (", m.n_heads,
                        "), got ", r.Get("n_kv_heads")->Describe()));
  }
  r.Int("head_dim", &m.head_dim, kRequired, 1);
  r.Int("mlp_dim", &m.mlp_dim, kRequired, 1);
  r.Int("vocab", &m.vocab, kRequired, 1);
  r.Bool("tied_embeddings", &m.tied_embeddings);
  r.DTypeField("weight_dtype", &m.weight_dtype);
  r.DTypeField("compute_dtype", &m.compute_dtype);
  r.DTypeField("logits_dtype", &m.logits_dtype);
  r.Enum("attention", &m.attention, {"flash", "explicit"});
  r.Int("param_scan_axis", &m.param_scan_axis, kOptional, 0);
  r.Bool("scan_layers", &m.scan_layers);
  RETURN_IF_ERROR(status);
  return m;
}

absl::StatusOr<RunSpec> ParseRunNode(const ConfigNode& root) {
  absl::Status status;
  RunSpec run;
  run.source_file = root.location().file;
  Reader r = Reader::Top(root, RunSchema(), "", &status);
  r.Enum("framework", &run.framework, {"jax", "pytorch"});
  for (absl::string_view key : {"device", "model"}) {
    if (r.ok() && r.Get(key) == nullptr) {
      r.Fail(root.location(), key, "missing required key");
    }
  }
  RETURN_IF_ERROR(status);
  ASSIGN_OR_RETURN(run.device, ParseDeviceNode(*r.Get("device"), "device"));
  ASSIGN_OR_RETURN(run.model, ParseModelNode(*r.Get("model"), "model"));

  Reader opt = r.Map("optimizer");
  opt.Enum("kind", &run.optimizer.kind, {"adamw", "sgd"});
  opt.DTypeField("moment_dtype", &run.optimizer.moment_dtype);
  opt.Bool("clip_grad_norm", &run.optimizer.clip_grad_norm);
  Reader loop = r.Map("loop");
  loop.Enum("mode", &run.loop.mode, {"rolled", "unrolled"});
  loop.Int("trip_count", &run.loop.trip_count, kOptional, 0);
  loop.Int("unroll", &run.loop.unroll, kOptional, 1);
  Reader remat = r.Map("remat");
  remat.String("policy", &run.remat.policy, kOptional);
  remat.StringList("names", &run.remat.names);
  remat.StringList("offload_names", &run.remat.offload_names);
  Reader par = r.Map("parallelism");
  par.Int("fsdp", &run.parallelism.fsdp, kOptional, 1);
  par.Int("tensor", &run.parallelism.tensor, kOptional, 1);
  par.Bool("sequence_parallel", &run.parallelism.sequence_parallel);
  par.Enum("gather_dtype", &run.parallelism.gather_dtype,
           {"compute", "weight"});
  Reader batch = r.Map("batch");
  batch.Int("per_device", &run.batch.per_device, kOptional, 1);
  batch.Int("seq_len", &run.batch.seq_len, kOptional, 1);
  Reader alloc = r.Map("allocator");
  alloc.String("impl", &run.allocator.impl, kOptional);
  // Every other allocator key is an option for the allocator registry.
  if (const ConfigNode* a = r.Get("allocator"); a != nullptr && a->is_map()) {
    for (const ConfigEntry& e : a->entries()) {
      if (e.key == "impl") continue;
      if (!e.value.is_scalar()) {
        alloc.Fail(e.value, e.key,
                   absl::StrCat("expected a scalar option value, got ",
                                e.value.Describe()));
        break;
      }
      run.allocator.options[e.key] = e.value.scalar();
    }
  }
  RETURN_IF_ERROR(status);
  return run;
}

}  // namespace internal
}  // namespace gpusim
