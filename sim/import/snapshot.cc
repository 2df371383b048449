#include "sim/import/snapshot.h"

#include <deque>
#include <map>
#include <optional>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "sim/base/file_util.h"
#include "sim/base/status.h"
#include "sim/base/str_cat.h"
#include "sim/import/byte_source.h"
#include "sim/import/pickle.h"
#include "sim/import/simdjson_util.h"

namespace gpusim {

using import_internal::NumberToken;
using import_internal::OffsetIn;
using import_internal::ParseInteger;
using str_internal::Cat;
namespace od = simdjson::ondemand;

namespace {

std::vector<RecordedMemoryEvent> LiveThroughWindow(const RecordedSnapshot& snap);

// Note [One reader, two sources]
// The snapshot reader below reads its values through a source: JsonSource,
// simdjson On-Demand over the JSON form, or PickleSource, the values of a
// pickle as PlainPickle decoded them (sim/import/pickle.h), read as the JSON
// PlainPickle::WriteJson would write for them reads (the same keys, numbers,
// strings and texts; PlainPickle::Check has refused first what that JSON
// could not hold), so a pickle is read without writing and parsing that
// JSON (14.9 MB for the largest snapshot pickle in the repo) and gives what
// the JSON gives. The equivalence is tested (sim/import/pickle_test.cc,
// pickle_fuzzer.cc: both ways on every input).

// simdjson On-Demand over a JSON document. Errors name a byte offset in it.
class JsonSource {
 public:
  using Value = od::value;
  using Pos = const char*;

  JsonSource(const std::string& json, const std::string& label) : json_(json), label_(label) {}

  Pos At(Value& v) const { return v.raw_json_token().data(); }

  absl::Status Error(Pos at, std::string_view what) const {
    return absl::InvalidArgumentError(Cat(label_, ": byte ", OffsetIn(json_, at), ": ", what));
  }

  // The top-level object's fields.
  template <typename Fn>
  absl::Status Top(Fn fn) {
    simdjson::padded_string_view view(json_.data(), json_.size(), json_.capacity());
    // A failed iterate leaves `doc_` without a token position: JsonError's
    // current_location() would read through a null pointer.
    if (auto err = parser_.iterate(view).get(doc_)) {
      if (json_.find_first_not_of(" \t\r\n") == std::string::npos) {
        return Error(json_.data(), "empty file, expected a snapshot JSON object");
      }
      return Error(json_.data(), Cat("malformed JSON (", std::string_view(simdjson::error_message(err)), ")"));
    }
    od::object top;
    if (auto err = doc_.get_object().get(top)) return JsonError(err, "a JSON object");
    return Fields(top, fn);
  }

  template <typename Fn>
  absl::Status Fields(Value& v, std::string_view what, Fn fn) {
    od::object obj;
    if (v.get_object().get(obj) != simdjson::SUCCESS) return Error(At(v), Cat(what, ": expected an object"));
    return Fields(obj, fn);
  }

  template <typename Fn>
  absl::Status Elements(Value& v, std::string_view what, Fn fn) {
    od::array arr;
    if (v.get_array().get(arr) != simdjson::SUCCESS) return Error(At(v), Cat(what, ": expected an array"));
    for (auto er : arr) {
      od::value ev;
      if (auto err = std::move(er).get(ev)) return JsonError(err);
      RETURN_IF_ERROR(fn(ev));
    }
    return absl::OkStatus();
  }

  bool Integer(Value& v, int64_t* out) const {
    std::string_view tok;
    return NumberToken(v, &tok) && ParseInteger(tok, out);
  }
  // A view into the parser's string buffer, valid while the document is.
  bool String(Value& v, std::string_view* out) const { return v.get_string().get(*out) == simdjson::SUCCESS; }
  bool Bool(Value& v, bool* out) const { return v.get_bool().get(*out) == simdjson::SUCCESS; }
  bool Double(Value& v, double* out) const { return v.get_double().get(*out) == simdjson::SUCCESS; }
  // Whether `v` is an object or array, or fails on a malformed value.
  absl::Status IsContainer(Value& v, bool* container) const {
    od::json_type type;
    if (v.type().get(type) != simdjson::SUCCESS) return Error(At(v), "malformed value");
    *container = type == od::json_type::object || type == od::json_type::array;
    return absl::OkStatus();
  }
  // The JSON text of a scalar (taken before it is read) ...
  std::string_view Token(Value& v) const { return v.raw_json_token(); }
  std::string ScalarText(std::string_view token) const {
    while (!token.empty() && (token.back() == ' ' || token.back() == '\n')) token.remove_suffix(1);
    return std::string(token);
  }
  // ... and of an object or array, unread.
  std::string ContainerText(Value& v) const {
    std::string_view text;
    od::json_type type;
    if (v.type().get(type) != simdjson::SUCCESS) return std::string();
    if (type == od::json_type::object) {
      od::object o;
      if (v.get_object().get(o) == simdjson::SUCCESS) if (o.raw_json().get(text) != simdjson::SUCCESS) text = {};
    } else {
      od::array a;
      if (v.get_array().get(a) == simdjson::SUCCESS) if (a.raw_json().get(text) != simdjson::SUCCESS) text = {};
    }
    return std::string(text);
  }
  // A value seen before (JSON has no sharing).
  std::optional<uint32_t> Identity(Value&) const { return std::nullopt; }

 private:
  absl::Status JsonError(simdjson::error_code err, std::string_view expected = {}) const {
    const char* loc = nullptr;
    if (doc_.current_location().get(loc) != simdjson::SUCCESS) loc = json_.data() + json_.size();
    if (!expected.empty() && err == simdjson::INCORRECT_TYPE) return Error(loc, Cat("expected ", expected));
    return Error(loc, Cat("malformed JSON (", std::string_view(simdjson::error_message(err)), ")"));
  }

  template <typename Fn>
  absl::Status Fields(od::object& obj, Fn fn) {
    for (auto fr : obj) {
      od::field f;
      if (auto err = std::move(fr).get(f)) return JsonError(err);
      std::string_view key;
      if (auto err = f.unescaped_key().get(key)) return JsonError(err);
      od::value fv = f.value();
      RETURN_IF_ERROR(fn(key, fv));
    }
    return absl::OkStatus();
  }

  const std::string& json_;
  const std::string& label_;
  od::parser parser_;
  mutable od::document doc_;
};

// Note [Pickle offsets]
// Every error about a snapshot pickle names a byte offset in the pickle (in
// the decompressed bytes of a .gz, as for the other importers), never one in
// a JSON text the user never sees (issue 27): the pickle reader's own errors
// the opcode at fault (sim/import/pickle.h), the snapshot reader's the
// opcode that made the value at fault (a value the memo shares: where it was
// made).

// The values of a decoded pickle, as its JSON would read (Note [Pickle
// offsets]).
class PickleSource {
 public:
  using Value = uint32_t;
  using Pos = uint32_t;
  using Pickle = import_internal::PlainPickle;

  PickleSource(const Pickle& pickle, const std::string& label) : p_(pickle), label_(label) {}

  Pos At(Value& v) const { return v; }

  absl::Status Error(Pos at, std::string_view what) const {
    return absl::InvalidArgumentError(Cat(label_, ": byte ", p_.Offset(at), ": ", what));
  }

  template <typename Fn>
  absl::Status Top(Fn fn) {
    Value root = p_.Root();  // a dict: PlainPickle::Check
    return Fields(root, "", fn);
  }

  template <typename Fn>
  absl::Status Fields(Value& v, std::string_view what, Fn fn) {
    if (p_.Type(v) != Pickle::JsonType::kObject) return Error(v, Cat(what, ": expected an object"));
    return p_.Fields(v, [&](std::string_view key, uint32_t value) -> absl::Status { return fn(key, value); });
  }

  template <typename Fn>
  absl::Status Elements(Value& v, std::string_view what, Fn fn) {
    if (p_.Type(v) != Pickle::JsonType::kArray) return Error(v, Cat(what, ": expected an array"));
    return p_.Elements(v, [&](uint32_t item) -> absl::Status { return fn(item); });
  }

  bool Integer(Value& v, int64_t* out) const { return p_.Integer(v, out); }
  bool String(Value& v, std::string_view* out) {
    std::string rebuilt;
    if (!p_.String(v, out, &rebuilt)) return false;
    if (!rebuilt.empty() && out->data() == rebuilt.data()) {
      scratch_.push_back(std::move(rebuilt));
      *out = scratch_.back();
    }
    return true;
  }
  bool Bool(Value& v, bool* out) const { return p_.Bool(v, out); }
  bool Double(Value& v, double* out) const { return p_.Double(v, out); }
  absl::Status IsContainer(Value& v, bool* container) const {
    const Pickle::JsonType t = p_.Type(v);
    *container = t == Pickle::JsonType::kObject || t == Pickle::JsonType::kArray;
    return absl::OkStatus();
  }
  Value Token(Value& v) const { return v; }
  std::string ScalarText(Value v) const { return p_.JsonText(v); }
  std::string ContainerText(Value& v) const { return p_.JsonText(v); }
  std::optional<uint32_t> Identity(Value& v) const { return v; }

 private:
  const Pickle& p_;
  const std::string& label_;
  // Strings String() had to rebuild (a surrogate pair), kept as the
  // parser's buffer keeps JSON strings: while the reader reads.
  std::deque<std::string> scratch_;
};

// Reads a snapshot document from `Src` (Note [One reader, two sources]).
// Every accessor records the failing value's position so errors can name a
// byte offset.
template <typename Src>
class SnapshotReader {
 public:
  using Value = typename Src::Value;

  SnapshotReader(Src& src, const std::string& label) : src_(src), label_(label) {}

  absl::StatusOr<RecordedSnapshot> Read() {
    RecordedSnapshot out;
    out.trace.metadata.source_file = label_;
    out.trace.metadata.format = "snapshot";
    bool have_segments = false;
    RETURN_IF_ERROR(src_.Top([&](std::string_view key, Value& v) -> absl::Status {
      if (key == "segments") {
        have_segments = true;
        return Segments(v, out.segments);
      }
      if (key == "device_traces") return DeviceTraces(v, out.trace.memory_events);
      if (key == "allocator_settings") return Settings(v, out.allocator_settings);
      return absl::OkStatus();
    }));
    if (!have_segments) {
      return absl::InvalidArgumentError(
          Cat(label_, ": not a memory snapshot: no \"segments\" key"));
    }
    out.trace.frames = std::move(frames_);
    out.trace.live_through = LiveThroughWindow(out);
    return out;
  }

 private:
  absl::Status Int(Value& v, std::string_view key, int64_t* out) const {
    if (!src_.Integer(v, out)) return src_.Error(src_.At(v), Cat("\"", key, "\": expected an integer"));
    return absl::OkStatus();
  }

  // A byte count: an integer >= 0.
  absl::Status Size(Value& v, std::string_view key, int64_t* out) const {
    const auto at = src_.At(v);
    RETURN_IF_ERROR(Int(v, key, out));
    if (*out < 0) return src_.Error(at, Cat("\"", key, "\": negative size ", *out));
    return absl::OkStatus();
  }

  absl::Status Str(Value& v, std::string_view key, std::string* out) {
    std::string_view s;
    RETURN_IF_ERROR(StrView(v, key, &s));
    *out = std::string(s);
    return absl::OkStatus();
  }

  // A view valid while the source is being read.
  absl::Status StrView(Value& v, std::string_view key, std::string_view* out) {
    const auto at = src_.At(v);
    if (!src_.String(v, out)) return src_.Error(at, Cat("\"", key, "\": expected a string"));
    return absl::OkStatus();
  }

  absl::Status Segments(Value& v, std::vector<SnapshotSegment>& out) {
    return src_.Elements(v, "segments", [&](Value& sv) -> absl::Status {
      SnapshotSegment s;
      RETURN_IF_ERROR(src_.Fields(sv, "segment", [&](std::string_view k, Value& x) -> absl::Status {
        int64_t n = 0;
        if (k == "device") {
          RETURN_IF_ERROR(Int(x, k, &n));
          s.device = static_cast<int32_t>(n);
        } else if (k == "address") {
          return Int(x, k, &s.address);
        } else if (k == "total_size" || k == "allocated_size" || k == "active_size" ||
                   k == "requested_size") {
          RETURN_IF_ERROR(Size(x, k, &n));
          (k == "total_size"       ? s.total_size
           : k == "allocated_size" ? s.allocated_size
           : k == "active_size"    ? s.active_size
                                   : s.requested_size) = Bytes(n);
        } else if (k == "stream") {
          return Int(x, k, &s.stream);
        } else if (k == "segment_type") {
          return Str(x, k, &s.segment_type);
        } else if (k == "is_expandable") {
          bool b = false;
          const auto at = src_.At(x);
          if (!src_.Bool(x, &b)) return src_.Error(at, "\"is_expandable\": expected true or false");
          s.is_expandable = b;
        } else if (k == "blocks") {
          return src_.Elements(x, "blocks", [&](Value& bv) -> absl::Status {
            SnapshotBlock b;
            RETURN_IF_ERROR(src_.Fields(bv, "block", [&](std::string_view bk, Value& y) -> absl::Status {
              int64_t m = 0;
              if (bk == "address") return Int(y, bk, &b.address);
              if (bk == "size" || bk == "requested_size") {
                RETURN_IF_ERROR(Size(y, bk, &m));
                (bk == "size" ? b.size : b.requested_size) = Bytes(m);
              } else if (bk == "state") {
                return Str(y, bk, &b.state);
              } else if (bk == "frames") {
                return Frames(y, &b.stack);
              }
              return absl::OkStatus();
            }));
            s.blocks.push_back(std::move(b));
            return absl::OkStatus();
          });
        }
        return absl::OkStatus();
      }));
      out.push_back(std::move(s));
      return absl::OkStatus();
    });
  }

  absl::Status DeviceTraces(Value& v, std::vector<RecordedMemoryEvent>& out) {
    int32_t device = 0;
    return src_.Elements(v, "device_traces", [&](Value& dv) -> absl::Status {
      RETURN_IF_ERROR(src_.Elements(dv, "device trace", [&](Value& ev) -> absl::Status {
        RecordedMemoryEvent m;
        m.device = device;
        const auto entry_at = src_.At(ev);
        bool have_action = false;
        RETURN_IF_ERROR(src_.Fields(ev, "trace entry", [&](std::string_view k, Value& x) -> absl::Status {
          int64_t n = 0;
          if (k == "action") {
            std::string_view action;
            RETURN_IF_ERROR(StrView(x, k, &action));
            if (!ParseMemoryEventKind(action, &m.kind) || m.kind == MemoryEventKind::kFree ||
                m.kind == MemoryEventKind::kPreexisting ||
                m.kind == MemoryEventKind::kIncrementVersion) {
              return src_.Error(entry_at, Cat("unknown trace entry action '", action, "'"));
            }
            have_action = true;
          } else if (k == "addr") {
            RETURN_IF_ERROR(Int(x, k, &n));
            m.address = n;
          } else if (k == "size") {
            RETURN_IF_ERROR(Size(x, k, &n));
            m.size = Bytes(n);
          } else if (k == "stream") {
            return Int(x, k, &m.stream);
          } else if (k == "frames") {
            return Frames(x, &m.stack);
          } else if (k == "time_us") {
            const auto at = src_.At(x);
            RETURN_IF_ERROR(Int(x, k, &n));
            int64_t ns = 0;
            if (__builtin_mul_overflow(n, 1000, &ns)) {
              return src_.Error(at, Cat("\"time_us\": ", n, " us is out of range for int64 ns"));
            }
            m.time = SimTime(ns);
          }
          return absl::OkStatus();
        }));
        if (!have_action) return src_.Error(entry_at, "trace entry lacks \"action\"");
        out.push_back(m);
        return absl::OkStatus();
      }));
      ++device;
      return absl::OkStatus();
    });
  }

  // A `frames` list (torch/cuda/memory.py _Frame: filename, line, name),
  // innermost first, interned into frames_ (Note [Interned stack frames]).
  // The strings are views, and the key is built in a buffer kept across
  // frames: a frame seen before (the same frames repeat across thousands of
  // entries) costs no allocation; from a pickle, a frame the memo shares
  // (the same Python object) is looked up by its identity alone.
  absl::Status Frames(Value& v, std::vector<int32_t>* stack) {
    return src_.Elements(v, "frames", [&](Value& fv) -> absl::Status {
      const std::optional<uint32_t> identity = src_.Identity(fv);
      if (identity.has_value()) {
        auto seen = frame_of_value_.find(*identity);
        if (seen != frame_of_value_.end()) {
          stack->push_back(seen->second);
          return absl::OkStatus();
        }
      }
      const auto frame_at = src_.At(fv);
      std::string_view file, function;
      int64_t line = 0;
      RETURN_IF_ERROR(src_.Fields(fv, "frame", [&](std::string_view k, Value& x) -> absl::Status {
        if (k == "filename") return StrView(x, k, &file);
        if (k == "name") return StrView(x, k, &function);
        if (k == "line") {
          const auto at = src_.At(x);
          RETURN_IF_ERROR(Int(x, k, &line));
          if (line < 0) return src_.Error(at, Cat("\"line\": expected a non-negative line number, got ", line));
        }
        return absl::OkStatus();
      }));
      frame_key_.clear();
      str_internal::Append(frame_key_, function, std::string_view("\0", 1), file, std::string_view("\0", 1), line);
      auto it = frame_index_.find(absl::string_view(frame_key_.data(), frame_key_.size()));
      if (it == frame_index_.end()) {
        if (frames_.size() >= static_cast<size_t>(INT32_MAX)) {
          return src_.Error(frame_at, "more than 2^31 - 1 distinct stack frames");
        }
        it = frame_index_.emplace(frame_key_, static_cast<int32_t>(frames_.size())).first;
        frames_.push_back(StackFrame{std::string(function), std::string(file), line});
      }
      if (identity.has_value()) frame_of_value_.emplace(*identity, it->second);
      stack->push_back(it->second);
      return absl::OkStatus();
    });
  }

  absl::Status Settings(Value& v, SnapshotAllocatorSettings& s) {
    s.present = true;
    return src_.Fields(v, "allocator_settings", [&](std::string_view k, Value& x) -> absl::Status {
      const auto at = src_.At(x);
      const auto token = src_.Token(x);
      bool container = false;
      RETURN_IF_ERROR(src_.IsContainer(x, &container));
      if (k == "PYTORCH_CUDA_ALLOC_CONF") {
        RETURN_IF_ERROR(Str(x, k, &s.alloc_conf));
      } else if (k == "max_split_size") {
        int64_t n = 0;
        RETURN_IF_ERROR(Int(x, k, &n));
        s.max_split_size = n;
      } else if (k == "expandable_segments") {
        bool b = false;
        if (!src_.Bool(x, &b)) return src_.Error(at, "\"expandable_segments\": expected true or false");
        s.expandable_segments = b;
      } else if (k == "garbage_collection_threshold") {
        double d = 0;
        if (!src_.Double(x, &d)) return src_.Error(at, "\"garbage_collection_threshold\": expected a number");
        s.garbage_collection_threshold = d;
      } else if (container) {
        s.raw.emplace_back(std::string(k), src_.ContainerText(x));
        return absl::OkStatus();
      }
      s.raw.emplace_back(std::string(k), src_.ScalarText(token));
      return absl::OkStatus();
    });
  }

  Src& src_;
  const std::string& label_;
  std::vector<StackFrame> frames_;
  absl::flat_hash_map<std::string, int32_t> frame_index_;  // function \0 file \0 line → index
  std::string frame_key_;  // Frames' key buffer
  absl::flat_hash_map<uint32_t, int32_t> frame_of_value_;  // pickle value → index
};

// Note [Interned stack frames]
// With _record_memory_history(context="all"/"alloc"), every trace entry and
// every block carries `frames`, the Python (and C++) stack at the call
// (CUDACachingAllocator.cpp records the CapturedTraceback of the malloc in
// TraceEntry::context_ and Block::context_when_allocated; torch/cuda/memory.py
// _snapshot turns them into {filename, line, name} lists). The same frames
// repeat across thousands of entries, so the reader stores each distinct
// (function, file, line) once in RecordedTrace::frames and keeps indices;
// ToNativeTrace hands them on as Trace::frames (traces/FORMAT.md 1.1).

// Note [Blocks live through the window]
// A snapshot's trace is a window (the _record_memory_history ring buffer,
// max_entries); its `segments` are the allocator state at the dump
// (CUDACachingAllocator.cpp, DeviceCachingAllocator::snapshot). A block that
// is allocated in the segments and that no trace entry allocated was
// allocated before the window and lived through all of it (parameters,
// optimizer state): no event shows it, yet it holds memory at every
// instant. Walking the trace backwards from the end undoes the window's
// allocs (an alloc at A means the block at A did not exist before it); what
// stays allocated is live through the window. Those blocks become
// RecordedTrace::live_through (requested size, as the trace's allocs carry
// requested sizes), so that every consumer of the import — replay with any
// allocator, compare, viz — counts them; without them the peaks come out low
// by their size.
std::vector<RecordedMemoryEvent> LiveThroughWindow(const RecordedSnapshot& snap) {
  std::map<std::pair<int32_t, int64_t>, RecordedMemoryEvent> live;  // (device, address)
  for (const SnapshotSegment& s : snap.segments) {
    for (const SnapshotBlock& b : s.blocks) {
      if (b.state == "inactive") continue;
      RecordedMemoryEvent m;
      m.kind = MemoryEventKind::kPreexisting;
      m.address = b.address;
      m.size = b.requested_size;
      m.stream = s.stream;
      m.device = s.device;
      m.stack = b.stack;
      live[{s.device, b.address}] = m;
    }
  }
  const auto& ev = snap.trace.memory_events;
  for (size_t k = ev.size(); k-- > 0;) {
    if (ev[k].kind == MemoryEventKind::kAlloc && ev[k].address.has_value()) {
      live.erase({ev[k].device, *ev[k].address});
    }
  }
  std::vector<RecordedMemoryEvent> out;
  out.reserve(live.size());
  for (auto& [key, m] : live) out.push_back(m);
  return out;
}

bool EndsWith(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

}  // namespace

Bytes RecordedSnapshot::TotalReserved() const {
  Bytes total;
  for (const SnapshotSegment& s : segments) total += s.total_size;
  return total;
}

absl::StatusOr<RecordedSnapshot> ParseSnapshotJson(const std::string& json,
                                                   const std::string& label) {
  std::string padded = json;
  padded.reserve(json.size() + import_internal::kJsonPadding);
  JsonSource src(padded, label);
  return SnapshotReader<JsonSource>(src, label).Read();
}

absl::StatusOr<RecordedSnapshot> ParseSnapshotPickle(const std::string& pickle, const std::string& label,
                                                     PickleRead how) {
  ASSIGN_OR_RETURN(std::unique_ptr<import_internal::PlainPickle> plain,
                   import_internal::PlainPickle::Read(pickle, label));
  if (how == PickleRead::kThroughJson) {
    std::string json;
    RETURN_IF_ERROR(plain->WriteJson(&json));
    JsonSource src(json, label);
    absl::StatusOr<RecordedSnapshot> s = SnapshotReader<JsonSource>(src, label).Read();
    // Its offsets are the JSON's: only whether it fails is compared.
    if (!s.ok()) {
      return absl::InvalidArgumentError(
          Cat(label, ": byte 0: through JSON: ", std::string_view(s.status().message().data(), s.status().message().size())));
    }
    return s;
  }
  RETURN_IF_ERROR(plain->Check());
  PickleSource src(*plain, label);
  return SnapshotReader<PickleSource>(src, label).Read();
}

absl::StatusOr<RecordedSnapshot> LoadSnapshot(const std::string& path) {
  ASSIGN_OR_RETURN(std::shared_ptr<const InputFd> file, InputFd::Open(path));
  return LoadSnapshot(std::move(file));
}

absl::StatusOr<RecordedSnapshot> LoadSnapshot(std::shared_ptr<const InputFd> file) {
  const std::string& path = file->path();
  ASSIGN_OR_RETURN(std::unique_ptr<ByteSource> source, OpenByteSource(file));
  // A gzipped snapshot (x.pickle.gz, x.json.gz) arrives decompressed, in
  // memory; its name says nothing then, its first byte does.
  ASSIGN_OR_RETURN(std::string content, ReadAll(*source));
  bool pickle = !source->decompressed() && (EndsWith(path, ".pickle") || EndsWith(path, ".pkl"));
  if (!content.empty() && static_cast<unsigned char>(content[0]) == 0x80) pickle = true;
  if (!pickle) return ParseSnapshotJson(content, path);
  return ParseSnapshotPickle(content, path);
}

}  // namespace gpusim
