// Tests of the Kineto / Chrome-trace importer (sim/import/kineto.h) and of
// ToNativeTrace on real recorded traces (traces/recorded/README.md), plus
// malformed and truncated inputs.
#include <sys/stat.h>
#include <zlib.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "gtest/gtest.h"

#include "sim/import/byte_source.h"
#include "sim/import/import.h"
#include "sim/import/kineto.h"
#include "sim/import/recorded_trace.h"
#include "sim/trace/validate.h"
#include "sim/import/trace_path.h"

namespace gpusim::import_kineto_test {
namespace {


#define REQUIRE_TRACE(var, name)                                                       \
  const std::string var = RecordedTracePath(name);                                             \
  if (var.empty()) {                                                                   \
    GTEST_SKIP() << name << " is in neither traces/recorded/ nor ../shared/traces/"; \
  }

constexpr char kBert[] = "tracelens_h100_bert-small_inference.pt.trace.json.gz";
constexpr char kOwl[] = "tracelens_h100_owlv2-large_inference.pt.trace.json.gz";
constexpr char kMi300x[] = "tracelens_mi300x_rocm_normalization_coldstart.pt.trace.json.gz";
constexpr char kHta[] = "hta_df_index_resolver_v100_rank1.pt.trace.json.gz";
constexpr char kLegacy[] = "kineto_tbplugin_resnet50_v100_legacy_noaddr.pt.trace.json.gz";

// The recorded invariants of a trace with Addr and totals: sorted by
// (ts, Ev Idx), every free pairs with an earlier live alloc at the same Addr
// and of the same size, and Total Allocated moves by exactly Bytes.
void ExpectRecordedInvariants(const RecordedTrace& t) {
  std::map<int64_t, int64_t> live;  // addr -> bytes
  std::optional<Bytes> prev_total;
  for (size_t i = 0; i < t.memory_events.size(); ++i) {
    const RecordedMemoryEvent& m = t.memory_events[i];
    ASSERT_TRUE(m.address.has_value()) << i;
    ASSERT_TRUE(m.total_allocated.has_value()) << i;
    if (i > 0) {
      const RecordedMemoryEvent& p = t.memory_events[i - 1];
      ASSERT_TRUE(p.time < m.time || (p.time == m.time && p.seq < m.seq)) << i;
    }
    if (m.kind == MemoryEventKind::kAlloc) {
      ASSERT_FALSE(live.contains(*m.address)) << "event " << i << " reuses a live address";
      live[*m.address] = m.size.value();
    } else {
      ASSERT_EQ(m.kind, MemoryEventKind::kFree);
      auto it = live.find(*m.address);
      ASSERT_NE(it, live.end()) << "free at event " << i << " has no earlier alloc";
      EXPECT_EQ(it->second, m.size.value()) << i;
      live.erase(it);
    }
    if (prev_total.has_value()) {
      const Bytes delta = m.kind == MemoryEventKind::kAlloc ? m.size : Bytes(0) - m.size;
      ASSERT_EQ((*m.total_allocated - *prev_total).value(), delta.value()) << "event " << i;
    }
    prev_total = m.total_allocated;
  }
}

Bytes MaxTotalAllocated(const RecordedTrace& t) {
  Bytes peak;
  for (const RecordedMemoryEvent& m : t.memory_events) peak = Max(peak, *m.total_allocated);
  return peak;
}

TEST(ImportKinetoTest, BertSmallCountsAndInvariants) {
  REQUIRE_TRACE(path, kBert);
  auto t = ImportKinetoTrace(path);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->memory_events.size(), 218u);
  EXPECT_EQ(t->metadata.memory_events_filtered_out, 18);  // CPU [memory] events
  ASSERT_EQ(t->metadata.devices.size(), 1u);
  EXPECT_EQ(t->metadata.devices[0].name, "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(t->metadata.devices[0].total_global_mem, Bytes(85018279936));
  EXPECT_EQ(t->metadata.format, "kineto");
  int kernels = 0;
  for (const RecordedOp& op : t->ops) kernels += op.kind == RecordedOpKind::kKernel;
  EXPECT_EQ(kernels, 60);
  // First memory event, exactly as recorded (ts 1419247333400.919 us).
  const RecordedMemoryEvent& m = t->memory_events[0];
  EXPECT_EQ(m.time, SimTime(1419247333400919));
  EXPECT_EQ(m.size, Bytes(144384));
  EXPECT_EQ(m.address, 128184607182336);
  EXPECT_EQ(m.total_allocated, Bytes(91505152));
  EXPECT_EQ(m.total_reserved, Bytes(121634816));
  EXPECT_EQ(m.seq, 480);
  EXPECT_EQ(m.device_type, 1);
  ExpectRecordedInvariants(*t);
}

TEST(ImportKinetoTest, Owlv2CountsInvariantsAndNativePeak) {
  REQUIRE_TRACE(path, kOwl);
  auto t = ImportKinetoTrace(path);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->memory_events.size(), 12270u);
  int kernels = 0;
  for (const RecordedOp& op : t->ops) {
    kernels += op.kind == RecordedOpKind::kKernel;
    EXPECT_GE(op.duration, SimTime(0));
  }
  EXPECT_EQ(kernels, 4330);
  ExpectRecordedInvariants(*t);
  for (const RecordedMemoryEvent& m : t->memory_events) {
    EXPECT_EQ(m.total_reserved, Bytes(3600809984)) << "warm pool: reserved is constant";
    break;
  }

  ConversionStats st;
  auto native = ToNativeTrace(*t, {}, &st);
  ASSERT_TRUE(native.ok()) << native.status();
  EXPECT_TRUE(ValidateTrace(*native).ok()) << ValidateTrace(*native);
  EXPECT_EQ(st.allocs + st.frees, 12270);
  EXPECT_EQ(st.frees_matched_by_address, st.frees);
  EXPECT_EQ(st.allocs_before_recording, 0);
  EXPECT_EQ(st.timed_events, 4330 + 85 + 750);  // kernels + memcpys + memsets
  // Preexisting = Total Allocated before the first event; the replayed peak
  // is then exactly the recorded peak.
  const RecordedMemoryEvent& first = t->memory_events[0];
  EXPECT_EQ(native->preexisting, *first.total_allocated -
                                     (first.kind == MemoryEventKind::kAlloc ? first.size : Bytes(0)));
  EXPECT_EQ(ComputeTraceStats(*native).peak_live, MaxTotalAllocated(*t));
}

// Note [Matching frees]: how often LIFO / FIFO by size find the true pairing
// on traces that have addresses, and that the peak does not depend on it.
struct PairingRates {
  double lifo = 0, fifo = 0;
};
PairingRates MeasurePairing(const RecordedTrace& t) {
  std::map<int64_t, std::vector<int64_t>> live;  // size -> addresses, allocation order
  int64_t frees = 0, lifo_right = 0, fifo_right = 0;
  for (const RecordedMemoryEvent& m : t.memory_events) {
    auto& l = live[m.size.value()];
    if (m.kind == MemoryEventKind::kAlloc) {
      l.push_back(*m.address);
      continue;
    }
    ++frees;
    lifo_right += l.back() == *m.address;
    fifo_right += l.front() == *m.address;
    l.erase(std::find(l.begin(), l.end(), *m.address));
  }
  return {static_cast<double>(lifo_right) / frees, static_cast<double>(fifo_right) / frees};
}

TEST(ImportKinetoTest, SizePairingRatesMatchTheNote) {
  REQUIRE_TRACE(owl, kOwl);
  REQUIRE_TRACE(hta, kHta);
  auto o = ImportKinetoTrace(owl);
  auto h = ImportKinetoTrace(hta);
  ASSERT_TRUE(o.ok() && h.ok());
  const PairingRates ro = MeasurePairing(*o), rh = MeasurePairing(*h);
  EXPECT_NEAR(ro.lifo, 0.329, 0.001);
  EXPECT_NEAR(ro.fifo, 0.426, 0.001);
  EXPECT_NEAR(rh.lifo, 0.417, 0.001);
  EXPECT_NEAR(rh.fifo, 0.133, 0.001);
  // Whatever the pairing, the native trace without addresses has the same
  // live-bytes peak.
  RecordedTrace no_addr = *o;
  for (RecordedMemoryEvent& m : no_addr.memory_events) m.address.reset();
  auto a = ToNativeTrace(*o);
  auto lifo = ToNativeTrace(no_addr);
  ToNativeOptions fifo_opt;
  fifo_opt.size_match = ToNativeOptions::SizeMatch::kFifo;
  auto fifo = ToNativeTrace(no_addr, fifo_opt);
  ASSERT_TRUE(a.ok() && lifo.ok() && fifo.ok());
  EXPECT_EQ(ComputeTraceStats(*a).peak_live, ComputeTraceStats(*lifo).peak_live);
  EXPECT_EQ(ComputeTraceStats(*a).peak_live, ComputeTraceStats(*fifo).peak_live);
  EXPECT_TRUE(ValidateTrace(*fifo).ok());
}

TEST(ImportKinetoTest, RocmColdStartUsesDeviceType6) {
  REQUIRE_TRACE(path, kMi300x);
  auto t = ImportKinetoTrace(path);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->memory_events.size(), 415u);
  ExpectRecordedInvariants(*t);
  // Cold allocator: reserved grows during the trace.
  EXPECT_LT(*t->memory_events.front().total_reserved, *t->memory_events.back().total_reserved);
  for (const RecordedMemoryEvent& m : t->memory_events) EXPECT_EQ(m.device_type, 6);
  EXPECT_EQ(t->metadata.devices[0].name, "AMD Instinct MI300X");
  // Selecting CUDA only finds nothing here.
  KinetoImportOptions cuda_only;
  cuda_only.device_types = {kKinetoDeviceTypeCuda};
  auto c = ImportKinetoTrace(path, cuda_only);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->memory_events.size(), 0u);
  auto native = ToNativeTrace(*t);
  ASSERT_TRUE(native.ok()) << native.status();
  EXPECT_TRUE(ValidateTrace(*native).ok());
  EXPECT_EQ(ComputeTraceStats(*native).peak_live, MaxTotalAllocated(*t));
}

TEST(ImportKinetoTest, DeviceIdSelection) {
  REQUIRE_TRACE(path, kHta);
  auto t = ImportKinetoTrace(path);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->memory_events.size(), 26770u);
  for (const RecordedMemoryEvent& m : t->memory_events) ASSERT_EQ(m.device, 1);
  ExpectRecordedInvariants(*t);
  KinetoImportOptions dev0;
  dev0.device_id = 0;
  auto t0 = ImportKinetoTrace(path, dev0);
  ASSERT_TRUE(t0.ok());
  EXPECT_EQ(t0->memory_events.size(), 0u);
  KinetoImportOptions cpu;
  cpu.device_types = {kKinetoDeviceTypeCpu};
  cpu.keep_cpu_ops = cpu.keep_gpu_ops = false;
  auto tc = ImportKinetoTrace(path, cpu);
  ASSERT_TRUE(tc.ok());
  EXPECT_EQ(tc->memory_events.size(), 1240u);
  EXPECT_TRUE(tc->ops.empty());
  ToNativeOptions device0;
  device0.device = 0;
  auto native = ToNativeTrace(*t, device0);
  EXPECT_FALSE(native.ok()) << "device 0 has no memory events";
}

TEST(ImportKinetoTest, LegacyTraceWithoutAddrMatchesFreesBySize) {
  REQUIRE_TRACE(path, kLegacy);
  auto t = ImportKinetoTrace(path);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->memory_events.size(), 8220u);
  int kernels = 0;
  for (const RecordedOp& op : t->ops) kernels += op.kind == RecordedOpKind::kKernel;
  EXPECT_EQ(kernels, 8772);  // legacy category "Kernel"
  for (const RecordedMemoryEvent& m : t->memory_events) {
    ASSERT_FALSE(m.address.has_value());
    ASSERT_FALSE(m.total_allocated.has_value());
  }
  ConversionStats st;
  auto native = ToNativeTrace(*t, {}, &st);
  ASSERT_TRUE(native.ok()) << native.status();
  EXPECT_TRUE(ValidateTrace(*native).ok()) << ValidateTrace(*native);
  EXPECT_EQ(st.frees_matched_by_address, 0);
  EXPECT_EQ(st.frees_matched_by_size + st.allocs_before_recording, st.frees);
  EXPECT_EQ(st.allocs + st.frees, 8220);
  // The LIFO rule on a hand-made sequence: A(100) B(100) free(100) ends B.
  RecordedTrace small;
  for (int64_t bytes : {100, 100, -100, -100}) {
    RecordedMemoryEvent m;
    m.kind = bytes > 0 ? MemoryEventKind::kAlloc : MemoryEventKind::kFree;
    m.size = Bytes(bytes > 0 ? bytes : -bytes);
    small.memory_events.push_back(m);
  }
  auto s = ToNativeTrace(small);
  ASSERT_TRUE(s.ok());
  ASSERT_EQ(s->events.size(), 4u);
  EXPECT_EQ(s->events[2].buffer, s->events[1].buffer);
  EXPECT_EQ(s->events[3].buffer, s->events[0].buffer);
}

TEST(ImportKinetoTest, FreeOfBlockAllocatedBeforeRecordingGetsAnAllocAtTheStart) {
  RecordedTrace t;
  RecordedMemoryEvent f;
  f.kind = MemoryEventKind::kFree;
  f.address = 4096;
  f.size = Bytes(512);
  f.total_allocated = Bytes(1000);  // 1512 before; 512 of it is the freed block
  t.memory_events.push_back(f);
  ConversionStats st;
  auto n = ToNativeTrace(t, {}, &st);
  ASSERT_TRUE(n.ok());
  ASSERT_EQ(n->events.size(), 2u);
  EXPECT_EQ(n->events[0].type, EventType::kAlloc);
  EXPECT_EQ(n->events[1].type, EventType::kFree);
  EXPECT_EQ(st.allocs_before_recording, 1);
  EXPECT_EQ(n->preexisting, Bytes(1000));
  EXPECT_TRUE(ValidateTrace(*n).ok());
}

absl::StatusOr<RecordedTrace> ImportText(const std::string& text) {
  auto src = StringByteSource(text);
  return ImportKinetoTrace(*src, "t.json");
}

TEST(ImportKinetoTest, TopLevelArrayAndMinimalEvents) {
  auto t = ImportText(
      R"([{"ph":"i","name":"[memory]","ts":1.5,"args":{"Device Type":1,"Device Id":0,"Bytes":64}},)"
      R"( {"ph":"X","cat":"kernel","name":"k","ts":2,"dur":0.25,"args":{"stream":7}},)"
      R"( {"ph":"i","name":"[memory]","ts":3,"args":{"Device Type":1,"Device Id":0,"Bytes":-64}}])");
  ASSERT_TRUE(t.ok()) << t.status();
  ASSERT_EQ(t->memory_events.size(), 2u);
  EXPECT_EQ(t->memory_events[0].time, SimTime(1500));
  ASSERT_EQ(t->ops.size(), 1u);
  EXPECT_EQ(t->ops[0].duration, SimTime(250));
  EXPECT_EQ(t->ops[0].stream, 7);
  auto n = ToNativeTrace(*t);
  ASSERT_TRUE(n.ok());
  ASSERT_EQ(n->events.size(), 3u);  // alloc, kernel (ts 2), free
  EXPECT_EQ(n->events[1].type, EventType::kCompute);
  EXPECT_EQ(n->events[1].recorded_duration, SimTime(250));
}

TEST(ImportKinetoTest, MalformedInputsNameTheByteOffset) {
  struct Case {
    std::string text;
    std::string want;  // substring of the error
  } cases[] = {
      {R"({"traceEvents": [{"ph":"i","name":"[memory]","ts":1,"args":{"Bytes":12)",
       "byte 70: unexpected end of input inside the object opened at byte 59 (truncated file?)"},
      {R"({"traceEvents": [{"ph":"X"}] )", "byte 29: expected ',' or '}'"},
      {R"({"traceEvents": [{"ph":"i","name":"[memory]","ts":1,"args":{"Bytes":"12","Device Type":1}}]})",
       "byte 68: \"args.Bytes\": expected an integer, got '\"12\"'"},
      {R"({"traceEvents": [{"ph":"X","cat":"kernel","name":"k","ts":1,"dur":tru}]})",
       "byte 66: \"dur\": expected a number of microseconds, got 'tru'"},
      {R"({"traceEvents": [{"ph":"X","cat":"kernel" "name":"k"}]})",
       "malformed JSON in the trace event starting at byte 17"},
      {R"({"traceEvents": [{"ph":"X","a":[1}]})",
       "byte 33: expected ']' to close the array opened at byte 31, got '}'"},
      {R"({"traceEvents": [{"ph":"X","ts":1}} ]})",
       "byte 34: expected ',' or ']' after an element of \"traceEvents\", got '}'"},
      {R"({"traceEvents": [1, 2] })", "byte 17: expected a trace event object"},
      {R"({"traceEvents": [{"ph":"i","name":"[memory]","ts":1,"args":{}}]})",
       "byte 17: [memory] event lacks args.Bytes"},
      {"", "byte 0: expected '{' or '[' to start the JSON document, got end of input"},
      {R"({"traceEvents": []} x)", "byte 20: unexpected 'x' after the JSON document"},
      {R"({"a": "unterminated)", "unexpected end of input inside the string opened at byte 6"},
  };
  for (const Case& c : cases) {
    auto t = ImportText(c.text);
    ASSERT_FALSE(t.ok()) << c.text;
    EXPECT_NE(std::string(t.status().message()).find(c.want), std::string::npos)
        << "input: " << c.text << "\nerror: " << t.status().message() << "\nwanted: " << c.want;
    EXPECT_EQ(std::string(t.status().message()).rfind("t.json: ", 0), 0u) << t.status();
  }
}

TEST(ImportKinetoTest, TruncatedGzipIsAnErrorNotACrash) {
  REQUIRE_TRACE(path, kBert);
  std::ifstream in(path, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::string cut = ::testing::TempDir() + "/truncated.json.gz";
  std::ofstream(cut, std::ios::binary) << bytes.substr(0, bytes.size() / 2);
  auto t = ImportKinetoTrace(cut);
  ASSERT_FALSE(t.ok());
  EXPECT_NE(std::string(t.status().message()).find("truncated"), std::string::npos) << t.status();

  // A complete gzip stream of a JSON document cut mid-event.
  const std::string json_cut = ::testing::TempDir() + "/cut_json.json.gz";
  gzFile g = gzopen(json_cut.c_str(), "wb");
  const std::string doc = R"({"traceEvents": [{"ph":"X","cat":"kernel","name":"k","ts":1,"du)";
  gzwrite(g, doc.data(), static_cast<unsigned>(doc.size()));
  gzclose(g);
  auto u = ImportKinetoTrace(json_cut);
  ASSERT_FALSE(u.ok());
  EXPECT_NE(std::string(u.status().message())
                .find("byte 63 of the decompressed input: unexpected end of input inside the "
                      "object opened at byte 17"),
            std::string::npos)
      << u.status();
}

TEST(ImportKinetoTest, MissingFileIsNotFound) {
  auto t = ImportKinetoTrace("/nonexistent/x.json");
  EXPECT_EQ(t.status().code(), absl::StatusCode::kNotFound);
}

TEST(ImportKinetoTest, FormatDetection) {
  REQUIRE_TRACE(bert, kBert);
  auto f = DetectRecordedFormat(bert);
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(*f, "kineto");
  auto t = ImportRecordedTrace(bert);
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->memory_events.size(), 218u);
}


}  // namespace
}  // namespace gpusim::import_kineto_test
