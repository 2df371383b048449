#include "sim/import/kineto.h"

#include <algorithm>
#include <map>
#include <limits>
#include <optional>
#include <string>
#include <string_view>

#include "absl/container/flat_hash_map.h"
#include "sim/base/status.h"
#include "sim/import/json_fast.h"
#include "sim/import/json_stream.h"
#include "sim/import/simdjson_util.h"
#include "sim/base/str_cat.h"

namespace gpusim {

using import_internal::NumberToken;
using import_internal::OffsetIn;
using import_internal::OffsetPrefix;
using import_internal::ParseInteger;
using import_internal::ParseMicrosToNanos;
using str_internal::Cat;
namespace od = simdjson::ondemand;

namespace {

// The "args" keys any kept event may need.
struct Args {
  std::optional<int64_t> device_type, device_id, addr, bytes, total_allocated,
      total_reserved, ev_idx, stream, device, correlation, external_id, op_bytes, sequence;
  bool has_shapes = false;
  std::vector<std::vector<int64_t>> input_dims;
  std::vector<std::string> input_types, concrete_inputs;
};

// The integer "args" key `key` is read into, or null.
std::optional<int64_t>* ArgSlot(Args& args, std::string_view key) {
  if (key == "Device Type") return &args.device_type;
  if (key == "Device Id") return &args.device_id;
  if (key == "Addr") return &args.addr;
  if (key == "Bytes") return &args.bytes;
  if (key == "Total Allocated") return &args.total_allocated;
  if (key == "Total Reserved") return &args.total_reserved;
  if (key == "Ev Idx") return &args.ev_idx;
  if (key == "stream") return &args.stream;
  if (key == "device") return &args.device;
  if (key == "correlation") return &args.correlation;
  if (key == "External id" || key == "external id") return &args.external_id;
  if (key == "bytes") return &args.op_bytes;
  if (key == "Sequence number") return &args.sequence;
  return nullptr;
}

enum class Class { kUnknown, kMemory, kOp, kPython, kCapture, kSkip };

// A field's key as the document spells it when it has no escape (every key
// Kineto writes): a view into the padded text, with no copy — what
// unescaped_key() would return, which copied each key of each event into
// the parser's string buffer (the field walk, OnElement + ParseArgs, went
// from 23% to 14% of a streamed replay's CPU time; README "Replaying
// recorded traces"). A key with an escape is unescaped as before.
simdjson::error_code KeyOf(od::field& field, std::string_view* key) {
  const char* p = field.key().raw();  // just after the opening quote
  const char* q = p;
  while (*q != '"' && *q != '\\') ++q;  // stage 1 found the closing quote
  if (*q == '"') {
    *key = std::string_view(p, static_cast<size_t>(q - p));
    return simdjson::SUCCESS;
  }
  return field.unescaped_key().get(*key);
}

// Runtime calls that open and close a CUDA/HIP graph capture.
bool IsCaptureCall(std::string_view name, bool* begin) {
  if (name == "cudaStreamBeginCapture" || name == "hipStreamBeginCapture" ||
      name == "cudaStreamBeginCaptureToGraph") {
    *begin = true;
    return true;
  }
  if (name == "cudaStreamEndCapture" || name == "hipStreamEndCapture") {
    *begin = false;
    return true;
  }
  return false;
}

// Note [Kineto call stacks]
// A trace recorded with torch.profiler.profile(with_stack=True) carries one
// complete event of category "python_function" per Python call (torch
// profiler's python tracer, torch/csrc/profiler/python/init.cpp and
// collection.cpp: name "FILE(LINE): FUNCTION", on the calling thread), and
// every CPU-side [memory] event sits on the thread whose code allocated. The
// call stack of a [memory] event is therefore the python_function events of
// its thread (same pid and tid) open at its timestamp, innermost (latest
// start) first. Frames are interned into RecordedTrace::frames, one per
// distinct name.
struct PythonCall {
  int32_t thread = -1;  // interned (pid, tid) tokens
  int64_t start = 0, end = 0;
  std::string name;
};

// "FILE(LINE): FUNCTION" → a frame; any other name is the function alone.
StackFrame ParsePythonFrame(std::string_view name) {
  StackFrame f;
  const size_t colon = name.find("): ");
  const size_t open = colon == std::string_view::npos ? colon : name.rfind('(', colon);
  int64_t line = 0;
  if (open != std::string_view::npos && ParseInteger(name.substr(open + 1, colon - open - 1), &line) && line >= 0) {
    f.file = std::string(name.substr(0, open));
    f.line = line;
    f.function = std::string(name.substr(colon + 3));
  } else {
    f.function = std::string(name);
  }
  return f;
}

bool FitsInt32(int64_t v) {
  return v >= std::numeric_limits<int32_t>::min() && v <= std::numeric_limits<int32_t>::max();
}

std::optional<RecordedOpKind> OpKindForCategory(std::string_view cat,
                                                const KinetoImportOptions& o) {
  if (o.keep_gpu_ops) {
    if (cat == "kernel" || cat == "Kernel") return RecordedOpKind::kKernel;
    if (cat == "gpu_memcpy" || cat == "Memcpy") return RecordedOpKind::kMemcpy;
    if (cat == "gpu_memset" || cat == "Memset") return RecordedOpKind::kMemset;
  }
  if (o.keep_cpu_ops) {
    if (cat == "cpu_op" || cat == "Operator") return RecordedOpKind::kCpuOp;
    if (cat == "user_annotation") return RecordedOpKind::kUserAnnotation;
    if (cat == "gpu_user_annotation") return RecordedOpKind::kGpuUserAnnotation;
  }
  if (o.keep_runtime) {
    if (cat == "cuda_runtime" || cat == "Runtime" || cat == "cuda_driver") {
      return RecordedOpKind::kRuntime;
    }
  }
  return std::nullopt;
}

class KinetoVisitor : public import_internal::JsonStreamVisitor {
 public:
  KinetoVisitor(const std::string& label, bool decompressed, const KinetoImportOptions& options,
                RecordedTrace& out)
      : label_(label), decompressed_(decompressed), options_(options), out_(out) {}

  bool WantsTopLevelKey(std::string_view key) override {
    return key == "deviceProperties" || key == "traceName" || key == "baseTimeNanoseconds";
  }

  absl::Status OnTopLevelValue(std::string_view key, const std::string& text,
                               int64_t offset) override {
    od::document doc;
    if (auto err = parser_.iterate(Padded(text)).get(doc)) return IterateError(offset, err);
    if (key == "traceName") {
      std::string_view s;
      if (doc.get_string().get(s) == simdjson::SUCCESS) out_.metadata.trace_name = std::string(s);
      return absl::OkStatus();
    }
    if (key == "baseTimeNanoseconds") {
      od::value v;
      std::string_view tok;
      int64_t n = 0;
      if (doc.get_value().get(v) == simdjson::SUCCESS && NumberToken(v, &tok) &&
          ParseInteger(tok, &n)) {
        out_.metadata.base_time_ns = n;
      }
      return absl::OkStatus();
    }
    // deviceProperties: [{"id": 0, "name": "...", "totalGlobalMem": N, ...}, ...]
    od::array arr;
    if (auto err = doc.get_array().get(arr)) return JsonError(text, offset, doc, err);
    for (auto elem : arr) {
      od::object obj;
      if (auto err = std::move(elem).get_object().get(obj)) return JsonError(text, offset, doc, err);
      RecordedDevice d;
      for (auto f : obj) {
        std::string_view k;
        od::field field;
        if (auto err = std::move(f).get(field)) return JsonError(text, offset, doc, err);
        if (auto err = KeyOf(field, &k)) return JsonError(text, offset, doc, err);
        od::value v = field.value();
        std::string_view tok;
        int64_t n = 0;
        if (k == "id" && NumberToken(v, &tok) && ParseInteger(tok, &n)) {
          d.id = static_cast<int32_t>(n);
        } else if (k == "name") {
          std::string_view s;
          if (v.get_string().get(s) == simdjson::SUCCESS) d.name = std::string(s);
        } else if (k == "totalGlobalMem" && NumberToken(v, &tok) && ParseInteger(tok, &n)) {
          d.total_global_mem = Bytes(n);
        }
      }
      out_.metadata.devices.push_back(std::move(d));
    }
    return absl::OkStatus();
  }

  absl::Status OnElement(const std::string& text, int64_t offset) override {
    od::document doc;
    if (auto err = parser_.iterate(Padded(text)).get(doc)) return IterateError(offset, err);
    od::object obj;
    if (auto err = doc.get_object().get(obj)) {
      if (err == simdjson::INCORRECT_TYPE) return Error(offset, "expected a trace event object");
      return JsonError(text, offset, doc, err);
    }
    Fields f;
    std::string_view &ph = f.ph, &name = f.name, &cat = f.cat, &pid = f.pid, &tid = f.tid;
    std::optional<int64_t>&ts = f.ts, &dur = f.dur;
    Args& args = f.args;
    bool& have_args = f.have_args;
    for (auto field_result : obj) {
      od::field field;
      if (auto err = std::move(field_result).get(field)) return JsonError(text, offset, doc, err);
      std::string_view key;
      if (auto err = KeyOf(field, &key)) return JsonError(text, offset, doc, err);
      od::value v = field.value();
      if (key == "ph") {
        if (v.get_string().get(ph) != simdjson::SUCCESS) return FieldError(text, offset, v, "ph", "a string");
      } else if (key == "name") {
        if (v.get_string().get(name) != simdjson::SUCCESS) name = {};
      } else if (key == "cat") {
        if (v.get_string().get(cat) != simdjson::SUCCESS) cat = {};
      } else if (key == "pid" || key == "tid") {
        (key == "pid" ? pid : tid) = v.raw_json_token();
      } else if (key == "ts" || key == "dur") {
        std::string_view tok;
        int64_t ns = 0;
        if (!NumberToken(v, &tok) || !ParseMicrosToNanos(tok, &ns)) {
          return FieldError(text, offset, v, key, "a number of microseconds");
        }
        (key == "ts" ? ts : dur) = ns;
      } else if (key == "args") {
        const Class c = Classify(ph, name, cat);
        if (c == Class::kSkip) continue;
        RETURN_IF_ERROR(ParseArgs(text, offset, doc, v, args));
        have_args = true;
      }
    }
    return Emit(f, offset);
  }

  // Note [One pass per trace event]
  // Most of a streamed replay's time went to reading each trace event twice:
  // json_stream.cc found its end (copying it out of the read buffer), then
  // simdjson On-Demand indexed and walked it for the fields (perf of
  // bench/replay_stream_benchmark.cc, 1 M events: element scan 13%, the
  // copies 5%, the walk 29%). The events Kineto writes are plain: ASCII
  // keys and names without escapes, integers, one nested "args". So an
  // element is first read in place, in one pass that finds its end and its
  // fields together (json_fast.h), into the same Fields the general walk
  // fills; anything that pass does not read exactly — an escape, a
  // non-ASCII byte, a field of an unexpected type, an element past the
  // read buffer, "Input Dims" and the like — declines before any effect,
  // and the element takes the general path, whose values and errors are
  // the reference. Both then go through Emit.
  absl::StatusOr<size_t> OnElementInPlace(std::string_view window, int64_t offset) override {
    if (!options_.fast_path) return size_t{0};
    // Note [Events of one shape]: a [memory] event like the last one walked
    // is read against its shape.
    // Its fields go to shape_fields_, which holds nothing but the values of
    // its holes (Note [Fields kept for a shape]), and it is a [memory] event.
    if (!shape_.empty()) {
      import_internal::FastJson j(window);
      recording_ = false;
      if (MatchShape(j, shape_fields_)) {
        RETURN_IF_ERROR(EmitMemory(shape_fields_, offset));
        return static_cast<size_t>(j.pos() - window.data());
      }
    }
    import_internal::FastJson j(window);
    Fields f;
    shape_.Begin(window.data());
    recording_ = true;
    if (!FastWalk(j, f)) return size_t{0};
    if (f.have_args && Classify(f.ph, f.name, f.cat) == Class::kMemory && shape_.Learn(j.pos())) {
      shape_ph_.assign(f.ph);
      shape_name_.assign(f.name);
      shape_cat_.assign(f.cat);
      shape_fields_ = Fields();
    }
    RETURN_IF_ERROR(Emit(f, offset));
    return static_cast<size_t>(j.pos() - window.data());
  }

 private:
  // The microseconds ParseMicrosToNanos takes (a smaller bound than its
  // range check's, so that both agree inside it).
  static constexpr int64_t kMaxMicros = std::numeric_limits<int64_t>::max() / 1000 - 2;

  // An event's fields, as the walk found them.
  struct Fields {
    std::string_view ph, name, cat, pid, tid;
    std::optional<int64_t> ts, dur;
    Args args;
    bool have_args = false;
  };

  // The fields of the object at the cursor, read as OnElement reads them;
  // false: not read (the general path's to read).
  // Keys of the fast walk, in the order Kineto writes a [memory] event's
  // (the guesses of FastJson::Key); "s" is read and ignored. The "args"
  // keys are ArgSlotAt's.
  enum TopKey { kPh, kCat, kName, kPid, kTid, kTs, kS, kArgs, kDur };
  static const import_internal::KeyTable& TopKeys() {
    static const auto& t =
        *new import_internal::KeyTable({"ph", "cat", "name", "pid", "tid", "ts", "s", "args", "dur"});
    return t;
  }
  static const import_internal::KeyTable& ArgKeys() {
    static const auto& t = *new import_internal::KeyTable(
        {"Device Type", "Device Id", "Addr", "Bytes", "Total Allocated", "Total Reserved", "Ev Idx", "stream", "device",
         "correlation", "External id", "external id", "bytes", "Sequence number"});
    return t;
  }
  // ArgSlot of ArgKeys().name(k).
  static std::optional<int64_t>* ArgSlotAt(Args& a, int k) {
    static constexpr std::optional<int64_t> Args::*kSlots[] = {
        &Args::device_type,    &Args::device_id, &Args::addr,        &Args::bytes,       &Args::total_allocated,
        &Args::total_reserved, &Args::ev_idx,    &Args::stream,      &Args::device,      &Args::correlation,
        &Args::external_id,    &Args::external_id, &Args::op_bytes,    &Args::sequence};
    return &(a.*kSlots[k]);
  }

  // FastWalk's read of the value of top-level field k (kPid, kTid, kTs,
  // kDur) and of the integer "args" field ArgKeys().name(k): the holes of
  // an event's shape (Note [Events of one shape]), recorded as they are read.
  static constexpr int kArgField = 100;  // hole field of args key k: kArgField + k
  [[gnu::always_inline]] bool TopValue(import_internal::FastJson& j, int k, Fields& f) {
    std::string_view tok;
    if (k == kPid || k == kTid) {
      if (!j.RawScalar(&tok)) return false;
      (k == kPid ? f.pid : f.tid) = tok;
    } else {
      int64_t ns = 0;
      bool integer = false;
      if (!j.Number(&tok, &ns, &integer)) return false;
      // ParseMicrosToNanos of an integer: its range, times 1000.
      if (integer && ns <= kMaxMicros && ns >= -kMaxMicros) {
        ns *= 1000;
      } else if (!ParseMicrosToNanos(tok, &ns)) {
        return false;
      }
      (k == kTs ? f.ts : f.dur) = ns;
    }
    if (recording_) shape_.Hole(k, tok.data(), j.pos());
    return true;
  }
  [[gnu::always_inline]] bool ArgValue(import_internal::FastJson& j, int k, Args& args) {
    std::string_view tok;
    int64_t n = 0;
    bool integer = false;
    if (!j.Number(&tok, &n, &integer) || (!integer && !ParseInteger(tok, &n))) return false;
    *ArgSlotAt(args, k) = n;
    if (recording_) shape_.Hole(kArgField + k, tok.data(), j.pos());
    return true;
  }

  // The event at the cursor read against shape_: the fields of the event
  // it was learned from, with the holes' values read here.
  bool MatchShape(import_internal::FastJson& j, Fields& f) {
    if (!shape_.Match(j, [&](int field) {
          return field >= kArgField ? ArgValue(j, field - kArgField, f.args) : TopValue(j, field, f);
        })) {
      return false;
    }
    f.ph = shape_ph_;
    f.name = shape_name_;
    f.cat = shape_cat_;
    f.have_args = true;
    return true;
  }

  bool FastWalk(import_internal::FastJson& j, Fields& f) {
    return j.Object(TopKeys(), [&](int k, std::string_view /*key*/, int* guess) {
      switch (k) {
        case kPh:
          return j.String(&f.ph);
        case kName:
          return j.String(&f.name);
        case kCat:
          return j.String(&f.cat);
        case kPid:
        case kTid:
        case kTs:
        case kDur:
          return TopValue(j, k, f);
        case kArgs:
          if (Classify(f.ph, f.name, f.cat) == Class::kSkip) return j.SkipValue(1);
          f.have_args = true;
          return FastArgs(j, f.args);
        default:  // "s" and keys OnElement does not read
          *guess = k == kS ? kArgs : 0;
          return j.SkipValue(1);
      }
    });
  }

  bool FastArgs(import_internal::FastJson& j, Args& args) {
    return j.Object(ArgKeys(), [&](int k, std::string_view key, int* /*guess*/) {
      if (k == import_internal::FastJson::kUnknownKey) {
        if (options_.keep_shapes && (key == "Input Dims" || key == "Input type" || key == "Concrete Inputs")) {
          return false;
        }
        return j.SkipValue(2);
      }
      return ArgValue(j, k, args);
    });
  }

  // The kept [memory] event of `f` (the element at `offset`).
  absl::Status EmitMemory(const Fields& f, int64_t offset) {
    const size_t before = out_.memory_events.size();
    RETURN_IF_ERROR(AddMemoryEvent(offset, f.ts, f.args, f.have_args));
    if (options_.keep_stacks && out_.memory_events.size() > before) {
      memory_threads_.resize(before, -1);
      memory_threads_.push_back(ThreadId(f.pid, f.tid));
    }
    return absl::OkStatus();
  }

  // The kept event of `f` (the element at `offset`).
  absl::Status Emit(Fields& f, int64_t offset) {
    const std::string_view ph = f.ph, name = f.name, cat = f.cat, pid = f.pid, tid = f.tid;
    const std::optional<int64_t> ts = f.ts, dur = f.dur;
    Args& args = f.args;
    const Class c = Classify(ph, name, cat);
    if (c == Class::kMemory) return EmitMemory(f, offset);
    if (c == Class::kCapture) {
      if (!ts.has_value()) return Error(offset, Cat("runtime event \"", name, "\" lacks ts"));
      bool begin = false;
      IsCaptureCall(name, &begin);
      capture_calls_.push_back({*ts + (begin ? 0 : dur.value_or(0)), begin});
      if (options_.keep_runtime) {
        RecordedOp op;
        op.kind = RecordedOpKind::kRuntime;
        op.name = std::string(name);
        op.start = SimTime(*ts);
        op.duration = SimTime(dur.value_or(0));
        out_.ops.push_back(std::move(op));
      }
      return absl::OkStatus();
    }
    if (c == Class::kPython) {
      if (!ts.has_value() || !dur.has_value()) {
        return Error(offset, Cat("python_function event \"", name, "\" lacks ", ts ? "dur" : "ts"));
      }
      if (options_.keep_stacks) python_calls_.push_back({ThreadId(pid, tid), *ts, *ts + *dur, std::string(name)});
      if (options_.keep_module_calls && name.starts_with("nn.Module: ")) {
        RecordedOp op;
        op.kind = RecordedOpKind::kModuleCall;
        op.name = std::string(name);
        op.start = SimTime(*ts);
        op.duration = SimTime(*dur);
        op.thread = ThreadId(pid, tid);
        out_.ops.push_back(std::move(op));
      }
      return absl::OkStatus();
    }
    if (c == Class::kOp) {
      if (!ts.has_value() || !dur.has_value()) {
        return Error(offset, Cat("complete event \"", name, "\" lacks ", ts ? "dur" : "ts"));
      }
      RecordedOp op;
      op.kind = *OpKindForCategory(cat, options_);
      op.name = std::string(name);
      op.start = SimTime(*ts);
      op.duration = SimTime(*dur);
      op.stream = args.stream.value_or(-1);
      if (!FitsInt32(args.device.value_or(-1))) {
        return Error(offset, Cat("complete event \"", name, "\": args.device ", *args.device,
                                 " is out of range"));
      }
      op.device = static_cast<int32_t>(args.device.value_or(-1));
      op.correlation = args.correlation.value_or(-1);
      op.external_id = args.external_id.value_or(-1);
      op.sequence = args.sequence.value_or(-1);
      op.thread = ThreadId(pid, tid);
      op.bytes = Bytes(args.op_bytes.value_or(0));
      op.has_shapes = args.has_shapes;
      op.input_dims = std::move(args.input_dims);
      op.input_types = std::move(args.input_types);
      op.concrete_inputs = std::move(args.concrete_inputs);
      out_.ops.push_back(std::move(op));
    }
    return absl::OkStatus();
  }

 private:
  static simdjson::padded_string_view Padded(const std::string& text) {
    return simdjson::padded_string_view(text.data(), text.size(), text.capacity());
  }

  Class Classify(std::string_view ph, std::string_view name, std::string_view cat) const {
    if (ph.empty()) return Class::kUnknown;
    if ((ph == "i" || ph == "I") && name == "[memory]") return Class::kMemory;
    if (ph == "X" && OpKindForCategory(cat, options_).has_value()) return Class::kOp;
    if (ph == "X" && cat == "python_function" && (options_.keep_stacks || options_.keep_module_calls)) {
      return Class::kPython;
    }
    bool begin = false;
    if (ph == "X" && (cat == "cuda_runtime" || cat == "Runtime") && IsCaptureCall(name, &begin)) {
      return Class::kCapture;
    }
    return Class::kSkip;
  }

  absl::Status ParseArgs(const std::string& text, int64_t offset, od::document& doc,
                         od::value& v, Args& args) {
    od::object obj;
    if (v.get_object().get(obj) != simdjson::SUCCESS) {
      return FieldError(text, offset, v, "args", "an object");
    }
    for (auto field_result : obj) {
      od::field field;
      if (auto err = std::move(field_result).get(field)) return JsonError(text, offset, doc, err);
      std::string_view key;
      if (auto err = KeyOf(field, &key)) return JsonError(text, offset, doc, err);
      if (options_.keep_shapes && (key == "Input Dims" || key == "Input type" || key == "Concrete Inputs")) {
        od::value fv = field.value();
        RETURN_IF_ERROR(key == "Input Dims" ? ParseDims(text, offset, doc, fv, args)
                                            : ParseStrings(text, offset, doc, fv, key,
                                                           key == "Input type" ? args.input_types
                                                                               : args.concrete_inputs));
        continue;
      }
      std::optional<int64_t>* slot = ArgSlot(args, key);
      if (slot == nullptr) continue;
      od::value fv = field.value();
      std::string_view tok;
      int64_t n = 0;
      if (!NumberToken(fv, &tok) || !ParseInteger(tok, &n)) {
        return FieldError(text, offset, fv, Cat("args.", key), "an integer");
      }
      *slot = n;
    }
    return absl::OkStatus();
  }

  // "Input Dims": [[d0, d1, ...], [], [[...], [...]], ...]. An entry that is
  // not a flat list of integers (a TensorList's shapes) is kept empty.
  absl::Status ParseDims(const std::string& text, int64_t offset, od::document& doc, od::value& v,
                         Args& args) {
    od::array outer;
    if (v.get_array().get(outer) != simdjson::SUCCESS) {
      return FieldError(text, offset, v, "args.Input Dims", "a list of shapes");
    }
    args.has_shapes = true;
    for (auto item : outer) {
      od::value shape_v;
      if (auto err = std::move(item).get(shape_v)) return JsonError(text, offset, doc, err);
      std::vector<int64_t> shape;
      od::array dims;
      if (shape_v.get_array().get(dims) == simdjson::SUCCESS) {
        bool flat = true;
        for (auto d : dims) {
          od::value dv;
          if (auto err = std::move(d).get(dv)) return JsonError(text, offset, doc, err);
          std::string_view tok;
          int64_t n = 0;
          if (flat && NumberToken(dv, &tok) && ParseInteger(tok, &n)) {
            shape.push_back(n);
          } else {
            flat = false;
          }
        }
        if (!flat) shape.clear();
      }
      args.input_dims.push_back(std::move(shape));
    }
    return absl::OkStatus();
  }

  absl::Status ParseStrings(const std::string& text, int64_t offset, od::document& doc, od::value& v,
                            std::string_view key, std::vector<std::string>& out) {
    od::array arr;
    if (v.get_array().get(arr) != simdjson::SUCCESS) {
      return FieldError(text, offset, v, Cat("args.", key), "a list of strings");
    }
    for (auto item : arr) {
      od::value iv;
      if (auto err = std::move(item).get(iv)) return JsonError(text, offset, doc, err);
      std::string_view str;
      out.emplace_back(iv.get_string().get(str) == simdjson::SUCCESS ? std::string(str) : std::string());
    }
    return absl::OkStatus();
  }

  absl::Status AddMemoryEvent(int64_t offset, std::optional<int64_t> ts, const Args& a,
                              bool have_args) {
    if (!have_args || !a.bytes.has_value()) {
      return Error(offset, "[memory] event lacks args.Bytes");
    }
    if (!ts.has_value()) return Error(offset, "[memory] event lacks ts");
    if (*a.bytes == std::numeric_limits<int64_t>::min()) {
      return Error(offset, Cat("[memory] event: args.Bytes ", *a.bytes, " is out of range"));
    }
    if (a.total_allocated.value_or(0) < 0 || a.total_reserved.value_or(0) < 0) {
      return Error(offset, Cat("[memory] event: negative args.\"Total ",
                               a.total_allocated.value_or(0) < 0 ? "Allocated\" " : "Reserved\" ",
                               a.total_allocated.value_or(0) < 0 ? *a.total_allocated
                                                                  : *a.total_reserved));
    }
    const int64_t type = a.device_type.value_or(-1);
    const int64_t id = a.device_id.value_or(-1);
    if (!FitsInt32(id) || !FitsInt32(type)) {
      return Error(offset, Cat("[memory] event: args.\"Device ", FitsInt32(id) ? "Type" : "Id",
                               "\" ", FitsInt32(id) ? type : id, " is out of range"));
    }
    if (std::find(options_.device_types.begin(), options_.device_types.end(), type) ==
            options_.device_types.end() ||
        (options_.device_id.has_value() && *options_.device_id != id)) {
      ++out_.metadata.memory_events_filtered_out;
      return absl::OkStatus();
    }
    // One event, its every field set here (Kineto records no stream,
    // category or stack), reused: no construction per event.
    RecordedMemoryEvent& m = event_;
    m.kind = *a.bytes < 0 ? MemoryEventKind::kFree : MemoryEventKind::kAlloc;
    m.size = Bytes(*a.bytes < 0 ? -*a.bytes : *a.bytes);
    m.address = a.addr;
    m.time = SimTime(*ts);
    m.device = static_cast<int32_t>(id);
    m.device_type = static_cast<int32_t>(type);
    m.seq = a.ev_idx.value_or(-1);
    m.total_allocated.reset();
    m.total_reserved.reset();
    if (a.total_allocated) m.total_allocated = Bytes(*a.total_allocated);
    if (a.total_reserved) m.total_reserved = Bytes(*a.total_reserved);
    // Note [Reserved below allocated]
    // PyTorch's caching allocator reports, with every block it hands out or
    // takes back, stats.allocated_bytes and stats.reserved_bytes after the
    // event (c10/cuda/CUDACachingAllocator.cpp, malloc / free:
    // reportMemoryUsageToProfiler). Every block lies in a segment, so
    // reserved is never below allocated. A recording that says otherwise
    // (Total Reserved 0 from an allocator or writer that does not track
    // segments, a synthetic trace) has no reserved figure to compare with
    // or to infer a warm start from: it is read as not recorded, and the
    // replay says at how many events (ReplayResult::reserved_below_allocated).
    if (m.total_reserved.has_value() && m.total_allocated.has_value() && *m.total_reserved < *m.total_allocated) {
      m.total_reserved.reset();
      ++out_.metadata.reserved_below_allocated;
    }
    if (options_.on_memory_event) return options_.on_memory_event(m, out_.metadata);
    out_.memory_events.push_back(m);
    return absl::OkStatus();
  }

  absl::Status Error(int64_t offset, std::string_view what) const {
    return absl::InvalidArgumentError(Cat(OffsetPrefix(label_, offset, decompressed_), what));
  }

  absl::Status FieldError(const std::string& text, int64_t offset, od::value& v,
                          std::string_view key, std::string_view expected) const {
    std::string_view tok = v.raw_json_token();
    const int64_t at = offset + OffsetIn(text, tok.data());
    if (tok.size() > 40) tok = tok.substr(0, 40);
    while (!tok.empty() && (tok.back() == ' ' || tok.back() == '\n')) tok.remove_suffix(1);
    return Error(at, Cat("\"", key, "\": expected ", expected, ", got '", tok, "'"));
  }

  // iterate() failed: `doc` has no position to ask for.
  absl::Status IterateError(int64_t offset, simdjson::error_code err) const {
    return Error(offset, Cat("malformed JSON in the trace event starting at byte ", offset, " (",
                             std::string_view(simdjson::error_message(err)), ")"));
  }

  absl::Status JsonError(const std::string& text, int64_t offset, od::document& doc,
                         simdjson::error_code err) const {
    const char* loc = nullptr;
    int64_t at = offset;
    if (doc.current_location().get(loc) == simdjson::SUCCESS) at += OffsetIn(text, loc);
    return Error(at, Cat("malformed JSON in the trace event starting at byte ", offset, " (",
                         std::string_view(simdjson::error_message(err)), ")"));
  }

  const std::string& label_;
  bool decompressed_;
  const KinetoImportOptions& options_;
  RecordedTrace& out_;
  od::parser parser_;

 public:
  // Note [Kineto call stacks]: fills RecordedMemoryEvent::stack and
  // RecordedTrace::frames. Call after the scan, before any reordering.
  void AttachStacks() {
    if (python_calls_.empty()) return;
    memory_threads_.resize(out_.memory_events.size(), -1);
    std::map<int32_t, std::vector<size_t>> calls_of, events_of;  // thread → indices
    for (size_t i = 0; i < python_calls_.size(); ++i) calls_of[python_calls_[i].thread].push_back(i);
    for (size_t i = 0; i < memory_threads_.size(); ++i) events_of[memory_threads_[i]].push_back(i);
    absl::flat_hash_map<std::string, int32_t> frame_of;  // name → frame index
    for (auto& [thread, events] : events_of) {
      auto it = calls_of.find(thread);
      if (it == calls_of.end()) continue;
      std::vector<size_t>& calls = it->second;
      std::stable_sort(calls.begin(), calls.end(), [&](size_t a, size_t b) {
        const PythonCall &x = python_calls_[a], &y = python_calls_[b];
        return x.start != y.start ? x.start < y.start : x.end > y.end;  // outer first
      });
      std::stable_sort(events.begin(), events.end(), [&](size_t a, size_t b) {
        return out_.memory_events[a].time < out_.memory_events[b].time;
      });
      std::vector<size_t> open;  // outermost first
      size_t next = 0;
      for (size_t e : events) {
        const int64_t t = out_.memory_events[e].time.ns();
        while (next < calls.size() && python_calls_[calls[next]].start <= t) {
          const PythonCall& c = python_calls_[calls[next]];
          while (!open.empty() && python_calls_[open.back()].end <= c.start) open.pop_back();
          open.push_back(calls[next++]);
        }
        while (!open.empty() && python_calls_[open.back()].end <= t) open.pop_back();
        std::vector<int32_t>& stack = out_.memory_events[e].stack;
        for (size_t k = open.size(); k-- > 0;) {
          const PythonCall& c = python_calls_[open[k]];
          if (c.end <= t) continue;  // closed, under a still-open inner call
          auto [f, inserted] = frame_of.try_emplace(c.name, static_cast<int32_t>(out_.frames.size()));
          if (inserted) out_.frames.push_back(ParsePythonFrame(c.name));
          stack.push_back(f->second);
        }
      }
    }
  }

 private:
  // (pid, tid) raw tokens → a small id, without allocating per event.
  int32_t ThreadId(std::string_view pid, std::string_view tid) {
    thread_key_.assign(pid);
    thread_key_ += '/';
    thread_key_.append(tid);
    auto it = thread_ids_.find(thread_key_);
    if (it != thread_ids_.end()) return it->second;
    const int32_t id = static_cast<int32_t>(thread_ids_.size());
    thread_ids_.emplace(thread_key_, id);
    return id;
  }

  // Pairs capture begins and ends in time order into RecordedTrace::captures.
 public:
  void PairCaptures() {
    std::stable_sort(capture_calls_.begin(), capture_calls_.end(),
                     [](const auto& a, const auto& b) { return a.first < b.first; });
    std::optional<int64_t> open;
    for (const auto& [t, begin] : capture_calls_) {
      if (begin) {
        if (!open.has_value()) open = t;
      } else {
        out_.captures.push_back({SimTime(open.value_or(-1)), SimTime(t)});
        open.reset();
      }
    }
    if (open.has_value()) out_.captures.push_back({SimTime(*open), SimTime(-1)});
  }

 private:
  std::vector<std::pair<int64_t, bool>> capture_calls_;  // time, begin?
  std::vector<PythonCall> python_calls_;
  std::vector<int32_t> memory_threads_;  // per kept memory event
  absl::flat_hash_map<std::string, int32_t> thread_ids_;
  std::string thread_key_;
  // Note [Events of one shape]: the last [memory] event walked, and its
  // literal ph, name and cat.
  import_internal::EventShape shape_;
  bool recording_ = false;  // the walk records its holes into shape_
  std::string shape_ph_, shape_name_, shape_cat_;
  // Note [Fields kept for a shape]
  // A Fields is 392 bytes (the optional integers, the shapes' vectors),
  // and constructing one per event — zeroing it, then destroying its
  // vectors — was 7% of OnElementInPlace's cycles. An event read against
  // shape_ sets exactly the fields of the shape's holes, the same ones every
  // time, and Emit reads a [memory] event's fields without moving any. So
  // those events share one Fields, reset when a shape is learned: every
  // field a match does not set is as a new Fields has it, and every one it
  // sets is set anew (a match that fails part way leaves values that the
  // next match overwrites before they are read).
  Fields shape_fields_;
  RecordedMemoryEvent event_;  // AddMemoryEvent's
};

}  // namespace

absl::StatusOr<RecordedTrace> ImportKinetoTrace(ByteSource& source, const std::string& label,
                                                const KinetoImportOptions& options) {
  RecordedTrace out;
  out.metadata.source_file = label;
  out.metadata.format = "kineto";
  KinetoVisitor visitor(label, source.decompressed(), options, out);
  RETURN_IF_ERROR(import_internal::ScanJsonStream(source, label, "traceEvents", visitor));
  visitor.AttachStacks();
  visitor.PairCaptures();
  // Recorders mostly write events in order: check before sorting (a stable
  // sort of the events would take a second copy of them and a sixth of the
  // import's time on a long trace; bench/replay_stream_benchmark.cc).
  auto memory_order = [](const RecordedMemoryEvent& a, const RecordedMemoryEvent& b) {
    if (a.time != b.time) return a.time < b.time;
    return a.seq < b.seq;
  };
  if (!std::is_sorted(out.memory_events.begin(), out.memory_events.end(), memory_order)) {
    std::stable_sort(out.memory_events.begin(), out.memory_events.end(), memory_order);
  }
  auto op_order = [](const RecordedOp& a, const RecordedOp& b) { return a.start < b.start; };
  if (!std::is_sorted(out.ops.begin(), out.ops.end(), op_order)) {
    std::stable_sort(out.ops.begin(), out.ops.end(), op_order);
  }
  return out;
}

absl::StatusOr<RecordedTrace> ImportKinetoTrace(const std::string& path,
                                                const KinetoImportOptions& options) {
  ASSIGN_OR_RETURN(std::unique_ptr<ByteSource> source, OpenByteSource(path));
  return ImportKinetoTrace(*source, path, options);
}

}  // namespace gpusim
