// Note [One pass per trace event] (sim/import/kineto.cc): the one-pass read
// of plain trace events in place must give what the general path (simdjson)
// gives, value for value and error for error. Every shipped Kineto trace,
// under every import option, and synthetic events that take each of the
// fast path's exits, are imported both ways and compared.
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

#include "sim/import/byte_source.h"
#include "sim/import/kineto.h"
#include "sim/import/trace_path.h"

namespace gpusim::kineto_fast_path_test {
namespace {

std::string Describe(const RecordedMemoryEvent& m) {
  std::string s = std::string(MemoryEventKindName(m.kind)) + " size=" + std::to_string(m.size.value()) +
                  " addr=" + (m.address ? std::to_string(*m.address) : "-") + " t=" + std::to_string(m.time.ns()) +
                  " dev=" + std::to_string(m.device) + "/" + std::to_string(m.device_type) +
                  " seq=" + std::to_string(m.seq) + " stream=" + std::to_string(m.stream) +
                  " ta=" + (m.total_allocated ? std::to_string(m.total_allocated->value()) : "-") +
                  " tr=" + (m.total_reserved ? std::to_string(m.total_reserved->value()) : "-") + " stack=";
  for (int32_t f : m.stack) s += std::to_string(f) + ",";
  return s;
}

std::string Describe(const RecordedOp& op) {
  std::string s = std::string(RecordedOpKindName(op.kind)) + " " + op.name + " " + std::to_string(op.start.ns()) +
                  "+" + std::to_string(op.duration.ns()) + " s" + std::to_string(op.stream) + " d" +
                  std::to_string(op.device) + " c" + std::to_string(op.correlation) + " x" +
                  std::to_string(op.external_id) + " b" + std::to_string(op.bytes.value()) +
                  (op.has_shapes ? " shapes" : "");
  for (const auto& d : op.input_dims) {
    s += " [";
    for (int64_t v : d) s += std::to_string(v) + ",";
    s += "]";
  }
  for (const auto& t : op.input_types) s += " " + t;
  for (const auto& c : op.concrete_inputs) s += " '" + c + "'";
  return s;
}

// Everything an import keeps, as text.
std::string Describe(const absl::StatusOr<RecordedTrace>& t) {
  if (!t.ok()) return "error: " + t.status().ToString();
  std::string s = "trace " + t->metadata.trace_name + " base " + std::to_string(t->metadata.base_time_ns) +
                  " filtered " + std::to_string(t->metadata.memory_events_filtered_out) + "\n";
  for (const RecordedDevice& d : t->metadata.devices) {
    s += "device " + std::to_string(d.id) + " " + d.name + " " + std::to_string(d.total_global_mem.value()) + "\n";
  }
  for (const CaptureWindow& c : t->captures) {
    s += "capture " + std::to_string(c.begin.ns()) + ".." + std::to_string(c.end.ns()) + "\n";
  }
  for (const RecordedMemoryEvent& m : t->memory_events) s += Describe(m) + "\n";
  for (const RecordedOp& op : t->ops) s += Describe(op) + "\n";
  for (const StackFrame& f : t->frames) s += "frame " + f.file + ":" + std::to_string(f.line) + " " + f.function + "\n";
  return s;
}

// The first line where `a` and `b` differ ("" when they are equal): the
// texts are too long for gtest to print whole.
std::string FirstDifference(const std::string& a, const std::string& b) {
  if (a == b) return "";
  size_t i = 0;
  while (i < a.size() && i < b.size() && a[i] == b[i]) ++i;
  const size_t line = a.rfind('\n', i == 0 ? 0 : i - 1);
  const size_t from = line == std::string::npos ? 0 : line + 1;
  return "fast:    " + a.substr(from, a.find('\n', i) - from) + "\ngeneral: " + b.substr(from, b.find('\n', i) - from);
}

std::vector<KinetoImportOptions> EveryOption() {
  std::vector<KinetoImportOptions> out;
  for (int bits = 0; bits < 8; ++bits) {
    KinetoImportOptions o;
    o.keep_runtime = (bits & 1) != 0;
    o.keep_shapes = (bits & 2) != 0;
    o.keep_stacks = (bits & 4) != 0;
    o.keep_cpu_ops = bits != 3;
    out.push_back(o);
  }
  return out;
}

std::string ImportBoth(const std::string& doc, KinetoImportOptions o, std::string* general) {
  o.fast_path = false;
  auto g = StringByteSource(doc);
  *general = Describe(ImportKinetoTrace(*g, "t.json", o));
  o.fast_path = true;
  auto f = StringByteSource(doc);
  return Describe(ImportKinetoTrace(*f, "t.json", o));
}

TEST(KinetoFastPathTest, ShippedTracesImportTheSameBothWays) {
  int traces = 0;
  for (const char* name :
       {"tracelens_h100_bert-small_inference.pt.trace.json.gz", "tracelens_h100_owlv2-large_inference.pt.trace.json.gz",
        "tracelens_mi300x_rocm_normalization_coldstart.pt.trace.json.gz",
        "hta_df_index_resolver_v100_rank1.pt.trace.json.gz",
        "kineto_tbplugin_resnet50_v100_legacy_noaddr.pt.trace.json.gz"}) {
    const std::string path = RecordedTracePath(name);
    if (path.empty()) continue;
    ++traces;
    {  // every kind of event kept, shapes left to the general path
      KinetoImportOptions o = EveryOption()[5];
      o.keep_gpu_ops = true;
      o.fast_path = false;
      const std::string general = Describe(ImportKinetoTrace(path, o));
      o.fast_path = true;
      const std::string fast = Describe(ImportKinetoTrace(path, o));
      ASSERT_EQ(FirstDifference(fast, general), "") << name;
      EXPECT_GT(general.size(), 1000u) << name;
    }
    // The file is read in blocks without a copy (ByteSource::SwapBlock);
    // the same bytes read into the scanner's buffer give the same trace.
    auto file = OpenByteSource(path);
    ASSERT_TRUE(file.ok());
    auto bytes = ReadAll(**file);
    ASSERT_TRUE(bytes.ok());
    auto copied = StringByteSource(*bytes);
    KinetoImportOptions o;
    ASSERT_EQ(FirstDifference(Describe(ImportKinetoTrace(*copied, path, o)), Describe(ImportKinetoTrace(path, o))), "")
        << name;
  }
  if (traces == 0) GTEST_SKIP() << "no shipped Kineto trace found";
}

// Events that take each exit of the fast path (and some it reads), in one
// document per case so that an error in one does not hide the others.
TEST(KinetoFastPathTest, EveryExitGivesTheGeneralPathsResult) {
  const std::string mem =
      R"({"ph": "i", "cat": "cpu_instant_event", "name": "[memory]", "pid": 1, "tid": 2, "ts": 10, "s": "t", )"
      R"("args": {"Device Type": 1, "Device Id": 0, "Addr": 4096, "Bytes": 512, "Total Allocated": 512, )"
      R"("Total Reserved": 2097152, "Ev Idx": 3}})";
  const std::vector<std::string> events = {
      mem,
      // Field order, blanks, duplicates, args before ph.
      R"({"args": {"Bytes": 512, "Device Type": 1, "Addr": 8192}, "ts": 11, "name": "[memory]", "ph": "i"})",
      R"(  {  "ph" :"i","name":"[memory]" , "ts":12.5,"args":{ "Bytes" : -512 ,"Device Type":1,"Addr":8192 } } )",
      R"({"ph": "i", "ph": "i", "name": "[memory]", "ts": 13, "args": {"Bytes": 7, "Bytes": 9, "Device Type": 1}})",
      // Numbers: fractions, exponents, long integers, negative zero, bad ones.
      R"({"ph": "i", "name": "[memory]", "ts": 1.0e1, "args": {"Bytes": 5e2, "Device Type": 1}})",
      R"({"ph": "i", "name": "[memory]", "ts": 14.9999, "args": {"Bytes": 512.0, "Device Type": 1}})",
      R"({"ph": "i", "name": "[memory]", "ts": 1234567890123456789, "args": {"Bytes": 1, "Device Type": 1}})",
      R"({"ph": "i", "name": "[memory]", "ts": 9223372036854775, "args": {"Bytes": 1, "Device Type": 1}})",
      R"({"ph": "i", "name": "[memory]", "ts": 15, "args": {"Bytes": 12345678901234567890, "Device Type": 1}})",
      R"({"ph": "i", "name": "[memory]", "ts": -0, "args": {"Bytes": -0, "Device Type": 1}})",
      R"({"ph": "i", "name": "[memory]", "ts": 01, "args": {"Bytes": 1, "Device Type": 1}})",
      R"({"ph": "i", "name": "[memory]", "ts": 16, "args": {"Bytes": 1x, "Device Type": 1}})",
      R"({"ph": "i", "name": "[memory]", "ts": "17", "args": {"Bytes": 1, "Device Type": 1}})",
      R"({"ph": "i", "name": "[memory]", "ts": 18, "args": {"Bytes": "1", "Device Type": 1}})",
      R"({"ph": "i", "name": "[memory]", "ts": 18, "args": {"Bytes": 1.5, "Device Type": 1}})",
      // Strings: escapes, non-ASCII, control bytes, other types.
      R"({"ph": "i", "name": "[mem\u006fry]", "ts": 19, "args": {"Bytes": 1, "Device Type": 1}})",
      R"({"ph": "i", "name": "[memory]", "ts": 20, "args": {"Byt\u0065s": 1, "Device Type": 1}})",
      "{\"ph\": \"i\", \"name\": \"[memory]\", \"cat\": \"caf\xc3\xa9\", \"ts\": 21, \"args\": {\"Bytes\": 1, \"Device Type\": 1}}",
      "{\"ph\": \"i\", \"name\": \"[memory]\", \"cat\": \"bad\xff\", \"ts\": 21, \"args\": {\"Bytes\": 1, \"Device Type\": 1}}",
      "{\"ph\": \"i\", \"name\": \"[memory]\", \"cat\": \"tab\there\", \"ts\": 22, \"args\": {\"Bytes\": 1}}",
      R"({"ph": 5, "name": "[memory]", "ts": 23, "args": {"Bytes": 1, "Device Type": 1}})",
      R"({"ph": "i", "name": null, "ts": 24, "args": {"Bytes": 1, "Device Type": 1}})",
      R"({"ph": "i", "name": "[memory]", "pid": "Spans", "tid": {"a": 1}, "ts": 25, "args": {"Bytes": 1, "Device Type": 1}})",
      R"({"ph": "i", "name": "[memory]", "pid": 1 , "tid": true, "ts": 26, "args": {"Bytes": 1, "Device Type": 1}})",
      R"({"ph": "i", "name": "[memory]", "ts": 27, "args": [1, 2]})",
      R"({"ph": "i", "name": "[memory]", "ts": 28, "args": {}})",
      R"({"ph": "i", "name": "[memory]", "ts": 29})",
      R"({})",
      R"({"ph": "i", "name": "[memory]", "ts": 30, "args": {"Bytes": 1, "Device Type": 1, "extra": {"a": [1, {"b": null}], "c": false}}})",
      R"({"ph": "i", "name": "[memory]", "ts": 31, "args": {"Bytes": 1, "Device Type": 1, "x": tru}})",
      R"({"ph": "i", "name": "[memory]", "ts": 32, "args": {"Bytes": 1, "Device Type": 1,}})",
      R"({"ph": "i", "name": "[memory]", "ts": 33 "args": {"Bytes": 1, "Device Type": 1}})",
      R"({"ph": "i", "name": "[memory]", "ts": 34, "args": {"Bytes": 1, "Device Type": 1}, "deep": [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]})",
      R"({"ph": "i", "name": "[memory]", "ts": 35, "args": {"Bytes": 1, "Device Type": 0}})",
      // Ops, python calls, captures, shapes.
      R"({"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 40, "dur": 3.25, "args": {"stream": 7, "device": 0, "correlation": 9, "External id": 4, "grid": [1, 2, 3]}})",
      R"({"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy HtoD", "ts": 41, "dur": 1, "args": {"bytes": 4096, "external id": 5}})",
      R"({"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 2, "ts": 42, "dur": 5, "args": {"Input Dims": [[2, 3], [3, 4], []], "Input type": ["float", "float", "Scalar"], "Concrete Inputs": ["", "", "1"]}})",
      R"({"ph": "X", "cat": "python_function", "name": "model.py(12): forward", "pid": 1, "tid": 2, "ts": 5, "dur": 50})",
      R"({"ph": "X", "cat": "python_function", "name": "model.py(30): inner", "pid": 1, "tid": 2, "ts": 9, "dur": 5})",
      R"({"ph": "X", "cat": "cuda_runtime", "name": "cudaStreamBeginCapture", "ts": 43, "dur": 1})",
      R"({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": 44, "dur": 1, "args": {"correlation": 10}})",
      R"({"ph": "X", "cat": "cuda_runtime", "name": "cudaStreamEndCapture", "ts": 45, "dur": 2})",
      R"({"ph": "X", "cat": "kernel", "name": "k2", "ts": 46, "args": {"stream": 7}})",
      R"({"ph": "X", "cat": "kernel", "name": "k3", "ts": 47, "dur": 1, "args": {"device": 99999999999}})",
      R"({"ph": "M", "name": "process_name", "pid": 1, "args": {"name": "python"}})",
      R"([1, 2])",
      R"("x")",
  };
  for (const KinetoImportOptions& o : EveryOption()) {
    // All events in one document, and each alone.
    std::string all = R"({"traceEvents": [)" + mem;
    for (const std::string& e : events) {
      std::string general;
      const std::string doc = R"({"traceName": "t", "traceEvents": [)" + mem + ",\n" + e + R"(], "deviceProperties": [{"id": 0, "name": "d", "totalGlobalMem": 1024}]})";
      EXPECT_EQ(ImportBoth(doc, o, &general), general) << e;
      all += ", " + e;
    }
    all += "]}";
    std::string general;
    EXPECT_EQ(ImportBoth(all, o, &general), general);
  }
  // A plain document reads some events on the fast path and differs from
  // nothing; an element past the read window still takes the general path.
  std::string big = R"({"traceEvents": [)" + mem + R"(, {"ph": "X", "cat": "kernel", "name": ")" +
                    std::string(40000, 'k') + R"(", "ts": 50, "dur": 1}]})";
  std::string general;
  EXPECT_EQ(FirstDifference(ImportBoth(big, {}, &general), general), "");
  EXPECT_THAT(general, testing::HasSubstr(std::string(40000, 'k')));
}

// Note [Events of one shape]: [memory] events read against the shape of the
// last one walked give what the general path gives, whatever their values
// (lengths, signs, fractions, exponents, strings where numbers were) and
// whatever breaks the shape between them.
TEST(KinetoFastPathTest, EventsOfOneShapeGiveTheGeneralPathsResult) {
  auto mem = [](const std::string& ts, const std::string& pid, const std::string& addr, const std::string& bytes,
                const std::string& total) {
    return R"({"ph": "i", "cat": "cpu_instant_event", "name": "[memory]", "pid": )" + pid + R"(, "tid": 2, "ts": )" +
           ts + R"(, "s": "t", "args": {"Device Type": 1, "Device Id": 0, "Addr": )" + addr + R"(, "Bytes": )" +
           bytes + R"(, "Total Allocated": )" + total + R"(, "Total Reserved": 2097152, "Ev Idx": 3}})";
  };
  const std::vector<std::string> events = {
      mem("10", "1", "4096", "512", "512"),
      mem("11", "1", "140737488355328", "-512", "0"),
      mem("1234567890123", "\"Spans\"", "8", "99999999999999999", "1"),
      mem("12.5", "1", "8", "-99999999999999999", "0"),
      mem("1e3", "1", "8", "1", "1"),
      mem("13", "1", "8", "1.5", "1"),                       // an integer field that is not one
      mem("14", "1", "8", "12345678901234567890", "1"),       // past int64
      mem("15", "1", "8", "-0", "1"),
      mem("16", "1", "\"8\"", "1", "1"),
      mem("17", "1", "8", "01", "1"),
      mem("18", "1", "8", "1", "-1"),                        // a negative total: the event's error
      R"({"ph": "i", "cat": "cpu_instant_event", "name": "[memory]", "pid": 1, "tid": 2, "ts": 19, "s": "p", "args": {"Device Type": 1, "Bytes": 5}})",
      mem("20", "1", "8", "1", "1"),
      R"({"ph": "i", "cat": "cpu_instant_event", "name": "[memory]", "pid": 1, "tid": 2, "ts": 21, "s": "t", "args": {"Device Type": 1, "Bytes": 5}})",
      R"({"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 22, "dur": 3, "args": {"stream": 7}})",
      mem("23", "1", "8", "2", "3"),
      mem("24", "1", "8", "2", "3").substr(0, 60),  // cut short inside the shape: the document's error
  };
  for (const KinetoImportOptions& o : EveryOption()) {
    // Each event after two of the shape, and all of them in a row.
    for (const std::string& e : events) {
      std::string general;
      const std::string doc = R"({"traceEvents": [)" + events[0] + ",\n" + events[1] + ",\n" + e + "]}";
      EXPECT_EQ(ImportBoth(doc, o, &general), general) << e;
    }
    std::string all = R"({"traceEvents": [)";
    for (size_t i = 0; i + 1 < events.size(); ++i) all += (i == 0 ? "" : ",\n") + events[i];
    std::string general;
    EXPECT_EQ(ImportBoth(all + "]}", o, &general), general);
    EXPECT_EQ(ImportBoth(all + ",\n" + events.back(), o, &general), general);
  }
}

}  // namespace
}  // namespace gpusim::kineto_fast_path_test
