#include "sim/import/recorded_trace.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <cstdio>
#include <functional>
#include <iterator>
#include <map>
#include <string>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "sim/base/status.h"
#include "sim/base/str_cat.h"

namespace gpusim {

using str_internal::Cat;

namespace {

constexpr std::array<std::string_view, 12> kKindNames = {
    "alloc",         "free",          "free_requested", "free_completed",
    "segment_alloc", "segment_free",  "segment_map",    "segment_unmap",
    "oom",           "snapshot",      "preexisting",    "increment_version"};

constexpr std::array<std::string_view, 8> kOpKindNames = {
    "kernel", "memcpy", "memset", "cpu_op", "user_annotation", "gpu_user_annotation",
    "runtime", "module_call"};

bool Contains(std::string_view hay, std::string_view needle) {
  return hay.find(needle) != std::string_view::npos;
}

// `name` in ASCII lower case, into `out` (reused: one pass, no allocation once
// `out` has grown). Kernel names are matched case-insensitively against
// several needles; lower-casing once per name instead of once per needle and
// character was two thirds of the conversion time on the V100 trace.
std::string_view LowerAscii(std::string_view name, std::string& out) {
  out.resize(name.size());
  for (size_t i = 0; i < name.size(); ++i) {
    const char c = name[i];
    out[i] = (c >= 'A' && c <= 'Z') ? static_cast<char>(c + ('a' - 'A')) : c;
  }
  return out;
}

// The timed event for a recorded GPU op. The kind is a naming heuristic, for
// reports only: the recorded duration is what the engine uses.
TraceEvent TimedEventFor(const RecordedOp& op) {
  TraceEvent e;
  e.name = op.name;
  e.recorded_duration = op.duration;
  switch (op.kind) {
    case RecordedOpKind::kMemcpy:
      e.type = EventType::kCopy;
      e.kind = Contains(op.name, "HtoD")   ? OpKind::kHostToDevice
               : Contains(op.name, "DtoH") ? OpKind::kDeviceToHost
                                           : OpKind::kCopy;
      e.bytes_read = op.bytes;
      e.bytes_written = op.bytes;
      return e;
    case RecordedOpKind::kMemset:
      e.type = EventType::kCompute;
      e.kind = OpKind::kElementwise;
      e.bytes_written = op.bytes;
      return e;
    default:
      break;
  }
  e.type = EventType::kCompute;
  e.kind = OpKind::kElementwise;
  thread_local std::string lower_buf;
  const std::string_view lower = LowerAscii(op.name, lower_buf);
  if (Contains(lower, "nccl")) {
    if (Contains(op.name, "AllReduce")) {
      e.type = EventType::kCollective;
      e.kind = OpKind::kAllReduce;
    } else if (Contains(op.name, "AllGather")) {
      e.type = EventType::kCollective;
      e.kind = OpKind::kAllGather;
    } else if (Contains(op.name, "ReduceScatter")) {
      e.type = EventType::kCollective;
      e.kind = OpKind::kReduceScatter;
    }
  } else if (Contains(lower, "gemm") || Contains(lower, "matmul") ||
             Contains(lower, "cutlass") || Contains(lower, "xmma")) {
    e.kind = OpKind::kMatmul;
  } else if (Contains(lower, "flash") || Contains(lower, "fmha") ||
             Contains(lower, "attention")) {
    e.kind = OpKind::kAttention;
  }
  return e;
}

std::string HexAddress(int64_t a) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(a));
  return buf;
}

std::string BaseName(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

}  // namespace

std::string_view MemoryEventKindName(MemoryEventKind k) {
  return kKindNames[static_cast<size_t>(k)];
}

bool ParseMemoryEventKind(std::string_view s, MemoryEventKind* out) {
  for (size_t i = 0; i < kKindNames.size(); ++i) {
    if (kKindNames[i] == s) {
      *out = static_cast<MemoryEventKind>(i);
      return true;
    }
  }
  return false;
}

std::string_view RecordedOpKindName(RecordedOpKind k) {
  return kOpKindNames[static_cast<size_t>(k)];
}

bool IsGpuOp(RecordedOpKind k) {
  return k == RecordedOpKind::kKernel || k == RecordedOpKind::kMemcpy ||
         k == RecordedOpKind::kMemset;
}

// Note [Matching frees]
// A recorded free must end exactly one earlier alloc.
//  - With an address (Kineto "Addr", snapshot "addr"): the live alloc at that
//    address. The caching allocator never hands out a live address twice, so
//    this is exact.
//  - Without one (legacy Kineto before PyTorch 1.10, the memory timeline): a
//    free of N bytes ends the most recently allocated block of exactly N bytes
//    that is still live on that device (LIFO; options.size_match = kFifo for
//    the oldest). Any choice among same-size blocks gives the same live-bytes
//    curve, so totals and peaks are exact whatever the rule; the choice only
//    decides which buffer's lifetime ends, which matters to an allocator
//    replay (placement, fragmentation). Neither rule is right most of the
//    time. Measured on the recorded traces that do have addresses (drop Addr,
//    pair by size, compare with the true pairing; tests/import_kineto_test.cc):
//                                         LIFO    FIFO
//      HTA torch.compile training (V100)  41.7%   13.3%   13,385 frees
//      MI300X cold start (training ops)   30.7%    6.4%      202
//      OWLv2-large inference (H100)       32.9%   42.6%    6,135
//      bert-small inference (H100)        44.0%   60.6%      109
//    LIFO is the default because gpusim simulates training steps, where the
//    backward pass releases tensors roughly in reverse order of creation
//    (saved activations, gradient temporaries); inference frees each layer's
//    outputs in creation order, where FIFO does better.
//  - A free with no live match: the block was allocated before recording
//    began. It gets an alloc at the start of the trace (its whole life up to
//    the free is inside the recording window).
//  - An alloc at an address that is still live means its free was not
//    recorded; the old buffer is freed just before the new alloc.
namespace {

// What the conversion emits, in order, to a sink (ToNativeTrace: TraceEvents;
// ToMemoryOps: MemoryOps). `head` allocs go before every body event; `source`
// is the recorded memory event an event came from (-1: none).
struct TraceSink {
  std::vector<TraceEvent> head, body;
  std::vector<int64_t> head_source, body_source;
  std::vector<std::pair<BufferId, int64_t>>* head_addresses = nullptr;  // ToNativeOptions::head_addresses
  std::function<void(SimTime)> before;  // emits the timed events that start before a time
  void Reserve(size_t n) { body.reserve(n); }
  bool TakesHead() const { return true; }
  void Before(SimTime t) { before(t); }
  void Alloc(bool to_head, BufferId id, Bytes size, StreamId s, const RecordedMemoryEvent& m, bool with_stack,
             int64_t source) {
    TraceEvent e;
    e.type = EventType::kAlloc;
    e.buffer = id;
    e.size = size;
    e.stream = s;
    e.role = m.category.value_or(Role::kTemporary);
    if (m.address.has_value()) e.name = HexAddress(*m.address);
    if (with_stack) e.stack = m.stack;
    if (to_head && head_addresses != nullptr && m.address.has_value()) head_addresses->emplace_back(id, *m.address);
    (to_head ? head : body).push_back(std::move(e));
    (to_head ? head_source : body_source).push_back(to_head ? -1 : source);
  }
  void Free(BufferId id, StreamId s, int64_t source) {
    TraceEvent e;
    e.type = EventType::kFree;
    e.buffer = id;
    e.stream = s;
    body.push_back(std::move(e));
    body_source.push_back(source);
  }
  void Timed(const RecordedOp& op, StreamId s) {
    TraceEvent e = TimedEventFor(op);
    e.stream = s;
    body.push_back(std::move(e));
    body_source.push_back(-1);
  }
};

struct OpsSink {
  std::vector<MemoryOp> head, body;
  std::vector<int64_t> head_source, body_source;
  std::function<void(SimTime)> before;  // unused: no timed events
  void Reserve(size_t n) { body.reserve(n); }
  bool TakesHead() const { return true; }
  void Before(SimTime) {}
  void Alloc(bool to_head, BufferId id, Bytes size, StreamId s, const RecordedMemoryEvent&, bool, int64_t source) {
    (to_head ? head : body).push_back({EventType::kAlloc, s, id, size});
    (to_head ? head_source : body_source).push_back(to_head ? -1 : source);
  }
  void Free(BufferId id, StreamId s, int64_t source) {
    body.push_back({EventType::kFree, s, id, Bytes(0)});
    body_source.push_back(source);
  }
  void Timed(const RecordedOp&, StreamId) {}
};

// head, then body, in body's buffer when it has room (it was reserved for
// that: the events are the bulk of the conversion's memory).
template <typename Event>
std::vector<Event> HeadThenBody(std::vector<Event>& head, std::vector<Event>& body) {
  if (!head.empty()) {
    const size_t body_size = body.size();
    if (body.capacity() >= body_size + head.size()) {
      std::move(head.begin(), head.end(), std::back_inserter(body));
      std::rotate(body.begin(), body.begin() + static_cast<std::ptrdiff_t>(body_size), body.end());
    } else {
      head.reserve(head.size() + body.size());
      std::move(body.begin(), body.end(), std::back_inserter(head));
      body = std::move(head);
    }
  }
  return std::move(body);
}

// The pairing of Note [Matching frees], one event at a time: what
// ToNativeTrace and ToMemoryOps run over the whole trace and MemoryOpPairer
// over a stream. It holds only the live blocks.
struct Pairing {
  Pairing(const std::string& file, const ToNativeOptions& o, ConversionStats& s)
      : source_file(file), options(o), stats(s) {}
  const std::string& source_file;
  const ToNativeOptions& options;
  ConversionStats& stats;
  struct Live {
    BufferId id;
    Bytes size;
  };
  absl::flat_hash_map<int64_t, Live> by_address;
  absl::flat_hash_map<int64_t, std::vector<BufferId>> by_size;  // LIFO stacks
  BufferId next_id = 0;
  std::optional<Bytes> initial_allocated;
  // Live bytes of the body so far (frees of blocks allocated before
  // recording make it negative) and its maximum: with the pre-recording
  // allocs and Trace::preexisting, live bytes must fit in int64
  // (ValidateTrace).
  int64_t body_live = 0;
  int64_t body_peak = 0;

  absl::Status Overflow(const RecordedMemoryEvent& m, size_t index, std::string_view what) const {
    return absl::InvalidArgumentError(Cat(source_file, ": memory event ", index, " (", MemoryEventKindName(m.kind),
                                          "): ", what, " exceed 2^63 - 1"));
  }

  // Event `index` (of the converted device) into `sink`, which may refuse a
  // head alloc (Sink::Alloc returns false): then nothing of the event is
  // emitted, and Step returns false.
  template <typename Sink>
  absl::StatusOr<bool> Step(const RecordedMemoryEvent& m, size_t index, StreamId s, Sink& sink) {
    const int64_t source = static_cast<int64_t>(index);
    bool is_alloc = m.kind == MemoryEventKind::kAlloc || m.kind == MemoryEventKind::kPreexisting;
    bool is_free = m.kind == MemoryEventKind::kFree || m.kind == options.snapshot_free;
    if (!is_alloc && !is_free) return true;
    if (m.size < Bytes(0)) {
      return absl::InvalidArgumentError(Cat(source_file, ": memory event ", index, " (", MemoryEventKindName(m.kind),
                                            "): negative size ", m.size.value()));
    }
    // The live block at the event's address, looked up once (nothing below
    // changes by_address before the event's own insert or erase).
    auto at_address = m.address.has_value() ? by_address.find(*m.address) : by_address.end();
    // A free without an address whose size no live block has, or one whose
    // address none has: its alloc was before recording.
    if (is_free && !sink.TakesHead()) {
      const bool matched = m.address.has_value()
                               ? at_address != by_address.end()
                               : (by_size.contains(m.size.value()) && !by_size.at(m.size.value()).empty());
      if (!matched) return false;
    }
    if (!initial_allocated.has_value() && m.total_allocated.has_value()) {
      int64_t before = 0;
      if (is_alloc ? __builtin_sub_overflow(m.total_allocated->value(), m.size.value(), &before)
                   : __builtin_add_overflow(m.total_allocated->value(), m.size.value(), &before)) {
        return Overflow(m, index, "Total Allocated before the event would");
      }
      initial_allocated = Bytes(before);
    }
    if (m.time >= SimTime(0)) sink.Before(m.time);
    if (is_alloc) {
      const BufferId id = next_id++;
      if (m.address.has_value()) {
        if (at_address != by_address.end()) {
          ++stats.implicit_frees;
          body_live -= at_address->second.size.value();
          sink.Free(at_address->second.id, s, source);
          ++stats.frees;
          at_address->second = {id, m.size};
        } else {
          by_address.emplace(*m.address, Live{id, m.size});
        }
      } else {
        by_size[m.size.value()].push_back(id);
      }
      sink.Alloc(/*to_head=*/false, id, m.size, s, m, /*with_stack=*/true, source);
      if (__builtin_add_overflow(body_live, m.size.value(), &body_live)) return Overflow(m, index, "live bytes");
      body_peak = std::max(body_peak, body_live);
      ++stats.allocs;
      return true;
    }
    // A free.
    BufferId id = -1;
    Bytes freed = m.size;  // the matched alloc's size when matched by address
    if (m.address.has_value()) {
      if (at_address != by_address.end()) {
        id = at_address->second.id;
        freed = at_address->second.size;
        if (at_address->second.size != m.size) ++stats.size_mismatches;
        by_address.erase(at_address);
        ++stats.frees_matched_by_address;
      }
    } else {
      auto it = by_size.find(m.size.value());
      if (it != by_size.end() && !it->second.empty()) {
        std::vector<BufferId>& stack = it->second;
        if (options.size_match == ToNativeOptions::SizeMatch::kLifo) {
          id = stack.back();
          stack.pop_back();
        } else {
          id = stack.front();
          stack.erase(stack.begin());  // same-size queues are short
        }
        ++stats.frees_matched_by_size;
      }
    }
    if (id < 0) {
      id = next_id++;
      sink.Alloc(/*to_head=*/true, id, m.size, s, m, /*with_stack=*/false, -1);
      ++stats.allocs_before_recording;
      int64_t before = 0;
      if (__builtin_add_overflow(stats.bytes_before_recording.value(), m.size.value(), &before)) {
        return Overflow(m, index, "bytes allocated before recording");
      }
      stats.bytes_before_recording = Bytes(before);
    }
    body_live -= freed.value();
    sink.Free(id, s, source);
    ++stats.frees;
    return true;
  }

  // After the last event: Trace::preexisting, checking that every live
  // byte count fits.
  absl::StatusOr<Bytes> Preexisting() const {
    Bytes preexisting;
    if (initial_allocated.has_value() && *initial_allocated > stats.bytes_before_recording) {
      preexisting = *initial_allocated - stats.bytes_before_recording;
    }
    int64_t peak = 0;
    if (__builtin_add_overflow(preexisting.value(), stats.bytes_before_recording.value(), &peak) ||
        __builtin_add_overflow(peak, stats.bytes_live_through.value(), &peak) ||
        __builtin_add_overflow(peak, body_peak, &peak)) {
      return absl::InvalidArgumentError(
          Cat(source_file, ": live bytes (before recording, ", stats.bytes_before_recording.value(),
              ", plus the peak inside it) exceed 2^63 - 1"));
    }
    return preexisting;
  }
};

struct Converted {
  std::map<int64_t, StreamId> stream_ids;  // recorded → dense
  Bytes preexisting;
};

// The conversion of ToNativeTrace (see recorded_trace.h), into `sink`.
template <typename Sink>
absl::StatusOr<Converted> Convert(const RecordedTrace& recorded, const ToNativeOptions& options, bool with_ops,
                                  Sink& sink, ConversionStats& stats) {
  Converted out;
  // Which device.
  int32_t device = 0;
  {
    std::map<int32_t, int64_t> devices;
    for (const RecordedMemoryEvent& m : recorded.memory_events) ++devices[m.device];
    if (options.device.has_value()) {
      device = *options.device;
      if (!devices.empty() && !devices.contains(device)) {
        std::string list;
        for (const auto& [d, n] : devices) str_internal::Append(list, list.empty() ? "" : ", ", d);
        return absl::InvalidArgumentError(
            Cat(recorded.metadata.source_file, ": no memory events on device ", device,
                " (devices with memory events: ", list, ")"));
      }
    } else if (devices.size() > 1) {
      std::string list;
      for (const auto& [d, n] : devices) str_internal::Append(list, list.empty() ? "" : ", ", d);
      return absl::InvalidArgumentError(
          Cat(recorded.metadata.source_file, ": memory events on several devices (", list,
              "); choose one"));
    } else if (devices.size() == 1) {
      device = devices.begin()->first;
    }
  }

  // Timed ops to merge, already sorted by start.
  std::vector<const RecordedOp*> ops;
  if (with_ops) {
    for (const RecordedOp& op : recorded.ops) {
      if (IsGpuOp(op.kind)) ops.push_back(&op);
    }
  }

  // Dense stream ids.
  std::map<int64_t, StreamId>& stream_ids = out.stream_ids;
  for (const RecordedMemoryEvent& m : recorded.memory_events) {
    if (m.device == device && m.stream >= 0) stream_ids.emplace(m.stream, 0);
  }
  for (const RecordedMemoryEvent& m : recorded.live_through) {
    if (m.device == device && m.stream >= 0) stream_ids.emplace(m.stream, 0);
  }
  for (const RecordedOp* op : ops) {
    if (op->stream >= 0) stream_ids.emplace(op->stream, 0);
  }
  {
    StreamId next = 0;
    for (auto& [rec, id] : stream_ids) id = next++;
  }
  auto native_stream = [&](int64_t rec) -> StreamId {
    auto it = stream_ids.find(rec);
    return it == stream_ids.end() ? 0 : it->second;
  };

  Pairing pairing(recorded.metadata.source_file, options, stats);
  // Room for the head too (at most one alloc per free and per block live
  // through), so that it can be moved in front without a second copy of
  // the events.
  sink.Reserve(recorded.memory_events.size() + ops.size() + recorded.live_through.size());
  size_t next_op = 0;
  sink.before = [&](SimTime t) {
    while (next_op < ops.size() && ops[next_op]->start < t) {
      sink.Timed(*ops[next_op], native_stream(ops[next_op]->stream));
      ++stats.timed_events;
      ++next_op;
    }
  };
  for (const RecordedMemoryEvent& m : recorded.live_through) {
    if (m.device != device) continue;
    sink.Alloc(/*to_head=*/true, pairing.next_id++, m.size, native_stream(m.stream), m, /*with_stack=*/true, -1);
    ++stats.allocs_live_through;
    int64_t sum = 0;
    if (__builtin_add_overflow(stats.bytes_live_through.value(), m.size.value(), &sum)) {
      return absl::InvalidArgumentError(
          Cat(recorded.metadata.source_file, ": bytes live through the recording exceed 2^63 - 1"));
    }
    stats.bytes_live_through = Bytes(sum);
  }
  for (size_t index = 0; index < recorded.memory_events.size(); ++index) {
    const RecordedMemoryEvent& m = recorded.memory_events[index];
    if (m.device != device) continue;
    RETURN_IF_ERROR(pairing.Step(m, index, native_stream(m.stream), sink).status());
  }
  sink.Before(SimTime(INT64_MAX));
  ASSIGN_OR_RETURN(out.preexisting, pairing.Preexisting());
  return out;
}

template <typename Sink>
void Sources(Sink& sink, const ToNativeOptions& options) {
  if (options.source_index == nullptr) return;
  sink.head_source.insert(sink.head_source.end(), sink.body_source.begin(), sink.body_source.end());
  *options.source_index = std::move(sink.head_source);
}

struct StreamSink {
  std::vector<MemoryOp>* ops = nullptr;
  bool take_head = false;
  std::vector<std::pair<BufferId, Bytes>> head;  // with take_head
  bool TakesHead() const { return take_head; }
  void Before(SimTime) {}
  void Alloc(bool to_head, BufferId id, Bytes size, StreamId s, const RecordedMemoryEvent&, bool, int64_t) {
    if (to_head) {
      head.emplace_back(id, size);
    } else {
      ops->push_back({EventType::kAlloc, s, id, size});
    }
  }
  void Free(BufferId id, StreamId s, int64_t) { ops->push_back({EventType::kFree, s, id, Bytes(0)}); }
};

}  // namespace

struct MemoryOpPairer::State {
  State(std::string file, ToNativeOptions o) : source_file(std::move(file)), options(std::move(o)) {}
  std::string source_file;
  ToNativeOptions options;
  ConversionStats stats;
  Pairing pairing{source_file, options, stats};
  StreamSink sink;
};

MemoryOpPairer::MemoryOpPairer(std::string source_file, ToNativeOptions options, bool take_head)
    : state_(std::make_unique<State>(std::move(source_file), std::move(options))) {
  state_->sink.take_head = take_head;
}
MemoryOpPairer::~MemoryOpPairer() = default;

absl::StatusOr<bool> MemoryOpPairer::Add(const RecordedMemoryEvent& m, int64_t index, StreamId stream,
                                         std::vector<MemoryOp>& ops) {
  state_->sink.ops = &ops;
  return state_->pairing.Step(m, static_cast<size_t>(index), stream, state_->sink);
}

const ConversionStats& MemoryOpPairer::stats() const { return state_->stats; }
const std::optional<Bytes>& MemoryOpPairer::initial_allocated() const { return state_->pairing.initial_allocated; }
BufferId MemoryOpPairer::next_buffer() const { return state_->pairing.next_id; }
const std::vector<std::pair<BufferId, Bytes>>& MemoryOpPairer::head() const { return state_->sink.head; }
absl::StatusOr<Bytes> MemoryOpPairer::Preexisting() const { return state_->pairing.Preexisting(); }


absl::StatusOr<Trace> ToNativeTrace(const RecordedTrace& recorded, const ToNativeOptions& options,
                                    ConversionStats* stats_out) {
  ConversionStats stats;
  TraceSink sink;
  sink.head_addresses = options.head_addresses;
  if (sink.head_addresses != nullptr) sink.head_addresses->clear();
  ASSIGN_OR_RETURN(Converted c, Convert(recorded, options, options.include_gpu_ops, sink, stats));
  Trace trace;
  trace.name = options.name.empty() ? BaseName(recorded.metadata.source_file) : options.name;
  trace.frames = recorded.frames;
  for (const auto& [rec, id] : c.stream_ids) trace.streams.push_back({id, Cat("stream_", rec)});
  if (trace.streams.empty()) trace.streams.push_back({0, "default"});
  trace.preexisting = c.preexisting;
  Sources(sink, options);
  trace.events = HeadThenBody(sink.head, sink.body);
  if (stats_out != nullptr) *stats_out = stats;
  return trace;
}

absl::StatusOr<MemoryOpStream> ToMemoryOps(const RecordedTrace& recorded, const ToNativeOptions& options,
                                           ConversionStats* stats_out) {
  ConversionStats stats;
  OpsSink sink;
  ASSIGN_OR_RETURN(Converted c, Convert(recorded, options, /*with_ops=*/false, sink, stats));
  MemoryOpStream out;
  out.preexisting = c.preexisting;
  Sources(sink, options);
  out.ops = HeadThenBody(sink.head, sink.body);
  if (stats_out != nullptr) *stats_out = stats;
  return out;
}

MemoryOpStream MemoryOpsOf(const Trace& trace, std::vector<int64_t>* source_index) {
  MemoryOpStream out;
  out.preexisting = trace.preexisting;
  if (source_index != nullptr) source_index->clear();
  for (size_t i = 0; i < trace.events.size(); ++i) {
    const TraceEvent& e = trace.events[i];
    if (e.type != EventType::kAlloc && e.type != EventType::kFree) continue;
    out.ops.push_back({e.type, e.stream, e.buffer, e.size});
    if (source_index != nullptr) source_index->push_back(static_cast<int64_t>(i));
  }
  return out;
}

}  // namespace gpusim
