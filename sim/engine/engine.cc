#include "sim/engine/engine.h"

#include <algorithm>
#include <limits>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "sim/base/checked.h"
#include "sim/base/status.h"
#include "sim/device/timing.h"

namespace gpusim {

namespace {

// The charge of one alloc's device calls on `stream` (Note [Allocator time]).
struct AllocCharge {
  SimTime begin;        // when the calls start (after any drain they wait for)
  SimTime end;          // when the stream is free again
  int64_t waited_for = -1;  // the event whose end a drain waited for, or -1
};

AllocCharge ChargeAllocatorActions(const std::vector<AllocatorEvent>& actions, StreamId stream,
                                   const std::vector<SimTime>& stream_ready,
                                   const std::vector<int64_t>& stream_last, const DeviceSpec& d,
                                   SimResult& r) {
  AllocCharge c;
  SimTime t = stream_ready[static_cast<size_t>(stream)];
  SimTime cost(0);
  auto wait_for = [&](size_t s) {
    if (stream_ready[s] > t) {
      t = stream_ready[s];
      c.waited_for = stream_last[s];
    }
  };
  for (const AllocatorEvent& a : actions) {
    switch (a.action) {
      case AllocatorAction::kSegmentAlloc:
        ++r.segment_allocs;
        cost += d.malloc_cost;
        t += d.malloc_cost;
        break;
      case AllocatorAction::kSegmentMap:
        r.pages_mapped += a.pages;
        cost += d.map_page_cost * a.pages;
        t += d.map_page_cost * a.pages;
        break;
      case AllocatorAction::kSegmentFree:
        ++r.segment_frees;
        for (size_t s = 0; s < stream_ready.size(); ++s) wait_for(s);
        cost += d.free_cost;
        t += d.free_cost;
        break;
      case AllocatorAction::kSegmentUnmap:
        r.pages_unmapped += a.pages;
        if (a.stream >= 0 && static_cast<size_t>(a.stream) < stream_ready.size()) {
          wait_for(static_cast<size_t>(a.stream));
        }
        cost += d.unmap_page_cost * a.pages;
        t += d.unmap_page_cost * a.pages;
        break;
      default:
        break;
    }
  }
  c.end = t;
  c.begin = t - cost;
  r.allocator_time += cost;
  r.allocator_sync_wait += c.begin - stream_ready[static_cast<size_t>(stream)];
  return c;
}

// Repeated ranges are in event order, disjoint, within the trace, and
// each stands for at least one iteration.
absl::Status CheckRepeats(const std::vector<TraceRepeat>& reps, size_t n) {
  int64_t prev_last = -1;
  for (const TraceRepeat& rp : reps) {
    if (rp.first <= prev_last || rp.last < rp.first || rp.last >= static_cast<int64_t>(n) || rp.times < 1) {
      return absl::InvalidArgumentError(absl::StrCat("repeated events ", rp.first, "-", rp.last, " x", rp.times,
                                                     ": not a range of the trace's ", n,
                                                     " events after the previous one"));
    }
    prev_last = rp.last;
  }
  return absl::OkStatus();
}

// Note [Checked time] (sim/base/units.h): every time the step reports is
// in range, or the step is refused naming the first event or total that is
// not (sums of in-range durations, an allocator's charges, repeated
// iterations' periods: each checked where it is made, and out-of-range
// results stay so). A step never reports a wrapped time.
absl::Status CheckTimes(const Trace& trace, const SimResult& r) {
  constexpr absl::string_view kWhy =
      " is beyond the 2^62 ns (146 years) a simulated time may be (Note [Checked time] in sim/base/units.h)";
  for (size_t i = 0; i < r.end.size(); ++i) {
    if (!r.start[i].ok() || !r.end[i].ok()) {
      return absl::InvalidArgumentError(absl::StrCat(EventWhere(trace, i), ": its ",
                                                     r.start[i].ok() ? "finish" : "start", kWhy));
    }
  }
  const std::pair<const char*, SimTime> totals[] = {
      {"the step time", r.step_time},
      {"the compute stream's busy time", r.compute_busy},
      {"the collective stream's busy time", r.collective_busy},
      {"the host copies' time", r.copy_busy},
      {"the recompute time", r.recompute_busy},
      {"the host's issue time", r.host_busy},
      {"the host wait", r.host_wait},
      {"the host's waits at syncs", r.host_sync_wait},
      {"the exposed communication", r.exposed_communication},
      {"the exposed host copies", r.exposed_copy},
      {"the allocator time", r.allocator_time},
      {"the allocator's drain waits", r.allocator_sync_wait},
      {"the critical path's compute", r.critical_compute},
      {"the critical path's communication", r.critical_communication},
      {"the critical path's copies", r.critical_copy},
      {"the critical path's allocator calls", r.critical_allocator}};
  for (const auto& [what, t] : totals) {
    if (!t.ok()) return absl::InvalidArgumentError(absl::StrCat(what, " of the step", kWhy));
  }
  for (size_t k = 0; k < r.repeat_periods.size(); ++k) {
    if (!r.repeat_periods[k].ok()) {
      return absl::InvalidArgumentError(absl::StrCat("the period of repeated events ", trace.repeats[k].first, "-",
                                                     trace.repeats[k].last, kWhy));
    }
  }
  return absl::OkStatus();
}

// Time on `busy` (sorted intervals of communication or host copies) during
// which the compute stream is idle: the intervals within [lo, hi) less their
// overlap with `comp` (sorted compute intervals).
SimTime ExposedTime(const std::vector<std::pair<SimTime, SimTime>>& busy,
                    const std::vector<std::pair<SimTime, SimTime>>& comp, SimTime lo, SimTime hi) {
  SimTime total(0);
  size_t j = 0;
  for (auto [s0, e0] : busy) {
    // Sum of [cs,ce) minus its overlap with compute intervals.
    const SimTime cs = Max(s0, lo), ce = e0 < hi ? e0 : hi;
    if (!(cs < ce)) continue;
    SimTime covered(0);
    while (j < comp.size() && comp[j].second <= cs) ++j;
    for (size_t k = j; k < comp.size() && comp[k].first < ce; ++k) {
      SimTime a = Max(cs, comp[k].first);
      SimTime b = comp[k].second < ce ? comp[k].second : ce;
      if (a < b) covered += b - a;
    }
    total += (ce - cs) - covered;
  }
  return total;
}

// One Simulate call: the state its pass in trace order shares (the streams'
// clocks, the live buffers, the repeated ranges' clocks), and the passes
// after it that fill in the rest of the SimResult.
class StepSimulation {
 public:
  StepSimulation(const Trace& trace, const DeviceSpec& device, Allocator* allocator,
                 const AllocatorStartState* start, bool time_by_op, bool critical_path, bool keep_memory_log)
      : trace_(trace), device_(device), allocator_(allocator), start_state_(start), time_by_op_(time_by_op),
        want_path_(critical_path), keep_log_(keep_memory_log && allocator != nullptr), n_(trace.events.size()),
        kernel_model_(KernelModelOf(device)), reps_(trace.repeats) {}

  absl::StatusOr<SimResult> Run() {
    absl::Status st = RunPasses();
    // Simulate leaves the allocator's log unset on return (engine.h).
    if (allocator_ != nullptr) allocator_->RecordEventsTo(nullptr);
    if (!st.ok()) return st;
    if (allocator_ != nullptr) r_.allocator = allocator_->stats();
    RETURN_IF_ERROR(CheckTimes(trace_, r_));
    return std::move(r_);
  }

 private:
  absl::Status RunPasses() {
    RETURN_IF_ERROR(Setup());
    // One pass in trace order. Events of a stream run in order; memory events
    // take the time their stream reaches them, plus any allocator charge.
    for (size_t i = 0; i < n_; ++i) {
      if (rep_ < reps_.size() && static_cast<int64_t>(i) == reps_[rep_].last + 1) {
        ready_after_[rep_++] = stream_ready_;
      }
      if (rep_ < reps_.size() && static_cast<int64_t>(i) == reps_[rep_].first) ready_before_[rep_] = stream_ready_;
      const TraceEvent& e = trace_.events[i];
      if (e.type == EventType::kAlloc) {
        RETURN_IF_ERROR(SimulateAlloc(i, e));
      } else if (e.type == EventType::kFree) {
        RETURN_IF_ERROR(SimulateFree(i, e));
      } else if (!IsTimed(e.type)) {
        r_.start[i] = r_.end[i] = stream_ready_[static_cast<size_t>(e.stream)];
        NoteStreamGate(i, e);
      } else {
        RETURN_IF_ERROR(SimulateTimed(i, e));
      }
    }
    if (rep_ < reps_.size()) ready_after_[rep_++] = stream_ready_;  // a range ending the trace
    if (keep_log_ && !r_.oom.happened) LogLiveBlocks();
    r_.host_busy += host_extra_;
    r_.host_wait += host_wait_extra_;
    RETURN_IF_ERROR(RepeatPeriods());
    ExposedTimes();
    ShiftAfterRepeats();
    CriticalPath();
    if (want_path_) WalkCriticalPath();
    LiveAtPeak();
    return absl::OkStatus();
  }

  absl::Status Setup();
  absl::Status SimulateAlloc(size_t i, const TraceEvent& e);
  absl::Status SimulateFree(size_t i, const TraceEvent& e);
  absl::Status SimulateTimed(size_t i, const TraceEvent& e);
  void CountBusy(const TraceEvent& e, SimTime busy, int64_t w);
  void HostSync(int64_t w);
  absl::Status RepeatPeriods();
  void ExposedTimes();
  void ShiftAfterRepeats();
  int64_t LastOnPath() const;
  void CriticalPath();
  void WalkCriticalPath();
  int64_t HostIssuePath(size_t upto, const std::vector<SimTime>& shift, SimTime& t);
  int64_t LastEndedUpTo(size_t upto);
  std::vector<int64_t> last_ended_;  // LastEndedUpTo's prefix maxima
  void LiveAtPeak();

  // Note [One memory event log]: the actions from actions_[from] on, taken
  // at event `i`; the blocks live in the allocator now.
  void LogActions(size_t i, size_t from) {
    for (size_t k = from; k < actions_.size(); ++k) {
      r_.memory_log.actions.push_back({static_cast<int64_t>(i), actions_[k]});
    }
  }
  void LogLiveBlocks() {
    std::vector<BufferId> ids;
    ids.reserve(live_.size());
    for (const auto& [id, held] : live_) ids.push_back(id);
    if (start_state_ != nullptr) {
      for (const SegmentLayout& seg : start_state_->segments) {
        for (const SegmentLayout::Block& b : seg.blocks) {
          if (b.buffer >= 0) ids.push_back(b.buffer);
        }
      }
    }
    std::sort(ids.begin(), ids.end());
    ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
    std::vector<MemoryEventLog::Block>& out = r_.memory_log.live_at_stop;
    out.reserve(ids.size());
    for (BufferId id : ids) out.push_back({id, allocator_->AddressOf(id), allocator_->BlockSizeOf(id)});
  }

  // An event whose start is its stream's clock (a marker, an uncharged
  // alloc or free): the stream's last event gated it (Note [Critical path
  // segments]). Recorded only when the path was asked for.
  void NoteStreamGate(size_t i, const TraceEvent& e) {
    if (!want_path_) return;
    via_[i] = stream_last_[static_cast<size_t>(e.stream)];
    gate_[i] = via_[i] >= 0 ? PathGate::kStreamOrder : PathGate::kStart;
  }

  // The allocator's allocated / reserved after each memory event that
  // changed them (for the memory timeline).
  void RecordUsage(size_t i) {
    if (allocator_ == nullptr || r_.oom.happened) return;
    const AllocatorUsage u = allocator_->usage();
    if (r_.allocator_curve.empty() || r_.allocator_curve.back().allocated != u.allocated ||
        r_.allocator_curve.back().reserved != u.reserved) {
      r_.allocator_curve.push_back({static_cast<int64_t>(i), u.allocated, u.reserved});
    }
  }
  // The iterations event `i` stands for.
  int64_t WeightOf(size_t i) const {
    return rep_ < reps_.size() && static_cast<int64_t>(i) >= reps_[rep_].first ? reps_[rep_].times : 1;
  }

  const Trace& trace_;
  const DeviceSpec& device_;
  Allocator* allocator_;
  const AllocatorStartState* start_state_;
  const bool time_by_op_;
  const bool want_path_;
  const bool keep_log_;  // Note [One memory event log]
  const size_t n_;
  // The device's kernel model, looked up (by name) once rather than per
  // event as EventDuration(e, device) does.
  const KernelModel& kernel_model_;
  SimResult r_;
  std::vector<SimTime> stream_ready_;
  std::vector<int64_t> stream_last_;
  std::vector<int64_t> via_;     // the event whose end this one's start waited for
  std::vector<bool> on_path_;    // timed, or an alloc charged for device calls
  std::vector<PathGate> gate_;   // what set each event's start (only when want_path_)
  std::vector<SimTime> host_start_;  // the host clock when it began issuing each event (want_path_)

  // Memory state (ideal tracker beside the allocator).
  absl::flat_hash_map<BufferId, std::pair<Bytes, Role>> live_;
  Bytes cur_;
  std::array<Bytes, kNumRoles> by_role_{};
  std::vector<AllocatorEvent> actions_;

  // Note [Rolled loop built once] (sim/lower/lower.h): the repeated ranges,
  // each stream's clock before and after each, and the weight of an event
  // (the iterations it stands for).
  const std::vector<TraceRepeat>& reps_;
  std::vector<std::vector<SimTime>> ready_before_, ready_after_;
  std::vector<std::vector<bool>> active_;
  size_t rep_ = 0;  // the first repeat not yet passed
  SimTime host_extra_{0}, host_wait_extra_{0};  // repeated iterations' host time and waits
  // The host's clock (Note [Host timeline]): its issue time so far plus its
  // waits at syncs (Note [Host syncs]); one iteration of a repeated range.
  SimTime host_clock_{0};
  std::vector<SimTime> period_;
};

absl::Status StepSimulation::Setup() {
  r_.start.assign(n_, SimTime(0));
  r_.end.assign(n_, SimTime(0));
  // Per-stream arrays are indexed by stream id: refuse an id outside
  // [0, kMaxStreamId] before sizing them (a negative id cast to size_t would
  // index far out of bounds; 2^31-1 would allocate gigabytes).
  StreamId max_stream = 0;
  for (size_t i = 0; i < n_; ++i) {
    const StreamId s = trace_.events[i].stream;
    if (!IsValidStreamId(s)) {
      return absl::InvalidArgumentError(absl::StrCat("event ", i, " (", std::string(EventTypeName(trace_.events[i].type)),
                                                     "): stream ", s, " is not in range 0 to ", kMaxStreamId));
    }
    max_stream = std::max(max_stream, s);
  }
  stream_ready_.assign(static_cast<size_t>(max_stream) + 1, SimTime(0));
  stream_last_.assign(static_cast<size_t>(max_stream) + 1, -1);
  via_.assign(n_, -1);
  on_path_.assign(n_, false);
  if (want_path_) gate_.assign(n_, PathGate::kStart);
  if (want_path_) host_start_.assign(n_, SimTime(0));

  cur_ = trace_.preexisting;
  r_.preexisting = cur_;
  r_.preexisting_in_allocator = allocator_ != nullptr && start_state_ != nullptr && !start_state_->empty();
  r_.peak_live = cur_;
  if (allocator_ != nullptr) {
    r_.allocator_name = std::string(allocator_->name());
    allocator_->RecordEventsTo(&actions_);
  }
  r_.memory_log.kept = keep_log_;
  RETURN_IF_ERROR(CheckRepeats(reps_, n_));
  ready_before_.resize(reps_.size());
  ready_after_.resize(reps_.size());
  active_.assign(reps_.size(), std::vector<bool>(stream_ready_.size(), false));
  return absl::OkStatus();
}

absl::Status StepSimulation::SimulateAlloc(size_t i, const TraceEvent& e) {
  const size_t stream = static_cast<size_t>(e.stream);
  SimTime& ready = stream_ready_[stream];
  r_.start[i] = r_.end[i] = ready;
  NoteStreamGate(i, e);
  if (allocator_ != nullptr && !r_.oom.happened && (start_state_ == nullptr || !start_state_->Holds(e.buffer))) {
    actions_.clear();
    if (!allocator_->Alloc(e.buffer, e.size, e.stream)) {
      r_.oom = {true, static_cast<int64_t>(i), ready, e.size, cur_, allocator_->stats().reserved, Bytes(0), e.name};
      if (keep_log_) LogLiveBlocks();  // before the request joins live_
    } else if (keep_log_) {
      r_.memory_log.placed.push_back({static_cast<int64_t>(i), allocator_->AddressOf(e.buffer)});
    }
    if (keep_log_) LogActions(i, 0);
    const AllocCharge c = ChargeAllocatorActions(actions_, e.stream, stream_ready_, stream_last_, device_, r_);
    if (c.end > ready) {
      r_.start[i] = c.begin;
      r_.end[i] = c.end;
      const bool drained = c.waited_for >= 0 && c.begin > ready;
      via_[i] = drained ? c.waited_for : stream_last_[stream];
      if (want_path_) {
        gate_[i] = drained ? PathGate::kAllocatorDrain : via_[i] >= 0 ? PathGate::kStreamOrder : PathGate::kStart;
      }
      on_path_[i] = true;
      stream_last_[stream] = static_cast<int64_t>(i);
      ready = c.end;
      r_.step_time = Max(r_.step_time, c.end);
    }
  } else if (keep_log_ && !r_.oom.happened) {
    // Held since the start state: where the allocator holds it.
    r_.memory_log.placed.push_back({static_cast<int64_t>(i), allocator_->AddressOf(e.buffer)});
  }
  int64_t next_live = 0;
  if (e.size < Bytes(0) || !CheckedAdd(cur_.value(), e.size.value(), &next_live)) {
    return absl::InvalidArgumentError(absl::StrCat("event ", i, " (alloc ", e.name, "): ", e.size.value(),
                                                   " bytes: live bytes would be negative or exceed 2^63 - 1"));
  }
  live_[e.buffer] = {e.size, e.role};
  cur_ = Bytes(next_live);
  by_role_[static_cast<size_t>(e.role)] += e.size;
  if (cur_ > r_.peak_live) {
    r_.peak_live = cur_;
    r_.peak_event = static_cast<int64_t>(i);
    r_.live_by_role_at_peak = by_role_;
  }
  RecordUsage(i);
  return absl::OkStatus();
}

absl::Status StepSimulation::SimulateFree(size_t i, const TraceEvent& e) {
  r_.start[i] = r_.end[i] = stream_ready_[static_cast<size_t>(e.stream)];
  NoteStreamGate(i, e);
  auto it = live_.find(e.buffer);
  if (it == live_.end()) {
    return absl::InvalidArgumentError(absl::StrCat("event ", i, " (free): buffer ", e.buffer, " is not live"));
  }
  if (allocator_ != nullptr && !r_.oom.happened) {
    const size_t from = actions_.size();
    allocator_->Free(e.buffer);
    if (keep_log_) LogActions(i, from);
  }
  cur_ -= it->second.first;
  by_role_[static_cast<size_t>(it->second.second)] -= it->second.first;
  live_.erase(it);
  RecordUsage(i);
  return absl::OkStatus();
}

absl::Status StepSimulation::SimulateTimed(size_t i, const TraceEvent& e) {
  const int64_t w = WeightOf(i);
  const size_t stream = static_cast<size_t>(e.stream);
  SimTime& ready = stream_ready_[stream];
  SimTime start = ready;
  via_[i] = stream_last_[stream];
  PathGate gate = via_[i] >= 0 ? PathGate::kStreamOrder : PathGate::kStart;
  // Note [Host timeline]. A repeated event's further iterations issue
  // while the streams run them: the clock here advances one iteration
  // (as the streams do, both shifted by the periods below), the totals
  // count every iteration.
  const SimTime host_cost = HostIssueTime(e, device_);
  if (want_path_) host_start_[i] = host_clock_;
  r_.host_busy += host_cost;
  host_clock_ += host_cost;
  if (w > 1) host_extra_ += host_cost * (w - 1);
  for (int64_t dep : e.after) {
    if (dep < 0 || static_cast<size_t>(dep) >= i) {
      return absl::InvalidArgumentError(absl::StrCat("event ", i, ": after=", dep, " is not an earlier event"));
    }
    if (r_.end[static_cast<size_t>(dep)] > start) {
      start = r_.end[static_cast<size_t>(dep)];
      via_[i] = dep;
      gate = PathGate::kDependency;
    }
  }
  if (host_cost > SimTime(0) && host_clock_ > start) {
    r_.host_wait += host_clock_ - start;
    if (w > 1) host_wait_extra_ += (host_clock_ - start) * (w - 1);
    start = host_clock_;
    gate = PathGate::kHostIssue;
  }
  if (want_path_) gate_[i] = gate;
  stream_last_[stream] = static_cast<int64_t>(i);
  on_path_[i] = true;
  if (w > 1) active_[rep_][stream] = true;
  if (const std::string why = UnrunnableReason(e, device_); !why.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(EventWhere(trace_, i), ": cannot run: ", why));
  }
  const SimTime dur = EventDuration(e, device_, kernel_model_);
  r_.start[i] = start;
  r_.end[i] = start + dur;
  if (!dur.ok() || !r_.end[i].ok() || !(dur * w).ok()) {  // Note [Checked time]
    return absl::InvalidArgumentError(absl::StrCat(
        EventWhere(trace_, i), ": ",
        !dur.ok() ? "its duration"
                  : !r_.end[i].ok() ? absl::StrCat("its finish (start ", start.ns(), " ns + ", dur.ns(), " ns)")
                                    : absl::StrCat("its time over ", w, " iterations"),
        " is beyond the 2^62 ns (146 years) a simulated time may be (Note [Checked time] in sim/base/units.h): ",
        DescribeDuration(e, device_)));
  }
  ready = r_.end[i];
  r_.step_time = Max(r_.step_time, r_.end[i]);
  // Busy times and FLOPs count every iteration an event stands for.
  CountBusy(e, dur * w, w);
  if (e.host_sync) HostSync(w);
  return absl::OkStatus();
}

// Note [Host syncs] (engine.h): the host waits until every stream is idle.
void StepSimulation::HostSync(int64_t w) {
  SimTime drained = host_clock_;
  for (SimTime t : stream_ready_) drained = Max(drained, t);
  r_.host_syncs += w;
  r_.host_sync_wait += (drained - host_clock_) * w;
  host_clock_ = drained;
}

void StepSimulation::CountBusy(const TraceEvent& e, SimTime busy, int64_t w) {
  const double flops = e.flops * static_cast<double>(w);
  if (time_by_op_) {
    SimResult::OpTime& t = r_.time_by_op[{e.kind, EventOpName(e)}];
    t.events += w;
    t.busy += busy;
    t.flops += flops;
    t.bytes += static_cast<double>((e.bytes_read + e.bytes_written).value()) * static_cast<double>(w);
  }
  if (e.type == EventType::kCollective) r_.collective_busy += busy;
  else if (e.type == EventType::kCopy) {
    r_.copy_busy += busy;
    if (e.kind == OpKind::kDeviceToHost) {
      r_.copy_to_host += busy;
      r_.bytes_to_host += e.bytes_read * w;
    } else if (e.kind == OpKind::kHostToDevice) {
      r_.copy_to_device += busy;
      r_.bytes_to_device += e.bytes_read * w;
    }
  } else {
    r_.compute_busy += busy;
    r_.flops += flops;
    if (e.recompute) r_.recompute_busy += busy;
    else r_.model_flops += flops;
  }
}

// Each repeated range advanced every stream it ran on by one period (the
// steady iteration's): the iterations it stands for beyond the one run
// take (times - 1) more periods.
// A range whose streams advanced by different amounts is not a steady
// iteration (a stream still catching up): charging it would be a guess,
// so it is refused as the builder's error.
absl::Status StepSimulation::RepeatPeriods() {
  period_.assign(reps_.size(), SimTime(-1));
  for (size_t k = 0; k < reps_.size(); ++k) {
    for (size_t s = 0; s < stream_ready_.size(); ++s) {
      if (!active_[k][s]) continue;
      const SimTime d = ready_after_[k][s] - ready_before_[k][s];
      if (period_[k].ns() >= 0 && d != period_[k]) {
        return absl::InternalError(absl::StrCat("repeated events ", reps_[k].first, "-", reps_[k].last,
                                                " are not a steady iteration: stream ", s, " advanced ", d.ns(),
                                                " ns, another ", period_[k].ns(), " ns"));
      }
      period_[k] = d;
    }
    period_[k] = Max(period_[k], SimTime(0));
  }
  r_.repeat_periods = period_;
  return absl::OkStatus();
}

// Exposed communication (and host copies): time on those streams during
// which the compute stream is idle (interval overlap with compute's busy
// set), within [lo, hi). A copy issued on the compute stream itself
// overlaps nothing, so it is wholly exposed. Measured on the timeline as
// run, each repeated range once; a repeated range's further iterations
// each add one period's worth, measured over one period from its start.
void StepSimulation::ExposedTimes() {
  std::vector<std::pair<SimTime, SimTime>> comp, coll, copy;
  for (size_t i = 0; i < n_; ++i) {
    const TraceEvent& e = trace_.events[i];
    if (e.type == EventType::kCompute) comp.push_back({r_.start[i], r_.end[i]});
    else if (e.type == EventType::kCollective) coll.push_back({r_.start[i], r_.end[i]});
    else if (e.type == EventType::kCopy) copy.push_back({r_.start[i], r_.end[i]});
  }
  // (Each stream runs its events in order, so these come mostly sorted
  // already; equal pairs are alike, so skipping the sort then changes
  // nothing.)
  for (auto* v : {&comp, &coll, &copy}) {
    if (!std::is_sorted(v->begin(), v->end())) std::sort(v->begin(), v->end());
  }
  const SimTime all_lo(0), all_hi(std::numeric_limits<int64_t>::max());
  r_.exposed_communication = ExposedTime(coll, comp, all_lo, all_hi);
  r_.exposed_copy = ExposedTime(copy, comp, all_lo, all_hi);
  for (size_t k = 0; k < reps_.size(); ++k) {
    SimTime lo = all_hi;
    for (size_t s = 0; s < stream_ready_.size(); ++s) {
      if (active_[k][s] && ready_before_[k][s] < lo) lo = ready_before_[k][s];
    }
    if (lo == all_hi) continue;
    const int64_t more = reps_[k].times - 1;
    r_.exposed_communication += ExposedTime(coll, comp, lo, lo + period_[k]) * more;
    r_.exposed_copy += ExposedTime(copy, comp, lo, lo + period_[k]) * more;
  }
}

// The events after a repeated range start its further iterations' time
// later.
void StepSimulation::ShiftAfterRepeats() {
  if (reps_.empty()) return;
  SimTime shift(0);
  size_t k = 0;
  r_.step_time = SimTime(0);
  for (size_t i = 0; i < n_; ++i) {
    while (k < reps_.size() && static_cast<int64_t>(i) > reps_[k].last) {
      shift += period_[k] * (reps_[k].times - 1);
      ++k;
    }
    r_.start[i] += shift;
    r_.end[i] += shift;
    if (on_path_[i]) r_.step_time = Max(r_.step_time, r_.end[i]);
  }
  if (r_.oom.happened) r_.oom.time = r_.start[static_cast<size_t>(r_.oom.event)];
}

// The event on the path that finishes last (the first of equals).
int64_t StepSimulation::LastOnPath() const {
  int64_t last = -1;
  for (size_t i = 0; i < n_; ++i) {
    if (on_path_[i] && (last < 0 || r_.end[i] > r_.end[static_cast<size_t>(last)])) {
      last = static_cast<int64_t>(i);
    }
  }
  return last;
}

// The critical path, back from the last event on it to finish. (An event
// off the path -- a marker or an uncharged alloc a dependency named -- ends
// the walk, as before the walk of WalkCriticalPath recorded its stream.)
void StepSimulation::CriticalPath() {
  // A repeated range's events on the path are on it in every iteration.
  size_t k = reps_.size();
  for (int64_t i = LastOnPath(); i >= 0; i = on_path_[static_cast<size_t>(i)] ? via_[static_cast<size_t>(i)] : -1) {
    const TraceEvent& e = trace_.events[static_cast<size_t>(i)];
    while (k > 0 && reps_[k - 1].first > i) --k;
    const int64_t w = k > 0 && reps_[k - 1].last >= i ? reps_[k - 1].times : 1;
    const SimTime d = (r_.end[static_cast<size_t>(i)] - r_.start[static_cast<size_t>(i)]) * w;
    r_.critical_events += w;
    if (e.type == EventType::kAlloc) r_.critical_allocator += d;
    else if (e.type == EventType::kCollective) r_.critical_communication += d;
    else if (e.type == EventType::kCopy) r_.critical_copy += d;
    else r_.critical_compute += d;
  }
}

// Note [Critical path segments]: back from the last event through what
// gated each start, cutting each segment at the start of the one after it
// (`t`, the earliest time covered so far), then in time order.
void StepSimulation::WalkCriticalPath() {
  std::vector<PathSegment>& out = r_.critical_path;
  // Each event's shift by the further iterations of the ranges before it
  // (as ShiftAfterRepeats moved it).
  std::vector<SimTime> shift(n_, SimTime(0));
  SimTime sh(0);
  for (size_t i = 0, k = 0; i < n_; ++i) {
    for (; k < reps_.size() && static_cast<int64_t>(i) > reps_[k].last; ++k) sh += period_[k] * (reps_[k].times - 1);
    shift[i] = sh;
  }
  SimTime t = r_.step_time;
  for (int64_t cur = LastOnPath(); cur >= 0;) {
    const size_t c = static_cast<size_t>(cur);
    const int64_t pred = via_[c];
    PathGate g = gate_[c];
    if (g == PathGate::kDependency && trace_.events[static_cast<size_t>(pred)].type == EventType::kCollective) {
      g = PathGate::kCollectiveWait;
    }
    const SimTime end = (r_.end[c] < t ? r_.end[c] : t);
    if (r_.start[c] < end) {
      out.push_back({PathSegment::Kind::kEvent, cur, r_.start[c], end, g});
      t = r_.start[c];
    }
    if (g == PathGate::kHostIssue) {
      // Through a host sync the path goes on in the GPU work the sync waited
      // for (-1: the host's issue reached time 0).
      cur = HostIssuePath(c, shift, t);
      continue;
    }
    const SimTime pred_end = pred >= 0 ? r_.end[static_cast<size_t>(pred)] : SimTime(0);
    if (pred_end < t) {
      const bool repeated = shift[c] != (pred >= 0 ? shift[static_cast<size_t>(pred)] : SimTime(0));
      const bool drain = trace_.events[c].type == EventType::kAlloc;
      out.push_back({repeated ? PathSegment::Kind::kRepeatedIterations : PathSegment::Kind::kGap,
                     repeated && pred >= 0 ? pred : cur, pred_end, t,
                     repeated ? PathGate::kRepeatedIterations : drain ? PathGate::kAllocatorDrain : PathGate::kIdle});
      t = pred_end;
    }
    cur = pred;
  }
  std::reverse(out.begin(), out.end());
}

// The host's issue of every timed event up to `upto`, back in time: each
// event's span from the host clock when it began issuing it (one iteration
// of a repeated range; each span moved as the event was). A hole between
// two spans is the host waiting at a sync (Note [Host syncs]) when a sync
// lies between them, else the further iterations of a repeated range.
// Waiting at a sync, the host was held by the GPU work the sync waited for:
// the timed event at or before the sync that ended last, if it ended after
// the host had issued everything before the sync. The path goes on from
// that event (returned; the stretch between its end and the host's resuming
// is the sync's own, host_sync) rather than through the wait as one gap, so
// a GPU-bound step's path names the kernels that held it. -1: the host's
// issue reached time 0.
int64_t StepSimulation::HostIssuePath(size_t upto, const std::vector<SimTime>& shift, SimTime& t) {
  std::vector<PathSegment>& out = r_.critical_path;
  bool sync_after = false;  // a host_sync event between this one and the span after it
  size_t sync_at = 0;       // ... the latest such event
  for (size_t j = upto + 1; j-- > 0;) {
    const TraceEvent& e = trace_.events[j];
    if (j < upto && e.host_sync && !sync_after) {
      sync_after = true;
      sync_at = j;
    }
    if (!IsTimed(e.type)) continue;
    const SimTime cost = HostIssueTime(e, device_);
    if (cost <= SimTime(0)) continue;
    const SimTime s = host_start_[j] + shift[j], end = (s + cost < t ? s + cost : t);
    if (end < t && sync_after) {
      const int64_t held = LastEndedUpTo(sync_at);
      if (held >= 0 && r_.end[static_cast<size_t>(held)] > end && r_.end[static_cast<size_t>(held)] <= t) {
        const SimTime resume = r_.end[static_cast<size_t>(held)];
        if (resume < t) {
          out.push_back({PathSegment::Kind::kGap, static_cast<int64_t>(sync_at), resume, t, PathGate::kHostSync});
          t = resume;
        }
        return held;
      }
    }
    if (end < t) {
      out.push_back(sync_after ? PathSegment{PathSegment::Kind::kGap, static_cast<int64_t>(j), end, t,
                                             PathGate::kHostSync}
                               : PathSegment{PathSegment::Kind::kRepeatedIterations, static_cast<int64_t>(j), end, t,
                                             PathGate::kRepeatedIterations});
      t = end;
    }
    sync_after = false;
    if (s < end) {
      out.push_back({PathSegment::Kind::kHostIssue, static_cast<int64_t>(j), s, end, PathGate::kHostIssue});
      t = s;
    }
  }
  if (t > SimTime(0)) {
    out.push_back({PathSegment::Kind::kRepeatedIterations, 0, SimTime(0), t, PathGate::kRepeatedIterations});
    t = SimTime(0);
  }
  return -1;
}

// The timed event at or before `upto` (trace order) that ends last; -1 if
// none. Prefix maxima, built on the first call.
int64_t StepSimulation::LastEndedUpTo(size_t upto) {
  if (last_ended_.empty()) {
    last_ended_.assign(n_, -1);
    int64_t best = -1;
    for (size_t i = 0; i < n_; ++i) {
      if (IsTimed(trace_.events[i].type) &&
          (best < 0 || r_.end[i] >= r_.end[static_cast<size_t>(best)])) {
        best = static_cast<int64_t>(i);
      }
      last_ended_[i] = best;
    }
  }
  return last_ended_[upto];
}

// Buffers live at the peak: replay up to the peak event.
void StepSimulation::LiveAtPeak() {
  if (r_.peak_event < 0) return;
  absl::flat_hash_map<BufferId, bool> at;
  for (int64_t i = 0; i <= r_.peak_event; ++i) {
    const TraceEvent& e = trace_.events[static_cast<size_t>(i)];
    if (e.type == EventType::kAlloc) at[e.buffer] = true;
    else if (e.type == EventType::kFree) at.erase(e.buffer);
  }
  for (const auto& [id, unused] : at) r_.live_at_peak.push_back(id);
  std::sort(r_.live_at_peak.begin(), r_.live_at_peak.end());
}

}  // namespace

std::string_view PathGateName(PathGate g) {
  switch (g) {
    case PathGate::kStart: return "start";
    case PathGate::kStreamOrder: return "stream_order";
    case PathGate::kDependency: return "dependency";
    case PathGate::kCollectiveWait: return "collective_wait";
    case PathGate::kHostIssue: return "host_issue";
    case PathGate::kAllocatorDrain: return "allocator_drain";
    case PathGate::kHostSync: return "host_sync";
    case PathGate::kRepeatedIterations: return "repeated_iterations";
    case PathGate::kIdle: return "idle";
  }
  return "idle";
}

Bytes FragmentationBytes(const SimResult& r) {
  if (r.allocator_name.empty()) return Bytes(0);  // no allocator: ideal tracking only
  const Bytes outside = r.preexisting_in_allocator ? Bytes(0) : r.preexisting;
  return r.oom.happened ? r.oom.reserved - (r.oom.live - outside)
                        : r.allocator.peak_reserved - (r.peak_live - outside);
}

const MemoryEventLog::Block* MemoryEventLog::LiveBlock(BufferId id) const {
  auto it = std::lower_bound(live_at_stop.begin(), live_at_stop.end(), id,
                             [](const Block& b, BufferId x) { return b.buffer < x; });
  return it != live_at_stop.end() && it->buffer == id ? &*it : nullptr;
}

absl::StatusOr<SimResult> Simulate(const Trace& trace, const DeviceSpec& device, Allocator* allocator,
                                   const AllocatorStartState* start, bool time_by_op, bool critical_path,
                                   bool keep_memory_log) {
  CountMemoryReplay();  // Note [Counting memory replays]
  return StepSimulation(trace, device, allocator, start, time_by_op, critical_path, keep_memory_log).Run();
}

}  // namespace gpusim
