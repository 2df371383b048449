#include "sim/import/snapshot.h"

#include <map>
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

// Reads a snapshot document. Every accessor records the failing value's
// position so errors can name a byte offset.
class SnapshotReader {
 public:
  // `pickle`: `json` is the JSON of the pickle `label` (PlainPickle), whose
  // offsets an error names instead of the JSON's (Note [Pickle offsets]).
  SnapshotReader(const std::string& json, const std::string& label,
                 const import_internal::PlainPickle* pickle = nullptr)
      : json_(json), label_(label), pickle_(pickle) {}

  absl::StatusOr<RecordedSnapshot> Read() {
    RecordedSnapshot out;
    out.trace.metadata.source_file = label_;
    out.trace.metadata.format = "snapshot";
    od::document doc;
    simdjson::padded_string_view view(json_.data(), json_.size(), json_.capacity());
    // A failed iterate leaves `doc` without a token position: JsonError's
    // current_location() would read through a null pointer.
    if (auto err = parser_.iterate(view).get(doc)) {
      if (json_.find_first_not_of(" \t\r\n") == std::string::npos) {
        return Error(json_.data(), "empty file, expected a snapshot JSON object");
      }
      return Error(json_.data(),
                   Cat("malformed JSON (", std::string_view(simdjson::error_message(err)), ")"));
    }
    od::object top;
    if (auto err = doc.get_object().get(top)) return JsonError(doc, err, "a JSON object");
    bool have_segments = false;
    for (auto fr : top) {
      od::field f;
      if (auto err = std::move(fr).get(f)) return JsonError(doc, err);
      std::string_view key;
      if (auto err = f.unescaped_key().get(key)) return JsonError(doc, err);
      od::value v = f.value();
      if (key == "segments") {
        have_segments = true;
        RETURN_IF_ERROR(Segments(doc, v, out.segments));
      } else if (key == "device_traces") {
        RETURN_IF_ERROR(DeviceTraces(doc, v, out.trace.memory_events));
      } else if (key == "allocator_settings") {
        RETURN_IF_ERROR(Settings(doc, v, out.allocator_settings));
      }
    }
    if (!have_segments) {
      return absl::InvalidArgumentError(
          Cat(label_, ": not a memory snapshot: no \"segments\" key"));
    }
    out.trace.frames = std::move(frames_);
    out.trace.live_through = LiveThroughWindow(out);
    return out;
  }

 private:
  absl::Status Error(const char* at, std::string_view what) const {
    const int64_t offset = OffsetIn(json_, at);
    return absl::InvalidArgumentError(
        Cat(label_, ": byte ", pickle_ != nullptr ? pickle_->PickleOffsetAt(offset) : offset, ": ", what));
  }

  absl::Status JsonError(od::document& doc, simdjson::error_code err,
                         std::string_view expected = {}) const {
    const char* loc = nullptr;
    if (doc.current_location().get(loc) != simdjson::SUCCESS) loc = json_.data() + json_.size();
    if (!expected.empty() && err == simdjson::INCORRECT_TYPE) {
      return Error(loc, Cat("expected ", expected));
    }
    return Error(loc, Cat("malformed JSON (", std::string_view(simdjson::error_message(err)), ")"));
  }

  absl::Status Int(od::value& v, std::string_view key, int64_t* out) const {
    std::string_view tok;
    if (!NumberToken(v, &tok) || !ParseInteger(tok, out)) {
      return Error(v.raw_json_token().data(), Cat("\"", key, "\": expected an integer"));
    }
    return absl::OkStatus();
  }

  // A byte count: an integer >= 0.
  absl::Status Size(od::value& v, std::string_view key, int64_t* out) const {
    const char* at = v.raw_json_token().data();
    RETURN_IF_ERROR(Int(v, key, out));
    if (*out < 0) return Error(at, Cat("\"", key, "\": negative size ", *out));
    return absl::OkStatus();
  }

  absl::Status Str(od::value& v, std::string_view key, std::string* out) const {
    std::string_view s;
    RETURN_IF_ERROR(StrView(v, key, &s));
    *out = std::string(s);
    return absl::OkStatus();
  }

  // A view into the parser's string buffer, valid while the document is.
  absl::Status StrView(od::value& v, std::string_view key, std::string_view* out) const {
    if (v.get_string().get(*out) != simdjson::SUCCESS) {
      return Error(v.raw_json_token().data(), Cat("\"", key, "\": expected a string"));
    }
    return absl::OkStatus();
  }

  template <typename Fn>
  absl::Status ForEachField(od::document& doc, od::value& v, std::string_view what, Fn fn) {
    od::object obj;
    if (v.get_object().get(obj) != simdjson::SUCCESS) {
      return Error(v.raw_json_token().data(), Cat(what, ": expected an object"));
    }
    for (auto fr : obj) {
      od::field f;
      if (auto err = std::move(fr).get(f)) return JsonError(doc, err);
      std::string_view key;
      if (auto err = f.unescaped_key().get(key)) return JsonError(doc, err);
      od::value fv = f.value();
      RETURN_IF_ERROR(fn(key, fv));
    }
    return absl::OkStatus();
  }

  template <typename Fn>
  absl::Status ForEachElement(od::document& doc, od::value& v, std::string_view what, Fn fn) {
    od::array arr;
    if (v.get_array().get(arr) != simdjson::SUCCESS) {
      return Error(v.raw_json_token().data(), Cat(what, ": expected an array"));
    }
    for (auto er : arr) {
      od::value ev;
      if (auto err = std::move(er).get(ev)) return JsonError(doc, err);
      RETURN_IF_ERROR(fn(ev));
    }
    return absl::OkStatus();
  }

  absl::Status Segments(od::document& doc, od::value& v, std::vector<SnapshotSegment>& out) {
    return ForEachElement(doc, v, "segments", [&](od::value& sv) -> absl::Status {
      SnapshotSegment s;
      RETURN_IF_ERROR(ForEachField(doc, sv, "segment", [&](std::string_view k, od::value& x) {
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
          if (x.get_bool().get(b) != simdjson::SUCCESS) {
            return Error(x.raw_json_token().data(), "\"is_expandable\": expected true or false");
          }
          s.is_expandable = b;
        } else if (k == "blocks") {
          return ForEachElement(doc, x, "blocks", [&](od::value& bv) -> absl::Status {
            SnapshotBlock b;
            RETURN_IF_ERROR(ForEachField(doc, bv, "block", [&](std::string_view bk, od::value& y) {
              int64_t m = 0;
              if (bk == "address") return Int(y, bk, &b.address);
              if (bk == "size" || bk == "requested_size") {
                RETURN_IF_ERROR(Size(y, bk, &m));
                (bk == "size" ? b.size : b.requested_size) = Bytes(m);
              } else if (bk == "state") {
                return Str(y, bk, &b.state);
              } else if (bk == "frames") {
                return Frames(doc, y, &b.stack);
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

  absl::Status DeviceTraces(od::document& doc, od::value& v,
                            std::vector<RecordedMemoryEvent>& out) {
    int32_t device = 0;
    return ForEachElement(doc, v, "device_traces", [&](od::value& dv) -> absl::Status {
      RETURN_IF_ERROR(ForEachElement(doc, dv, "device trace", [&](od::value& ev) -> absl::Status {
        RecordedMemoryEvent m;
        m.device = device;
        const char* entry_at = ev.raw_json_token().data();
        bool have_action = false;
        RETURN_IF_ERROR(ForEachField(doc, ev, "trace entry", [&](std::string_view k, od::value& x) {
          int64_t n = 0;
          if (k == "action") {
            std::string action;
            RETURN_IF_ERROR(Str(x, k, &action));
            if (!ParseMemoryEventKind(action, &m.kind) || m.kind == MemoryEventKind::kFree ||
                m.kind == MemoryEventKind::kPreexisting ||
                m.kind == MemoryEventKind::kIncrementVersion) {
              return Error(entry_at, Cat("unknown trace entry action '", action, "'"));
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
            return Frames(doc, x, &m.stack);
          } else if (k == "time_us") {
            const char* at = x.raw_json_token().data();
            RETURN_IF_ERROR(Int(x, k, &n));
            int64_t ns = 0;
            if (__builtin_mul_overflow(n, 1000, &ns)) {
              return Error(at, Cat("\"time_us\": ", n, " us is out of range for int64 ns"));
            }
            m.time = SimTime(ns);
          }
          return absl::OkStatus();
        }));
        if (!have_action) return Error(entry_at, "trace entry lacks \"action\"");
        out.push_back(m);
        return absl::OkStatus();
      }));
      ++device;
      return absl::OkStatus();
    });
  }

  // A `frames` list (torch/cuda/memory.py _Frame: filename, line, name),
  // innermost first, interned into frames_ (Note [Interned stack frames]).
  // The strings are views into the parser's buffer, and the key is built in
  // a buffer kept across frames: a frame seen before (the same frames repeat
  // across thousands of entries) costs no allocation.
  absl::Status Frames(od::document& doc, od::value& v, std::vector<int32_t>* stack) {
    return ForEachElement(doc, v, "frames", [&](od::value& fv) -> absl::Status {
      std::string_view file, function;
      int64_t line = 0;
      RETURN_IF_ERROR(ForEachField(doc, fv, "frame", [&](std::string_view k, od::value& x) {
        if (k == "filename") return StrView(x, k, &file);
        if (k == "name") return StrView(x, k, &function);
        if (k == "line") {
          const char* at = x.raw_json_token().data();
          RETURN_IF_ERROR(Int(x, k, &line));
          if (line < 0) return Error(at, Cat("\"line\": expected a non-negative line number, got ", line));
        }
        return absl::OkStatus();
      }));
      frame_key_.clear();
      str_internal::Append(frame_key_, function, std::string_view("\0", 1), file, std::string_view("\0", 1), line);
      auto it = frame_index_.find(absl::string_view(frame_key_.data(), frame_key_.size()));
      if (it == frame_index_.end()) {
        if (frames_.size() >= static_cast<size_t>(INT32_MAX)) {
          return Error(fv.raw_json_token().data(), "more than 2^31 - 1 distinct stack frames");
        }
        it = frame_index_.emplace(frame_key_, static_cast<int32_t>(frames_.size())).first;
        frames_.push_back(StackFrame{std::string(function), std::string(file), line});
      }
      stack->push_back(it->second);
      return absl::OkStatus();
    });
  }

  absl::Status Settings(od::document& doc, od::value& v, SnapshotAllocatorSettings& s) {
    s.present = true;
    return ForEachField(doc, v, "allocator_settings", [&](std::string_view k, od::value& x) {
      std::string_view raw = x.raw_json_token();
      od::json_type type;
      if (x.type().get(type) != simdjson::SUCCESS) return Error(raw.data(), "malformed value");
      if (k == "PYTORCH_CUDA_ALLOC_CONF") {
        RETURN_IF_ERROR(Str(x, k, &s.alloc_conf));
      } else if (k == "max_split_size") {
        int64_t n = 0;
        RETURN_IF_ERROR(Int(x, k, &n));
        s.max_split_size = n;
      } else if (k == "expandable_segments") {
        bool b = false;
        if (x.get_bool().get(b) != simdjson::SUCCESS) {
          return Error(raw.data(), "\"expandable_segments\": expected true or false");
        }
        s.expandable_segments = b;
      } else if (k == "garbage_collection_threshold") {
        double d = 0;
        if (x.get_double().get(d) != simdjson::SUCCESS) {
          return Error(raw.data(), "\"garbage_collection_threshold\": expected a number");
        }
        s.garbage_collection_threshold = d;
      } else if (type == od::json_type::object || type == od::json_type::array) {
        std::string_view text;
        if (type == od::json_type::object) {
          od::object o;
          if (x.get_object().get(o) == simdjson::SUCCESS) if (o.raw_json().get(text) != simdjson::SUCCESS) text = {};
        } else {
          od::array a;
          if (x.get_array().get(a) == simdjson::SUCCESS) if (a.raw_json().get(text) != simdjson::SUCCESS) text = {};
        }
        s.raw.emplace_back(std::string(k), std::string(text));
        return absl::OkStatus();
      }
      while (!raw.empty() && (raw.back() == ' ' || raw.back() == '\n')) raw.remove_suffix(1);
      s.raw.emplace_back(std::string(k), std::string(raw));
      return absl::OkStatus();
    });
  }

  const std::string& json_;
  const std::string& label_;
  // Note [Pickle offsets]: every error about a pickle names a byte offset
  // in the pickle (of the decompressed bytes for .gz), never one in the JSON
  // it is read through, a text the user never sees (issue 27): the reader's
  // own errors the opcode at fault (pickle.h), this reader's the opcode that
  // made the value at fault (PlainPickle::PickleOffsetAt; a value the memo
  // shares, where it was made).
  const import_internal::PlainPickle* pickle_ = nullptr;
  od::parser parser_;
  std::vector<StackFrame> frames_;
  absl::flat_hash_map<std::string, int32_t> frame_index_;  // function \0 file \0 line → index
  std::string frame_key_;  // Frames' key buffer
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
  return SnapshotReader(padded, label).Read();
}

absl::StatusOr<RecordedSnapshot> ParseSnapshotPickle(const std::string& pickle, const std::string& label) {
  // Read natively (sim/import/pickle.h) into the JSON the reader above reads.
  ASSIGN_OR_RETURN(std::unique_ptr<import_internal::PlainPickle> plain,
                   import_internal::PlainPickle::Read(pickle, label));
  std::string json;
  RETURN_IF_ERROR(plain->WriteJson(&json));
  return SnapshotReader(json, label, plain.get()).Read();
}

absl::StatusOr<RecordedSnapshot> LoadSnapshot(const std::string& path) {
  bool pickle = EndsWith(path, ".pickle") || EndsWith(path, ".pkl");
  ASSIGN_OR_RETURN(std::string content, ReadFileToString(path));
  if (content.size() >= 2 && static_cast<unsigned char>(content[0]) == 0x1f &&
      static_cast<unsigned char>(content[1]) == 0x8b) {
    // A gzipped snapshot (x.pickle.gz, x.json.gz): its bytes, through the
    // byte source every importer reads gzip with.
    ASSIGN_OR_RETURN(std::unique_ptr<ByteSource> source, OpenByteSource(path));
    content.clear();
    std::string chunk(1 << 20, '\0');
    for (;;) {
      ASSIGN_OR_RETURN(size_t got, source->Read(chunk.data(), chunk.size()));
      if (got == 0) break;
      content.append(chunk.data(), got);
    }
    pickle = false;
  }
  if (!content.empty() && static_cast<unsigned char>(content[0]) == 0x80) pickle = true;
  if (!pickle) return ParseSnapshotJson(content, path);
  return ParseSnapshotPickle(content, path);
}

}  // namespace gpusim
