#include "sim/trace/trace_io.h"

#include "sim/base/file_util.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <optional>
#include <sstream>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_join.h"
#include "sim/base/status.h"
#include "sim/base/str_cat.h"

namespace gpusim {

using str_internal::Append;
using str_internal::Cat;
using str_internal::Join;
namespace {

// Keys an event line may carry, in the order the writer emits them. Any key
// is accepted on any event type so that every TraceEvent field round-trips;
// the writer only emits fields that differ from TraceEvent's defaults.
enum class Key {
  kBuffer, kSize, kRole, kName, kKind, kStream, kPhase, kDtype, kFlops,
  kRead, kWrite, kGroup, kM, kN, kK, kBatch, kRecompute, kAfter, kUses,
  kDurNs, kStack, kOp, kDims, kNodes, kHost,
};
constexpr std::array<std::string_view, 25> kKeyNames = {
    "buffer", "size",  "role",  "name", "kind",      "stream", "phase",
    "dtype",  "flops", "read",  "write", "group",    "m",      "n",
    "k",      "batch", "recompute", "after", "uses", "dur_ns", "stack",
    "op",     "dims", "nodes", "host"};

constexpr std::array<std::string_view, 13> kLineWords = {
    "alloc", "free", "compute", "copy", "collective", "marker",
    "name",  "preexisting", "stream", "frame", "end", "meta", "warmup"};

// The minor version that introduced `frame` lines and `stack=` keys.
constexpr int kFramesMinor = 1;
// The minor version that introduced `meta` lines and `op=` / `dims=` keys.
constexpr int kOpFactsMinor = 2;
// The minor version that introduced `kind=broadcast` and the distributed
// step's meta keys (world_size, rank, ranks_per_node, comm.ID).
constexpr int kCollectivesMinor = 3;
// The minor version that introduced the `nodes=` key (the nodes a
// collective's group spans).
constexpr int kNodesMinor = 4;
// The minor version that introduced `warmup` lines (the allocations and
// frees before the recorded window).
constexpr int kWarmupMinor = 5;
// The minor version that introduced the `host=` key (Note [Host work per
// kernel], python/gpusim_torch/recorder.py).
constexpr int kHostMinor = 6;
// host=D,N,M counts at most this each (a step's host work between two
// kernels; bounds the host time one event can be charged).
constexpr int64_t kMaxHostCount = 1000000;

constexpr std::array<EventType, 6> kEventTypes = {
    EventType::kAlloc, EventType::kFree,       EventType::kCompute,
    EventType::kCopy,  EventType::kCollective, EventType::kMarker};

constexpr std::array<Phase, 4> kPhases = {Phase::kForward, Phase::kBackward,
                                          Phase::kOptimizer, Phase::kOther};

constexpr std::array<DType, 8> kDTypes = {
    DType::kF32, DType::kBF16, DType::kF16, DType::kF8,
    DType::kI32, DType::kI64,  DType::kU8,  DType::kPred};

size_t EditDistance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1,
                         diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

// " (did you mean 'x'?)" for the nearest candidate within 2 edits, else "".
template <size_t N>
std::string DidYouMean(std::string_view word,
                       const std::array<std::string_view, N>& candidates) {
  std::string_view best;
  size_t best_d = word.empty() ? 0 : 3;
  for (std::string_view c : candidates) {
    size_t d = EditDistance(word, c);
    if (d < best_d && d < c.size()) {
      best_d = d;
      best = c;
    }
  }
  if (best.empty()) return "";
  return Cat(" (did you mean '", best, "'?)");
}

bool ParseInt64(std::string_view s, int64_t* out) {
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return ec == std::errc() && p == s.data() + s.size() && !s.empty();
}

bool ParseDouble(std::string_view s, double* out) {
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return ec == std::errc() && p == s.data() + s.size() && !s.empty();
}

std::string FormatDouble(double v) {
  char buf[64];
  auto [p, ec] = std::to_chars(buf, buf + sizeof(buf), v);  // shortest exact
  GPUSIM_CHECK(ec == std::errc());
  return std::string(buf, p);
}

template <typename T, size_t N, typename NameFn>
std::string NameList(const std::array<T, N>& values, NameFn name) {
  std::vector<std::string_view> names;
  for (const T& v : values) names.push_back(name(v));
  return Join(names, ", ");
}

std::vector<std::string_view> Tokenize(std::string_view line) {
  std::vector<std::string_view> tokens;
  size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) ++i;
    if (i >= line.size() || line[i] == '#') break;  // comment to end of line
    size_t j = i;
    while (j < line.size() && line[j] != ' ' && line[j] != '\t') ++j;
    tokens.push_back(line.substr(i, j - i));
    i = j;
  }
  return tokens;
}

class Parser {
 public:
  explicit Parser(std::string_view source) : source_(source) {}

  absl::StatusOr<Trace> Run(std::istream& in);

 private:
  absl::Status Err(std::string_view what) const {
    return absl::InvalidArgumentError(Cat(
        source_, ":", line_no_, ": ", context_.empty() ? "" : context_,
        context_.empty() ? "" : ": ", what));
  }
  absl::Status Expected(std::string_view what,
                        std::optional<std::string_view> got) const {
    if (!got) return Err(Cat("expected ", what, ", got end of line"));
    return Err(Cat("expected ", what, ", got '", *got, "'"));
  }
  std::optional<std::string_view> Token(size_t i) const {
    if (i < tokens_.size()) return tokens_[i];
    return std::nullopt;
  }
  absl::Status ExpectEndOfLine(size_t n) const {
    if (tokens_.size() > n) return Expected("end of line", tokens_[n]);
    return absl::OkStatus();
  }

  absl::Status ParseHeader();
  absl::Status ParseLine(Trace& trace);
  absl::Status ParseEvent(EventType type, TraceEvent& e);
  absl::Status ParseField(Key key, std::string_view v, TraceEvent& e);
  absl::Status ParseBytes(std::optional<std::string_view> tok, Bytes* out) const;
  absl::Status ParseName(std::optional<std::string_view> tok, std::string* out) const;
  absl::Status ParseList(std::string_view v, std::string_view what,
                         std::vector<int64_t>* out) const;
  absl::Status ParseFrame(Trace& trace);
  absl::Status ParseStack(std::string_view v, TraceEvent& e) const;
  absl::Status NeedsFramesVersion(std::string_view what) const;
  absl::Status NeedsMinor(int minor, std::string_view what) const;
  absl::Status ParseMeta(Trace& trace);
  absl::Status ParseWarmup(Trace& trace);

  std::string_view source_;
  int64_t line_no_ = 0;
  std::string context_;  // the line's leading word, prefixed to errors
  std::vector<std::string_view> tokens_;
  int minor_ = 0;        // the file's minor version
  int64_t name_line_ = 0, preexisting_line_ = 0, end_line_ = 0;
  // File frame id -> index into Trace::frames, and the line defining it.
  absl::flat_hash_map<int64_t, std::pair<int32_t, int64_t>> frame_ids_;
  // Warm-up buffers: id -> the line that allocated it (live) or 0 (freed).
  absl::flat_hash_map<int64_t, int64_t> warmup_ids_;
};

absl::Status Parser::NeedsFramesVersion(std::string_view what) const {
  return NeedsMinor(kFramesMinor, what);
}

// `warmup alloc ID BYTES` / `warmup free ID` (1.5), before the first event:
// each id allocated once, freed only while live (Note [Warm-up history],
// sim/replay/replay.cc; what the history leaves live is checked against the
// start state by ValidateTrace).
absl::Status Parser::ParseWarmup(Trace& trace) {
  RETURN_IF_ERROR(NeedsMinor(kWarmupMinor, "a 'warmup' line"));
  if (!trace.events.empty()) return Err("'warmup' lines come before the first event");
  const std::optional<std::string_view> what = Token(1);
  if (!what || (*what != "alloc" && *what != "free" && *what != "compute")) {
    return Expected("alloc, free or compute", what);
  }
  WarmupOp op;
  if (*what == "compute") {
    // `warmup compute OP [phase=P] [dims=...]`: the event keys' syntax.
    op.kind = WarmupOp::Kind::kCompute;
    RETURN_IF_ERROR(ParseName(Token(2), &op.op));
    TraceEvent scratch;
    bool phase_seen = false, dims_seen = false;
    for (size_t t = 3; t < tokens_.size(); ++t) {
      const std::string_view tok = tokens_[t];
      const size_t eq = tok.find('=');
      const std::string_view k = eq == std::string_view::npos ? tok : tok.substr(0, eq);
      if (eq == std::string_view::npos || (k != "phase" && k != "dims")) return Expected("phase= or dims=", tok);
      bool& seen = k == "phase" ? phase_seen : dims_seen;
      if (seen) return Err(Cat("duplicate key '", k, "'"));
      seen = true;
      RETURN_IF_ERROR(ParseField(k == "phase" ? Key::kPhase : Key::kDims, tok.substr(eq + 1), scratch));
    }
    op.phase = scratch.phase;
    op.dims = std::move(scratch.dims);
    trace.warmup.push_back(std::move(op));
    return absl::OkStatus();
  }
  op.kind = *what == "alloc" ? WarmupOp::Kind::kAlloc : WarmupOp::Kind::kFree;
  int64_t id;
  if (!Token(2) || !ParseInt64(*Token(2), &id) || id < 0) return Expected("a buffer id (a non-negative integer)", Token(2));
  op.buffer = id;
  auto it = warmup_ids_.find(id);
  if (op.kind == WarmupOp::Kind::kAlloc) {
    if (it != warmup_ids_.end()) {
      return Err(Cat("buffer ", id, " allocated again (first at line ", it->second != 0 ? it->second : -1,
                     "); a warm-up buffer id is allocated once"));
    }
    RETURN_IF_ERROR(ParseBytes(Token(3), &op.size));
    if (op.size <= Bytes(0)) return Expected("a positive byte count", Token(3));
    warmup_ids_[id] = line_no_;
    trace.warmup.push_back(op);
    return ExpectEndOfLine(4);
  }
  if (it == warmup_ids_.end() || it->second == 0) {
    return Err(Cat("free of buffer ", id, it == warmup_ids_.end() ? ", never allocated in the warm-up"
                                                                  : ", already freed in the warm-up"));
  }
  it->second = 0;
  trace.warmup.push_back(op);
  return ExpectEndOfLine(3);
}

absl::Status Parser::NeedsMinor(int minor, std::string_view what) const {
  if (minor_ >= minor) return absl::OkStatus();
  return Err(Cat(what, " needs format version ", kTraceFormatMajor, ".",
                 minor, " (the header says ", kTraceFormatMajor, ".",
                 minor_, ")"));
}

absl::Status Parser::ParseMeta(Trace& trace) {
  RETURN_IF_ERROR(NeedsMinor(kOpFactsMinor, "line type 'meta'"));
  std::string key, value;
  RETURN_IF_ERROR(ParseName(Token(1), &key));
  if (key.empty()) return Expected("a meta key", Token(1));
  for (const auto& [k, v] : trace.meta) {
    if (k == key) return Err(Cat("duplicate meta key '", key, "'"));
  }
  RETURN_IF_ERROR(ParseName(Token(2), &value));
  RETURN_IF_ERROR(ExpectEndOfLine(3));
  trace.meta.emplace_back(std::move(key), std::move(value));
  return absl::OkStatus();
}

absl::Status Parser::ParseFrame(Trace& trace) {
  RETURN_IF_ERROR(NeedsFramesVersion("line type 'frame'"));
  int64_t id;
  if (!Token(1) || !ParseInt64(*Token(1), &id) || id < 0) {
    return Expected("a non-negative frame id", Token(1));
  }
  if (trace.frames.size() >= static_cast<size_t>(INT32_MAX)) {
    return Err("more than 2^31 - 1 frames");
  }
  auto [it, inserted] = frame_ids_.try_emplace(
      id, static_cast<int32_t>(trace.frames.size()), line_no_);
  if (!inserted) {
    return Err(Cat("frame id ", id, " is already defined (line ",
                   it->second.second, ")"));
  }
  StackFrame& f = trace.frames.emplace_back();
  RETURN_IF_ERROR(ParseName(Token(2), &f.function));
  RETURN_IF_ERROR(ParseName(Token(3), &f.file));
  if (!Token(4) || !ParseInt64(*Token(4), &f.line) || f.line < 0) {
    return Expected("a non-negative line number (0 = unknown)", Token(4));
  }
  return ExpectEndOfLine(5);
}

absl::Status Parser::ParseStack(std::string_view v, TraceEvent& e) const {
  RETURN_IF_ERROR(NeedsFramesVersion("key 'stack'"));
  std::vector<int64_t> ids;
  RETURN_IF_ERROR(ParseList(v, "a comma-separated list of frame ids", &ids));
  e.stack.reserve(ids.size());
  for (int64_t id : ids) {
    auto it = frame_ids_.find(id);
    if (it == frame_ids_.end()) {
      return Err(Cat("stack= names frame ", id,
                     ", which is not defined by an earlier 'frame' line"));
    }
    e.stack.push_back(it->second.first);
  }
  return absl::OkStatus();
}

absl::Status Parser::ParseBytes(std::optional<std::string_view> tok,
                                Bytes* out) const {
  int64_t v;
  if (!tok || !ParseInt64(*tok, &v) || v < 0) {
    return Expected("a non-negative byte count", tok);
  }
  *out = Bytes(v);
  return absl::OkStatus();
}

absl::Status Parser::ParseName(std::optional<std::string_view> tok,
                               std::string* out) const {
  if (!tok || tok->find('=') != std::string_view::npos ||
      !UnescapeTraceName(*tok, out)) {
    return Expected("a name ('-' for none, %XX escapes)", tok);
  }
  return absl::OkStatus();
}

absl::Status Parser::ParseList(std::string_view v, std::string_view what,
                               std::vector<int64_t>* out) const {
  size_t start = 0;
  while (true) {
    size_t comma = v.find(',', start);
    std::string_view item = v.substr(start, comma - start);
    int64_t x;
    if (!ParseInt64(item, &x) || x < 0) return Expected(what, v);
    out->push_back(x);
    if (comma == std::string_view::npos) return absl::OkStatus();
    start = comma + 1;
  }
}

absl::Status Parser::ParseField(Key key, std::string_view v, TraceEvent& e) {
  int64_t i;
  auto integer = [&](int64_t* out) -> absl::Status {
    if (!ParseInt64(v, out)) return Expected("an integer", v);
    return absl::OkStatus();
  };
  switch (key) {
    case Key::kBuffer: return integer(&e.buffer);
    case Key::kSize: return ParseBytes(v, &e.size);
    case Key::kName: return ParseName(v, &e.name);
    case Key::kRead: return ParseBytes(v, &e.bytes_read);
    case Key::kWrite: return ParseBytes(v, &e.bytes_written);
    case Key::kGroup: return integer(&e.group);
    case Key::kM: return integer(&e.m);
    case Key::kN: return integer(&e.n);
    case Key::kK: return integer(&e.k);
    case Key::kBatch: return integer(&e.batch);
    case Key::kRole:
      if (!ParseRole(v, &e.role)) {
        std::array<Role, kNumRoles> all;
        for (int r = 0; r < kNumRoles; ++r) all[r] = static_cast<Role>(r);
        return Expected(Cat("a role (", NameList(all, RoleName), ")"), v);
      }
      return absl::OkStatus();
    case Key::kKind:
      if (!ParseOpKind(v, &e.kind)) {
        std::array<OpKind, kNumOpKinds> all;
        for (int k = 0; k < kNumOpKinds; ++k) all[k] = static_cast<OpKind>(k);
        return Expected(Cat("an op kind (", NameList(all, OpKindName), ")"), v);
      }
      if (e.kind == OpKind::kBroadcast) RETURN_IF_ERROR(NeedsMinor(kCollectivesMinor, "kind 'broadcast'"));
      return absl::OkStatus();
    case Key::kStream:
      if (!ParseInt64(v, &i) || !IsValidStreamId(i)) {
        return Expected(Cat("a stream id (0 to ", kMaxStreamId, ")"), v);
      }
      e.stream = static_cast<StreamId>(i);
      return absl::OkStatus();
    case Key::kPhase:
      for (Phase p : kPhases) {
        if (PhaseName(p) == v) {
          e.phase = p;
          return absl::OkStatus();
        }
      }
      return Expected(Cat("a phase (", NameList(kPhases, PhaseName), ")"), v);
    case Key::kDtype:
      if (std::optional<DType> d = ParseDType(v)) {
        e.dtype = *d;
        return absl::OkStatus();
      }
      return Expected(Cat("a dtype (", NameList(kDTypes, DTypeName), ")"), v);
    case Key::kFlops:
      if (!ParseDouble(v, &e.flops) || !std::isfinite(e.flops) || e.flops < 0) {
        return Expected("a non-negative number of flops", v);
      }
      return absl::OkStatus();
    case Key::kRecompute:
      if (v != "0" && v != "1") return Expected("0 or 1", v);
      e.recompute = v == "1";
      return absl::OkStatus();
    case Key::kAfter:
      return ParseList(v, "a comma-separated list of event indices", &e.after);
    case Key::kUses:
      return ParseList(v, "a comma-separated list of buffer ids", &e.uses);
    case Key::kDurNs:
      // Note [Checked time] (sim/base/units.h): at most 2^62 - 1 ns.
      if (!ParseInt64(v, &i) || i > SimTime::kMaxNs) return Expected("a duration in nanoseconds (at most 2^62 - 1)", v);
      e.recorded_duration = SimTime(i);
      return absl::OkStatus();
    case Key::kStack:
      return ParseStack(v, e);
    case Key::kOp:
      RETURN_IF_ERROR(NeedsMinor(kOpFactsMinor, "key 'op'"));
      return ParseName(v, &e.op);
    case Key::kDims:
      RETURN_IF_ERROR(NeedsMinor(kOpFactsMinor, "key 'dims'"));
      return ParseList(v, "a comma-separated list of non-negative integers", &e.dims);
    case Key::kNodes:
      RETURN_IF_ERROR(NeedsMinor(kNodesMinor, "key 'nodes'"));
      if (!ParseInt64(v, &i) || i < 1) return Expected("a positive node count", v);
      e.group_nodes = i;
      return absl::OkStatus();
    case Key::kHost: {
      RETURN_IF_ERROR(NeedsMinor(kHostMinor, "key 'host'"));
      if (e.type != EventType::kCompute) return Err("key 'host' is for compute events only");
      std::vector<int64_t> c;
      const std::string what = Cat("three counts D,N,M (dispatches, autograd nodes, module calls), each 0 to ",
                                   kMaxHostCount);
      RETURN_IF_ERROR(ParseList(v, what, &c));
      if (c.size() != 3 || c[0] > kMaxHostCount || c[1] > kMaxHostCount || c[2] > kMaxHostCount) {
        return Expected(what, v);
      }
      e.host_recorded = true;
      e.host_dispatches = static_cast<int32_t>(c[0]);
      e.host_nodes = static_cast<int32_t>(c[1]);
      e.host_module_calls = static_cast<int32_t>(c[2]);
      return absl::OkStatus();
    }
  }
  return Err("internal: unhandled key");
}

absl::Status Parser::ParseEvent(EventType type, TraceEvent& e) {
  e.type = type;
  std::array<bool, kKeyNames.size()> seen{};
  size_t next = 1;
  if (type == EventType::kAlloc || type == EventType::kFree) {
    if (!Token(1) || !ParseInt64(*Token(1), &e.buffer)) {
      return Expected("a buffer id", Token(1));
    }
    seen[static_cast<size_t>(Key::kBuffer)] = true;
    next = 2;
    if (type == EventType::kAlloc) {
      RETURN_IF_ERROR(ParseBytes(Token(2), &e.size));
      seen[static_cast<size_t>(Key::kSize)] = true;
      next = 3;
    }
  } else {
    RETURN_IF_ERROR(ParseName(Token(1), &e.name));
    seen[static_cast<size_t>(Key::kName)] = true;
    next = 2;
  }
  for (size_t t = next; t < tokens_.size(); ++t) {
    std::string_view tok = tokens_[t];
    size_t eq = tok.find('=');
    if (eq == std::string_view::npos) return Expected("key=value", tok);
    std::string_view k = tok.substr(0, eq);
    size_t index = kKeyNames.size();
    for (size_t j = 0; j < kKeyNames.size(); ++j) {
      if (kKeyNames[j] == k) index = j;
    }
    if (index == kKeyNames.size()) {
      std::string hint;
      if (minor_ > kTraceFormatMinor) {
        hint = Cat(" (the file is version ", kTraceFormatMajor, ".",
                            minor_, "; this reader knows ", kTraceFormatMajor,
                            ".", kTraceFormatMinor, ")");
      }
      return Err(Cat("unknown key '", k, "'",
                              DidYouMean(k, kKeyNames), hint));
    }
    if (seen[index]) return Err(Cat("duplicate key '", k, "'"));
    seen[index] = true;
    RETURN_IF_ERROR(ParseField(static_cast<Key>(index), tok.substr(eq + 1), e));
  }
  return absl::OkStatus();
}

absl::Status Parser::ParseHeader() {
  std::string want = Cat("header 'gpusim-trace ", kTraceFormatMajor, "'");
  if (tokens_[0] != "gpusim-trace") return Expected(want, tokens_[0]);
  context_ = "gpusim-trace";
  std::optional<std::string_view> v = Token(1);
  int64_t major = 0, minor = 0;
  bool ok = v.has_value();
  if (ok) {
    size_t dot = v->find('.');
    ok = ParseInt64(v->substr(0, dot), &major) && major >= 0 &&
         (dot == std::string_view::npos ||
          (ParseInt64(v->substr(dot + 1), &minor) && minor >= 0));
  }
  if (!ok) return Expected("a format version such as '1' or '1.0'", v);
  if (major != kTraceFormatMajor) {
    return Err(Cat("unsupported trace format version '", *v,
                            "' (this reader understands major version ",
                            kTraceFormatMajor, ")"));
  }
  minor_ = static_cast<int>(std::min<int64_t>(minor, INT32_MAX));
  return ExpectEndOfLine(2);
}

absl::Status Parser::ParseLine(Trace& trace) {
  std::string_view word = tokens_[0];
  context_ = std::string(word);
  if (end_line_ != 0) {
    context_.clear();
    return Expected(Cat("nothing after 'end' (line ", end_line_, ")"),
                    word);
  }
  for (EventType type : kEventTypes) {
    if (EventTypeName(type) != word) continue;
    TraceEvent& e = trace.events.emplace_back();
    trace.event_lines.push_back(line_no_);
    return ParseEvent(type, e);
  }
  if (word == "stream") {
    StreamInfo& s = trace.streams.emplace_back();
    int64_t id;
    if (!Token(1) || !ParseInt64(*Token(1), &id) || !IsValidStreamId(id)) {
      return Expected(Cat("a stream id (0 to ", kMaxStreamId, ")"), Token(1));
    }
    s.id = static_cast<StreamId>(id);
    RETURN_IF_ERROR(ParseName(Token(2), &s.name));
    return ExpectEndOfLine(3);
  }
  if (word == "frame") return ParseFrame(trace);
  if (word == "meta") return ParseMeta(trace);
  if (word == "warmup") return ParseWarmup(trace);
  if (word == "name" || word == "preexisting") {
    int64_t& first = word == "name" ? name_line_ : preexisting_line_;
    if (first != 0) {
      return Err(Cat("duplicate '", word, "' line (first at line ",
                              first, ")"));
    }
    first = line_no_;
    if (word == "name") {
      RETURN_IF_ERROR(ParseName(Token(1), &trace.name));
    } else {
      RETURN_IF_ERROR(ParseBytes(Token(1), &trace.preexisting));
    }
    return ExpectEndOfLine(2);
  }
  if (word == "end") {
    int64_t n;
    const int64_t have = static_cast<int64_t>(trace.events.size());
    if (!Token(1) || !ParseInt64(*Token(1), &n) || n != have) {
      return Expected(Cat("the event count ", have), Token(1));
    }
    end_line_ = line_no_;
    return ExpectEndOfLine(2);
  }
  context_.clear();
  return Err(Cat("unknown line type '", word, "'",
                          DidYouMean(word, kLineWords)));
}

absl::StatusOr<Trace> Parser::Run(std::istream& in) {
  Trace trace;
  bool have_header = false;
  std::string line;
  while (std::getline(in, line)) {
    ++line_no_;
    std::string_view view = line;
    if (!view.empty() && view.back() == '\r') view.remove_suffix(1);
    tokens_ = Tokenize(view);
    if (tokens_.empty()) continue;
    context_.clear();
    if (!have_header) {
      RETURN_IF_ERROR(ParseHeader());
      have_header = true;
      continue;
    }
    RETURN_IF_ERROR(ParseLine(trace));
  }
  if (in.bad()) {
    return absl::UnavailableError(Cat(source_, ":", line_no_,
                                            ": read error"));
  }
  if (!have_header) {
    return absl::InvalidArgumentError(Cat(
        source_, ": empty file, expected header 'gpusim-trace ",
        kTraceFormatMajor, "'"));
  }
  trace.source = std::string(source_);
  return trace;
}

// The text of `key` for `e`, or "" when the field holds TraceEvent's default
// and is omitted. `role` on allocs and `kind` on timed events are always
// written, for the reader's sake.
std::string FieldText(Key key, const TraceEvent& e) {
  static const TraceEvent d;
  auto num = [](int64_t v, int64_t def) { return v == def ? "" : std::to_string(v); };
  switch (key) {
    case Key::kBuffer: return num(e.buffer, d.buffer);
    case Key::kSize: return num(e.size.value(), d.size.value());
    case Key::kRole:
      if (e.role == d.role && e.type != EventType::kAlloc) return "";
      return std::string(RoleName(e.role));
    case Key::kName: return e.name.empty() ? "" : EscapeTraceName(e.name);
    case Key::kKind:
      if (e.kind == d.kind && !IsTimed(e.type)) return "";
      return std::string(OpKindName(e.kind));
    case Key::kStream: return num(e.stream, d.stream);
    case Key::kPhase: return e.phase == d.phase ? "" : std::string(PhaseName(e.phase));
    case Key::kDtype: return e.dtype == d.dtype ? "" : std::string(DTypeName(e.dtype));
    case Key::kFlops: return e.flops == d.flops ? "" : FormatDouble(e.flops);
    case Key::kRead: return num(e.bytes_read.value(), d.bytes_read.value());
    case Key::kWrite: return num(e.bytes_written.value(), d.bytes_written.value());
    case Key::kGroup: return num(e.group, d.group);
    case Key::kM: return num(e.m, d.m);
    case Key::kN: return num(e.n, d.n);
    case Key::kK: return num(e.k, d.k);
    case Key::kBatch: return num(e.batch, d.batch);
    case Key::kRecompute: return e.recompute ? "1" : "";
    case Key::kAfter: return Join(e.after, ",");
    case Key::kUses: return Join(e.uses, ",");
    case Key::kDurNs:
      return num(e.recorded_duration.ns(), d.recorded_duration.ns());
    case Key::kStack: return Join(e.stack, ",");
    case Key::kOp: return e.op.empty() ? "" : EscapeTraceName(e.op);
    case Key::kDims: return Join(e.dims, ",");
    case Key::kNodes: return num(e.group_nodes, d.group_nodes);
    case Key::kHost:
      if (!e.host_recorded) return "";
      return Cat(e.host_dispatches, ",", e.host_nodes, ",", e.host_module_calls);
  }
  return "";
}

void AppendEvent(const TraceEvent& e, std::string& out) {
  Append(out, EventTypeName(e.type));
  std::array<bool, kKeyNames.size()> positional{};
  if (e.type == EventType::kAlloc || e.type == EventType::kFree) {
    Append(out, " ", e.buffer);
    positional[static_cast<size_t>(Key::kBuffer)] = true;
    if (e.type == EventType::kAlloc) {
      Append(out, " ", e.size.value());
      positional[static_cast<size_t>(Key::kSize)] = true;
    }
  } else {
    Append(out, " ", EscapeTraceName(e.name));
    positional[static_cast<size_t>(Key::kName)] = true;
  }
  for (size_t i = 0; i < kKeyNames.size(); ++i) {
    if (positional[i]) continue;
    std::string v = FieldText(static_cast<Key>(i), e);
    if (!v.empty()) Append(out, " ", kKeyNames[i], "=", v);
  }
  out += '\n';
}

// Values the format cannot hold; the reader would reject them.
absl::Status CheckWritable(const Trace& trace) {
  if (!trace.repeats.empty()) {
    const TraceRepeat& r = trace.repeats.front();
    return absl::InvalidArgumentError(Cat(
        "cannot write trace: events ", r.first, "-", r.last, " stand for ", r.times,
        " iterations of a rolled loop built once, and the native format has no repeat line "
        "(a trace of one iteration would replay as one); rolled loops of at most 1,024 trips are "
        "built, and written, iteration by iteration"));
  }
  if (trace.preexisting < Bytes(0)) {
    return absl::InvalidArgumentError(Cat(
        "cannot write trace: negative preexisting bytes ", trace.preexisting.value()));
  }
  for (size_t i = 0; i < trace.frames.size(); ++i) {
    if (trace.frames[i].line < 0) {
      return absl::InvalidArgumentError(
          Cat("cannot write trace: frame ", i, ": negative line number ",
              trace.frames[i].line));
    }
  }
  for (size_t i = 0; i < trace.events.size(); ++i) {
    const TraceEvent& e = trace.events[i];
    std::string_view bad;
    if (e.size < Bytes(0)) bad = "negative size";
    if (e.bytes_read < Bytes(0)) bad = "negative read bytes";
    if (e.bytes_written < Bytes(0)) bad = "negative write bytes";
    if (!std::isfinite(e.flops) || e.flops < 0) bad = "flops negative or not finite";
    bool bad_list = false;
    for (int64_t a : e.after) bad_list |= a < 0;
    for (int64_t u : e.uses) bad_list |= u < 0;
    for (int64_t d : e.dims) bad_list |= d < 0;
    if (bad_list) bad = "negative value in after=, uses= or dims=";
    if (e.host_recorded &&
        (e.type != EventType::kCompute || e.host_dispatches < 0 || e.host_nodes < 0 || e.host_module_calls < 0 ||
         e.host_dispatches > kMaxHostCount || e.host_nodes > kMaxHostCount || e.host_module_calls > kMaxHostCount)) {
      bad = "host= counts on an event that is not a compute, or outside 0 to 1,000,000";
    }
    for (int32_t f : e.stack) {
      if (f < 0 || static_cast<size_t>(f) >= trace.frames.size()) {
        bad = "stack= names a frame index outside Trace::frames";
      }
    }
    if (!bad.empty()) {
      return absl::InvalidArgumentError(Cat(
          "cannot write trace: event ", i, " (", EventTypeName(e.type), "): ", bad));
    }
  }
  return absl::OkStatus();
}

absl::Status Errno(std::string_view what, const std::string& path) {
  return absl::UnavailableError(
      Cat(what, " '", path, "': ", std::strerror(errno)));
}

}  // namespace

std::string EscapeTraceName(std::string_view name) {
  if (name.empty()) return "-";
  if (name == "-") return "%2D";
  std::string out;
  out.reserve(name.size());
  for (char c : name) {
    unsigned char u = static_cast<unsigned char>(c);
    if (u <= 0x20 || u == 0x7f || c == '%' || c == '=' || c == ',' || c == '#') {
      char buf[4];
      std::snprintf(buf, sizeof(buf), "%%%02X", u);
      out += buf;
    } else {
      out += c;
    }
  }
  return out;
}

bool UnescapeTraceName(std::string_view token, std::string* out) {
  out->clear();
  if (token == "-") return true;
  auto hex = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
  };
  for (size_t i = 0; i < token.size(); ++i) {
    if (token[i] != '%') {
      *out += token[i];
      continue;
    }
    if (i + 2 >= token.size()) return false;
    int hi = hex(token[i + 1]), lo = hex(token[i + 2]);
    if (hi < 0 || lo < 0) return false;
    *out += static_cast<char>(hi * 16 + lo);
    i += 2;
  }
  return true;
}

absl::StatusOr<Trace> ReadTrace(std::istream& in, std::string_view source_name) {
  return Parser(source_name).Run(in);
}

absl::StatusOr<Trace> ReadTraceFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return Errno("cannot open trace file", path);
  return ReadTrace(in, path);
}

absl::Status WriteTrace(const Trace& trace, std::ostream& out) {
  RETURN_IF_ERROR(CheckWritable(trace));
  // Version 1.1 only when the trace uses frames, 1.2 only when it uses meta
  // lines or op facts, 1.3 only with a broadcast or the meta world_size of a
  // distributed step, 1.4 only with a `nodes=` key, so that traces without them stay readable by older
  // readers byte for byte as before.
  // 1.5 only with `warmup` lines, 1.6 only with a `host=` key.
  bool op_facts = !trace.meta.empty();
  bool collectives = FindMeta(trace, "world_size") != nullptr, nodes = false, host = false;
  for (const TraceEvent& e : trace.events) {
    host |= e.host_recorded;
    op_facts |= !e.op.empty() || !e.dims.empty();
    collectives |= e.kind == OpKind::kBroadcast;
    nodes |= e.group_nodes != 0;
  }
  std::string buf = Cat("gpusim-trace ", kTraceFormatMajor);
  if (host) {
    Append(buf, ".", kHostMinor);
  } else if (!trace.warmup.empty()) {
    Append(buf, ".", kWarmupMinor);
  } else if (nodes) {
    Append(buf, ".", kNodesMinor);
  } else if (collectives) {
    Append(buf, ".", kCollectivesMinor);
  } else if (op_facts) {
    Append(buf, ".", kOpFactsMinor);
  } else if (!trace.frames.empty()) {
    Append(buf, ".", kFramesMinor);
  }
  Append(buf, "\n# format: traces/FORMAT.md\n");
  if (!trace.name.empty()) Append(buf, "name ", EscapeTraceName(trace.name), "\n");
  if (trace.preexisting != Bytes(0)) {
    Append(buf, "preexisting ", trace.preexisting.value(), "\n");
  }
  for (const auto& [k, v] : trace.meta) {
    Append(buf, "meta ", EscapeTraceName(k), " ", EscapeTraceName(v), "\n");
  }
  for (const StreamInfo& s : trace.streams) {
    Append(buf, "stream ", s.id, " ", EscapeTraceName(s.name), "\n");
  }
  for (size_t i = 0; i < trace.frames.size(); ++i) {
    const StackFrame& f = trace.frames[i];
    Append(buf, "frame ", i, " ", EscapeTraceName(f.function), " ",
           EscapeTraceName(f.file), " ", f.line, "\n");
    if (buf.size() >= (1 << 16)) {
      out.write(buf.data(), static_cast<std::streamsize>(buf.size()));
      buf.clear();
    }
  }
  for (const WarmupOp& w : trace.warmup) {
    if (w.kind == WarmupOp::Kind::kAlloc) {
      Append(buf, "warmup alloc ", w.buffer, " ", w.size.value(), "\n");
    } else if (w.kind == WarmupOp::Kind::kFree) {
      Append(buf, "warmup free ", w.buffer, "\n");
    } else {
      Append(buf, "warmup compute ", EscapeTraceName(w.op));
      if (w.phase != Phase::kForward) Append(buf, " phase=", PhaseName(w.phase));
      if (!w.dims.empty()) Append(buf, " dims=", absl::StrJoin(w.dims, ","));
      Append(buf, "\n");
    }
    if (buf.size() >= (1 << 16)) {
      out.write(buf.data(), static_cast<std::streamsize>(buf.size()));
      buf.clear();
    }
  }
  for (const TraceEvent& e : trace.events) {
    AppendEvent(e, buf);
    if (buf.size() >= (1 << 16)) {  // stream out in chunks
      out.write(buf.data(), static_cast<std::streamsize>(buf.size()));
      buf.clear();
    }
  }
  Append(buf, "end ", trace.events.size(), "\n");
  out.write(buf.data(), static_cast<std::streamsize>(buf.size()));
  out.flush();
  if (!out) return absl::DataLossError("error writing trace");
  return absl::OkStatus();
}

absl::Status WriteTraceFile(const Trace& trace, const std::string& path) {
  std::ostringstream text;  // fails here, before touching the disk
  RETURN_IF_ERROR(WriteTrace(trace, text));
  return WriteFileAtomically(path, std::move(text).str());
}

}  // namespace gpusim
