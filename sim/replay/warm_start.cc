#include "sim/replay/warm_start.h"

#include <algorithm>
#include <map>
#include <set>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "sim/alloc/cuda_caching_constants.h"
#include "sim/base/status.h"

namespace gpusim {

// Note [Warm start from recorded addresses]
// Most Kineto recordings start warm: the caching allocator already holds its
// segments (Total Reserved is constant), and a replay from an empty
// allocator gets reserved wrong at every event and splits blocks that were
// not split. The recording gives every block's address and size and the
// total reserved, and the caching rules constrain the rest (PyTorch
// c10/cuda/CUDACachingAllocator.cpp, v2.5.1 to the 2.11 the H200 recordings
// of validation/h200_2026-12-04 were made with; these rules did not move):
//  - a block is its request rounded up to 512 bytes (round_size), carved
//    from the front of a free block (alloc_found_block), and never crosses
//    a segment; Kineto's Bytes is that block's size (malloc:
//    reportMemoryUsageToProfiler(block->size, ...)), Total Allocated the sum
//    of live block sizes and Total Reserved the sum of segment sizes, both
//    after the event (stats.allocated_bytes / reserved_bytes);
//  - requests ≤ kSmallSize (1 MiB) live in the small pool (get_pool), whose
//    segments are kSmallBuffer (2 MiB) each (get_allocation_size);
//    cudaMalloc hands out 2 MiB-aligned ranges at this size, so the small
//    segment holding a block is the aligned 2 MiB window around it;
//  - large-pool segments are multiples of kRoundLarge (2 MiB), 2 MiB
//    aligned: the blocks whose ranges overlap, or touch off a 2 MiB
//    boundary, form one piece (Note [Segment boundaries where blocks
//    meet]), and a segment spans at least its pieces, widened to 2 MiB
//    boundaries.
// The inferred segments must fit in the first event's Total Reserved; what
// is left (reserved memory where no recorded block ever lay) is restored as
// one segment, since neither the number nor the sizes of such segments are
// recorded. The blocks freed in the recording but never allocated in it are
// live at the start, at their recorded addresses; the bytes live before
// recording and never freed (Trace::preexisting: the start's Total
// Allocated less those blocks) lie where no recorded block ever lies (Note
// [Bytes live through the recording]). What the data leave open is listed
// in WarmStart::undetermined: adjacent large pieces (one segment or two?),
// the untouched reserved bytes' segmentation, where bytes at unknown
// addresses were chosen to lie, and a replay's departure from the recorded
// addresses that no correction explains (Note [Departures from the
// recorded addresses]). A fact that breaks a rule (a small block across a
// 2 MiB boundary, large and small blocks in one 2 MiB window, segments over
// the recorded total) is named there too, and the rest is still placed
// (Note [Exact from the first determined event]): one undetermined block
// never sends the whole trace back to a cold start.
//
// Note [Bytes live through the recording]
// A training step recorded warm holds, from its first event to its last,
// blocks it never allocates nor frees: parameters, optimizer states, the
// cuBLAS workspace (CUDABlas.cpp getCurrentCUDABlasHandle's workspace,
// allocated through the caching allocator once per handle and stream).
// Their total is recorded (Total Allocated before the first event, less the
// blocks the recording frees without allocating them); their addresses are
// not. They lie where no recorded block ever lies: in the ranges of the
// inferred segments between recorded blocks (gaps) or in the reserved bytes
// no recorded block touches. Some of those gaps the recording proves live:
// a gap that ends where the recording allocates a block, off a 2 MiB
// boundary (so inside one segment), held a block then — alloc_found_block
// carves a request from the front of the free block best fit chose, and
// free_block merges a freed block with its free neighbours
// (try_merge_blocks), so had the bytes before that address been free, the
// block would have started lower — and no recorded block lies there, so it
// was a block live through the recording: it still is. Measured against the
// segments of the H200 snapshots (validation/h200_2026-12-04/snapshots,
// the same allocator one step earlier), 99.8% of such gap bytes held
// allocated blocks (445,996,032 of 446,906,368 over the 32 recordings). Proven gaps are restored live first (whole: where in a
// gap the proven block starts is not recorded, and filling it is what the
// snapshots show). The rest of the bytes go to the untouched reserved bytes;
// when they do not fit there, gaps no placement proves are chosen to hold
// them (in address order, those before a recorded block before the tails
// after the last one; said in WarmStart::undetermined); a replay's
// placement can show more gaps live (Note [Departures from the recorded
// addresses], Note [Growing inferred segments]), which then take their
// bytes from the untouched ones. Bytes that fit nowhere are restored as a
// segment of their own past the recorded Total Reserved, so that allocated
// stays exact and the reserved error names them (Note [Exact from the first
// determined event]).
//
// Note [Exact from the first determined event]
// What the inference cannot place at all — bytes live through the
// recording that fit in no gap and no untouched byte, a block freed in the
// recording whose range another start block holds — leaves the replay's
// state wrong for as long as it is live: a block freed at event k until k,
// bytes never freed to the end. WarmStart::determined_from is the first
// memory event after every such fact has stopped mattering (0 when the
// inference placed everything, -1 when something unplaced is never freed),
// and the replay reports the share of events exact from there beside the
// share over all events (ReplayResult::reserved_determined), with each run
// of inexact events and the fact that explains it (ReplayResult::mismatches).
namespace {

using cuda_caching::kMinBlockSize;  // round_size
using cuda_caching::kSmallSize;     // get_pool
constexpr int64_t kSegmentAlign = cuda_caching::kSmallBuffer;  // = kRoundLarge
constexpr uint64_t kUntouchedAddress = 0x600000000000;  // below the simulated space's base
// Note [Reserved bytes no recorded block lies in]: the stream of their
// segment, which no recorded request uses.
constexpr StreamId kUntouchedStream = kMaxStreamId;
constexpr size_t kStraddlesKept = 4;  // the rule-breaking blocks named

int64_t AlignDown(int64_t v) { return v / kSegmentAlign * kSegmentAlign; }
int64_t AlignUp(int64_t v) { return (v + kSegmentAlign - 1) / kSegmentAlign * kSegmentAlign; }

using Piece = WarmFactCollector::Piece;

// Note [Pieces seen before]
// A training loop allocates at the same addresses step after step, so most
// of the collector's AddPiece calls (a std::map search each, 4-6% of a warm
// replay's cycles on BM_EndToEndWarm) found their range inside a piece
// already and changed nothing. Pieces only grow (AddPiece merges, never
// splits or shrinks), and a piece that begins where an alloc added a range
// keeps alloc_at_begin (a merge that keeps that begin ORs it in; one that
// starts lower puts the address inside the piece, where nothing is kept).
// So once an alloc has added [a, a + b) to a pool's pieces, adding [a, a +
// c) with c <= b to the same pool again, by an alloc or a free, changes
// nothing: the collector keeps, per address, the largest block an alloc
// added in each pool (WarmFactCollector::seen_, with whether a block is
// live there, bounded by the distinct addresses) and calls AddPiece only
// past it. The pieces, and so the inference, are the same.
//
// Adds [begin, end) to `pieces`, merging the ranges it overlaps (ranges that
// only touch stay apart: Note [Segment boundaries where blocks meet]).
void AddPiece(std::map<int64_t, Piece>& pieces, int64_t begin, int64_t end, bool alloc) {
  Piece p{end, alloc};
  auto it = pieces.upper_bound(begin);
  if (it != pieces.begin() && std::prev(it)->second.end > begin) --it;
  // Most blocks of a warm trace lie where one lay before: nothing to merge.
  if (it != pieces.end() && it->first <= begin && it->second.end >= end) {
    if (it->first == begin) it->second.alloc_at_begin |= alloc;
    return;
  }
  while (it != pieces.end() && it->first < end) {
    if (it->first < begin) {
      p.alloc_at_begin = it->second.alloc_at_begin;
    } else if (it->first == begin) {
      p.alloc_at_begin |= it->second.alloc_at_begin;
    }
    begin = std::min(begin, it->first);
    p.end = std::max(p.end, it->second.end);
    it = pieces.erase(it);
  }
  pieces[begin] = p;
}

}  // namespace

void WarmFactCollector::Add(const RecordedMemoryEvent& m, int64_t index) {
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
  Seen& seen = seen_[addr];
  const bool small = block <= kSmallSize && addr + block <= AlignDown(addr) + kSegmentAlign;
  // A small block across a 2 MiB boundary lies in no small segment: it is
  // placed with the large pool's, and named (Note [Warm start from recorded
  // addresses]). Each block once: at its alloc, or at the free of a block
  // live at the start.
  if (!small && block <= kSmallSize && (is_alloc || !seen.live)) {
    if (straddles_.size() < kStraddlesKept) straddles_.push_back({addr, block});
    ++straddle_count_;
  }
  // Note [Pieces seen before]: the range an alloc added before at this
  // address, in this pool, holds this one.
  int64_t& added = small ? seen.small_block : seen.large_block;
  if (block > added) {
    AddPiece(small ? small_pieces_ : large_pieces_, addr, addr + block, is_alloc);
    if (is_alloc) added = block;
  }
  if (is_alloc) {
    seen.live = true;
  } else if (seen.live) {
    seen.live = false;
  } else {
    start_blocks_.push_back({addr, block, m.size.value(), index});
  }
}

std::string WarmStartState(const WarmStart& ws) {
  std::string unknown;
  if (ws.unknown_bytes > Bytes(0)) {
    unknown = absl::StrFormat("; the %s live before recording at unknown addresses: %s in gaps the recorded "
                              "placements prove live, %s in gaps the replay showed live, %s in gaps chosen, %s "
                              "where no recorded block lies%s",
                              FormatBytes(ws.unknown_bytes), FormatBytes(ws.proven_bytes),
                              FormatBytes(ws.shown_bytes), FormatBytes(ws.chosen_bytes),
                              FormatBytes(ws.movable_bytes),
                              ws.unplaced_bytes > Bytes(0)
                                  ? absl::StrCat(", ", FormatBytes(ws.unplaced_bytes), " nowhere (a segment past "
                                                                                        "Total Reserved)")
                                  : std::string());
  }
  return absl::StrFormat(
      "warm, inferred from the recorded addresses and Total Reserved: %d small + %d large segments (%s), %s "
      "where no recorded block lies; %d blocks live at the start%s%s%s",
      ws.small_segments, ws.large_segments, FormatBytes(ws.inferred_bytes), FormatBytes(ws.untouched_bytes),
      ws.restored_blocks, unknown,
      ws.grown_segments == 0
          ? ""
          : absl::StrFormat("; %d segments grown past their blocks by the recorded block sizes", ws.grown_segments),
      ws.joined_boundaries == 0
          ? ""
          : absl::StrFormat("; %d boundaries where blocks meet joined by the recorded placements",
                            ws.joined_boundaries));
}

namespace {

// The segments inferred from the recorded pieces, ascending by begin.
struct SegmentSet {
  std::map<int64_t, InferredSegment> by_begin;
  int64_t adjacent = 0;  // large segments that meet at a chosen boundary
  int64_t merged_windows = 0;  // small windows large blocks also lie in
};

// Large-pool spans from the pieces: pieces that meet off a 2 MiB boundary
// joined, each widened to 2 MiB boundaries, with the corrections of
// earlier passes.
std::vector<InferredSegment> LargeSpans(const WarmFactCollector& facts, const WarmCorrections& kept, int64_t* grown) {
  struct Cluster {
    int64_t begin, end;
  };
  std::vector<Cluster> clusters;
  for (const auto& [begin, p] : facts.large_pieces()) {
    // Note [Segment boundaries where blocks meet]: pieces that meet off a
    // 2 MiB boundary share a segment.
    if (!clusters.empty() && clusters.back().end == begin && begin % kSegmentAlign != 0) {
      clusters.back().end = p.end;
      continue;
    }
    clusters.push_back({begin, p.end});
  }
  // Each cluster lies in a segment from the 2 MiB boundary at or below its
  // first block to the one at or above its last. get_allocation_size makes
  // a segment of kLargeBuffer (20 MiB) for a request below kMinLargeAlloc
  // (10 MiB), but a segment made for a larger request is reused by smaller
  // ones (the H200 snapshots hold 25 segments of 12 MiB whose blocks are 3
  // to 9 MiB), so the blocks' sizes do not say how far a segment goes: it is
  // not widened to 20 MiB (as it was before: on the H200 recordings that
  // claimed reserved bytes the bytes live through the recording needed, and
  // reserved was exact at 97.1% of t5_gpu's events, 100% without). A
  // segment that ends later shows it in the replay (Note [Growing inferred
  // segments], Note [Departures from the recorded addresses]).
  std::vector<InferredSegment> spans;
  for (size_t c = 0; c < clusters.size(); ++c) {
    InferredSegment s{AlignDown(clusters[c].begin), AlignUp(clusters[c].end)};
    // Note [Growing inferred segments]: what earlier passes found.
    if (auto g = kept.grown_ends.find(s.begin); g != kept.grown_ends.end() && g->second > s.end) {
      s.end = g->second;
      ++*grown;
    }
    // Segments overlap once rounded to 2 MiB or grown, or meet where a departure joined them
    // (Note [Departures from the recorded addresses]): one segment.
    if (!spans.empty() &&
        (s.begin < spans.back().end || (s.begin == spans.back().end && kept.joined.contains(s.begin)))) {
      spans.back().end = std::max(spans.back().end, s.end);
    } else {
      spans.push_back(s);
    }
  }
  return spans;
}

// Small windows and large spans; a small window a large span overlaps (the
// recording put both pools' blocks in one 2 MiB range) becomes part of it.
SegmentSet InferSegments(const WarmFactCollector& facts, const WarmCorrections& kept, WarmStart& w) {
  std::map<int64_t, bool> windows;  // small-pool 2 MiB window starts
  for (const auto& [begin, p] : facts.small_pieces()) windows[AlignDown(begin)] = true;
  int64_t grown = 0;
  std::vector<InferredSegment> spans = LargeSpans(facts, kept, &grown);
  SegmentSet out;
  std::set<int64_t> joinable;  // span ends where the next span's blocks meet its own
  for (size_t i = 0; i < spans.size(); ++i) {
    InferredSegment& s = spans[i];
    if (i > 0 && spans[i - 1].end == s.begin) {
      ++out.adjacent;
      joinable.insert(s.begin);
    }
    for (auto it = windows.lower_bound(s.begin); it != windows.end() && it->first < s.end;) {
      ++out.merged_windows;
      it = windows.erase(it);
    }
  }
  for (const auto& [start, small] : windows) out.by_begin[start] = {start, start + kSegmentAlign, true};
  for (InferredSegment& s : spans) {
    s.joinable_end = joinable.contains(s.end);
    out.by_begin[s.begin] = s;
  }
  w.small_segments = static_cast<int64_t>(windows.size());
  w.large_segments = static_cast<int64_t>(spans.size());
  w.grown_segments = grown;
  return out;
}

// The gaps of each segment: where no recorded piece lies.
std::vector<StartGap> GapsOf(const SegmentSet& set, const WarmFactCollector& facts) {
  std::vector<StartGap> gaps;
  for (const auto& [begin, s] : set.by_begin) {
    int64_t at = begin;
    // Pieces of both pools in the segment, in address order (a merged
    // window brings small pieces into a large segment).
    std::vector<std::pair<int64_t, const Piece*>> in;
    for (const std::map<int64_t, Piece>* pieces : {&facts.small_pieces(), &facts.large_pieces()}) {
      for (auto it = pieces->lower_bound(begin); it != pieces->end() && it->first < s.end; ++it) {
        in.push_back({it->first, &it->second});
      }
    }
    std::sort(in.begin(), in.end());
    for (const auto& [piece_begin, p] : in) {
      if (piece_begin > at) {
        gaps.push_back({at, piece_begin, false, p->alloc_at_begin && piece_begin % kSegmentAlign != 0, 0});
      }
      at = std::max(at, p->end);
    }
    if (at < s.end) gaps.push_back({at, s.end, true, false, 0});
  }
  return gaps;
}

// Note [Bytes live through the recording]: `unknown` bytes into `gaps` —
// proven gaps, those earlier passes showed live, then (while more is left
// than the `untouched` bytes hold) chosen ones; returns what is left.
int64_t FillGaps(std::vector<StartGap>& gaps, int64_t unknown, int64_t untouched, const WarmCorrections& kept,
                 WarmStart& w) {
  int64_t left = unknown;
  auto fill = [&](StartGap& g, Bytes& into) {
    const auto front = g.tail ? kept.front_free.end() : kept.front_free.find(g.begin);
    const int64_t room = g.end - g.begin - (front == kept.front_free.end() ? 0 : front->second);
    g.filled = std::min(room, left);
    left -= g.filled;
    into += Bytes(g.filled);
  };
  for (StartGap& g : gaps) {
    if (left > 0 && g.proven) fill(g, w.proven_bytes);
  }
  for (StartGap& g : gaps) {
    if (left > 0 && g.filled == 0 && kept.filled.contains(g.begin)) fill(g, w.shown_bytes);
  }
  int64_t chosen = 0;
  for (const bool tails : {false, true}) {
    for (StartGap& g : gaps) {
      if (left <= untouched) break;
      if (g.filled != 0 || g.tail != tails || kept.freed.contains(g.begin)) continue;
      fill(g, w.chosen_bytes);
      g.chosen = true;
      ++chosen;
    }
  }
  if (chosen > 0) {
    w.undetermined.push_back(absl::StrFormat(
        "%d bytes live before recording at unknown addresses do not fit in the reserved bytes where no recorded "
        "block lies: %d gaps between recorded blocks that no placement proves live were chosen to hold them (in "
        "address order, tails after the last block of a segment last)",
        w.chosen_bytes.value(), chosen));
  }
  return left;
}

// Note [Reserved bytes no recorded block lies in]
// The reserved bytes where no recorded block ever lies held no recorded
// block through the whole recording, so the replay must not place one
// there either; but restored as one free segment they are a free block
// larger than most real ones, which best fit takes for requests the
// recording placed elsewhere (the benchmark's warm trace departed at its
// 46th event, a 9.8 MiB request taking the 14 MiB where no block lies —
// the unused tail of a 66 MiB segment — over the 15 MiB the recording
// used, and reserved was exact at 2.5% of its events). They are restored
// on a stream of their own (kUntouchedStream): get_free_block searches
// only the request's stream's blocks (BlockComparatorSize orders by
// stream first), so best fit never takes them, while they stay in Total
// Reserved, hold the bytes live through the recording that went there,
// and are released by release_cached_blocks (empty_cache, an OOM's retry)
// as the real free segments would be. A segment the recording shows ending
// later still grows into them (Note [Growing inferred segments], Note
// [Departures from the recorded addresses]).

// A block restored live at the start.
struct LiveBlock {
  int64_t address, size, requested;
  BufferId buffer;
};

absl::Status RestoreOne(Allocator& a, int64_t begin, int64_t end, bool small, const std::vector<LiveBlock>& blocks,
                        StreamId stream = 0) {
  SegmentLayout seg;
  seg.address = static_cast<uint64_t>(begin);
  seg.size = end - begin;
  seg.small = small;
  seg.stream = stream;
  int64_t at = begin;
  for (const LiveBlock& b : blocks) {
    if (b.address > at) seg.blocks.push_back({static_cast<uint64_t>(at), b.address - at, 0, -1});
    seg.blocks.push_back({static_cast<uint64_t>(b.address), b.size, b.requested, b.buffer});
    at = b.address + b.size;
  }
  if (at < end) seg.blocks.push_back({static_cast<uint64_t>(at), end - at, 0, -1});
  absl::Status st = a.RestoreSegment(seg);
  if (!st.ok()) return absl::InvalidArgumentError(absl::StrCat("warm start: ", st.message()));
  return absl::OkStatus();
}

// The blocks live at the start, by address: the start blocks (freed in the
// recording, the head allocs `head_ids` in order) and the filled gaps
// (buffers from `first_unknown_id` up). A start block over another is not
// placed: the start state is determined from its free on.
absl::StatusOr<std::map<int64_t, LiveBlock>> LiveAtStart(const WarmFactCollector& facts,
                                                         const std::vector<BufferId>& head_ids,
                                                         const std::vector<StartGap>& gaps,
                                                         BufferId first_unknown_id, WarmStart& w) {
  const std::vector<WarmFactCollector::StartBlock>& start_blocks = facts.start_blocks();
  if (head_ids.size() != start_blocks.size()) return absl::InternalError("warm start: head allocs do not pair");
  std::map<int64_t, LiveBlock> live;
  BufferId id = first_unknown_id;
  for (const StartGap& g : gaps) {
    if (g.filled == 0) continue;
    const int64_t at = g.tail ? g.begin : g.end - g.filled;
    live[at] = {at, g.filled, g.filled, id++};
  }
  int64_t overlapping = 0;
  for (size_t i = 0; i < start_blocks.size(); ++i) {
    const WarmFactCollector::StartBlock& b = start_blocks[i];
    auto next = live.lower_bound(b.address);
    const bool over = (next != live.end() && next->first < b.address + b.size) ||
                      (next != live.begin() && std::prev(next)->second.address + std::prev(next)->second.size >
                                                   b.address);
    if (over) {
      ++overlapping;
      w.determined_from = w.determined_from < 0 ? -1 : std::max(w.determined_from, b.free_event + 1);
      continue;
    }
    live[b.address] = {b.address, b.size, b.requested, head_ids[i]};
  }
  if (overlapping > 0) {
    w.undetermined.push_back(absl::StrFormat(
        "%d blocks the recording frees without allocating them overlap others freed so: not placed (the start "
        "state is determined from the last such free on)",
        overlapping));
  }
  return live;
}

// Restores the segments of `set` with `live`, then the untouched bytes (and
// the unplaced ones) as segments of their own.
absl::Status RestoreAll(const SegmentSet& set, const std::map<int64_t, LiveBlock>& live, int64_t pre_requested,
                        BufferId first_unknown_id, Allocator& a, WarmStart& w,
                        absl::flat_hash_set<BufferId>* restored) {
  bool first = true;
  for (const auto& [begin, s] : set.by_begin) {
    std::vector<LiveBlock> in;
    for (auto it = live.lower_bound(begin); it != live.end() && it->first < s.end; ++it) {
      in.push_back(it->second);
      restored->insert(it->second.buffer);
      ++w.restored_blocks;
    }
    absl::Status st = RestoreOne(a, begin, s.end, s.small, in);
    // The allocator cannot hold a restored segment at all (expandable
    // segments): nothing is restored yet, and the replay starts cold.
    if (!st.ok() && first) return absl::FailedPreconditionError(st.message());
    RETURN_IF_ERROR(st);
    first = false;
  }
  BufferId id = first_unknown_id + static_cast<BufferId>(w.gaps.size());
  int64_t at = static_cast<int64_t>(kUntouchedAddress);
  for (const auto& [bytes, held] : {std::pair{w.untouched_bytes.value(), w.movable_bytes.value()},
                                    std::pair{w.unplaced_bytes.value(), w.unplaced_bytes.value()}}) {
    if (bytes <= 0) continue;
    std::vector<LiveBlock> in;
    if (held > 0) {
      in.push_back({at, held, held, id});
      restored->insert(id++);
    }
    const bool small = bytes == kSegmentAlign && held > 0 && pre_requested <= kSmallSize;
    RETURN_IF_ERROR(RestoreOne(a, at, at + bytes, small, in, kUntouchedStream));
    at += AlignUp(bytes);
  }
  return absl::OkStatus();
}

// What the inference read but could not follow, said in w.undetermined.
void NameBrokenRules(const WarmFactCollector& facts, const SegmentSet& set, WarmStart& w) {
  if (facts.straddle_count() > 0) {
    w.undetermined.push_back(absl::StrFormat(
        "%d small-pool blocks cross a 2 MiB boundary, which no small segment allows (the first at 0x%x, %d bytes): "
        "placed with the large pool's blocks",
        facts.straddle_count(), facts.straddles().front().first, facts.straddles().front().second));
  }
  if (set.merged_windows > 0) {
    w.undetermined.push_back(absl::StrFormat(
        "%d 2 MiB windows hold both small- and large-pool blocks (a segment released and mapped again during the "
        "recording): restored as part of a large-pool segment",
        set.merged_windows));
  }
  if (set.adjacent > 0) {
    w.undetermined.push_back(absl::StrFormat(
        "%d pairs of large-pool segments touch at a 2 MiB boundary no recorded block crosses: whether each pair is "
        "one segment or two is not recorded (kept as two)",
        set.adjacent));
  }
}

}  // namespace

absl::StatusOr<WarmStart> RestoreWarmStart(const WarmFactCollector& facts, const std::vector<BufferId>& head_ids,
                                           Bytes preexisting, BufferId preexisting_id,
                                           const WarmCorrections& kept, Allocator& a,
                                           absl::flat_hash_set<BufferId>* restored) {
  WarmStart w;
  if (facts.have_reserved()) w.recorded_reserved = facts.recorded_reserved();
  if (!facts.why_not().empty()) {
    w.why_not = facts.why_not();
    return w;
  }
  if (!facts.have_reserved()) {
    w.why_not = "no memory events";
    return w;
  }
  SegmentSet set = InferSegments(facts, kept, w);
  for (const auto& [begin, seg] : set.by_begin) w.inferred_bytes += Bytes(seg.end - seg.begin);
  int64_t untouched = std::max<int64_t>(0, (w.recorded_reserved - w.inferred_bytes).value());
  untouched -= untouched % kMinBlockSize;
  if (w.inferred_bytes > w.recorded_reserved) {
    w.determined_from = -1;
    w.undetermined.push_back(absl::StrFormat(
        "the recorded addresses span %d bytes of segments, more than the %d bytes reserved at the first event "
        "(segments mapped during the recording): all restored from the start",
        w.inferred_bytes.value(), w.recorded_reserved.value()));
  }
  // Note [Bytes live through the recording].
  std::vector<StartGap> gaps = GapsOf(set, facts);
  w.unknown_bytes = preexisting == Bytes(0) ? Bytes(0) : a.RoundedBlockSize(preexisting);
  const int64_t left = FillGaps(gaps, w.unknown_bytes.value(), untouched, kept, w);
  w.movable_bytes = Bytes(std::min(left, untouched));
  w.unplaced_bytes = Bytes(left) - w.movable_bytes;
  w.untouched_bytes = Bytes(untouched);
  w.spare_bytes = w.untouched_bytes - w.movable_bytes;
  NameBrokenRules(facts, set, w);
  w.joined_boundaries = static_cast<int64_t>(kept.joined.size());
  for (const auto& [begin, s] : set.by_begin) w.segments.push_back(s);
  if (untouched > 0) {
    const int64_t u = static_cast<int64_t>(kUntouchedAddress);
    w.segments.push_back({u, u + untouched, false, true});
  }
  if (w.unplaced_bytes > Bytes(0)) {
    w.determined_from = -1;
    w.undetermined.push_back(absl::StrFormat(
        "%d bytes live before recording at unknown addresses fit in no gap between recorded blocks and in no "
        "reserved byte where no recorded block lies: restored as a segment of their own past the recorded Total "
        "Reserved (reserved is over by them at every event)",
        w.unplaced_bytes.value()));
  }
  w.gaps = std::move(gaps);
  ASSIGN_OR_RETURN(auto live, LiveAtStart(facts, head_ids, w.gaps, preexisting_id, w));
  if (absl::Status st = RestoreAll(set, live, preexisting.value(), preexisting_id, a, w, restored); !st.ok()) {
    if (!absl::IsFailedPrecondition(st)) return st;
    restored->clear();
    WarmStart refused;
    refused.recorded_reserved = w.recorded_reserved;
    refused.why_not = absl::StrCat("the allocator cannot hold the inferred segments (", st.message(), ")");
    return refused;
  }
  if (untouched > 0) {
    w.undetermined.push_back(absl::StrFormat(
        "%d reserved bytes hold no recorded block: how they are split into segments is not recorded (restored as "
        "one segment, which no request is placed in%s)",
        untouched,
        w.movable_bytes > Bytes(0) ? absl::StrFormat(", holding %d of the bytes live before recording at unknown "
                                                     "addresses",
                                                     w.movable_bytes.value())
                                   : std::string()));
  }
  w.applied = true;
  return w;
}

namespace {

// The gap of `w` that `addr` lies in while it is restored free; null when
// none.
const StartGap* FreeGapAt(const WarmStart& w, int64_t addr) {
  auto it = std::upper_bound(w.gaps.begin(), w.gaps.end(), addr,
                             [](int64_t a, const StartGap& g) { return a < g.begin; });
  if (it == w.gaps.begin()) return nullptr;
  const StartGap& g = *std::prev(it);
  return addr < g.end && g.filled == 0 ? &g : nullptr;
}

// Keeps `g` live in `kept` when the bytes at unknown addresses restored
// where no recorded block lies cover it (they move there).
bool FillFromBudget(const StartGap& g, WarmBudget* budget, WarmCorrections* kept) {
  const Bytes size(g.end - g.begin);
  if (size > budget->movable || kept->filled.contains(g.begin)) return false;
  budget->movable -= size;
  budget->spare += size;
  kept->filled.insert(g.begin);
  return true;
}

}  // namespace

// Note [Growing inferred segments]
// A large-pool segment is inferred as the smallest 2 MiB-aligned range
// around its blocks (Note [Warm start from recorded addresses]); the real
// one can end later, and a gap after a block restored free can have held a
// block live through the recording (Note [Bytes live through the
// recording]). The recorded block sizes tell which: Kineto's Bytes is the
// size of the block handed out (CUDACachingAllocator.cpp malloc:
// reportMemoryUsageToProfiler(block->size)), and alloc_found_block carves
// it from the front of the free block get_free_block chose, splitting the
// rest off only when should_split holds — in the large pool, a remainder
// of more than kSmallSize (1 MiB) (max_split_size unset: every request is
// below it). So the free block a recorded block of S bytes came from was
// either exactly S (nothing left over) or more than S + 1 MiB (split); a
// remainder in (0, 1 MiB] would have been kept in the block and recorded in
// S. When the model places a block at its recorded address and keeps such
// a remainder, its free block after addr + S is not the real one:
//  - when addr + S begins a gap restored free, a block live through the
//    recording began there (nothing recorded did): the gap is shown live,
//    its bytes taken from those restored where no recorded block lies;
//  - else, when the model's free block runs to the inferred segment's end,
//    that end is too early: the real free block went on past S + 1 MiB, so
//    the segment reaches at least the 2 MiB boundary after addr + S + 1 MiB
//    + 512. The segment grows there (taken from the free reserved bytes
//    where no recorded block lies, which keeps Total Reserved) when the next
//    segment and those bytes leave room.
// The replay runs again, keeping every correction, until a pass finds none.
std::optional<StartCorrection> CorrectionForPlacement(const WarmStart& w, int64_t addr, int64_t recorded_block,
                                                      int64_t model_block) {
  if (!w.applied || recorded_block <= kSmallSize || model_block <= recorded_block ||
      model_block - recorded_block > kSmallSize) {
    return std::nullopt;
  }
  const StartGap* g = FreeGapAt(w, addr + recorded_block);
  std::optional<StartCorrection> fill;
  if (g != nullptr && g->begin == addr + recorded_block) fill = StartCorrection{true, g->begin, g->end};
  for (size_t i = 0; i < w.segments.size(); ++i) {
    const InferredSegment& s = w.segments[i];
    if (addr < s.begin || addr >= s.end) continue;
    if (s.small || s.untouched || addr + model_block != s.end) return fill;
    const int64_t need = AlignUp(addr + recorded_block + kSmallSize + kMinBlockSize);
    // Room: the next segment (ascending; the untouched one is elsewhere).
    if (i + 1 < w.segments.size() && !w.segments[i + 1].untouched && w.segments[i + 1].begin < need) {
      return fill;
    }
    if (Bytes(need - s.end) > w.spare_bytes) return fill;
    return StartCorrection{false, s.begin, need};
  }
  return fill;
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
// pass; later ones may follow from it) can name. Best fit took the
// recorded address's free block R over the one the model took, C, so in the
// real state C was smaller than the request, or larger than R (equal and
// above it), or R smaller:
//  - the model carved the block over a gap restored free (Note [Bytes live
//    through the recording]): no recorded block ever lies there, and best
//    fit did not take it, so it held a block live through the recording:
//    the gap is shown live, its bytes taken from those restored where no
//    recorded block lies;
//  - C ran to a segment end the inference chose (Note [Segment boundaries
//    where blocks meet]): the real free block there was bigger — it went on
//    into the next piece — so those segments are one: the boundary is
//    joined;
//  - C ended where a gap chosen to hold bytes live through the recording
//    begins: that gap was free (C larger), and the bytes go to the next
//    gap in the chosen order;
//  - R ran into a gap restored free: R was smaller, that gap was live;
//  - C ended where a gap proven live begins: the proven block begins later
//    in the gap (only its end is proven), by what makes C larger than R;
//  - C ran to an inferred segment's end: the segment ends later, at least
//    where the recorded address's free block would have been the best fit.
// A free block that begins at a chosen boundary is not joined: on the
// benchmark's warm trace that joined two segments the recording allocator
// had made apart (its replay was then exact at 2.5% of events).
// The replay then runs again from the corrected state, to a fixed point
// with the growths. A departure no rule explains is reported in
// WarmStart::undetermined, with the event, the recorded and the modelled
// address, so that an inexact reserved is never silent.
namespace {

// The first gap of `w` restored free that meets [begin, end); null when none.
const StartGap* FirstFreeGapIn(const WarmStart& w, int64_t begin, int64_t end) {
  auto it = std::upper_bound(w.gaps.begin(), w.gaps.end(), begin,
                             [](int64_t a, const StartGap& g) { return a < g.begin; });
  if (it != w.gaps.begin() && std::prev(it)->end > begin) --it;
  for (; it != w.gaps.end() && it->begin < end; ++it) {
    if (it->filled == 0) return &*it;
  }
  return nullptr;
}

// The gap of `w` whose live bytes begin at `addr`; null when none.
const StartGap* FilledGapFrom(const WarmStart& w, int64_t addr) {
  auto it = std::upper_bound(w.gaps.begin(), w.gaps.end(), addr,
                             [](int64_t a, const StartGap& g) { return a < g.begin; });
  if (it == w.gaps.begin()) return nullptr;
  const StartGap& g = *std::prev(it);
  if (g.filled == 0 || addr >= g.end) return nullptr;
  return (g.tail ? g.begin : g.end - g.filled) == addr ? &g : nullptr;
}

// Segment `i` of `w` ends too early: the real free block was at least the
// recorded one's (larger when it lay below it: best fit's ties go to the
// lower address).
bool GrowToRecorded(const WarmStart& w, size_t i, const AddressDeparture& d, WarmBudget* budget,
                    WarmCorrections* kept) {
  const InferredSegment& s = w.segments[i];
  if (d.recorded_free <= 0) return false;
  const int64_t need = AlignUp(d.placed + d.recorded_free + (d.placed < d.recorded ? kMinBlockSize : 0));
  const bool last = i + 1 == w.segments.size() || w.segments[i + 1].untouched;
  if ((!last && w.segments[i + 1].begin < need) || Bytes(need - s.end) > budget->spare) return false;
  int64_t& end = kept->grown_ends[s.begin];
  if (end >= need) return false;
  budget->spare -= Bytes(need - std::max(end, s.end));
  end = need;
  return true;
}

}  // namespace

bool CorrectForDeparture(const WarmStart& w, const AddressDeparture& d, WarmBudget* budget, WarmCorrections* kept) {
  if (!w.applied || d.new_segment) return false;
  // The model carved the block over a gap restored free: it was live.
  if (const StartGap* g = FirstFreeGapIn(w, d.placed, d.placed + d.block)) return FillFromBudget(*g, budget, kept);
  size_t i = 0;
  while (i < w.segments.size() && !(w.segments[i].begin <= d.placed && d.placed < w.segments[i].end)) ++i;
  const InferredSegment* s = i < w.segments.size() ? &w.segments[i] : nullptr;
  const bool ends_free = s != nullptr && !s->small && !s->untouched && d.free_end == s->end;
  if (ends_free && s->joinable_end) return kept->joined.insert(s->end).second;
  // The model's free block ends at a gap chosen to hold bytes live through
  // the recording: it was free, and the real free block larger.
  if (const StartGap* g = FilledGapFrom(w, d.free_end); g != nullptr && g->chosen) {
    return kept->freed.insert(g->begin).second;
  }

  // Best fit took the recorded address's free block, so it was no larger
  // than the one the model took: a gap it runs into was live.
  if (d.recorded_free > 0) {
    if (const StartGap* g = FirstFreeGapIn(w, d.recorded, d.recorded + d.recorded_free)) {
      return FillFromBudget(*g, budget, kept);
    }
  }
  // Or the model's free block was larger: it ends where a gap restored live
  // begins, and that gap's live bytes began later — enough later that best
  // fit prefers the recorded one (ties go to the lower address).
  if (const StartGap* g = FilledGapFrom(w, d.free_end); g != nullptr && !g->tail && d.recorded_free > 0) {
    const int64_t need = std::max<int64_t>(0, d.recorded_free - (d.free_end - d.placed)) + kMinBlockSize;
    if (g->filled - need < kMinBlockSize || Bytes(need) > budget->spare) return false;
    kept->front_free[g->begin] += need;
    budget->spare -= Bytes(need);
    budget->movable += Bytes(need);
    return true;
  }
  return ends_free && GrowToRecorded(w, i, d, budget, kept);
}

std::string DepartureUnexplained(const AddressDeparture& d) {
  return absl::StrFormat(
      "the replay departs from the recorded addresses at memory event %d (a %d-byte block recorded at 0x%x, placed "
      "at 0x%x%s): the start state that explains it is not recorded (blocks live through the whole recording at "
      "addresses it does not show, or segments the inference cannot place; from there the replay's addresses, and "
      "its totals where they differ, are the model's)",
      d.event, d.block, d.recorded, d.placed, d.new_segment ? " in a segment it mapped" : "");
}

}  // namespace gpusim
