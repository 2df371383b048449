#include "sim/replay/event_cache.h"

#include <algorithm>

namespace gpusim {
namespace replay_internal {

namespace {

// The flags byte of a packed event (Note [Later passes from memory]).
enum : uint8_t {
  kFree = 1,             // kind kFree (else kAlloc)
  kAddress = 2,          // an address: its difference from the last one follows
  kAllocated = 4,        // a Total Allocated
  kAllocatedFollows = 8, // ... its difference follows (else: the last one plus or minus the bytes)
  kReserved = 16,        // a Total Reserved
  kReservedFollows = 32, // ... its difference follows (else: the last one)
  kPlain = 64,           // index and Ev Idx one past the last, the same device and type (else they follow)
  // Note [Paired ops kept with the events]: an alloc's implicit free (its
  // buffer's distance back from the next id follows), or a free of a head
  // block (else a free's distance follows).
  kOpsExtra = 128,
};

inline uint8_t* PutVarint(uint8_t* p, uint64_t v) {
  while (v >= 0x80) {
    *p++ = static_cast<uint8_t>(v) | 0x80;
    v >>= 7;
  }
  *p++ = static_cast<uint8_t>(v);
  return p;
}
// A difference, zigzagged so that a small negative one is short too.
inline uint8_t* PutDelta(uint8_t* p, uint64_t now, uint64_t last) {
  const uint64_t d = now - last;
  return PutVarint(p, (d << 1) ^ (0 - (d >> 63)));
}
inline uint64_t GetVarint(const uint8_t*& p) {
  // Most values take one or two bytes.
  uint64_t b = *p++;
  if (b < 0x80) return b;
  uint64_t v = b & 0x7f;
  b = *p++;
  v |= (b & 0x7f) << 7;
  int shift = 14;
  while (b >= 0x80) {
    b = *p++;
    v |= (b & 0x7f) << shift;
    shift += 7;
  }
  return v;
}
inline uint64_t GetDelta(const uint8_t*& p, uint64_t last) {
  const uint64_t z = GetVarint(p);
  return last + ((z >> 1) ^ (0 - (z & 1)));
}

// The Total Allocated the event implies: the last one plus or minus its bytes.
inline uint64_t Implied(uint64_t last, bool free, uint64_t size) { return free ? last - size : last + size; }

}  // namespace

bool MemoryEventCache::NewChunk() {
  const int64_t size = std::min(kChunk, cap_bytes_ - bytes_);
  if (size < kMaxEvent) return false;
  chunks_.push_back({std::unique_ptr<uint8_t[]>(new uint8_t[static_cast<size_t>(size)]), 0});
  bytes_ += size;
  p_ = chunks_.back().bytes.get();
  end_ = p_ + size;
  return true;
}

void MemoryEventCache::Drop() {
  complete_ = false;
  chunks_.clear();
  chunks_.shrink_to_fit();
  bytes_ = 0;
  events_ = 0;
  p_ = end_ = nullptr;
}

namespace {

// The ops the pairing makes of a Kineto event, in the form the cache keeps
// (Note [Paired ops kept with the events]): an alloc of the next id, after
// a free of an earlier one or not; a free of the next id (a head block) or
// of an earlier one.
bool PairedAsKept(const RecordedMemoryEvent& m, const std::vector<MemoryOp>& ops, bool head, BufferId next_id) {
  auto free_of_earlier = [&](const MemoryOp& op) {
    return op.type == EventType::kFree && op.stream == 0 && op.size == Bytes(0) && op.buffer >= 0 &&
           op.buffer < next_id;
  };
  if (m.kind == MemoryEventKind::kAlloc) {
    if (head || ops.empty() || ops.size() > 2) return false;
    const MemoryOp& a = ops.back();
    return a.type == EventType::kAlloc && a.stream == 0 && a.buffer == next_id && a.size == m.size &&
           (ops.size() == 1 || free_of_earlier(ops[0]));
  }
  if (ops.size() != 1) return false;
  if (!head) return free_of_earlier(ops[0]);
  const MemoryOp& f = ops[0];
  return f.type == EventType::kFree && f.stream == 0 && f.size == Bytes(0) && f.buffer == next_id;
}

}  // namespace

void MemoryEventCache::Add(const RecordedMemoryEvent& m, int64_t index, const std::vector<MemoryOp>& ops,
                           bool head) {
  if (!complete_) return;
  if ((m.kind != MemoryEventKind::kAlloc && m.kind != MemoryEventKind::kFree) || m.stream != -1 ||
      m.category.has_value() || m.previous_category.has_value() || !m.stack.empty() ||
      !PairedAsKept(m, ops, head, last_.next_id) || (end_ - p_ < kMaxEvent && !NewChunk())) {
    Drop();
    return;
  }
  const bool free = m.kind == MemoryEventKind::kFree;
  const uint64_t size = static_cast<uint64_t>(m.size.value());
  const uint64_t i = static_cast<uint64_t>(index), seq = static_cast<uint64_t>(m.seq);
  uint8_t flags = free ? kFree : 0;
  if (m.address.has_value()) flags |= kAddress;
  if (m.total_allocated.has_value()) {
    flags |= kAllocated;
    if (static_cast<uint64_t>(m.total_allocated->value()) != Implied(last_.allocated, free, size)) {
      flags |= kAllocatedFollows;
    }
  }
  if (m.total_reserved.has_value()) {
    flags |= kReserved;
    if (static_cast<uint64_t>(m.total_reserved->value()) != last_.reserved) flags |= kReservedFollows;
  }
  // An implicit free, or a head block freed.
  const bool extra = free ? head : ops.size() == 2;
  if (extra) flags |= kOpsExtra;
  const bool plain = i == last_.index + 1 && seq == last_.seq + 1 && m.device == last_.device &&
                     m.device_type == last_.device_type;
  if (plain) flags |= kPlain;
  uint8_t* p = p_;
  *p++ = flags;
  if (!plain) {
    p = PutDelta(p, i, last_.index + 1);
    p = PutDelta(p, seq, last_.seq + 1);
    p = PutDelta(p, static_cast<uint64_t>(int64_t{m.device}), static_cast<uint64_t>(int64_t{last_.device}));
    p = PutDelta(p, static_cast<uint64_t>(int64_t{m.device_type}), static_cast<uint64_t>(int64_t{last_.device_type}));
    last_.device = m.device;
    last_.device_type = m.device_type;
  }
  last_.index = i;
  last_.seq = seq;
  const uint64_t time = static_cast<uint64_t>(m.time.ns());
  p = PutDelta(p, time, last_.time);
  last_.time = time;
  if (m.address.has_value()) {
    const uint64_t a = static_cast<uint64_t>(*m.address);
    p = PutDelta(p, a, last_.address);
    last_.address = a;
  }
  p = PutVarint(p, size);
  if (m.total_allocated.has_value()) {
    const uint64_t a = static_cast<uint64_t>(m.total_allocated->value());
    if (flags & kAllocatedFollows) p = PutDelta(p, a, last_.allocated);
    last_.allocated = a;
  }
  if (m.total_reserved.has_value()) {
    const uint64_t r = static_cast<uint64_t>(m.total_reserved->value());
    if (flags & kReservedFollows) p = PutDelta(p, r, last_.reserved);
    last_.reserved = r;
  }
  // The freed buffer's distance back from the next id, when it is not a
  // head block's (which is the next id).
  if (free ? !head : extra) p = PutVarint(p, static_cast<uint64_t>(last_.next_id - 1 - ops[0].buffer));
  if (!free || head) ++last_.next_id;
  p_ = p;
  chunks_.back().used = static_cast<size_t>(p - chunks_.back().bytes.get());
  ++events_;
}

bool MemoryEventCache::Reader::Next(RecordedMemoryEvent& m, int64_t& index, MemoryOp (&ops)[2], size_t& n_ops,
                                     bool& head) {
  if (p_ == end_) {
    if (chunk_ >= cache_.chunks_.size()) return false;
    const Chunk& c = cache_.chunks_[chunk_++];
    p_ = c.bytes.get();
    end_ = p_ + c.used;
    if (p_ == end_) return false;  // only the last chunk can be empty
  }
  const uint8_t* p = p_;
  const uint8_t flags = *p++;
  const bool free = flags & kFree;
  if (flags & kPlain) {
    ++last_.index;
    ++last_.seq;
  } else {
    last_.index = GetDelta(p, last_.index + 1);
    last_.seq = GetDelta(p, last_.seq + 1);
    last_.device = static_cast<int32_t>(GetDelta(p, static_cast<uint64_t>(int64_t{last_.device})));
    last_.device_type = static_cast<int32_t>(GetDelta(p, static_cast<uint64_t>(int64_t{last_.device_type})));
  }
  last_.time = GetDelta(p, last_.time);
  m.kind = free ? MemoryEventKind::kFree : MemoryEventKind::kAlloc;
  m.time = SimTime(static_cast<int64_t>(last_.time));
  if (flags & kAddress) {
    last_.address = GetDelta(p, last_.address);
    m.address = static_cast<int64_t>(last_.address);
  } else {
    m.address.reset();
  }
  const uint64_t size = GetVarint(p);
  m.size = Bytes(static_cast<int64_t>(size));
  if (flags & kAllocated) {
    last_.allocated = flags & kAllocatedFollows ? GetDelta(p, last_.allocated) : Implied(last_.allocated, free, size);
    m.total_allocated = Bytes(static_cast<int64_t>(last_.allocated));
  } else {
    m.total_allocated.reset();
  }
  if (flags & kReserved) {
    if (flags & kReservedFollows) last_.reserved = GetDelta(p, last_.reserved);
    m.total_reserved = Bytes(static_cast<int64_t>(last_.reserved));
  } else {
    m.total_reserved.reset();
  }
  m.stream = -1;
  m.device = last_.device;
  m.device_type = last_.device_type;
  m.seq = static_cast<int64_t>(last_.seq);
  m.category.reset();
  m.previous_category.reset();
  m.stack.clear();
  index = static_cast<int64_t>(last_.index);
  n_ops = 0;
  const bool extra = flags & kOpsExtra;
  head = free && extra;
  if (free ? !head : extra) {
    ops[n_ops++] = {EventType::kFree, 0, last_.next_id - 1 - static_cast<BufferId>(GetVarint(p)), Bytes(0)};
  }
  if (head) ops[n_ops++] = {EventType::kFree, 0, last_.next_id, Bytes(0)};
  if (!free) ops[n_ops++] = {EventType::kAlloc, 0, last_.next_id, m.size};
  if (!free || head) ++last_.next_id;
  p_ = p;
  return true;
}

}  // namespace replay_internal
}  // namespace gpusim
