// Import speed of recorded traces: the Kineto importer on the largest shared
// trace (HTA torch.compile training step, 53.7 MB of JSON, 3.0 MB gzip),
// reported as MB/s of decompressed JSON, plus peak RSS; and ToNativeTrace.
// Target: under 1 s for that file. Figures: sim/import/README.md.
// Also the memory-snapshot pickle reader (sim/import/pickle.h) on the
// largest snapshot pickle in the repo, as MB/s of pickle; figures against
// Python's pickle.load in docs/replay.md.
#include <sys/resource.h>
#include <sys/stat.h>

#include <string>

#include "benchmark/benchmark.h"

#include "sim/import/byte_source.h"
#include "sim/import/kineto.h"
#include "sim/import/pickle.h"
#include "sim/import/recorded_trace.h"
#include "sim/import/snapshot.h"
#include "sim/import/trace_path.h"

namespace gpusim {
namespace {


const char* const kTraces[] = {
    "hta_df_index_resolver_v100_rank1.pt.trace.json.gz",      // 53.7 MB unpacked
    "tracelens_h100_owlv2-large_inference.pt.trace.json.gz",  // 55.6 MB unpacked
};

int64_t UnpackedSize(const std::string& path) {
  auto src = OpenByteSource(path);
  if (!src.ok()) return 0;
  std::string buf(1 << 20, '\0');
  int64_t n = 0;
  while (true) {
    auto got = (*src)->Read(buf.data(), buf.size());
    if (!got.ok() || *got == 0) break;
    n += static_cast<int64_t>(*got);
  }
  return n;
}

void SetRss(benchmark::State& state) {
  rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  state.counters["peak_rss_MB"] = static_cast<double>(ru.ru_maxrss) / 1024.0;
}

void BM_ImportKineto(benchmark::State& state) {
  const std::string path = RecordedTracePath(kTraces[state.range(0)]);
  if (path.empty()) {
    state.SkipWithError("trace not found in traces/recorded/ or ../shared/traces/");
    return;
  }
  const int64_t bytes = UnpackedSize(path);
  int64_t events = 0;
  for (auto _ : state) {
    auto t = ImportKinetoTrace(path);
    if (!t.ok()) {
      state.SkipWithError(std::string(t.status().message()).c_str());
      return;
    }
    events = static_cast<int64_t>(t->memory_events.size() + t->ops.size());
    benchmark::DoNotOptimize(t);
  }
  state.SetBytesProcessed(bytes * state.iterations());
  state.SetLabel(kTraces[state.range(0)]);
  state.counters["kept_events"] = static_cast<double>(events);
  SetRss(state);
}
BENCHMARK(BM_ImportKineto)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond);

// Decompression alone, to see what share of the import it is.
void BM_GunzipOnly(benchmark::State& state) {
  const std::string path = RecordedTracePath(kTraces[0]);
  if (path.empty()) {
    state.SkipWithError("trace not found");
    return;
  }
  int64_t bytes = 0;
  for (auto _ : state) bytes = UnpackedSize(path);
  state.SetBytesProcessed(bytes * state.iterations());
}
BENCHMARK(BM_GunzipOnly)->Unit(benchmark::kMillisecond);

void BM_ToNativeTrace(benchmark::State& state) {
  const std::string path = RecordedTracePath(kTraces[0]);
  auto t = path.empty() ? absl::StatusOr<RecordedTrace>(absl::NotFoundError(path))
                        : ImportKinetoTrace(path);
  if (!t.ok()) {
    state.SkipWithError(std::string(t.status().message()).c_str());
    return;
  }
  for (auto _ : state) {
    auto n = ToNativeTrace(*t);
    benchmark::DoNotOptimize(n);
  }
  state.counters["events/s"] = benchmark::Counter(
      static_cast<double>(t->memory_events.size()) * state.iterations(),
      benchmark::Counter::kIsRate);
}
BENCHMARK(BM_ToNativeTrace)->Unit(benchmark::kMillisecond);

// The largest snapshot pickle in the repo (1,485,293 B unpacked, protocol
// 4, 37,333 memo entries referenced from 224,826 places: shared stack
// frames).
constexpr char kSnapshotPickle[] = GPUSIM_SOURCE_DIR "/validation/h200_2026-12-04/snapshots/llama_gpu_ckpt.pickle.gz";

std::string Unpacked(const std::string& path) {
  std::string out;
  auto src = OpenByteSource(path);
  if (!src.ok()) return out;
  std::string buf(1 << 20, '\0');
  while (true) {
    auto got = (*src)->Read(buf.data(), buf.size());
    if (!got.ok() || *got == 0) break;
    out.append(buf.data(), *got);
  }
  return out;
}

// The whole read of a pickle already in memory (ParseSnapshotPickle): the
// pickle reader, its checks, the snapshot reader on its values.
void BM_ImportSnapshotPickle(benchmark::State& state) {
  const std::string bytes = Unpacked(kSnapshotPickle);
  if (bytes.empty()) {
    state.SkipWithError("snapshot pickle not found");
    return;
  }
  size_t events = 0;
  for (auto _ : state) {
    auto s = ParseSnapshotPickle(bytes, "llama_gpu_ckpt.pickle");
    if (!s.ok()) {
      state.SkipWithError(std::string(s.status().message()).c_str());
      return;
    }
    events = s->trace.memory_events.size();
    benchmark::DoNotOptimize(s);
  }
  state.SetBytesProcessed(static_cast<int64_t>(bytes.size()) * state.iterations());
  state.counters["trace_entries"] = static_cast<double>(events);
  SetRss(state);
}
BENCHMARK(BM_ImportSnapshotPickle)->Unit(benchmark::kMillisecond);

// Its parts: decoding the opcodes (PlainPickle::Read); that plus the checks
// (Check, what ParseSnapshotPickle runs); that plus writing the JSON instead
// (WriteJson, what the snapshot reader read before Note [One reader, two
// sources]).
void BM_PickleDecode(benchmark::State& state) {
  const std::string bytes = Unpacked(kSnapshotPickle);
  const int64_t what = state.range(0);
  size_t json_bytes = 0;
  for (auto _ : state) {
    auto p = import_internal::PlainPickle::Read(bytes, "llama_gpu_ckpt.pickle");
    if (!p.ok()) {
      state.SkipWithError(std::string(p.status().message()).c_str());
      return;
    }
    if (what == 1 && !(*p)->Check().ok()) {
      state.SkipWithError("Check failed");
      return;
    }
    if (what == 2) {
      std::string out;
      if (!(*p)->WriteJson(&out).ok()) {
        state.SkipWithError("WriteJson failed");
        return;
      }
      json_bytes = out.size();
      benchmark::DoNotOptimize(out);
    }
    benchmark::DoNotOptimize(p);
  }
  state.SetBytesProcessed(static_cast<int64_t>(bytes.size()) * state.iterations());
  state.SetLabel(what == 0 ? "read" : what == 1 ? "read + Check" : "read + WriteJson");
  if (what == 2) state.counters["json_MB"] = static_cast<double>(json_bytes) / 1e6;
}
BENCHMARK(BM_PickleDecode)->Arg(0)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace gpusim
