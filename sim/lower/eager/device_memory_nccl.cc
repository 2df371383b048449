// NCCL connection buffers; see Note [NCCL buffers] in device_memory_nccl.h.
#include "sim/lower/eager/device_memory_nccl.h"

#include <algorithm>
#include <charconv>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "sim/base/status.h"

namespace gpusim {
namespace {

constexpr int64_t kCudaIpcMin = int64_t{2} << 20;      // src/include/comm.h CUDA_IPC_MIN
constexpr int64_t kDefaultLl = 8 * 512 * 8 * 16;       // DEFAULT_LL_BUFFSIZE
constexpr int64_t kDefaultLl128 = 120 * 640 * 8 * 8;   // DEFAULT_LL128_BUFFSIZE
constexpr int64_t kDefaultSimple = int64_t{1} << 22;   // DEFAULT_BUFFSIZE
constexpr int64_t kMaxChannels = 64;                    // src/include/device.h MAXCHANNELS
constexpr int64_t kAssumedChannels = kMaxChannels / 2;  // src/init.cc ringGraph->maxChannels
// sizeof(ncclRecvMem) and sizeof(ncclSendMem) (src/include/comm.h) are a few
// KiB: below CUDA_IPC_MIN, so they only make the rounding up; 4 KiB stands
// for them.
constexpr int64_t kConnectionHeader = 4096;
constexpr int64_t kMaxBytes = int64_t{1} << 40;

int64_t AlignUp(int64_t v, int64_t a) { return (v + a - 1) / a * a; }

bool ParseCount(absl::string_view s, int64_t* out) {
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return ec == std::errc() && p == s.data() + s.size() && !s.empty();
}

// meta `key` as a non-negative integer within [lo, hi]; `fallback` when absent.
absl::StatusOr<int64_t> MetaInt(const Trace& t, absl::string_view key, int64_t lo, int64_t hi, int64_t fallback) {
  const std::string* v = FindMeta(t, std::string_view(key.data(), key.size()));
  if (v == nullptr) return fallback;
  int64_t x = 0;
  if (!ParseCount(*v, &x) || x < lo || x > hi) {
    return absl::InvalidArgumentError(
        absl::StrCat("meta ", key, " '", *v, "': expected an integer from ", lo, " to ", hi));
  }
  return x;
}

}  // namespace

absl::StatusOr<NcclMemory> NcclDeviceMemory(const Trace& trace, const DeviceSpec& device) {
  NcclMemory m;
  std::set<int64_t> event_groups;
  for (size_t i = 0; i < trace.events.size(); ++i) {
    const TraceEvent& e = trace.events[i];
    if (e.type == EventType::kCollective && e.group > 1) event_groups.insert(e.group);
  }
  if (FindMeta(trace, "world_size") == nullptr) {
    if (!event_groups.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "collective events of ", *event_groups.rbegin(),
          " ranks without meta world_size: NCCL's buffers depend on the process groups, which a distributed "
          "recording names (python/gpusim_torch --world-size; traces/FORMAT.md 1.3)"));
    }
    return m;
  }
  m.distributed = true;
  ASSIGN_OR_RETURN(m.world_size, MetaInt(trace, "world_size", 1, int64_t{1} << 20, 1));
  ASSIGN_OR_RETURN(m.rank, MetaInt(trace, "rank", 0, m.world_size - 1, 0));
  ASSIGN_OR_RETURN(const int64_t ll, MetaInt(trace, "NCCL_LL_BUFFSIZE", 0, kMaxBytes, kDefaultLl));
  ASSIGN_OR_RETURN(const int64_t ll128, MetaInt(trace, "NCCL_LL128_BUFFSIZE", 0, kMaxBytes, kDefaultLl128));
  ASSIGN_OR_RETURN(const int64_t simple, MetaInt(trace, "NCCL_BUFFSIZE", 0, kMaxBytes, kDefaultSimple));
  ASSIGN_OR_RETURN(const int64_t max_ch, MetaInt(trace, "NCCL_MAX_NCHANNELS", 1, kMaxChannels, kMaxChannels));
  ASSIGN_OR_RETURN(const int64_t min_ch, MetaInt(trace, "NCCL_MIN_NCHANNELS", 1, kMaxChannels, 1));
  const int64_t channels = std::max(std::min(kAssumedChannels, max_ch), min_ch);
  // P2P read: the Simple buffer on the sender's side (p2pSendSetup).
  const bool read = device.cc_major == 8 && device.cc_minor == 0;
  const int64_t recv = AlignUp(kConnectionHeader + ll + ll128 + (read ? 0 : simple), kCudaIpcMin);
  const int64_t send = AlignUp(kConnectionHeader + (read ? simple : 0), kCudaIpcMin);
  std::set<int64_t> sizes;
  for (const auto& [key, value] : trace.meta) {
    if (key.rfind("comm.", 0) != 0) continue;
    NcclCommunicator c;
    c.id = key.substr(5);
    std::set<int64_t> ranks;
    for (absl::string_view r : absl::StrSplit(value, ',')) {
      int64_t x = 0;
      if (!ParseCount(r, &x) || x >= m.world_size || !ranks.insert(x).second) {
        return absl::InvalidArgumentError(absl::StrCat(
            "meta ", key, " '", value, "': expected the group's distinct global ranks (0 to ", m.world_size - 1,
            ") separated by commas"));
      }
    }
    if (!ranks.contains(m.rank)) {
      return absl::InvalidArgumentError(
          absl::StrCat("meta ", key, " '", value, "': the recorded rank ", m.rank, " is not in the group"));
    }
    c.ranks = static_cast<int64_t>(ranks.size());
    sizes.insert(c.ranks);
    if (c.ranks > 1) {
      c.channels = channels;
      c.per_channel = Bytes(recv + send);
      c.bytes = Bytes(channels * (recv + send));
    }
    m.total += c.bytes;
    m.communicators.push_back(std::move(c));
  }
  for (int64_t g : event_groups) {
    if (!sizes.contains(g)) {
      return absl::InvalidArgumentError(absl::StrCat("a collective event of ", g,
                                                     " ranks, and no meta comm.ID names a process group of that "
                                                     "size (traces/FORMAT.md 1.3)"));
    }
  }
  const bool bounded = FindMeta(trace, "NCCL_MAX_NCHANNELS") != nullptr ||
                       FindMeta(trace, "NCCL_MIN_NCHANNELS") != nullptr;
  m.assumption = absl::StrCat(
      "NCCL channels per communicator ASSUMED ", channels,
      bounded ? " (32, the ring search's cap, bounded by the recorded NCCL_MIN/MAX_NCHANNELS)"
              : " (the ring search's cap, src/init.cc ringGraph->maxChannels = MAXCHANNELS / 2)",
      "; NCCL finds the count on the machine's topology (src/graph/search.cc ncclTopoCompute, duplicated in "
      "connect.cc), which a recording does not carry; ring connections only (tree, NVLS and CollNet buffers "
      "not modelled), inter-node connections sized as P2P ones");
  return m;
}

}  // namespace gpusim
