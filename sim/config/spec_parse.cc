// Typed parse of a resolved config tree; see spec_parse.h.
#include "sim/config/spec_parse.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <initializer_list>
#include <limits>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/types/span.h"
#include "sim/base/checked.h"
#include "sim/base/status.h"
#include "sim/config/megatron_args.h"
#include "sim/config/maxtext.h"
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
  // The mapping, or where it would have been written.
  const SourceLocation& location() const { return anchor_; }

  // The entries of the mapping in written order; none when it is absent.
  const std::vector<ConfigEntry>& Entries() const {
    static const std::vector<ConfigEntry>* const kNone =
        new std::vector<ConfigEntry>();
    return map_ == nullptr ? *kNone : map_->entries();
  }

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
    std::string path = key.empty() ? path_ : JoinPath(path_, key);
    *status_ = absl::InvalidArgumentError(absl::StrCat(
        loc.ToString(), ": ", path.empty() ? "" : absl::StrCat(path, ": "),
        msg));
  }

  Reader Map(absl::string_view key, Need need = kOptional) {
    const ConfigNode* n = Get(key);
    Reader sub(nullptr, schema_->Find(key), JoinPath(path_, key), anchor(),
               status_);
    if (n == nullptr && need == kRequired) {
      Fail(anchor(), key, "missing required key");
    }
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

  // A fraction in (0, 1], or [0, 1] with `allow_zero`.
  void Fraction(absl::string_view key, double* out, bool allow_zero = false) {
    const char* range = allow_zero ? "[0, 1]" : "(0, 1]";
    const ConfigNode* n = Scalar(key, kOptional, absl::StrCat("a number in ", range));
    if (n == nullptr) return;
    double v = 0;
    if (!ParseDouble(n->scalar(), &v) || v < 0 || (v == 0 && !allow_zero) || v > 1) {
      Fail(*n, key,
           absl::StrCat("expected a number in ", range, ", got ", n->Describe()));
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
            absl::Span<const absl::string_view> choices,
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

  // A sequence of names; null reads as empty. `example` is shown in errors.
  void StringList(absl::string_view key, std::vector<std::string>* out,
                  Need need = kOptional,
                  absl::string_view example = "[attn_out, mlp_in]") {
    if (!ok()) return;
    const ConfigNode* n = Get(key);
    if (n == nullptr) {
      if (need == kRequired) Fail(anchor(), key, "missing required key");
      return;
    }
    out->clear();
    if (n->is_null()) return;
    bool good = n->is_sequence();
    if (good) {
      for (const ConfigNode& item : n->items()) good &= item.is_scalar();
    }
    if (!good) {
      Fail(*n, key, absl::StrCat("expected a sequence of names such as ",
                                 example, ", got ", n->Describe()));
      return;
    }
    for (const ConfigNode& item : n->items()) out->push_back(item.scalar());
  }

  // A shape: a sequence of dims, each an integer >= 1 or `trip_count`
  // (stored as -1); [] is a scalar.
  void Dims(absl::string_view key, std::vector<int64_t>* out, Need need) {
    if (!ok()) return;
    const ConfigNode* n = Get(key);
    if (n == nullptr) {
      if (need == kRequired) Fail(anchor(), key, "missing required key");
      return;
    }
    if (!n->is_sequence()) {
      Fail(*n, key, absl::StrCat("expected a sequence of dims such as "
                                 "[trip_count, 1024], got ",
                                 n->Describe()));
      return;
    }
    std::vector<int64_t> dims;
    for (const ConfigNode& item : n->items()) {
      int64_t v = 0;
      if (item.is_scalar() && item.scalar() == "trip_count") {
        dims.push_back(-1);
      } else if (item.is_scalar() && ParseInt(item.scalar(), &v) && v >= 1) {
        dims.push_back(v);
      } else {
        Fail(item, key, absl::StrCat("expected a dim (an integer >= 1 or "
                                     "trip_count), got ",
                                     item.Describe()));
        return;
      }
    }
    *out = std::move(dims);
  }

  // Readers over the mappings in the sequence at `key` (a kList in the
  // schema), with paths "PATH.key[i]". Null reads as empty.
  std::vector<Reader> Items(absl::string_view key, Need need,
                            absl::string_view what) {
    std::vector<Reader> items;
    if (!ok()) return items;
    const ConfigNode* n = Get(key);
    if (n == nullptr) {
      if (need == kRequired) Fail(anchor(), key, "missing required key");
      return items;
    }
    if (n->is_null()) return items;
    if (!n->is_sequence()) {
      Fail(*n, key, absl::StrCat("expected ", what, ", got ", n->Describe()));
      return items;
    }
    const Schema* item_schema = schema_->Find(key)->element();
    GPUSIM_CHECK(item_schema != nullptr);
    for (size_t i = 0; i < n->items().size(); ++i) {
      items.push_back(Top(n->items()[i], *item_schema,
                          absl::StrCat(JoinPath(path_, key), "[", i, "]"),
                          status_));
    }
    return items;
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

bool Contains(const std::vector<std::string>& names, absl::string_view name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

std::string NameList(const std::vector<std::string>& names) {
  return absl::StrCat("(", absl::StrJoin(names, ", "), ")");
}

std::string ShapeText(const std::vector<int64_t>& shape) {
  return absl::StrCat(
      "[", absl::StrJoin(shape, ", ", [](std::string* out, int64_t d) {
        absl::StrAppend(out, d < 0 ? std::string("trip_count")
                                   : absl::StrCat(d));
      }), "]");
}

// The inputs of `program:`; returns their names.
std::vector<std::string> ParseProgramInputs(Reader& r, ProgramSpec* p) {
  Reader inputs = r.Map("inputs", kRequired);
  std::vector<std::string> input_names;
  for (const ConfigEntry& e : inputs.Entries()) {
    if (e.key == "zero") {
      inputs.Fail(e.key_location, e.key,
                  "'zero' is reserved (a scalar 0 in scan.carry); choose "
                  "another input name");
    }
    ProgramInputSpec in;
    in.name = e.key;
    Reader ir = inputs.Map(e.key);
    ir.Dims("shape", &in.shape, kRequired);
    ir.DTypeField("dtype", &in.dtype);
    ir.Bool("donate", &in.donate);
    input_names.push_back(in.name);
    p->inputs.push_back(std::move(in));
  }
  if (input_names.empty()) {
    inputs.Fail(inputs.location(), "", "expected at least one input");
  }
  return input_names;
}

// The names a scan declares: its carries, xs and consts, each checked
// against the inputs and the names before it.
struct ScanNames {
  std::vector<std::string> carry, xs, consts;
};

// scan.carry: each carry's initial value, an input or zero.
std::vector<std::string> ParseCarry(Reader& scan, ProgramSpec* p, const std::vector<std::string>& input_names) {
  Reader carry = scan.Map("carry", kRequired);
  std::vector<std::string> carry_names;
  for (const ConfigEntry& e : carry.Entries()) {
    std::string init;
    carry.String(e.key, &init, kRequired);
    if (carry.ok() && init != "zero" && !Contains(input_names, init)) {
      carry.Fail(e.value, e.key,
                 absl::StrCat("expected an input name ", NameList(input_names),
                              " or zero, got ", e.value.Describe()));
    }
    carry_names.push_back(e.key);
    p->carry.emplace_back(e.key, init);
  }
  if (carry_names.empty()) {
    carry.Fail(carry.location(), "", "expected at least one carry");
  }

  return carry_names;
}

// scan.xs: the inputs scanned over, each with trip_count leading.
std::vector<std::string> ParseXs(Reader& scan, ProgramSpec* p, const std::vector<std::string>& input_names,
                                 const std::vector<std::string>& carry_names) {
  Reader xs = scan.Map("xs");
  std::vector<std::string> xs_names;
  for (const ConfigEntry& e : xs.Entries()) {
    std::string src;
    xs.String(e.key, &src, kRequired);
    if (!xs.ok()) break;
    auto in = std::find_if(p->inputs.begin(), p->inputs.end(),
                           [&](const ProgramInputSpec& i) { return i.name == src; });
    if (Contains(carry_names, e.key)) {
      xs.Fail(e.key_location, e.key,
              absl::StrCat("'", e.key, "' is already a carry name"));
    } else if (in == p->inputs.end()) {
      xs.Fail(e.value, e.key,
              absl::StrCat("expected an input name ", NameList(input_names),
                           ", got ", e.value.Describe()));
    } else if (in->shape.empty() || in->shape[0] != -1) {
      xs.Fail(e.value, e.key,
              absl::StrCat("expected an input whose shape starts with "
                           "trip_count, got '",
                           src, "' (shape ", ShapeText(in->shape), ")"));
    }
    xs_names.push_back(e.key);
    p->xs.emplace_back(e.key, src);
  }
  return xs_names;
}

std::vector<std::string> ParseConsts(Reader& scan, ProgramSpec* p, const std::vector<std::string>& input_names,
                                     const std::vector<std::string>& carry_names,
                                     const std::vector<std::string>& xs_names) {
  // consts: loop-invariant inputs the body closes over.
  Reader consts = scan.Map("consts");
  std::vector<std::string> const_names;
  for (const ConfigEntry& e : consts.Entries()) {
    std::string src;
    consts.String(e.key, &src, kRequired);
    if (!consts.ok()) break;
    if (Contains(carry_names, e.key) || Contains(xs_names, e.key)) {
      consts.Fail(e.key_location, e.key, absl::StrCat("'", e.key, "' is already a carry or xs name"));
    } else if (!Contains(input_names, src)) {
      consts.Fail(e.value, e.key,
                  absl::StrCat("expected an input name ", NameList(input_names), ", got ", e.value.Describe()));
    }
    const_names.push_back(e.key);
    p->consts.emplace_back(e.key, src);
  }
  return const_names;
}

// scan.body: each op's inputs in scope, its out a new name. Returns false
// where an op's own fields failed (the caller stops); `*outs` the outs in
// order.
bool ParseScanBody(Reader& scan, ProgramSpec* p, const ScanNames& names, std::vector<std::string>* outs_out) {
  const std::vector<std::string>& carry_names = names.carry;
  const std::vector<std::string>& xs_names = names.xs;
  const std::vector<std::string>& const_names = names.consts;
  // Names a body op may read: carries, xs, consts, then each op's out in turn.
  std::vector<std::string> scope = carry_names;
  scope.insert(scope.end(), xs_names.begin(), xs_names.end());
  scope.insert(scope.end(), const_names.begin(), const_names.end());
  std::vector<std::string> outs;
  std::vector<Reader> ops = scan.Items(
      "body", kRequired,
      "a sequence of ops such as [{op: matmul, out: h, in: [x, w]}]");
  if (scan.ok() && ops.empty()) {
    scan.Fail(*scan.Get("body"), "body", "expected at least one op");
  }
  for (Reader& op : ops) {
    ProgramOpSpec o;
    op.Enum("op", &o.op, {"matmul", "mul", "add", "sum", "scale"}, kRequired);
    op.String("out", &o.out, kRequired);
    op.StringList("in", &o.in, kRequired, "[x, w]");
    if (!op.ok()) return false;
    const ConfigNode& in_node = *op.Get("in");
    const size_t arity = o.op == "sum" ? 1 : 2;
    if (o.in.size() != arity) {
      op.Fail(in_node, "in",
              absl::StrCat(o.op, " takes ", arity,
                           arity == 1 ? " input" : " inputs", ", got ",
                           o.in.size()));
    }
    for (size_t j = 0; j < o.in.size(); ++j) {
      if (!Contains(scope, o.in[j])) {
        op.Fail(in_node.items()[j], "in",
                absl::StrCat("expected a carry, xs, const or earlier out name ",
                             NameList(scope), ", got '", o.in[j], "'"));
      }
    }
    const ConfigNode& out_node = *op.Get("out");
    auto earlier = std::find(outs.begin(), outs.end(), o.out);
    if (Contains(carry_names, o.out)) {
      op.Fail(out_node, "out",
              absl::StrCat("'", o.out, "' shadows a carry name"));
    } else if (Contains(xs_names, o.out)) {
      op.Fail(out_node, "out", absl::StrCat("'", o.out, "' shadows an xs name"));
    } else if (earlier != outs.end()) {
      op.Fail(out_node, "out",
              absl::StrCat("'", o.out, "' is already the out of body[",
                           earlier - outs.begin(), "]"));
    }
    scope.push_back(o.out);
    outs.push_back(o.out);
    p->body.push_back(std::move(o));
  }
  *outs_out = std::move(outs);
  return true;
}

void ParseCarryOut(Reader& scan, ProgramSpec* p, const std::vector<std::string>& outs,
                   const std::vector<std::string>& carry_names) {
  // carry_out: exactly the carry names, each from a body out or a carry.
  Reader carry_out = scan.Map("carry_out", kRequired);
  std::vector<std::string> next_names = outs;
  next_names.insert(next_names.end(), carry_names.begin(), carry_names.end());
  std::vector<std::string> written;
  for (const ConfigEntry& e : carry_out.Entries()) {
    std::string next;
    carry_out.String(e.key, &next, kRequired);
    if (!carry_out.ok()) break;
    if (!Contains(carry_names, e.key)) {
      carry_out.Fail(e.key_location, "",
                     absl::StrCat("expected the carry names ",
                                   NameList(carry_names), " as keys, got '",
                                   e.key, "'"));
    } else if (!Contains(next_names, next)) {
      carry_out.Fail(e.value, e.key,
                     absl::StrCat("expected a body out or carry name ",
                                  NameList(next_names), ", got ",
                                  e.value.Describe()));
    }
    written.push_back(e.key);
    p->carry_out.emplace_back(e.key, next);
  }
  for (const std::string& c : carry_names) {
    if (carry_out.ok() && !Contains(written, c)) {
      carry_out.Fail(carry_out.location(), "",
                     absl::StrCat("missing carry '", c, "'"));
    }
  }

}

// `loss` (a carry) and `grad` (inputs, each once).
void ParseLossAndGrad(Reader& r, ProgramSpec* p, const std::vector<std::string>& input_names,
                      const std::vector<std::string>& carry_names) {
  r.String("loss", &p->loss, kRequired);
  if (r.ok() && !Contains(carry_names, p->loss)) {
    r.Fail(*r.Get("loss"), "loss",
           absl::StrCat("expected a carry name ", NameList(carry_names),
                        ", got ", r.Get("loss")->Describe()));
  }
  r.StringList("grad", &p->grad, kRequired, "[w1, w2]");
  if (!r.ok()) return;
  const ConfigNode& grad_node = *r.Get("grad");
  if (p->grad.empty()) {
    r.Fail(grad_node, "grad", "expected at least one input name");
  }
  for (size_t i = 0; i < p->grad.size(); ++i) {
    const std::string& g = p->grad[i];
    if (!Contains(input_names, g)) {
      r.Fail(grad_node.items()[i], "grad",
             absl::StrCat("expected an input name ", NameList(input_names),
                          ", got '", g, "'"));
    } else if (std::find(p->grad.begin(), p->grad.begin() + i, g) !=
               p->grad.begin() + i) {
      r.Fail(grad_node.items()[i], "grad",
             absl::StrCat("'", g, "' is listed twice"));
    }
  }
}

// The `program:` section: reads `r` (the program mapping) into `p` and checks
// that every name refers to something in scope. Errors go to r's status.
void ParseProgram(Reader& r, ProgramSpec* p) {
  p->present = true;
  r.String("name", &p->name, kOptional);
  const std::vector<std::string> input_names = ParseProgramInputs(r, p);
  if (!r.ok()) return;

  Reader scan = r.Map("scan", kRequired);
  ScanNames names;
  names.carry = ParseCarry(scan, p, input_names);
  names.xs = ParseXs(scan, p, input_names, names.carry);
  names.consts = ParseConsts(scan, p, input_names, names.carry, names.xs);
  if (!r.ok()) return;
  std::vector<std::string> outs;
  if (!ParseScanBody(scan, p, names, &outs)) return;
  if (!r.ok()) return;
  ParseCarryOut(scan, p, outs, names.carry);
  ParseLossAndGrad(r, p, input_names, names.carry);
}

// Records where every leaf under `node` (a mapping at `path`) was written.
void RecordWritten(const ConfigNode& node, const std::string& path,
                   std::map<std::string, std::string>* out) {
  for (const ConfigEntry& e : node.entries()) {
    const std::string p = JoinPath(path, e.key);
    if (e.value.is_map()) {
      RecordWritten(e.value, p, out);
    } else {
      (*out)[p] = e.value.location().ToString();
    }
  }
}

// The run-level sections a grid setting may vary (sim/config/grid.h), read
// by ParseRunNode and by ParseRunSettings alike: optimizer and loop (head),
// then remat, parallelism, batch, xla and allocator (tail); the program
// sections are read between the two.
void ReadHeadSections(Reader& r, RunSpec& run) {
  Reader opt = r.Map("optimizer");
  opt.Enum("kind", &run.optimizer.kind, {"adamw", "sgd"});
  opt.DTypeField("moment_dtype", &run.optimizer.moment_dtype);
  opt.Bool("clip_grad_norm", &run.optimizer.clip_grad_norm);
  Reader loop = r.Map("loop");
  loop.Enum("mode", &run.loop.mode, {"rolled", "unrolled"});
  loop.Int("trip_count", &run.loop.trip_count, kOptional, 0);
  loop.Int("unroll", &run.loop.unroll, kOptional, 1);
}

void ReadTailSections(Reader& r, RunSpec& run) {
  Reader remat = r.Map("remat");
  remat.String("policy", &run.remat.policy, kOptional);
  if (const ConfigNode* rm = r.Get("remat"); rm != nullptr && rm->is_map()) {
    if (const ConfigNode* p = rm->Find("policy"); p != nullptr) run.remat.policy_at = p->location().ToString();
  }
  remat.StringList("names", &run.remat.names);
  remat.StringList("offload_names", &run.remat.offload_names);
  remat.StringList("policies", &run.remat.policies);
  remat.Enum("method", &run.remat.method, {"uniform", "block", "sequential", "sqrt"});
  remat.Int("num_layers", &run.remat.num_layers, kOptional, 1);
  Reader par = r.Map("parallelism");
  par.Int("fsdp", &run.parallelism.fsdp, kOptional, 1);
  par.Int("tensor", &run.parallelism.tensor, kOptional, 1);
  par.Bool("sequence_parallel", &run.parallelism.sequence_parallel);
  par.Enum("gather_dtype", &run.parallelism.gather_dtype,
           {"compute", "weight"});
  Reader batch = r.Map("batch");
  batch.Int("per_device", &run.batch.per_device, kOptional, 1);
  batch.Int("seq_len", &run.batch.seq_len, kOptional, 1);
  Reader xla = r.Map("xla");
  xla.Bool("dynamic_slice_fusion", &run.xla.dynamic_slice_fusion);
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
}

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
  // Note [Fused attention efficiency]: efficiency.fused_attention defaults to
  // the h200-sxm-141gb fit (docs/validation_step_time.md, Fitted rates; tools/
  // collect/kineto_classes.py Note [Attention efficiency fit]): the tile model
  // (sim/device/impl/attention.h) already carries each device's SMs, clock and
  // tensor peak, so the share is taken to carry over to other devices. 0
  // turns the tile model off: fused SDPA ops are then timed by their FLOPs
  // at efficiency.attention, as before it (sim/device/impl/tiled.cc).
  d.fused_attention_efficiency = 0.78;
  d.memory_efficiency = 0.85;
  d.collective_efficiency = 0.80;
  // Estimates; see configs/devices/h100-sxm-80gb.yaml, allocator_cost.
  d.malloc_cost = d.free_cost = d.map_page_cost = d.unmap_page_cost = SimTime(50000);
  // Note [Host cost per kernel]: an eager step the recorder did not count
  // (a model config, a Megatron-LM launch line) pays host.op per kernel and
  // host.module per Python module call (Note [Eager host costs]). Measured
  // like Note [Recorded host costs]: host.op is the median over the ten H200
  // test-size steps of (host.dispatch x dispatches + host.node x nodes) /
  // kernels (24-40 us by case), host.module the fitted host.python_module
  // (tools/gen_validation.py checks both; docs/validation_step_time.md).
  // Megatron-LM's Transformer Engine layers launch several kernels per
  // Python call, so host.op may be high for them: `gpusim calibrate` fits
  // both to measured iterations.
  d.host_op_cost = SimTime(29600);
  d.host_module_cost = SimTime(51500);
  // Note [Recorded host costs] (sim/lower/eager/host_timeline.h): fitted
  // to the ten test-size PyTorch steps measured on the H200 machine
  // (validation/h200_2026-12-04: zoo.json medians, the Kineto traces'
  // per-phase host spans); `gpusim calibrate` fits them to a user's runs.
  d.host_dispatch_cost = SimTime(14400);
  d.host_node_cost = SimTime(24200);
  d.host_python_module_cost = SimTime(51500);

  Reader r = Reader::Top(node, DeviceSchema(), path, &status);
  r.String("name", &d.name, kRequired);
  r.String("description", &d.description, kOptional, /*allow_empty=*/true);
  r.Int("sms", &d.sms, kRequired, /*min=*/1);
  std::string cc;
  r.String("compute_capability", &cc, kOptional);
  if (status.ok() && !cc.empty()) {
    const size_t dot = cc.find('.');
    const bool good = dot != std::string::npos && dot > 0 && dot + 1 < cc.size() &&
                      cc.find_first_not_of("0123456789.") == std::string::npos &&
                      cc.find('.', dot + 1) == std::string::npos && dot <= 3 && cc.size() - dot <= 4;
    if (good) {
      d.cc_major = std::stoi(cc.substr(0, dot));
      d.cc_minor = std::stoi(cc.substr(dot + 1));
    } else {
      r.Fail(*r.Get("compute_capability"), "compute_capability",
             absl::StrCat("expected MAJOR.MINOR such as 9.0, got ", r.Get("compute_capability")->Describe()));
    }
  }
  r.Int("max_threads_per_sm", &d.max_threads_per_sm, kOptional, /*min=*/32);
  Reader mem = r.Map("memory");
  mem.Unit("cuda_total", &d.cuda_total, kRequired, ParseBytes, kBytesWhat,
           /*positive=*/true);
  mem.Unit("context_reserve", &d.context_reserve, kRequired, ParseBytes,
           kBytesWhat);
  if (status.ok() && d.cuda_total.value() >= kMaxDeviceBytes) {
    mem.Fail(*mem.Get("cuda_total"), "cuda_total",
             absl::StrCat("expected less than 2^46 bytes (64 TiB, the largest device modelled), got ",
                          mem.Get("cuda_total")->Describe()));
  }
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
  // Note [fp8 peak]: FP8 tensor cores arrived with compute capability 8.9
  // (Ada) and 9.0 (Hopper); the NVIDIA H100 whitepaper ("Hopper FP8 ... 2x
  // the throughput of FP16/BF16") and the Ada whitepaper give twice the dense
  // bf16 rate, which is flops.fp8's default for those two capabilities only.
  // Any other device has no fp8 unit unless its file writes flops.fp8
  // (Blackwell and MI300X files give their datasheet rate; A100, 8.0, has none).
  if ((d.cc_major == 8 && d.cc_minor == 9) || (d.cc_major == 9 && d.cc_minor == 0)) d.peak_fp8 = 2 * d.peak_bf16;
  flops.Unit("fp8", &d.peak_fp8, kOptional, ParseFlopRate, kFlopWhat, true);
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
  eff.Fraction("fused_attention", &d.fused_attention_efficiency, /*allow_zero=*/true);
  eff.Fraction("memory", &d.memory_efficiency);
  eff.Fraction("collective", &d.collective_efficiency);
  Reader cost = r.Map("allocator_cost");
  cost.Unit("malloc", &d.malloc_cost, kOptional, ParseDuration, kTimeWhat);
  cost.Unit("free", &d.free_cost, kOptional, ParseDuration, kTimeWhat);
  cost.Unit("map_page", &d.map_page_cost, kOptional, ParseDuration, kTimeWhat);
  cost.Unit("unmap_page", &d.unmap_page_cost, kOptional, ParseDuration, kTimeWhat);
  if (const ConfigNode* h = node.Find("host"); h != nullptr) {
    // Note [Megatron host costs]: host.megatron_op / megatron_module name
    // the steps they price (a Megatron-LM launch line's); host.op and
    // host.module price every eager step, and an XLA step refuses them.
    d.host_given = h->Find("op") != nullptr || h->Find("module") != nullptr;
    d.host_recorded_given = h->Find("dispatch") != nullptr || h->Find("node") != nullptr ||
                            h->Find("python_module") != nullptr;
  }
  Reader host = r.Map("host");
  host.Unit("op", &d.host_op_cost, kOptional, ParseDuration, kTimeWhat);
  host.Unit("module", &d.host_module_cost, kOptional, ParseDuration, kTimeWhat);
  host.Unit("megatron_op", &d.host_megatron_op_cost, kOptional, ParseDuration, kTimeWhat);
  host.Unit("megatron_module", &d.host_megatron_module_cost, kOptional, ParseDuration, kTimeWhat);
  host.Unit("dispatch", &d.host_dispatch_cost, kOptional, ParseDuration, kTimeWhat);
  host.Unit("node", &d.host_node_cost, kOptional, ParseDuration, kTimeWhat);
  host.Unit("python_module", &d.host_python_module_cost, kOptional, ParseDuration, kTimeWhat);
  r.Enum("kernel_model", &d.kernel_model,
         std::vector<absl::string_view>(std::begin(kKernelModelNames), std::end(kKernelModelNames)));
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
  r.Int("experts", &m.experts, kOptional, 1);
  r.Int("experts_per_token", &m.experts_per_token, kOptional, 1);
  if (status.ok() && m.experts_per_token > m.experts) {
    r.Fail(*r.Get("experts_per_token"), "experts_per_token",
           absl::StrCat("expected at most experts (", m.experts, "), got ", m.experts_per_token));
  }
  RETURN_IF_ERROR(status);
  return m;
}

absl::StatusOr<RunSpec> ParseRunNode(const ConfigNode& root) {
  if (root.is_map() && root.Find("maxtext") != nullptr) {  // MaxText's keys: sim/config/maxtext.h
    ASSIGN_OR_RETURN(MaxTextLowering lowered, LowerMaxTextRun(root));
    ASSIGN_OR_RETURN(RunSpec run, ParseRunNode(lowered.root));
    run.maxtext = std::move(lowered.spec);
    return run;
  }
  absl::Status status;
  RunSpec run;
  run.source_file = root.location().file;
  Reader r = Reader::Top(root, RunSchema(), "", &status);
  r.Enum("framework", &run.framework, {"jax", "pytorch"});
  if (r.ok() && r.Get("device") == nullptr) {
    r.Fail(root.location(), "device", "missing required key");
  }
  const bool has_model = r.Get("model") != nullptr;
  const bool has_hlo = r.Get("program_hlo") != nullptr;
  const bool has_megatron = r.Get("megatron") != nullptr;
  if ((has_model ? 1 : 0) + (r.Get("program") != nullptr ? 1 : 0) + (has_hlo ? 1 : 0) + (has_megatron ? 1 : 0) != 1) {
    r.Fail(root.location(), "",
           "expected exactly one of 'model', 'program', 'program_hlo' or 'megatron'");
  }
  if (has_megatron && run.framework != "pytorch" && root.Find("framework") != nullptr) {
    r.Fail(*root.Find("framework"), "framework", "a megatron: block runs under framework pytorch (eager)");
  }
  RETURN_IF_ERROR(status);
  ASSIGN_OR_RETURN(run.device, ParseDeviceNode(*r.Get("device"), "device"));
  if (has_model) {
    ASSIGN_OR_RETURN(run.model, ParseModelNode(*r.Get("model"), "model"));
  }
  if (has_megatron) {
    // sim/config/megatron_args.h: the launch line fills model, parallelism,
    // remat, batch and optimizer; the keys below may not repeat them.
    RETURN_IF_ERROR(ParseMegatronNode(*r.Get("megatron"), &run));
    for (const char* key : {"model", "parallelism", "remat", "batch", "optimizer", "loop"}) {
      if (const ConfigNode* n = root.Find(key)) {
        return absl::InvalidArgumentError(absl::StrCat(n->location().ToString(), ": ", key,
                                                       ": given by the megatron: block's arguments"));
      }
    }
    if (run.allocator.impl == "ideal") run.allocator.impl = "pytorch_caching";
  }

  ReadHeadSections(r, run);
  Reader loop = r.Map("loop");
  if (has_hlo) {
    // Relative to the file the key was written in (a --set value: to the
    // working directory).
    r.String("program_hlo", &run.program_hlo, kOptional);
    const std::string& from = r.Get("program_hlo")->location().file;
    if (!run.program_hlo.empty() && run.program_hlo[0] != '/' && !absl::StartsWith(from, "--set")) {
      const std::string dir = std::filesystem::path(from).parent_path().string();
      if (!dir.empty()) run.program_hlo = (std::filesystem::path(dir) / run.program_hlo).lexically_normal().string();
    }
  } else if (!has_model && !has_megatron) {
    // A program's scan runs loop.trip_count times; there is no model to
    // take the count from.
    loop.Int("trip_count", &run.loop.trip_count, kRequired, 0);
    Reader program = r.Map("program");
    ParseProgram(program, &run.program);
  }
  ReadTailSections(r, run);
  RETURN_IF_ERROR(status);
  for (const ConfigEntry& e : root.entries()) {
    if (e.key == "device" || e.key == "program" || !e.value.is_map()) continue;
    RecordWritten(e.value, e.key, &run.written);
  }
  if (const ConfigNode* model = root.Find("model"); model != nullptr && model->is_map()) {
    RecordModelFileLeaves(*model, "model", root.location().file, &run.from_model_file);
  }
  for (const char* key : {"framework", "device"}) {
    if (const ConfigNode* n = root.Find(key)) run.written[key] = n->location().ToString();
  }
  if (has_model) {
    absl::Status st = CheckModelMagnitudes(run);
    if (!st.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat(r.Get("model")->location().ToString(), ": model: ", st.message()));
    }
  }
  return run;
}

absl::Status ParseRunSettings(const ConfigNode& root, RunSpec* run) {
  absl::Status status;
  Reader r = Reader::Top(root, RunSchema(), "", &status);
  r.Enum("framework", &run->framework, {"jax", "pytorch"});
  ReadHeadSections(r, *run);
  ReadTailSections(r, *run);
  RETURN_IF_ERROR(status);
  RecordWrittenLeaves(root, "", &run->written);
  return absl::OkStatus();
}

absl::StatusOr<ProgramSpec> ParseProgramNode(const ConfigNode& root) {
  absl::Status status;
  ProgramSpec p;
  Reader r = Reader::Top(root, RunSchema(), "", &status);
  Reader program = r.Map("program");
  ParseProgram(program, &p);
  RETURN_IF_ERROR(status);
  return p;
}

void RecordWrittenLeaves(const ConfigNode& node, const std::string& path,
                         std::map<std::string, std::string>* out) {
  RecordWritten(node, path, out);
}

void RecordModelFileLeaves(const ConfigNode& node, const std::string& path, const std::string& run_file,
                           std::set<std::string>* out) {
  for (const ConfigEntry& e : node.entries()) {
    const std::string p = JoinPath(path, e.key);
    const SourceLocation& at = e.value.location();
    if (e.value.is_map()) {
      RecordModelFileLeaves(e.value, p, run_file, out);
    } else if (at.label.empty() && !at.file.empty() && at.file != run_file) {
      out->insert(p);
    }
  }
}

// Note [Magnitude checks]: the families compute tensor sizes, parameter
// counts and FLOPs from these keys in int64 (and the engine sums live bytes
// in int64), so a product that does not fit is refused here by name rather
// than wrapping into a negative peak or a 0-byte buffer (issue 17). Every
// figure is taken with 4 bytes per element (the widest dtype a family
// uses for activations, logits and master weights) and 16 bytes per
// parameter (f32 weight, gradient and two Adam moments), so every int64
// product the builders form is smaller than one checked here; the IR's
// CheckTensorSizes (sim/ir/program.h) is the backstop for any other shape.
absl::Status CheckModelMagnitudes(const RunSpec& run) {
  const ModelSpec& m = run.model;
  // Unrolled, every layer's ops are built and simulated, and the temp heap
  // packer's cost grows with layers x buffers (every saved activation is its
  // own buffer, live across the other layers): `gpusim run` of 512 unrolled
  // Llama-7B layers takes 0.7 s CPU, with --out 3.4 s and 400 MB; 1,024
  // would be ~2.5 s and, with --out, past the hostile-input limits
  // (bench/alloc_benchmark.cc BM_PackDeepLlamaTemps). A rolled scan deeper
  // than 1,024 layers is built once (Note [Rolled loop built once],
  // sim/lower/lower.h); bench/step_benchmark.cc BM_SimulateDeepLlama
  // measures both.
  const bool rolled = m.scan_layers && run.loop.mode == "rolled";
  const int64_t cap = rolled ? kMaxRolledLayers : kMaxLayers;
  if (m.n_layers > cap) {
    const std::string most =
        rolled ? absl::StrCat(cap, " as a rolled scan (one report row per layer)")
               : absl::StrCat(cap, " unrolled (", kMaxRolledLayers,
                              " as a rolled scan: model.scan_layers with loop.mode rolled)");
    return absl::InvalidArgumentError(
        absl::StrCat("n_layers: expected at most ", most, ", a deeper model is not modelled; got ", m.n_layers));
  }
  const int64_t b = run.batch.per_device, s = run.batch.seq_len;
  ASSIGN_OR_RETURN(int64_t qdim, CheckedProduct({{"model.n_heads", m.n_heads}, {"model.head_dim", m.head_dim}}));
  for (const NamedInt& width : {NamedInt{"model.d_model", m.d_model}, NamedInt{"model.mlp_dim", m.mlp_dim},
                                NamedInt{"model.vocab", m.vocab}, NamedInt{"model.n_heads × model.head_dim", qdim}}) {
    RETURN_IF_ERROR(CheckedProduct({{"batch.per_device", b}, {"batch.seq_len", s}, width, {"4 bytes", 4}},
                                   "bytes of one activation").status());
    ASSIGN_OR_RETURN(int64_t w, CheckedProduct({{"model.d_model", m.d_model}, width, {"16 bytes", 16}},
                                               "bytes of one weight matrix with its optimizer state"));
    RETURN_IF_ERROR(CheckedProduct({{"model.n_layers", m.n_layers}, {"4 matrices", 4}, {"bytes of one", w}},
                                   "bytes of every layer's weights with their optimizer state").status());
  }
  if (m.attention == "explicit") {
    RETURN_IF_ERROR(CheckedProduct({{"batch.per_device", b}, {"model.n_heads", m.n_heads}, {"batch.seq_len", s},
                                    {"batch.seq_len", s}, {"4 bytes", 4}},
                                   "bytes of one layer's attention scores")
                        .status());
  }
  return absl::OkStatus();
}

}  // namespace internal
}  // namespace gpusim
