#include "sim/replay/warm_start.h"

#include <algorithm>
#include <map>
#include <set>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace gpusim {

// Note [Warm start from recorded addresses]
// Most Kineto recordings start warm: the caching allocator already holds its
// segments (Total Reserved is constant), and a replay from an empty
// allocator gets reserved wrong at every event and splits blocks that were
// not split. The recording gives every block's address and requested size
// and the total reserved, and the caching rules constrain the rest
// (PyTorch CUDACachingAllocator.cpp):
//  - a block is its request rounded up to 512 bytes (round_size), carved
//    from the front of a free block, and never crosses a segment;
//  - requests ≤ kSmallSize (1 MiB) live in the small pool, whose segments
//    are kSmallBuffer (2 MiB) each (get_allocation_size); cudaMalloc hands
//    out 2 MiB-aligned ranges at this size, so the small segment holding a
//    block is the aligned 2 MiB window around it;
//  - large-pool segments are multiples of kRoundLarge (2 MiB), 2 MiB aligned:
//    the blocks whose ranges overlap, or touch off a 2 MiB boundary, form
//    one cluster (Note [Segment boundaries where blocks meet]), and a
//    segment spans at least its clusters, widened to 2 MiB boundaries.
// The inferred segments must fit in the first event's Total Reserved; what
// is left (reserved memory where no recorded block ever lay) holds the
// bytes live before recording at unknown addresses (Trace::preexisting) and
// is otherwise free: it is restored as one segment, since neither the
// number nor the sizes of such segments are recorded. The blocks freed in
// the recording but never allocated in it are live at the start, at their
// recorded addresses. What the data leave open is listed in
// WarmStart::undetermined: adjacent large clusters (one segment or two?),
// the untouched reserved bytes' segmentation, and a replay's departure
// from the recorded addresses that no correction explains (Note
// [Departures from the recorded addresses]). When a rule is violated
// (a small block straddling a 2 MiB boundary, segments over the recorded
// total, addresses missing) the inference is not applied and the reason is
// reported; the replay then starts cold.
namespace {

constexpr int64_t kMinBlockSize = 512;      // kMinBlockSize (round_size)
constexpr int64_t kSmallSize = 1048576;   // kSmallSize
constexpr int64_t kSegmentAlign = 2097152; // kSmallBuffer / kRoundLarge
constexpr int64_t kLargeBuffer = 20971520;  // kLargeBuffer
constexpr int64_t kMinLargeAlloc = 10485760; // kMinLargeAlloc
constexpr uint64_t kUntouchedAddress = 0x600000000000;  // below the simulated space's base

int64_t AlignDown(int64_t v) { return v / kSegmentAlign * kSegmentAlign; }
int64_t AlignUp(int64_t v) { return (v + kSegmentAlign - 1) / kSegmentAlign * kSegmentAlign; }

struct Span {
  int64_t begin = 0, end = 0;
};

}  // namespace

void WarmFactCollector::Add(const RecordedMemoryEvent& m) {
  if (!why_not_.empty() || m.device != device_) return;
  const bool is_alloc = m.kind == MemoryEventKind::kAlloc || m.kind == MemoryEventKind::kPreexisting;
  const bool is_free = m.kind == MemoryEventKind::kFree || m.kind == MemoryEventKind::kFreeCompleted;
  if (!is_alloc && !is_free) return;
  if (!have_reserved_) {
    if (!m.total_reserved.has_value()) {
      why_not_ = "the first memory event records no Total Reserved";
      return;
    }
    recorded_reserved_ = *m.total_reserved;
    have_reserved_ = true;
  }
  if (!m.address.has_value()) {
    why_not_ = "memory events without addresses";
    return;
  }
  const int64_t addr = *m.address;
  const int64_t block = rounding_.RoundedBlockSize(m.size).value();
  if (block <= kSmallSize) {
    const int64_t start = AlignDown(addr);
    if (addr + block > start + kSegmentAlign) {
      if (!straddle_.has_value()) straddle_ = std::make_pair(addr, block);
    } else {
      small_windows_[start] = true;
    }
  } else {
    // The union of the large blocks' ranges, ranges that overlap merged
    // (one piece); pieces that only touch stay apart, since a segment
    // boundary may lie where they meet (Note [Segment boundaries where
    // blocks meet]).
    int64_t begin = addr, end = addr + block, largest = block;
    auto it = clusters_.upper_bound(begin);
    if (it != clusters_.begin() && std::prev(it)->second.end > begin) --it;
    while (it != clusters_.end() && it->first < end) {
      begin = std::min(begin, it->first);
      end = std::max(end, it->second.end);
      largest = std::max(largest, it->second.largest);
      it = clusters_.erase(it);
    }
    clusters_[begin] = {end, largest};
  }
  if (is_alloc) {
    live_[addr] = m.size.value();
  } else if (!live_.erase(addr)) {
    start_blocks_.push_back({addr, block, m.size.value()});
  }
}

std::string WarmStartState(const WarmStart& ws) {
  return absl::StrFormat(
      "warm, inferred from the recorded addresses and Total Reserved: %d small + %d large segments (%s), %s "
      "where no recorded block lies; %d blocks live at the start%s%s",
      ws.small_segments, ws.large_segments, FormatBytes(ws.inferred_bytes), FormatBytes(ws.untouched_bytes),
      ws.restored_blocks,
      ws.grown_segments == 0
          ? ""
          : absl::StrFormat("; %d segments grown past their blocks by the recorded block sizes", ws.grown_segments),
      ws.joined_boundaries == 0
          ? ""
          : absl::StrFormat("; %d boundaries where blocks meet joined by the recorded placements",
                            ws.joined_boundaries));
}

absl::StatusOr<WarmStart> RestoreWarmStart(const WarmFactCollector& facts, const std::vector<BufferId>& head_ids,
                                           Bytes preexisting, BufferId preexisting_id,
                                           const WarmCorrections& kept, Allocator& a,
                                           absl::flat_hash_set<BufferId>* restored) {
  WarmStart w;
  using StartBlock = WarmFactCollector::StartBlock;
  const std::vector<StartBlock>& start_blocks = facts.start_blocks_;
  if (!facts.why_not_.empty()) {
    w.why_not = facts.why_not_;
    if (facts.have_reserved_) w.recorded_reserved = facts.recorded_reserved_;
    return w;
  }
  if (!facts.have_reserved_) {
    w.why_not = "no memory events";
    return w;
  }
  w.recorded_reserved = facts.recorded_reserved_;
  // Small-pool segments: the aligned 2 MiB windows.
  if (facts.straddle_.has_value()) {
    w.why_not = absl::StrFormat("a small-pool block at 0x%x (%d bytes) crosses a 2 MiB boundary",
                                facts.straddle_->first, facts.straddle_->second);
    return w;
  }
  std::map<int64_t, bool> segments_small;  // start → small (size 2 MiB)
  std::map<int64_t, int64_t> segments;     // start → end, both pools
  for (const auto& [start, small] : facts.small_windows_) {
    segments[start] = start + kSegmentAlign;
    segments_small[start] = true;
  }
  // Large-pool clusters, widened to 2 MiB boundaries and merged.
  std::vector<Span> clusters;
  std::vector<int64_t> largest_in;
  for (const auto& [begin, c] : facts.clusters_) {
    // Note [Segment boundaries where blocks meet]: pieces that meet off a
    // 2 MiB boundary share a segment.
    if (!clusters.empty() && clusters.back().end == begin && begin % kSegmentAlign != 0) {
      clusters.back().end = c.end;
      largest_in.back() = std::max(largest_in.back(), c.largest);
      continue;
    }
    clusters.push_back({begin, c.end});
    largest_in.push_back(c.largest);
  }
  // get_allocation_size: a segment made for a request < kMinLargeAlloc
  // (10 MiB) is kLargeBuffer (20 MiB); larger requests get their own size
  // rounded to kRoundLarge. A cluster smaller than 20 MiB whose blocks are
  // all < 10 MiB therefore lies in a 20 MiB segment: widen it upwards to
  // 20 MiB where the next cluster leaves room (the low end is where best fit
  // carved the first block).
  std::vector<Span> widened;
  for (size_t c = 0; c < clusters.size(); ++c) {
    Span s{AlignDown(clusters[c].begin), AlignUp(clusters[c].end)};
    if (largest_in[c] < kMinLargeAlloc && s.end - s.begin < kLargeBuffer) {
      int64_t limit = s.begin + kLargeBuffer;
      if (c + 1 < clusters.size()) limit = std::min(limit, AlignDown(clusters[c + 1].begin));
      auto next_small = segments.lower_bound(s.begin);
      if (next_small != segments.end()) limit = std::min(limit, next_small->first);
      s.end = std::max(s.end, limit);
    }
    // Note [Growing inferred segments]: what earlier passes found.
    if (auto g = kept.grown_ends.find(s.begin); g != kept.grown_ends.end() && g->second > s.end) {
      s.end = g->second;
      ++w.grown_segments;
    }
    // Segments overlap once widened, or meet where a departure joined them
    // (Note [Departures from the recorded addresses]): one segment.
    if (!widened.empty() &&
        (s.begin < widened.back().end || (s.begin == widened.back().end && kept.joined.contains(s.begin)))) {
      widened.back().end = std::max(widened.back().end, s.end);
    } else {
      widened.push_back(s);
    }
  }
  int64_t adjacent = 0;
  std::set<int64_t> joinable;  // segment ends where the next segment's blocks meet its own
  for (size_t i = 0; i < widened.size(); ++i) {
    const Span& s = widened[i];
    if (i > 0 && widened[i - 1].end == s.begin) {
      ++adjacent;
      joinable.insert(s.begin);
    }
    auto next = segments.lower_bound(s.begin);
    bool overlaps = next != segments.end() && next->first < s.end;
    if (next != segments.begin() && std::prev(next)->second > s.begin) overlaps = true;
    if (overlaps) {
      w.why_not = absl::StrFormat("large-pool blocks at 0x%x..0x%x share a 2 MiB window with small-pool blocks",
                                  s.begin, s.end);
      return w;
    }
  }
  for (const Span& s : widened) segments[s.begin] = s.end;
  for (const auto& [start, end] : segments) w.inferred_bytes += Bytes(end - start);
  w.small_segments = static_cast<int64_t>(segments_small.size());
  w.large_segments = static_cast<int64_t>(widened.size());
  if (w.inferred_bytes > w.recorded_reserved) {
    w.why_not = absl::StrFormat("the recorded addresses span %d bytes of segments, more than the %d bytes reserved",
                                w.inferred_bytes.value(), w.recorded_reserved.value());
    return w;
  }
  w.untouched_bytes = w.recorded_reserved - w.inferred_bytes;
  const int64_t pre = preexisting.value();
  const int64_t pre_block = pre == 0 ? 0 : a.RoundedBlockSize(preexisting).value();
  if (pre_block > w.untouched_bytes.value() || w.untouched_bytes.value() % kMinBlockSize != 0) {
    w.why_not = absl::StrFormat("the %d bytes live before recording at unknown addresses do not fit in the %d "
                                "reserved bytes where no recorded block lies",
                                pre, w.untouched_bytes.value());
    return w;
  }
  w.spare_bytes = w.untouched_bytes - Bytes(pre_block);
  for (const auto& [start, end] : segments) {
    const bool small = segments_small.contains(start);
    w.segments.push_back({start, end, small, false, !small && joinable.contains(end)});
  }
  w.joined_boundaries = static_cast<int64_t>(kept.joined.size());
  if (w.untouched_bytes > Bytes(0)) {
    const int64_t u = static_cast<int64_t>(kUntouchedAddress);
    w.segments.push_back({u, u + w.untouched_bytes.value(), false, true});
  }
  // The head allocs of the native trace, in order, are the start blocks.
  if (head_ids.size() != start_blocks.size()) return absl::InternalError("warm start: head allocs do not pair");
  std::map<int64_t, std::pair<const StartBlock*, BufferId>> at_start;
  for (size_t i = 0; i < start_blocks.size(); ++i) at_start[start_blocks[i].address] = {&start_blocks[i], head_ids[i]};

  // Restore.
  for (const auto& [start, end] : segments) {
    SegmentLayout seg;
    seg.address = static_cast<uint64_t>(start);
    seg.size = end - start;
    seg.small = segments_small.contains(start);
    int64_t at = start;
    for (auto it = at_start.lower_bound(start); it != at_start.end() && it->first < end; ++it) {
      const StartBlock& b = *it->second.first;
      if (b.address < at) return absl::InternalError("warm start: start blocks overlap");
      if (b.address > at) seg.blocks.push_back({static_cast<uint64_t>(at), b.address - at, 0, -1});
      seg.blocks.push_back({static_cast<uint64_t>(b.address), b.size, b.requested, it->second.second});
      restored->insert(it->second.second);
      ++w.restored_blocks;
      at = b.address + b.size;
    }
    if (at < end) seg.blocks.push_back({static_cast<uint64_t>(at), end - at, 0, -1});
    absl::Status st = a.RestoreSegment(seg);
    if (!st.ok()) return absl::InvalidArgumentError(absl::StrCat("warm start: ", st.message()));
  }
  if (w.untouched_bytes > Bytes(0)) {
    SegmentLayout seg;
    seg.address = kUntouchedAddress;
    seg.size = w.untouched_bytes.value();
    seg.small = seg.size == kSegmentAlign && pre <= kSmallSize && pre > 0;
    if (pre_block > 0) {
      seg.blocks.push_back({seg.address, pre_block, pre, preexisting_id});
      restored->insert(preexisting_id);
    }
    if (seg.size > pre_block) {
      seg.blocks.push_back({seg.address + static_cast<uint64_t>(pre_block), seg.size - pre_block, 0, -1});
    }
    absl::Status st = a.RestoreSegment(seg);
    if (!st.ok()) return absl::InvalidArgumentError(absl::StrCat("warm start: ", st.message()));
    w.undetermined.push_back(absl::StrFormat(
        "%d reserved bytes hold no recorded block: how they are split into segments is not recorded (restored as "
        "one segment%s)",
        w.untouched_bytes.value(), pre > 0 ? ", holding the bytes live before recording at unknown addresses" : ""));
  }
  if (adjacent > 0) {
    w.undetermined.push_back(absl::StrFormat(
        "%d pairs of large-pool segments touch at a 2 MiB boundary no recorded block crosses: whether each pair is "
        "one segment or two is not recorded (kept as two)",
        adjacent));
  }
  w.applied = true;
  return w;
}

// Note [Growing inferred segments]
// A large-pool segment is inferred as the smallest 2 MiB-aligned range
// around its blocks (Note [Warm start from recorded addresses]); the real
// one can end later. The recorded block sizes tell where: Kineto's Bytes is
// the size of the block handed out (CUDACachingAllocator.cpp malloc:
// reportMemoryUsageToProfiler(block->size)), and alloc_found_block carves
// it from the front of the free block get_free_block chose, splitting the
// rest off only when should_split holds — in the large pool, a remainder
// of more than kSmallSize (1 MiB) (max_split_size unset: every request is
// below it). So the free block a recorded block of S bytes came from was
// either exactly S (nothing left over) or more than S + 1 MiB (split); a
// remainder in (0, 1 MiB] would have been kept in the block and recorded in
// S. When the model places a block at its recorded address and keeps such
// a remainder because its free block runs to the inferred segment's end,
// that end is too early: the real free block went on past S + 1 MiB, so
// the segment reaches at least the 2 MiB boundary after addr + S + 1 MiB +
// 512. The segment grows there (taken from the reserved bytes where no
// recorded block lies, which keeps Total Reserved) when the next segment
// and those bytes leave room, and the replay runs again, keeping every
// growth, until a pass finds none. The other explanation — a block live
// before the recording, at an address no event shows, starting right at
// addr + S — is not taken: nothing records it.
std::optional<std::pair<int64_t, int64_t>> SegmentGrowthFor(const WarmStart& w, int64_t addr, int64_t recorded_block,
                                                            int64_t model_block) {
  if (!w.applied || recorded_block <= kSmallSize || model_block <= recorded_block ||
      model_block - recorded_block > kSmallSize) {
    return std::nullopt;
  }
  for (size_t i = 0; i < w.segments.size(); ++i) {
    const InferredSegment& s = w.segments[i];
    if (addr < s.begin || addr >= s.end) continue;
    if (s.small || s.untouched || addr + model_block != s.end) return std::nullopt;
    const int64_t need = AlignUp(addr + recorded_block + kSmallSize + kMinBlockSize);
    // Room: the next segment (ascending; the untouched one is elsewhere).
    if (i + 1 < w.segments.size() && !w.segments[i + 1].untouched && w.segments[i + 1].begin < need) {
      return std::nullopt;
    }
    if (Bytes(need - s.end) > w.spare_bytes) return std::nullopt;
    return std::make_pair(s.begin, need);
  }
  return std::nullopt;
}

// Note [Segment boundaries where blocks meet]
// cudaMalloc often hands out adjacent ranges (the pytorch_caching model's
// DeviceAddressSpace always does: first fit from its base), so the blocks
// of two segments can meet: the last block of one ends where the first of
// the next begins. Blocks never cross a segment (CUDACachingAllocator.cpp:
// a Block's prev/next link only the blocks split from one cudaMalloc, and
// try_merge_blocks merges only along them), and segments start on 2 MiB
// boundaries. So the large blocks' ranges are merged into pieces only where
// they overlap; two pieces that meet off a 2 MiB boundary are one segment,
// and two that meet at one may be two segments or one: the data do not say
// (a block edge falls on a 2 MiB boundary inside a segment when earlier
// requests summed to a multiple of 2 MiB, as the benchmark's warm trace
// shows once in 140 such points). They are kept as two, which every
// recorded block allows, and reported in WarmStart::undetermined; a replay
// that departs from the recorded addresses because of the choice joins
// them (Note [Departures from the recorded addresses]). Merging every
// piece that touched into one segment — what the inference did before —
// made one 100-300 MiB segment of a run of adjacent 20-66 MiB ones, best
// fit then carved requests across the real boundaries, and on the
// benchmark's warm trace reserved was exact at 0.09% of events.

// Note [Departures from the recorded addresses]
// The real allocator placed every recorded block at its recorded address,
// by best fit (get_free_block: the smallest free block of the pool that
// fits, BlockComparatorSize orders by stream, size, then address) and from
// the front of the block it chose (alloc_found_block). A replay from the
// inferred start state that places a block elsewhere shows that the start
// state differs from the real one in a way the first such departure (of a
// pass; later ones may follow from it) can name:
//  - the model carved it from a free block that ran to a segment end the
//    inference chose (Note [Segment boundaries where blocks meet]): the
//    real free block there was bigger — it went on into the next piece —
//    so those segments are one: the boundary is joined;
//  - the model carved it from the reserved bytes where no recorded block
//    lies (restored as one free segment): those bytes were not a free block
//    of that size; if exactly one inferred large segment has room after its
//    end for all of them (no segment starts there, nothing live before
//    recording at unknown addresses needs them), they are its untouched
//    tail: it grows by them (as Note [Growing inferred segments] grows a
//    segment, from the same bytes). With room after several, which one is
//    not recorded.
// The replay then runs again from the corrected state, to a fixed point
// with the growths. A departure no rule explains is reported in
// WarmStart::undetermined, with the event, the recorded and the modelled
// address, so that an inexact reserved is never silent.
bool CorrectForDeparture(const WarmStart& w, const AddressDeparture& d, Bytes* spare, WarmCorrections* kept) {
  // Bytes live before recording at unknown addresses may lie where the
  // model placed the block: then nothing here follows.
  if (!w.applied || w.spare_bytes != w.untouched_bytes) return false;
  for (size_t i = 0; i < w.segments.size(); ++i) {
    const InferredSegment& s = w.segments[i];
    if (d.placed < s.begin || d.placed >= s.end) continue;
    if (s.untouched) break;
    if (s.small || d.free_end != s.end) return false;
    if (s.joinable_end) return kept->joined.insert(s.end).second;
    // The segment ends too early: the real free block was at least the
    // recorded one's (larger when it lay below it: best fit's ties go to the
    // lower address).
    if (d.recorded_free <= 0) return false;
    const int64_t need = AlignUp(d.placed + d.recorded_free + (d.placed < d.recorded ? kMinBlockSize : 0));
    const bool last = i + 1 == w.segments.size() || w.segments[i + 1].untouched;
    if ((!last && w.segments[i + 1].begin < need) || Bytes(need - s.end) > *spare) return false;
    int64_t& end = kept->grown_ends[s.begin];
    if (end >= need) return false;
    *spare -= Bytes(need - std::max(end, s.end));
    end = need;
    return true;
  }
  const InferredSegment* untouched = w.segments.empty() || !w.segments.back().untouched ? nullptr : &w.segments.back();
  if (untouched == nullptr || d.placed < untouched->begin || d.placed >= untouched->end) return false;
  const int64_t bytes = untouched->end - untouched->begin;
  if (*spare < Bytes(bytes)) return false;
  const InferredSegment* room = nullptr;
  for (size_t i = 0; i < w.segments.size(); ++i) {
    const InferredSegment& s = w.segments[i];
    if (s.small || s.untouched) continue;
    const bool last = i + 1 == w.segments.size() || w.segments[i + 1].untouched;
    if (!last && w.segments[i + 1].begin < s.end + bytes) continue;
    if (room != nullptr) return false;  // several: not recorded which
    room = &s;
  }
  if (room == nullptr) return false;
  int64_t& end = kept->grown_ends[room->begin];
  end = std::max(end, room->end + bytes);
  *spare -= Bytes(bytes);
  return true;
}

std::string DepartureUnexplained(const AddressDeparture& d) {
  return absl::StrFormat(
      "the replay departs from the recorded addresses at memory event %d (a %d-byte block recorded at 0x%x, placed "
      "at 0x%x): the start state that explains it is not recorded (blocks live through the whole recording, which "
      "it does not show, or segments the inference cannot place; from there the replay's addresses, and its totals "
      "where they differ, are the model's)",
      d.event, d.block, d.recorded, d.placed);
}

}  // namespace gpusim
