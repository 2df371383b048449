#include "sim/replay/replay_core.h"

#include <algorithm>
#include <cstdlib>
#include <utility>

#include "sim/alloc/graph_pools.h"
#include "sim/alloc/options.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "sim/base/status.h"

namespace gpusim {
namespace replay_internal {

namespace {

void Compare(TotalsComparison& c, Bytes predicted, Bytes recorded, int64_t event, double& abs_sum) {
  ++c.compared;
  const int64_t err = std::llabs(predicted.value() - recorded.value());
  if (err == 0) {
    ++c.exact;
  } else if (c.first_mismatch < 0) {
    c.first_mismatch = event;
  }
  c.max_abs_error = std::max(c.max_abs_error, Bytes(err));
  abs_sum += static_cast<double>(err);
  c.mean_abs_error = abs_sum / static_cast<double>(c.compared);
  c.recorded_peak = std::max(c.recorded_peak, recorded);
  c.predicted_peak = std::max(c.predicted_peak, predicted);
}

constexpr int64_t kSmallRequest = 1048576;  // CUDACachingAllocator.cpp kSmallSize

}  // namespace

bool KeepGrowths(const WarmStart& ws, WarmPass& pass) {
  WarmBudget budget = ws.budget();
  bool changed = false;
  // Gaps shown live first: their bytes move out of the untouched segment,
  // which leaves it room to grow segments into.
  for (const StartGap& g : ws.gaps) {
    if (!pass.found_fills.contains(g.begin)) continue;
    const Bytes size(g.end - g.begin);
    if (size <= budget.movable && pass.kept.filled.insert(g.begin).second) {
      budget.movable -= size;
      budget.spare += size;
      changed = true;
    }
  }
  std::map<int64_t, int64_t> ends;  // this pass's segments
  for (const InferredSegment& s : ws.segments) ends[s.begin] = s.end;
  for (const auto& [begin, end] : pass.found) {
    const int64_t now = ends[begin];
    if (end > now && Bytes(end - now) <= budget.spare) {
      budget.spare -= Bytes(end - now);
      pass.kept.grown_ends[begin] = end;
      changed = true;
    }
  }
  // Note [Departures from the recorded addresses]: only when no growth
  // explains the pass (a growth changes what follows the departure too).
  if (!changed && pass.departure.has_value()) changed = CorrectForDeparture(ws, *pass.departure, &budget, &pass.kept);
  return changed;
}

// Note [The start state the recording agrees with most]
// Each correction of the passes (Note [Departures from the recorded
// addresses], Note [Growing inferred segments]) is the explanation the
// allocator's rules give for one placement, and one placement can have
// several: two free blocks of one size, say, of which the model's best fit
// took the lower and the recording the higher — the higher one was
// smaller, or the lower one was not free, and nothing in the placement
// says which. A wrong choice then misleads the passes after it (on the
// H100 OWLv2 trace, filling the tails of four segments made allocated
// inexact at 170 events where the uncorrected start had been exact at
// every one). The recorded totals are facts too: of the passes that
// replayed the whole recording — the first from the inferred state always
// does, and so does every one that stopped at no departure — the result is
// the one exact at the most events (reserved first, then allocated; the
// later of equals), reported with the number of passes run. A pass runs to
// the end, to be scored, while the warm passes, it included, replay fewer
// than kScoredEvents events in all; after that a pass stops at a departure
// that corrects the start (the rest of it would be replayed again), as
// before the scoring: a long trace (the benchmark's 1 M and 10 M events) is
// not replayed whole once per correction, and the real recordings of a few
// thousand events are scored at every pass. Which passes are scored depends
// on the number of events alone, so the result is the same run after run.
void WarmFixedPoint::Begin(int64_t n) {
  pass_.found.clear();
  pass_.found_fills.clear();
  pass_.may_stop = replayed_ + events_ >= kScoredEvents && n < kMaxPasses;
}

bool WarmFixedPoint::End(int64_t n, ReplayResult w) {
  replayed_ += w.events;
  const bool changed = KeepGrowths(*w.warm_start, pass_);
  if (!pass_.stopped) {
    auto score = [](const ReplayResult& r) {
      return std::make_pair(r.reserved.has_value() ? r.reserved->exact : 0,
                            r.allocated.has_value() ? r.allocated->exact : 0);
    };
    if (!best_.has_value() || score(w) >= score(*best_)) best_ = std::move(w);
  }
  const bool done = !changed || n == kMaxPasses;
  if (done) best_->warm_start->passes = n;
  return done;
}

absl::StatusOr<std::unique_ptr<ReplayCore>> ReplayCore::Make(const ReplayOptions& options,
                                                             const std::vector<CaptureWindow>* captures,
                                                             bool kineto_sizes, ReplayResult& r) {
  auto allocator = MakeAllocator(options.allocator, options.capacity);
  if (!allocator.ok()) return allocator.status();
  CountMemoryReplay();  // Note [Counting memory replays]
  std::unique_ptr<ReplayCore> core(new ReplayCore(options, r));
  core->allocator_ = std::move(*allocator);
  core->kineto_sizes_ = kineto_sizes;
  r.allocator = std::string(core->allocator_->name());
  r.capacity = options.capacity;
  r.capacity_source = options.capacity_source;
  r.start_state = "cold (an empty allocator); blocks live before recording allocated first";
  // An offline planner places everything at the end: no per-event totals
  // to compare, and stats() only once (after Finish).
  core->offline_ = core->allocator_->PlansOffline();
  r.offline = core->offline_;
  if (captures != nullptr && !core->offline_ && !captures->empty()) {
    // Note [CUDA graph private pools]: the main pool and one per capture.
    core->captures_ = captures;
    auto pooled = std::make_unique<GraphPoolAllocator>(std::move(core->allocator_), options.allocator,
                                                       options.capacity, GraphPoolMembers{});
    core->pooled_ = pooled.get();
    core->allocator_ = std::move(pooled);
  }
  return core;
}

absl::Status ReplayCore::Start(Bytes preexisting, BufferId preexisting_id, const WarmStart* warm,
                               absl::flat_hash_set<BufferId> restored, WarmPass* pass) {
  Allocator& a = *allocator_;
  r_.preexisting = preexisting;
  warm_ = warm != nullptr && warm->applied ? warm : nullptr;
  pass_ = pass;
  if (pass_ != nullptr) {
    pass_->departure.reset();
    pass_->stopped = false;
  }
  restored_ = std::move(restored);
  live_ = live_peak_ = preexisting;
  // Bytes that do not fit are an OOM before the first event (event -1), not
  // an error, so that `compare` still prints the strategy's row.
  auto oom_before_start = [&](Bytes requested) {
    ++r_.ooms;
    const AllocatorStats s = a.stats();
    if (!r_.oom.has_value()) r_.oom = ReplayOom{-1, SimTime(-1), requested, s.reserved, options_.capacity - s.reserved};
  };
  // Bytes live before recording and never freed, whose blocks the trace
  // never shows: one block, allocated first. For the caching allocator a
  // small-pool request when ≤ 1 MiB (a cold start: it shares its 2 MiB
  // segment with the first small requests, as the MI300X cold-start trace's
  // Total Reserved confirms); larger, a restored segment of exactly that
  // size, so the allocated total stays exact (a fresh 2 MiB-rounded segment
  // would keep an unsplit remainder); how those bytes lay in segments is
  // unknown. A warm start (Note [Warm start from recorded addresses]) has
  // them in its restored state.
  last_ = a.usage();
  model_reserved_before_ = last_.reserved;
  if (warm_ != nullptr) {
    determined_from_ = warm_->determined_from;
    return absl::OkStatus();
  }
  if (a.ModelsSegments() && preexisting > Bytes(kSmallRequest)) {
    const int64_t size = (preexisting.value() + 511) / 512 * 512;
    if (Bytes(size) > options_.capacity) {
      oom_before_start(preexisting);
      return absl::OkStatus();
    }
    SegmentLayout seg;
    seg.address = 0x600000000000;  // below the simulated space's first-fit base
    seg.size = size;
    seg.blocks = {{seg.address, size, preexisting.value(), preexisting_id}};
    return a.RestoreSegment(seg);
  }
  if (preexisting > Bytes(0) && !a.Alloc(preexisting_id, preexisting, 0)) oom_before_start(preexisting);
  return absl::OkStatus();
}

int64_t ReplayCore::CaptureOf(const RecordedMemoryEvent* m) const {  // the capture window m lies in, or -1
  if (captures_ == nullptr || m == nullptr) return -1;
  const std::vector<CaptureWindow>& captures = *captures_;
  for (size_t w = 0; w < captures.size(); ++w) {
    if ((captures[w].begin < SimTime(0) || captures[w].begin <= m->time) &&
        (captures[w].end < SimTime(0) || m->time <= captures[w].end)) {
      return static_cast<int64_t>(w);
    }
  }
  return -1;
}

void ReplayCore::OomAt(const MemoryOp& e, const RecordedMemoryEvent* m, int64_t source) {
  ++r_.ooms;
  if (r_.oom.has_value()) return;
  const AllocatorStats s = allocator_->stats();
  ReplayOom o;
  o.event = source;
  o.time = source >= 0 && m != nullptr ? m->time : SimTime(-1);
  o.requested = e.size;
  o.reserved = s.reserved;
  o.free = options_.capacity - s.reserved;
  r_.oom = o;
}

absl::Status ReplayCore::Op(const MemoryOp& e, const RecordedMemoryEvent* m, int64_t source) {
  Allocator& a = *allocator_;
  if (e.type == EventType::kAlloc) {
    Live& block = live_blocks_[e.buffer];
    block.size = e.size;
    live_ += e.size;
    live_peak_ = std::max(live_peak_, live_);
    const bool restored = !restored_.empty() && restored_.contains(e.buffer);
    const int64_t w = restored || source < 0 ? -1 : CaptureOf(m);
    bool ok = false;
    if (w >= 0) {
      ASSIGN_OR_RETURN(ok, pooled_->AllocInPool(static_cast<int32_t>(w), e.buffer, e.size, e.stream));
      if (ok) ++r_.graph_pool_allocs;
      // What the engine's replay of the same import routes (viz), served
      // or not.
      if (r_.start.has_value()) {
        GraphPoolMembers& g = r_.start->graph_pools;
        g.pool_of[e.buffer] = static_cast<int32_t>(w);
        g.pools = std::max(g.pools, static_cast<int32_t>(w) + 1);
      }
    }
    if (restored) {
      block.placed = true;
    } else if (w >= 0 ? ok : a.Alloc(e.buffer, e.size, e.stream)) {
      block.placed = true;
      // Note [Growing inferred segments]: Kineto records block sizes.
      if (warm_ != nullptr && pass_ != nullptr && w < 0 && m != nullptr && kineto_sizes_ && m->address.has_value()) {
        const std::optional<uint64_t> at = a.AddressOf(e.buffer);
        const int64_t recorded_block = (e.size.value() + 511) / 512 * 512;
        if (at.has_value() && static_cast<int64_t>(*at) != *m->address && !pass_->departure.has_value()) {
          pass_->departure = DepartureOf(source, *m->address, e.buffer);
          pass_->departure->new_segment = a.usage().reserved > last_.reserved;  // last_: before this op
          // KeepGrowths will correct the start from it: the rest of this
          // pass would be replayed again.
          WarmBudget budget = warm_->budget();
          WarmCorrections probe = pass_->kept;
          if (pass_->may_stop && pass_->found.empty() && pass_->found_fills.empty() &&
              CorrectForDeparture(*warm_, *pass_->departure, &budget, &probe)) {
            pass_->stopped = true;
            return absl::AbortedError("warm pass: stopped at a departure from the recorded addresses");
          }
        }
        if (at.has_value() && static_cast<int64_t>(*at) == *m->address) {
          if (auto c = CorrectionForPlacement(*warm_, *m->address, recorded_block, a.BlockSizeOf(e.buffer)->value())) {
            if (c->fill) {
              pass_->found_fills.insert(c->key);
            } else {
              int64_t& end = pass_->found[c->key];
              end = std::max(end, c->end);
            }
          }
        }
      }
    } else {
      OomAt(e, m, source);
    }
  } else if (e.type == EventType::kFree) {
    if (auto it = live_blocks_.find(e.buffer); it != live_blocks_.end()) {
      live_ -= it->second.size;
      if (it->second.placed) {
        a.Free(e.buffer);  // a private pool's block goes back to its pool
      }
      live_blocks_.erase(it);
    }
  } else {
    return absl::OkStatus();
  }
  if (offline_) return absl::OkStatus();  // placed at Finish
  last_ = a.usage();  // cheap: stats() may scan free lists
  peak_.Observe(last_);
  return absl::OkStatus();
}

void ReplayCore::EndEvent(const RecordedMemoryEvent* m, int64_t source) {
  ++r_.events;
  if (offline_) return;
  const AllocatorUsage& s = last_;
  if (m == nullptr) {
    if (options_.keep_series) r_.series.push_back({source, SimTime(-1), s.allocated, s.reserved, {}, {}});
    return;
  }
  // From the first determined event (Finish copies the whole comparison
  // when that is the first event).
  const bool determined = determined_from_ > 0 && source >= determined_from_;
  if (m->total_allocated.has_value()) {
    if (!r_.allocated.has_value()) r_.allocated.emplace();
    Compare(*r_.allocated, s.allocated, *m->total_allocated, source, alloc_abs_);
    if (determined) {
      if (!r_.allocated_determined.has_value()) r_.allocated_determined.emplace();
      Compare(*r_.allocated_determined, s.allocated, *m->total_allocated, source, alloc_det_abs_);
    }
  }
  if (m->total_reserved.has_value()) {
    if (!r_.reserved.has_value()) r_.reserved.emplace();
    Compare(*r_.reserved, s.reserved, *m->total_reserved, source, reserved_abs_);
    if (determined) {
      if (!r_.reserved_determined.has_value()) r_.reserved_determined.emplace();
      Compare(*r_.reserved_determined, s.reserved, *m->total_reserved, source, reserved_det_abs_);
    }
    TrackReservedRun(*m, source, s.reserved);
  }
  if (options_.keep_series) {
    r_.series.push_back({source, m->time, s.allocated, s.reserved, m->total_allocated, m->total_reserved});
  }
}

// Note [Departures from the recorded addresses]: the model's placement of
// `buffer` and the free block it was carved from (read from the segments
// once, at the first departure of a pass).
AddressDeparture ReplayCore::DepartureOf(int64_t source, int64_t recorded, BufferId buffer) const {
  const Allocator& a = *allocator_;
  AddressDeparture d;
  d.event = source;
  d.recorded = recorded;
  d.placed = static_cast<int64_t>(*a.AddressOf(buffer));
  d.block = a.BlockSizeOf(buffer)->value();
  d.free_end = d.placed + d.block;
  for (const SegmentLayout& seg : a.Segments()) {
    for (size_t k = 0; k < seg.blocks.size(); ++k) {
      const SegmentLayout::Block& b = seg.blocks[k];
      const int64_t begin = static_cast<int64_t>(b.address), end = begin + b.size;
      if (begin == d.placed && k + 1 < seg.blocks.size() && seg.blocks[k + 1].buffer < 0) {
        d.free_end = static_cast<int64_t>(seg.blocks[k + 1].address) + seg.blocks[k + 1].size;
      }
      if (b.buffer < 0 && begin <= recorded && recorded < end) d.recorded_free = end - recorded;
    }
  }
  return d;
}

// Note [Exact from the first determined event]: runs of events whose
// reserved is inexact, each with the fact that explains its first event.
void ReplayCore::TrackReservedRun(const RecordedMemoryEvent& m, int64_t source, Bytes predicted) {
  if (predicted == *m.total_reserved) {
    if (open_run_.has_value()) {
      if (r_.reserved_mismatches.size() < kMismatchRunsKept) r_.reserved_mismatches.push_back(*open_run_);
      open_run_.reset();
    }
  } else if (open_run_.has_value()) {
    open_run_->last = source;
  } else {
    ++r_.reserved_mismatch_runs;
    open_run_ = MismatchRun{source, source, predicted - *m.total_reserved, WhyReservedDiffers(m, source, predicted)};
  }
  model_reserved_before_ = predicted;
  recorded_reserved_before_ = *m.total_reserved;
}

std::string ReplayCore::WhyReservedDiffers(const RecordedMemoryEvent& m, int64_t source, Bytes predicted) const {
  std::string why;
  if (recorded_reserved_before_ < Bytes(0)) {
    why = absl::StrFormat("at the first event the model holds %d reserved bytes, the recording %d", predicted.value(),
                          m.total_reserved->value());
  } else {
    const int64_t model = (predicted - model_reserved_before_).value();
    const int64_t recorded = (*m.total_reserved - recorded_reserved_before_).value();
    why = absl::StrFormat("at this %s of %d bytes%s the model's reserved changes by %+d bytes, the recording's by %+d",
                          m.kind == MemoryEventKind::kFree ? "free" : "allocation", m.size.value(),
                          m.address.has_value() ? absl::StrFormat(" (recorded at 0x%x)", *m.address) : "", model,
                          recorded);
  }
  if (warm_ == nullptr) return why;
  if (determined_from_ == -1 || source < determined_from_) {
    absl::StrAppend(&why, "; the start state is not fully determined here (see its facts not recorded)");
  } else if (pass_ != nullptr && pass_->departure.has_value() && pass_->departure->event <= source) {
    const AddressDeparture& d = *pass_->departure;
    absl::StrAppend(&why, absl::StrFormat("; the replay's placements depart from the recording's from event %d (a "
                                          "%d-byte block recorded at 0x%x, placed at 0x%x): what differs in the start "
                                          "state there is not recorded",
                                          d.event, d.block, d.recorded, d.placed));
  } else {
    absl::StrAppend(&why, "; every block was placed at its recorded address before it: the start state's free "
                          "reserved bytes differ from the recording's where no recorded block shows them");
  }
  return why;
}

absl::Status ReplayCore::Finish() {
  // Note [Exact from the first determined event]: determined from the first
  // event, the whole comparison; never (or after the last event), none.
  for (auto [all, determined] : {std::pair{&r_.allocated, &r_.allocated_determined},
                                 std::pair{&r_.reserved, &r_.reserved_determined}}) {
    if (determined_from_ == 0) *determined = *all;
    if (determined_from_ >= -1 && all->has_value() && !determined->has_value()) determined->emplace();
  }
  if (open_run_.has_value()) {
    if (r_.reserved_mismatches.size() < kMismatchRunsKept) r_.reserved_mismatches.push_back(*open_run_);
    open_run_.reset();
  }
  Allocator& a = *allocator_;
  if (pass_ != nullptr && pass_->departure.has_value() && r_.warm_start.has_value()) {
    r_.warm_start->undetermined.push_back(DepartureUnexplained(*pass_->departure));
  }
  r_.no_fragmentation_peak = live_peak_;
  RETURN_IF_ERROR(a.Finish());
  r_.stats = a.stats();  // summed over the private pools (GraphPoolAllocator)
  if (pooled_ != nullptr) r_.graph_pools = pooled_->pools_used();
  if (offline_) {
    peak_.Observe(r_.stats);  // the plan's heap at its peak
    r_.fragmentation_at_peak = r_.stats.peak_reserved - r_.stats.peak_allocated;
  } else {
    r_.fragmentation_at_peak = peak_.fragmentation;
  }
  return absl::OkStatus();
}

}  // namespace replay_internal
}  // namespace gpusim
