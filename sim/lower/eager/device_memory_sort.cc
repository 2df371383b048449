#include "sim/lower/eager/device_memory_sort.h"

#include <algorithm>
#include <charconv>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "sim/base/status.h"
#include "sim/config/cublas_workspace.h"
#include "sim/lower/eager/device_memory.h"

namespace gpusim {
namespace {

// cub/util_arch.cuh RegBoundScaling: a policy's nominal 4-byte items per
// thread and block threads scaled to a `type_bytes` type; the tile size.
int64_t RegBoundTile(int nominal_threads, int nominal_items, int type_bytes) {
  const int items = std::max(1, nominal_items * 4 / std::max(4, type_bytes));
  const int smem_threads = static_cast<int>(DivUp(48 * 1024 / (type_bytes * items), 32) * 32);
  return static_cast<int64_t>(std::min(nominal_threads, smem_threads)) * items;
}

// CUB AliasTemporaries: each allocation rounded up to 256 B, plus 255.
int64_t AliasTemporaries(std::initializer_list<int64_t> sizes) {
  int64_t total = 0;
  for (int64_t s : sizes) total += (s + 255) / 256 * 256;
  return total + 255;
}

constexpr int64_t kInt64 = 8;

// Numbers an op's temporaries and appends their allocation and free steps.
class Slots {
 public:
  int Alloc(std::vector<TempStep>& into, Bytes size, std::string what) {
    into.push_back(TempStep{true, next_, size, std::move(what)});
    return next_++;
  }
  static void Free(std::vector<TempStep>& into, int slot) { into.push_back(TempStep{false, slot, Bytes(0), ""}); }

 private:
  int next_ = 0;
};

}  // namespace

std::optional<std::pair<int, int>> MajorMinor(std::string_view v) { return VersionMajorMinor(v); }

int CubNumBits(uint64_t max_key) {
  int bits = 1;
  while (max_key > 1) {
    max_key >>= 1;
    ++bits;
  }
  return bits;
}

absl::StatusOr<std::pair<int, int>> CudaOfBuild(const std::string& torch_version, const std::string& torch_cuda) {
  std::optional<std::pair<int, int>> cuda = MajorMinor(torch_cuda);
  if (cuda.has_value()) return *cuda;
  std::optional<std::pair<int, int>> v = MajorMinor(torch_version);
  if (!v.has_value()) {
    return absl::InvalidArgumentError(
        absl::StrCat("meta torch_version: expected MAJOR.MINOR..., got '", torch_version, "'"));
  }
  return *v >= std::make_pair(2, 1) ? std::make_pair(12, 1) : std::make_pair(11, 7);
}

absl::StatusOr<CubBuild> CubBuildFor(const std::string& torch_version, const std::string& torch_cuda) {
  ASSIGN_OR_RETURN(auto cuda, CudaOfBuild(torch_version, torch_cuda));
  // CUDA 11 ships CUB 1.x: `int num_items` and no sm_90 tuning.
  const bool cub2 = cuda.first >= 12;
  CubBuild cub;
  cub.offset_bytes = cub2 ? 8 : 4;
  cub.has_sm90_policy = cub2;
  return cub;
}

absl::StatusOr<Bytes> CubRadixSortPairsTempBytes(int64_t num_items, int key_bytes, int value_bytes, int end_bit,
                                                 const DeviceSpec& device, const CubBuild& cub) {
  if (key_bytes < 4 || key_bytes > 8 || value_bytes < 0 || value_bytes > 16 || end_bit < 1 || end_bit > 64 ||
      num_items < 0 || num_items > (int64_t{1} << 40)) {
    return absl::InvalidArgumentError(absl::StrCat("radix sort of ", num_items, " pairs of ", key_bytes, "-byte keys, ",
                                                   value_bytes, "-byte values on ", end_bit, " bits: out of range"));
  }
  const int cc = device.cc_major * 10 + device.cc_minor;
  if (cc < 70) {
    return absl::InvalidArgumentError(absl::StrCat(
        "device '", device.name, "' (", device.source_file, ") has compute capability ", device.cc_major, ".",
        device.cc_minor, "; CUB radix-sort storage is modelled from sm_70 (DeviceRadixSortPolicy Policy700)"));
  }
  if (num_items == 0) return Bytes(1);
  const int dominant = std::max(key_bytes, value_bytes);
  const bool keys_only = value_bytes == 0;
  const bool off64 = cub.offset_bytes == 8;
  // DeviceRadixSortPolicy: SingleTilePolicy <256, 19> on sm_70, 80, 90.
  if (num_items <= RegBoundTile(256, 19, dominant)) return Bytes(1);  // InvokeSingleTile
  // OnesweepPolicy (ONESWEEP: keys of at least 4 bytes).
  int64_t tile = 0;
  if (cc >= 90 && cub.has_sm90_policy) {
    int items = 0;
    if (key_bytes == 4) {
      items = keys_only ? 20 - (off64 ? 1 : 0) : (value_bytes < 8 ? (off64 ? 17 : 23) : (off64 ? 29 : 30));
    } else {
      items = value_bytes < 8 ? 30 : 24;  // OnesweepPolicyKey64
    }
    tile = RegBoundTile(384, items, dominant);
  } else if (cc >= 80) {
    tile = RegBoundTile(384, off64 && key_bytes == 4 && !keys_only ? 17 : 21, dominant);
  } else {
    tile = RegBoundTile(256, key_bytes == 4 && value_bytes == 4 ? 46 : 23, dominant);
  }
  constexpr int kRadixBits = 8, kDigits = 1 << kRadixBits;
  const int64_t portion = ((int64_t{1} << 28) - 1) / tile * tile;
  const int64_t passes = DivUp(end_bit, kRadixBits);
  const int64_t portions = DivUp(num_items, portion);
  const int64_t max_blocks = DivUp(std::min(num_items, portion), tile);
  const bool extra = passes > 1;  // is_overwrite_okay is false for SortPairs
  return Bytes(AliasTemporaries({
      portions * passes * kDigits * cub.offset_bytes,  // bins
      max_blocks * kDigits * 4,                        // lookback (AtomicOffsetT int)
      extra ? num_items * key_bytes : 0,               // extra key buffer
      extra ? num_items * value_bytes : 0,             // extra value buffer
      portions * passes * 4,                           // counters
  }));
}

absl::StatusOr<OpTemporaries> IndexPutTemporaries(const std::vector<int64_t>& dims, bool deterministic,
                                                  const std::string& torch_version, const CubBuild& cub,
                                                  const DeviceSpec& device) {
  OpTemporaries t;
  if (dims.size() == 2) {
    t.not_modelled = "recorded by an older collector (2 facts); re-record to size it";
    return t;
  }
  if (dims.size() != 12) {
    return absl::InvalidArgumentError(absl::StrCat("expected 12 index_put facts, got ", dims.size()));
  }
  const int64_t n = dims[0], tensors = dims[1], ints = dims[2], slice = dims[3], before = dims[4],
                max_key = dims[5], self_copy = dims[8], value_copy = dims[9];
  const bool unsafe = dims[6] != 0, accumulate = dims[7] != 0, adjacent = dims[10] != 0, masks = dims[11] != 0;
  constexpr int64_t kMax = int64_t{1} << 40;
  if (n < 0 || n > kMax || tensors < 1 || tensors > 64 || ints < 0 || ints > tensors || slice < 0 || slice > kMax ||
      before < 0 || before > kMax || max_key < 0 || max_key > kMax || self_copy < 0 || self_copy > kMax ||
      value_copy < 0 || value_copy > kMax) {
    return absl::InvalidArgumentError(absl::StrCat("index_put facts out of range: ", absl::StrJoin(dims, ",")));
  }
  if (!accumulate && !deterministic) return t;  // index_put_stub: no sort
  if (masks) {
    t.not_modelled = "mask indices (their count is data: expandTensors runs nonzero)";
    return t;
  }
  if (!adjacent) {
    t.not_modelled = "non-adjacent indices (self transposed to the front, transposeToFrontAndInvPerm)";
    return t;
  }
  const std::optional<std::pair<int, int>> v = MajorMinor(torch_version);
  const bool v2 = v.has_value() && v->first >= 2;
  Slots slots;
  auto alloc = [&](std::vector<TempStep>& into, Bytes size, std::string what) {
    return slots.Alloc(into, size, std::move(what));
  };
  auto free_slot = &Slots::Free;
  std::vector<TempStep>& b = t.before;
  const int self_slot = self_copy > 0 ? alloc(b, Bytes(self_copy), "contiguous self") : -1;
  std::vector<int> longs;
  for (int64_t i = 0; i < ints; ++i) longs.push_back(alloc(b, Bytes(n * kInt64), "int64 copy of an int32 index"));
  int linear = -1;
  for (int64_t i = 0; i < tensors; ++i) {
    if (!unsafe && n > 0) {
      // wrapIndexOnce's range check: full reductions of the index.
      const std::vector<int64_t> facts = {1, n, 1, 1, n > 1 ? 1 : 0, 1, 1, v2 ? 16 : 8, kInt64};
      absl::StatusOr<ReduceStaging> r = ReduceConfigFor(facts, device);
      if (!r.ok()) return r.status();
      auto staging = [&](const std::string& what) {
        if (!r->global) return;
        const int buf = alloc(b, r->buffer, what + " reduction staging");
        const int sem = alloc(b, r->semaphores, what + " reduction semaphores");
        free_slot(b, sem);  // DataPtrs die in reverse order
        free_slot(b, buf);
      };
      if (v2) {  // at::aminmax: min and max, freed when wrapIndexOnce returns
        const int lo = alloc(b, Bytes(kInt64), "index aminmax min");
        const int hi = alloc(b, Bytes(kInt64), "index aminmax max");
        staging("index aminmax");
        free_slot(b, hi);
        free_slot(b, lo);
      } else {  // index.max().item(), then index.min().item()
        for (const char* what : {"index max", "index min"}) {
          const int out = alloc(b, Bytes(kInt64), what);
          staging(what);
          free_slot(b, out);
        }
      }
    }
    const int rem = alloc(b, Bytes(n * kInt64), "index remainder");
    const int prod = alloc(b, Bytes(n * kInt64), linear < 0 ? "linear index" : "index times stride");
    free_slot(b, rem);
    if (linear < 0) {
      linear = prod;
    } else {
      free_slot(b, prod);  // linearIndex += index
    }
  }
  for (int s : longs) free_slot(b, s);
  const int value_slot = value_copy > 0 ? alloc(b, Bytes(value_copy), "expanded contiguous value") : -1;
  if (n > 0 && slice > 0) {
    const int sorted = alloc(b, Bytes(n * kInt64), "sorted_indices");
    const int orig = alloc(b, Bytes(n * kInt64), "orig_indices");
    const int range = alloc(b, Bytes(n * kInt64), "range");
    ASSIGN_OR_RETURN(Bytes scratch, CubRadixSortPairsTempBytes(n, 8, 8, CubNumBits(static_cast<uint64_t>(max_key)),
                                                                device, cub));
    free_slot(b, alloc(b, scratch, "CUB radix sort storage"));
    free_slot(t.after, range);
    free_slot(t.after, orig);
    free_slot(t.after, sorted);
  }
  if (value_slot >= 0) free_slot(t.after, value_slot);
  free_slot(t.after, linear);
  if (self_slot >= 0) free_slot(t.after, self_slot);
  return t;
}

absl::StatusOr<OpTemporaries> EmbeddingBackwardTemporaries(const std::vector<int64_t>& dims, const CubBuild& cub,
                                                           const DeviceSpec& device) {
  OpTemporaries t;
  if (dims.size() == 6) {
    t.not_modelled = "recorded by an older collector (6 facts); re-record to size it";
    return t;
  }
  if (dims.size() != 8) {
    return absl::InvalidArgumentError(absl::StrCat("expected 8 embedding_dense_backward facts, got ", dims.size()));
  }
  const int64_t n = dims[0], weights = dims[1], dim = dims[2], idx = dims[3], elem = dims[4], grad_copy = dims[6],
                idx_copy = dims[7];
  const bool scale = dims[5] != 0;
  constexpr int64_t kMax = int64_t{1} << 40;
  if (n < 0 || n > kMax || weights < 0 || weights > kMax || dim < 0 || dim > kMax || (idx != 4 && idx != 8) ||
      elem < 1 || elem > 8 || grad_copy < 0 || grad_copy > kMax || idx_copy < 0 || idx_copy > kMax) {
    return absl::InvalidArgumentError(
        absl::StrCat("embedding_dense_backward facts out of range: ", absl::StrJoin(dims, ",")));
  }
  if (scale) {
    t.not_modelled = "scale_grad_by_freq (counts through CUB scan-by-key)";
    return t;
  }
  Slots slots;
  auto alloc = [&](std::vector<TempStep>& into, Bytes size, std::string what) {
    return slots.Alloc(into, size, std::move(what));
  };
  auto free_slot = &Slots::Free;
  std::vector<TempStep>& b = t.before;
  const int indices_slot = idx_copy > 0 ? alloc(b, Bytes(idx_copy), "contiguous indices") : -1;
  const int grad_slot = grad_copy > 0 ? alloc(b, Bytes(grad_copy), "contiguous grad") : -1;
  std::vector<int> at_end;  // freed after the kernel, first listed first
  if (n > 3072) {
    if (cub.offset_bytes != 8) {
      t.before.clear();
      t.not_modelled = "CUDA 11 builds size the segment buffers by the distinct indices (thrust unique_by_key)";
      return t;
    }
    const int sorted = alloc(b, Bytes(n * idx), "sorted_indices");
    const int orig = alloc(b, Bytes(n * idx), "orig_indices");
    const int range = alloc(b, Bytes(n * idx), "range");
    ASSIGN_OR_RETURN(Bytes scratch, CubRadixSortPairsTempBytes(n, static_cast<int>(idx), static_cast<int>(idx),
                                                                static_cast<int>(idx * 8), device, cub));
    free_slot(b, alloc(b, scratch, "CUB radix sort storage"));
    free_slot(b, range);
    const int64_t segments = std::min(n, weights);
    const int64_t partials = n / 10 + segments;  // NROWS_PER_THREAD
    const int acc = elem == 8 ? 8 : 4;
    const int offsets = alloc(b, Bytes(n * idx), "segment_offsets");
    const int count = alloc(b, Bytes(kInt64), "segment count");
    const int per = alloc(b, Bytes(segments * idx), "partials_per_segment");
    const int per_off = alloc(b, Bytes(segments * idx), "partials_per_segment_offset");
    const int pcount = alloc(b, Bytes(kInt64), "partial segment count");
    const int poff = alloc(b, Bytes(partials * idx), "partial_segment_offset");
    const int sums = alloc(b, Bytes(partials * dim * acc), "grad_weight_per_segment");
    at_end = {sums, poff, pcount, per_off, per, count, offsets, orig, sorted};
    t.not_modelled = "CUB unique_by_key and exclusive_sum storage (DeviceSelect / DeviceScan tile state)";
  }
  for (int s : at_end) free_slot(t.after, s);
  if (grad_slot >= 0) free_slot(t.after, grad_slot);
  if (indices_slot >= 0) free_slot(t.after, indices_slot);
  return t;
}

}  // namespace gpusim
