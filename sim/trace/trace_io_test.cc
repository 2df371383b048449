#include "sim/trace/trace_io.h"
#include "sim/trace/validate.h"

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace gpusim::trace_io_test {
namespace {

void ExpectEqualEvent(const TraceEvent& a, const TraceEvent& b, size_t i) {
  SCOPED_TRACE(testing::Message() << "event " << i);
  EXPECT_EQ(a.type, b.type);
  EXPECT_EQ(a.stream, b.stream);
  EXPECT_EQ(a.buffer, b.buffer);
  EXPECT_EQ(a.size, b.size);
  EXPECT_EQ(a.role, b.role);
  EXPECT_EQ(a.name, b.name);
  EXPECT_EQ(a.kind, b.kind);
  EXPECT_EQ(a.flops, b.flops);  // exact: the format round-trips doubles
  EXPECT_EQ(a.bytes_read, b.bytes_read);
  EXPECT_EQ(a.bytes_written, b.bytes_written);
  EXPECT_EQ(a.dtype, b.dtype);
  EXPECT_EQ(a.phase, b.phase);
  EXPECT_EQ(a.group, b.group);
  EXPECT_EQ(a.group_nodes, b.group_nodes);
  EXPECT_EQ(a.recompute, b.recompute);
  EXPECT_EQ(a.m, b.m);
  EXPECT_EQ(a.n, b.n);
  EXPECT_EQ(a.k, b.k);
  EXPECT_EQ(a.batch, b.batch);
  EXPECT_EQ(a.after, b.after);
  EXPECT_EQ(a.uses, b.uses);
  EXPECT_EQ(a.recorded_duration, b.recorded_duration);
  EXPECT_EQ(a.stack, b.stack);
  EXPECT_EQ(a.op, b.op);
  EXPECT_EQ(a.dims, b.dims);
  EXPECT_EQ(a.host_recorded, b.host_recorded);
  EXPECT_EQ(a.host_dispatches, b.host_dispatches);
  EXPECT_EQ(a.host_nodes, b.host_nodes);
  EXPECT_EQ(a.host_module_calls, b.host_module_calls);
}

void ExpectEqualTrace(const Trace& a, const Trace& b) {
  EXPECT_EQ(a.name, b.name);
  EXPECT_EQ(a.preexisting, b.preexisting);
  ASSERT_EQ(a.streams.size(), b.streams.size());
  for (size_t i = 0; i < a.streams.size(); ++i) {
    EXPECT_EQ(a.streams[i].id, b.streams[i].id);
    EXPECT_EQ(a.streams[i].name, b.streams[i].name);
  }
  EXPECT_EQ(a.frames, b.frames);
  EXPECT_EQ(a.meta, b.meta);
  ASSERT_EQ(a.events.size(), b.events.size());
  for (size_t i = 0; i < a.events.size(); ++i) ExpectEqualEvent(a.events[i], b.events[i], i);
}

// A trace touching every event type and every field with non-default values,
// plus names that need escaping.
Trace FullTrace() {
  Trace t;
  t.name = "llama 7b step#1";
  t.preexisting = Bytes(40430575628);
  t.streams = {{0, "compute"}, {1, "collective"}, {2, ""}, {3, "-"}};
  TraceEvent a;
  a.type = EventType::kAlloc;
  a.buffer = 17;
  a.size = Bytes(33554432);
  a.role = Role::kActivation;
  a.name = "layer3.mlp_out";
  a.phase = Phase::kBackward;
  a.stack = {1, 0, 1};
  t.events.push_back(a);
  t.frames = {{"forward", "model.py", 42}, {"<lambda> x=1,#", "", 0}};
  TraceEvent c;
  c.type = EventType::kCompute;
  c.name = "layer3.wi_0";
  c.kind = OpKind::kMatmul;
  c.flops = 1.8e11 + 0.1;
  c.bytes_read = Bytes(123456789012);
  c.bytes_written = Bytes(7);
  c.dtype = DType::kF8;
  c.phase = Phase::kOptimizer;
  c.m = 4096;
  c.n = 11008;
  c.k = 4096;
  c.batch = 3;
  c.recompute = true;
  c.uses = {17};
  c.recorded_duration = SimTime(1234);
  t.events.push_back(c);
  TraceEvent g;
  g.type = EventType::kCollective;
  g.name = "layer4.ag";
  g.kind = OpKind::kAllGather;
  g.group = 8;
  g.stream = 1;
  g.flops = 1e-300;
  g.after = {1};
  g.recorded_duration = SimTime(0);
  t.events.push_back(g);
  TraceEvent cp;
  cp.type = EventType::kCopy;
  cp.name = "offload q=%,x";
  cp.kind = OpKind::kDeviceToHost;
  cp.stream = 2;
  cp.after = {1, 2};
  cp.uses = {17, 18};
  t.events.push_back(cp);
  TraceEvent f;
  f.type = EventType::kFree;
  f.buffer = 17;
  f.stream = 3;
  f.name = "freed\tbuffer";
  t.events.push_back(f);
  TraceEvent m;
  m.type = EventType::kMarker;
  m.name = "";
  m.phase = Phase::kOther;
  m.role = Role::kScalar;  // off-type fields round-trip too
  m.buffer = 5;
  m.size = Bytes(9);
  t.events.push_back(m);
  TraceEvent d;  // all defaults
  t.events.push_back(d);
  return t;
}

std::string Write(const Trace& t) {
  std::ostringstream out;
  absl::Status st = WriteTrace(t, out);
  EXPECT_TRUE(st.ok()) << st;
  return out.str();
}

absl::StatusOr<Trace> Read(const std::string& text) {
  std::istringstream in(text);
  return ReadTrace(in, "t.trace");
}

TEST(TraceIo, RoundTripsEveryField) {
  Trace t = FullTrace();
  std::string text = Write(t);
  absl::StatusOr<Trace> back = Read(text);
  ASSERT_TRUE(back.ok()) << back.status() << "\n" << text;
  ExpectEqualTrace(t, *back);
  EXPECT_EQ(Write(*back), text);
}

TEST(TraceIo, RoundTripsAwkwardDoubles) {
  Trace t;
  for (double v : {0.1, 1.0 / 3, 4.9e-324, 1.7976931348623157e308, 123456789.0}) {
    TraceEvent e;
    e.flops = v;
    t.events.push_back(e);
  }
  absl::StatusOr<Trace> back = Read(Write(t));
  ASSERT_TRUE(back.ok()) << back.status();
  ExpectEqualTrace(t, *back);
}

TEST(TraceIo, WriterIsDeterministic) {
  EXPECT_EQ(Write(FullTrace()), Write(FullTrace()));
}

TEST(TraceIo, WritesDocumentedText) {
  Trace t;
  t.name = "tiny";
  t.preexisting = Bytes(100);
  t.streams = {{0, "compute"}};
  TraceEvent a;
  a.type = EventType::kAlloc;
  a.buffer = 3;
  a.size = Bytes(64);
  a.role = Role::kActivation;
  a.name = "x y";
  t.events.push_back(a);
  TraceEvent c;
  c.name = "mm";
  c.kind = OpKind::kMatmul;
  c.flops = 1.8e11;
  c.bytes_read = Bytes(10);
  c.uses = {3};
  t.events.push_back(c);
  TraceEvent f;
  f.type = EventType::kFree;
  f.buffer = 3;
  t.events.push_back(f);
  EXPECT_EQ(Write(t),
            "gpusim-trace 1\n"
            "# format: traces/FORMAT.md\n"
            "name tiny\n"
            "preexisting 100\n"
            "stream 0 compute\n"
            "alloc 3 64 role=activation name=x%20y\n"
            "compute mm kind=matmul flops=1.8e+11 read=10 uses=3\n"
            "free 3\n"
            "end 3\n");
}

TEST(TraceIo, WritesFramesOnlyWhenUsedAsVersion11) {
  Trace t;
  t.frames = {{"forward", "/src/model.py", 42}, {"main", "run me.py", 0}};
  TraceEvent a;
  a.type = EventType::kAlloc;
  a.buffer = 3;
  a.size = Bytes(64);
  a.stack = {0, 1};
  t.events.push_back(a);
  TraceEvent f;
  f.type = EventType::kFree;
  f.buffer = 3;
  t.events.push_back(f);
  EXPECT_EQ(Write(t),
            "gpusim-trace 1.1\n"
            "# format: traces/FORMAT.md\n"
            "frame 0 forward /src/model.py 42\n"
            "frame 1 main run%20me.py 0\n"
            "alloc 3 64 role=temporary stack=0,1\n"
            "free 3\n"
            "end 2\n");
  t.frames.clear();
  t.events[0].stack.clear();
  EXPECT_EQ(Write(t).substr(0, 15), "gpusim-trace 1\n");
}

TEST(TraceIo, WritesOpFactsOnlyWhenUsedAsVersion12) {
  Trace t;
  t.meta = {{"framework", "pytorch"}, {"torch_version", "2.5.1+cu124"}};
  TraceEvent c;
  c.type = EventType::kCompute;
  c.name = "layer:sum";
  c.kind = OpKind::kReduce;
  c.op = "sum";
  c.dims = {768, 8192, 0, 1, 4};
  t.events.push_back(c);
  const std::string text = Write(t);
  EXPECT_EQ(text,
            "gpusim-trace 1.2\n"
            "# format: traces/FORMAT.md\n"
            "meta framework pytorch\n"
            "meta torch_version 2.5.1+cu124\n"
            "compute layer:sum kind=reduce op=sum dims=768,8192,0,1,4\n"
            "end 1\n");
  absl::StatusOr<Trace> back = Read(text);
  ASSERT_TRUE(back.ok()) << back.status();
  ExpectEqualTrace(*back, t);
  ASSERT_NE(FindMeta(*back, "torch_version"), nullptr);
  EXPECT_EQ(*FindMeta(*back, "torch_version"), "2.5.1+cu124");
  EXPECT_EQ(FindMeta(*back, "cudnn_benchmark"), nullptr);
  t.meta.clear();
  t.events[0].op.clear();
  t.events[0].dims.clear();
  EXPECT_EQ(Write(t).substr(0, 15), "gpusim-trace 1\n");
  // 1.3 with a broadcast or a distributed step's meta world_size.
  TraceEvent b;
  b.type = EventType::kCollective;
  b.name = "broadcast_";
  b.kind = OpKind::kBroadcast;
  b.group = 2;
  t.events.push_back(b);
  const std::string with_broadcast = Write(t);
  EXPECT_EQ(with_broadcast.substr(0, 17), "gpusim-trace 1.3\n");
  back = Read(with_broadcast);
  ASSERT_TRUE(back.ok()) << back.status();
  ExpectEqualTrace(*back, t);
  t.events.pop_back();
  t.meta = {{"world_size", "2"}};
  EXPECT_EQ(Write(t).substr(0, 17), "gpusim-trace 1.3\n");
  // 1.4 with a collective whose group says the nodes it spans.
  TraceEvent n;
  n.type = EventType::kCollective;
  n.name = "grad_sync.bucket0";
  n.kind = OpKind::kAllReduce;
  n.group = 8;
  n.group_nodes = 8;
  t.events.push_back(n);
  const std::string with_nodes = Write(t);
  EXPECT_EQ(with_nodes.substr(0, 17), "gpusim-trace 1.4\n");
  EXPECT_NE(with_nodes.find(" group=8 nodes=8"), std::string::npos) << with_nodes;
  back = Read(with_nodes);
  ASSERT_TRUE(back.ok()) << back.status();
  ExpectEqualTrace(*back, t);
  EXPECT_EQ(back->events.back().group_nodes, 8);
}

TEST(TraceIo, HostWorkRoundTripsAsVersion16) {
  // Note [Host work per kernel]: host=D,N,M on a compute event, 1.6 only
  // when some event has it; 0,0,0 is written (recorded, nothing to charge).
  Trace t;
  TraceEvent c;
  c.type = EventType::kCompute;
  c.name = "mm";
  c.kind = OpKind::kMatmul;
  t.events.push_back(c);
  EXPECT_EQ(Write(t).substr(0, 15), "gpusim-trace 1\n");
  c.host_recorded = true;
  c.host_dispatches = 3;
  c.host_nodes = 0;
  c.host_module_calls = 2;
  t.events.push_back(c);
  c.host_dispatches = 0;
  c.host_module_calls = 0;
  t.events.push_back(c);
  const std::string text = Write(t);
  EXPECT_EQ(text.substr(0, 17), "gpusim-trace 1.6\n");
  EXPECT_NE(text.find(" host=3,0,2"), std::string::npos) << text;
  EXPECT_NE(text.find(" host=0,0,0"), std::string::npos) << text;
  absl::StatusOr<Trace> back = Read(text);
  ASSERT_TRUE(back.ok()) << back.status();
  ExpectEqualTrace(*back, t);
  EXPECT_FALSE(back->events[0].host_recorded);
  EXPECT_TRUE(back->events[1].host_recorded);
  EXPECT_EQ(back->events[1].host_dispatches, 3);
  EXPECT_EQ(back->events[1].host_module_calls, 2);
  EXPECT_TRUE(back->events[2].host_recorded);
  // Counts the reader would refuse are not written.
  t.events[1].host_nodes = -1;
  std::ostringstream out;
  EXPECT_FALSE(WriteTrace(t, out).ok());
}

TEST(TraceIo, WarmupHistoryRoundTripsAsVersion15) {
  // Note [Warm-up history]: written before the first event, read back as is.
  Trace t;
  using K = WarmupOp::Kind;
  t.warmup = {{K::kAlloc, 4, Bytes(4096)}, {K::kAlloc, 9, Bytes(1 << 20)},
              {K::kCompute, 0, Bytes(0), "addmm", Phase::kBackward, {1, 1}}, {K::kFree, 9, Bytes(0)}};
  TraceEvent m;
  m.type = EventType::kMarker;
  m.name = "start_state";
  t.events.push_back(m);
  TraceEvent a;
  a.type = EventType::kAlloc;
  a.buffer = 4;
  a.size = Bytes(4096);
  t.events.push_back(a);
  m.name = "step";
  t.events.push_back(m);
  const std::string text = Write(t);
  EXPECT_EQ(text.substr(0, 17), "gpusim-trace 1.5\n");
  EXPECT_NE(text.find("warmup alloc 4 4096\nwarmup alloc 9 1048576\nwarmup compute addmm phase=backward dims=1,1\n"
                      "warmup free 9\nmarker start_state"),
            std::string::npos)
      << text;
  absl::StatusOr<Trace> back = Read(text);
  ASSERT_TRUE(back.ok()) << back.status();
  ASSERT_EQ(back->warmup.size(), 4u);
  EXPECT_EQ(back->warmup[1].buffer, 9);
  EXPECT_EQ(back->warmup[1].size, Bytes(1 << 20));
  EXPECT_EQ(back->warmup[2].op, "addmm");
  EXPECT_EQ(back->warmup[2].phase, Phase::kBackward);
  EXPECT_EQ(back->warmup[2].dims, (std::vector<int64_t>{1, 1}));
  EXPECT_EQ(back->warmup[3].kind, K::kFree);
  EXPECT_TRUE(ValidateTrace(*back).ok());
  // What the history leaves live is the start state's, size for size.
  back->warmup.push_back({K::kAlloc, 11, Bytes(512)});
  EXPECT_NE(ValidateTrace(*back).message().find(
                "warm-up: buffer 11 is live at the end of the warm-up, but the start state does not allocate it"),
            std::string::npos)
      << ValidateTrace(*back);
  back->warmup.pop_back();
  back->warmup[0].size = Bytes(8192);
  EXPECT_NE(ValidateTrace(*back).message().find(
                "warm-up: buffer 4 is 8192 bytes at the end of the warm-up and 4096 in the start state"),
            std::string::npos)
      << ValidateTrace(*back);
}

TEST(TraceIo, ReadsFramesByIdInAnyOrder) {
  // Ids are the file's own (any non-negative, unique); the reader interns
  // them as indices in definition order. Frames may be defined between events.
  absl::StatusOr<Trace> t = Read(
      "gpusim-trace 1.1\n"
      "frame 90 step train.py 10\n"
      "alloc 1 512 stack=90\n"
      "frame 5 inner %3Cmodule%3E 0\n"
      "alloc 2 512 stack=5,90,5\n"
      "marker m stack=90\n");
  ASSERT_TRUE(t.ok()) << t.status();
  ASSERT_EQ(t->frames.size(), 2u);
  EXPECT_EQ(t->frames[0], (StackFrame{"step", "train.py", 10}));
  EXPECT_EQ(t->frames[1], (StackFrame{"inner", "<module>", 0}));
  EXPECT_EQ(t->events[0].stack, (std::vector<int32_t>{0}));
  EXPECT_EQ(t->events[1].stack, (std::vector<int32_t>{1, 0, 1}));
  EXPECT_EQ(t->events[2].stack, (std::vector<int32_t>{0}));
  // Re-written with ids 0..n-1, and reads back equal.
  absl::StatusOr<Trace> back = Read(Write(*t));
  ASSERT_TRUE(back.ok()) << back.status();
  ExpectEqualTrace(*t, *back);
}

TEST(TraceIo, ReadsHandWrittenFile) {
  absl::StatusOr<Trace> t = Read(
      "# a comment before the header\n"
      "\n"
      "gpusim-trace 1.4\r\n"
      "stream 0 compute   # trailing comment\n"
      "alloc 1 1024 role=parameter\n"
      "\tcompute  fwd kind=matmul flops=1e9 dtype=bfloat16 after=\n"
      "marker - phase=backward\n");
  ASSERT_FALSE(t.ok());  // empty after= list
  EXPECT_EQ(t.status().message(),
            "t.trace:6: compute: expected a comma-separated list of event "
            "indices, got ''");
  t = Read(
      "# a comment before the header\n"
      "\n"
      "gpusim-trace 1.4\r\n"
      "stream 0 compute   # trailing comment\n"
      "alloc 1 1024 role=parameter\n"
      "\tcompute  fwd kind=matmul flops=1e9 dtype=bfloat16\n"
      "marker - phase=backward\n");
  ASSERT_TRUE(t.ok()) << t.status();
  ASSERT_EQ(t->events.size(), 3u);
  EXPECT_EQ(t->events[0].role, Role::kParameter);
  EXPECT_EQ(t->events[0].size, Bytes(1024));
  EXPECT_EQ(t->events[1].flops, 1e9);
  EXPECT_EQ(t->events[1].dtype, DType::kBF16);
  EXPECT_EQ(t->events[2].name, "");
  EXPECT_EQ(t->events[2].phase, Phase::kBackward);
}

struct BadCase {
  std::string text;
  std::string message;
};

TEST(TraceIo, ParseErrorsNameFileLineAndToken) {
  const std::string h = "gpusim-trace 1\n";
  const std::string f = "gpusim-trace 1.1\n";
  const std::vector<BadCase> cases = {
      {h + "alloc 1 -5\n", "t.trace:2: alloc: expected a non-negative byte count, got '-5'"},
      {h + "alloc 1\n", "t.trace:2: alloc: expected a non-negative byte count, got end of line"},
      {h + "alloc x 5\n", "t.trace:2: alloc: expected a buffer id, got 'x'"},
      {h + "compute a flop=3\n", "t.trace:2: compute: unknown key 'flop' (did you mean 'flops'?)"},
      {h + "compute a zzzzzz=3\n", "t.trace:2: compute: unknown key 'zzzzzz'"},
      {h + "compute a =3\n", "t.trace:2: compute: unknown key ''"},
      {"gpusim-trace 1.9\ncompute a flop=3\n",
       "t.trace:2: compute: unknown key 'flop' (did you mean 'flops'?) (the file "
       "is version 1.9; this reader knows 1.8)"},
      {h + "compute a flops=1 flops=2\n", "t.trace:2: compute: duplicate key 'flops'"},
      {h + "compute a flops=-1\n",
       "t.trace:2: compute: expected a non-negative number of flops, got '-1'"},
      {h + "compute a flops=inf\n",
       "t.trace:2: compute: expected a non-negative number of flops, got 'inf'"},
      {h + "compute a recompute=yes\n", "t.trace:2: compute: expected 0 or 1, got 'yes'"},
      {h + "compute a after=1,,2\n",
       "t.trace:2: compute: expected a comma-separated list of event indices, got '1,,2'"},
      {h + "compute a phase=fwd\n",
       "t.trace:2: compute: expected a phase (forward, backward, optimizer, other), got 'fwd'"},
      {h + "compute a 12\n", "t.trace:2: compute: expected key=value, got '12'"},
      {h + "compute\n",
       "t.trace:2: compute: expected a name ('-' for none, %XX escapes), got end of line"},
      {h + "marker bad%2\n",
       "t.trace:2: marker: expected a name ('-' for none, %XX escapes), got 'bad%2'"},
      {h + "\n\nallc 1 5\n", "t.trace:4: unknown line type 'allc' (did you mean 'alloc'?)"},
      {h + "frobnicate\n", "t.trace:2: unknown line type 'frobnicate'"},
      {"alloc 1 5\n", "t.trace:1: expected header 'gpusim-trace 1', got 'alloc'"},
      {"# only a comment\n\n", "t.trace: empty file, expected header 'gpusim-trace 1'"},
      {"gpusim-trace 2\n",
       "t.trace:1: gpusim-trace: unsupported trace format version '2' (this reader "
       "understands major version 1)"},
      {"gpusim-trace one\n",
       "t.trace:1: gpusim-trace: expected a format version such as '1' or '1.0', got 'one'"},
      {h + "name a\nname b\n", "t.trace:3: name: duplicate 'name' line (first at line 2)"},
      {h + "preexisting 5 6\n", "t.trace:2: preexisting: expected end of line, got '6'"},
      {h + "stream 0\n",
       "t.trace:2: stream: expected a name ('-' for none, %XX escapes), got end of line"},
      // Stream ids index per-stream arrays in the engine (issue 17).
      {h + "compute a stream=-1\n", "t.trace:2: compute: expected a stream id (0 to 32767), got '-1'"},
      {h + "compute a stream=2147483647\n",
       "t.trace:2: compute: expected a stream id (0 to 32767), got '2147483647'"},
      {h + "stream -2 x\n", "t.trace:2: stream: expected a stream id (0 to 32767), got '-2'"},
      {h + "free 1\nend 2\n", "t.trace:3: end: expected the event count 1, got '2'"},
      {h + "end 0\nfree 1\n", "t.trace:3: expected nothing after 'end' (line 2), got 'free'"},
      // Version 1.2: meta lines and op facts.
      {f + "meta torch_version 2.5\n",
       "t.trace:2: meta: line type 'meta' needs format version 1.2 (the header says 1.1)"},
      {f + "compute mm op=mm\n",
       "t.trace:2: compute: key 'op' needs format version 1.2 (the header says 1.1)"},
      {h + "compute mm dims=1,2\n",
       "t.trace:2: compute: key 'dims' needs format version 1.2 (the header says 1.0)"},
      {"gpusim-trace 1.2\ncompute mm dims=1,-2\n",
       "t.trace:2: compute: expected a comma-separated list of non-negative integers, got '1,-2'"},
      {"gpusim-trace 1.2\nmeta a 1\nmeta a 2\n", "t.trace:3: meta: duplicate meta key 'a'"},
      {"gpusim-trace 1.2\nmeta a\n",
       "t.trace:2: meta: expected a name ('-' for none, %XX escapes), got end of line"},
      {"gpusim-trace 1.2\nmeta a b c\n", "t.trace:2: meta: expected end of line, got 'c'"},
      // Version 1.4: nodes.
      {"gpusim-trace 1.3\ncollective b kind=all_reduce group=2 nodes=2\n",
       "t.trace:2: collective: key 'nodes' needs format version 1.4 (the header says 1.3)"},
      {"gpusim-trace 1.4\ncollective b kind=all_reduce group=2 nodes=0\n",
       "t.trace:2: collective: expected a positive node count, got '0'"},
      // Version 1.6: the host work a recorder saw (Note [Host work per kernel]).
      {"gpusim-trace 1.5\ncompute mm host=1,0,0\n",
       "t.trace:2: compute: key 'host' needs format version 1.6 (the header says 1.5)"},
      {"gpusim-trace 1.6\ncompute mm host=1,0\n",
       "t.trace:2: compute: expected three counts D,N,M (dispatches, autograd nodes, module calls), each 0 to "
       "1000000, got '1,0'"},
      {"gpusim-trace 1.6\ncompute mm host=1,0,1000001\n",
       "t.trace:2: compute: expected three counts D,N,M (dispatches, autograd nodes, module calls), each 0 to "
       "1000000, got '1,0,1000001'"},
      {"gpusim-trace 1.6\ncompute mm host=1,-1,0\n",
       "t.trace:2: compute: expected three counts D,N,M (dispatches, autograd nodes, module calls), each 0 to "
       "1000000, got '1,-1,0'"},
      {"gpusim-trace 1.6\ncopy c kind=device_to_host host=1,0,0\n",
       "t.trace:2: copy: key 'host' is for compute events only"},
      // Version 1.5: the warm-up history.
      {"gpusim-trace 1.4\nwarmup alloc 1 512\n",
       "t.trace:2: warmup: a 'warmup' line needs format version 1.5 (the header says 1.4)"},
      {"gpusim-trace 1.5\nwarmup take 1 512\n", "t.trace:2: warmup: expected alloc, free or compute, got 'take'"},
      {"gpusim-trace 1.5\nwarmup compute mm flops=3\n", "t.trace:2: warmup: expected phase= or dims=, got 'flops=3'"},
      {"gpusim-trace 1.5\nwarmup compute mm phase=backward phase=forward\n",
       "t.trace:2: warmup: duplicate key 'phase'"},
      {"gpusim-trace 1.5\nwarmup alloc -1 512\n",
       "t.trace:2: warmup: expected a buffer id (a non-negative integer), got '-1'"},
      {"gpusim-trace 1.5\nwarmup alloc 1 0\n", "t.trace:2: warmup: expected a positive byte count, got '0'"},
      {"gpusim-trace 1.5\nwarmup alloc 1 512\nwarmup alloc 1 512\n",
       "t.trace:3: warmup: buffer 1 allocated again (first at line 2); a warm-up buffer id is allocated once"},
      {"gpusim-trace 1.5\nwarmup free 3\n",
       "t.trace:2: warmup: free of buffer 3, never allocated in the warm-up"},
      {"gpusim-trace 1.5\nwarmup alloc 3 8\nwarmup free 3\nwarmup free 3\n",
       "t.trace:4: warmup: free of buffer 3, already freed in the warm-up"},
      {"gpusim-trace 1.5\nalloc 1 8\nwarmup alloc 3 8\n",
       "t.trace:3: warmup: 'warmup' lines come before the first event"},
      {"gpusim-trace 1.5\nwarmup alloc 3 8 x\n", "t.trace:2: warmup: expected end of line, got 'x'"},
      // Version 1.3: broadcast.
      {"gpusim-trace 1.2\ncollective b kind=broadcast group=2\n",
       "t.trace:2: collective: kind 'broadcast' needs format version 1.3 (the header says 1.2)"},
      // Version 1.1: frames.
      {h + "frame 0 f a.py 1\n",
       "t.trace:2: frame: line type 'frame' needs format version 1.1 (the header says 1.0)"},
      {h + "alloc 1 5 stack=0\n",
       "t.trace:2: alloc: key 'stack' needs format version 1.1 (the header says 1.0)"},
      {f + "frame -1 f a.py 1\n",
       "t.trace:2: frame: expected a non-negative frame id, got '-1'"},
      {f + "frame 0 f a.py\n",
       "t.trace:2: frame: expected a non-negative line number (0 = unknown), got end of line"},
      {f + "frame 0 f a.py -3\n",
       "t.trace:2: frame: expected a non-negative line number (0 = unknown), got '-3'"},
      {f + "frame 0 f a=b 3\n",
       "t.trace:2: frame: expected a name ('-' for none, %XX escapes), got 'a=b'"},
      {f + "frame 0 f a.py 3 x\n", "t.trace:2: frame: expected end of line, got 'x'"},
      {f + "frame 7 f a.py 1\nframe 7 g b.py 2\n",
       "t.trace:3: frame: frame id 7 is already defined (line 2)"},
      {f + "alloc 1 5 stack=0\nframe 0 f a.py 1\n",
       "t.trace:2: alloc: stack= names frame 0, which is not defined by an earlier 'frame' line"},
      {f + "frame 0 f a.py 1\nalloc 1 5 stack=0,\n",
       "t.trace:3: alloc: expected a comma-separated list of frame ids, got '0,'"},
      {f + "fram 0 f a.py 1\n", "t.trace:2: unknown line type 'fram' (did you mean 'frame'?)"},
  };
  for (const BadCase& c : cases) {
    absl::StatusOr<Trace> t = Read(c.text);
    ASSERT_FALSE(t.ok()) << c.text;
    EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(t.status().message(), c.message) << c.text;
  }
}

TEST(TraceIo, WriterRejectsUnrepresentableValues) {
  Trace t;
  TraceEvent a;
  a.type = EventType::kAlloc;
  a.buffer = 1;
  a.size = Bytes(-5);
  t.events.push_back(a);
  std::ostringstream out;
  absl::Status st = WriteTrace(t, out);
  EXPECT_EQ(st.message(), "cannot write trace: event 0 (alloc): negative size");
  EXPECT_EQ(out.str(), "");  // nothing written
  t.events[0].size = Bytes(5);
  t.events[0].stack = {0};  // no frames
  EXPECT_EQ(WriteTrace(t, out).message(),
            "cannot write trace: event 0 (alloc): stack= names a frame index "
            "outside Trace::frames");
  t.frames = {{"f", "a.py", -1}};
  EXPECT_EQ(WriteTrace(t, out).message(),
            "cannot write trace: frame 0: negative line number -1");
  EXPECT_EQ(out.str(), "");
}

TEST(TraceIo, EscapesNames) {
  EXPECT_EQ(EscapeTraceName(""), "-");
  EXPECT_EQ(EscapeTraceName("-"), "%2D");
  EXPECT_EQ(EscapeTraceName("a-b"), "a-b");
  EXPECT_EQ(EscapeTraceName("a b\t%=,#"), "a%20b%09%25%3D%2C%23");
  std::string out;
  ASSERT_TRUE(UnescapeTraceName("a%20b%2c", &out));
  EXPECT_EQ(out, "a b,");
  EXPECT_FALSE(UnescapeTraceName("a%2", &out));
  EXPECT_FALSE(UnescapeTraceName("a%zz", &out));
}

std::vector<std::string> ListDir(const std::string& dir) {
  std::vector<std::string> names;
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return names;
  while (dirent* e = readdir(d)) {
    std::string n = e->d_name;
    if (n != "." && n != "..") names.push_back(n);
  }
  closedir(d);
  return names;
}

std::string TempDir() {
  std::string tmpl = testing::TempDir() + "/trace_io_test.XXXXXX";
  char* dir = mkdtemp(tmpl.data());
  EXPECT_NE(dir, nullptr);
  return tmpl;
}

TEST(TraceIo, FileWriteIsAtomicAndLeavesNoTempFile) {
  const std::string dir = TempDir();
  const std::string path = dir + "/step.trace";
  {
    std::ofstream old(path);
    old << "old contents\n";
  }
  Trace t = FullTrace();
  ASSERT_TRUE(WriteTraceFile(t, path).ok());
  EXPECT_EQ(ListDir(dir), std::vector<std::string>{"step.trace"});
  absl::StatusOr<Trace> back = ReadTraceFile(path);
  ASSERT_TRUE(back.ok()) << back.status();
  ExpectEqualTrace(t, *back);

  // A failing write (unrepresentable trace) leaves the old file alone.
  Trace bad;
  bad.preexisting = Bytes(-1);
  absl::Status st = WriteTraceFile(bad, path);
  EXPECT_FALSE(st.ok());
  EXPECT_EQ(ListDir(dir), std::vector<std::string>{"step.trace"});
  back = ReadTraceFile(path);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->name, t.name);

  // A directory at the target is refused (exit 3), never replaced, and no
  // temporary file is left.
  const std::string sub = dir + "/sub";
  ASSERT_EQ(mkdir(sub.c_str(), 0755), 0);
  st = WriteTraceFile(t, sub);
  EXPECT_EQ(st.code(), absl::StatusCode::kPermissionDenied) << st;
  EXPECT_NE(st.message().find("exists and is a directory"), std::string::npos) << st;
  std::vector<std::string> names = ListDir(dir);
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"step.trace", "sub"}));

  rmdir(sub.c_str());
  unlink(path.c_str());
  rmdir(dir.c_str());
}

TEST(TraceIo, FileErrorsAreStatusNotCrash) {
  const std::string dir = TempDir();
  absl::Status st = WriteTraceFile(FullTrace(), dir + "/no/such/dir/x.trace");
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("no/such/dir/x.trace"), std::string::npos) << st;
  EXPECT_TRUE(ListDir(dir).empty());
  absl::StatusOr<Trace> t = ReadTraceFile(dir + "/missing.trace");
  EXPECT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("missing.trace"), std::string::npos);
  rmdir(dir.c_str());
}


// Note [Rolled loop built once] (sim/lower/lower.h): the format has no
// repeat line, so a trace whose events stand for more iterations than it
// holds is refused, never written as one iteration.
TEST(TraceIo, RefusesRepeatedEvents) {
  Trace t = FullTrace();
  t.repeats.push_back({0, 1, 1000});
  std::ostringstream out;
  absl::Status st = WriteTrace(t, out);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("stand for 1000 iterations"), std::string::npos) << st;
}

}  // namespace
}  // namespace gpusim::trace_io_test
