#include "sim/trace/validate.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace gpusim::validate_test {
namespace {

// A tiny builder: each call appends one event.
class Builder {
 public:
  Builder& Alloc(BufferId id, int64_t bytes, StreamId stream = 0) {
    TraceEvent& e = Add(EventType::kAlloc);
    e.buffer = id;
    e.size = Bytes(bytes);
    e.stream = stream;
    return *this;
  }
  Builder& Free(BufferId id) {
    Add(EventType::kFree).buffer = id;
    return *this;
  }
  Builder& Compute(std::vector<int64_t> after = {}, std::vector<BufferId> uses = {}) {
    TraceEvent& e = Add(EventType::kCompute);
    e.name = "op";
    e.after = std::move(after);
    e.uses = std::move(uses);
    return *this;
  }
  Builder& Marker() {
    Add(EventType::kMarker);
    return *this;
  }
  Builder& Stream(StreamId id) {
    trace_.streams.push_back({id, "s"});
    return *this;
  }
  Builder& Preexisting(int64_t bytes) {
    trace_.preexisting = Bytes(bytes);
    return *this;
  }
  const Trace& trace() const { return trace_; }

 private:
  TraceEvent& Add(EventType type) {
    TraceEvent& e = trace_.events.emplace_back();
    e.type = type;
    return e;
  }
  Trace trace_;
};

std::string Error(const Builder& b) {
  absl::Status st = ValidateTrace(b.trace());
  EXPECT_FALSE(st.ok());
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  return std::string(st.message());
}

TEST(TraceValidate, AcceptsValidTrace) {
  Builder b;
  b.Stream(0).Stream(1).Alloc(1, 10).Compute({}, {1}).Alloc(2, 5, 1)
      .Compute({1}, {1, 2}).Free(1).Marker().Free(2).Alloc(1, 7);  // id reuse ok
  absl::Status st = ValidateTrace(b.trace());
  EXPECT_TRUE(st.ok()) << st;
}

TEST(TraceValidate, DoubleFreeNamesEvents) {
  Builder b;
  b.Marker().Alloc(3, 8).Compute().Marker().Free(3).Free(3);
  EXPECT_EQ(Error(b),
            "event 5 (free): double free of buffer 3 (allocated at event 1, "
            "freed at event 4)");
}

TEST(TraceValidate, RejectsNegativeSizes) {
  Builder b;
  b.Alloc(1, -5);
  EXPECT_EQ(Error(b), "event 0 (alloc): negative size -5");
  Builder p;
  p.Preexisting(-1);
  EXPECT_EQ(Error(p), "trace: negative preexisting bytes -1");
  Trace t;
  t.events.emplace_back().bytes_read = Bytes(-2);
  EXPECT_EQ(ValidateTrace(t).message(),
            "event 0 (compute): negative bytes read/written (-2/0)");
}

TEST(TraceValidate, RejectsAllocOfLiveBuffer) {
  Builder b;
  b.Alloc(4, 1).Compute().Alloc(4, 1);
  EXPECT_EQ(Error(b), "event 2 (alloc): buffer 4 is still live (allocated at event 0)");
}

TEST(TraceValidate, RejectsNegativeBufferId) {
  Builder b;
  b.Alloc(-1, 1);
  EXPECT_EQ(Error(b), "event 0 (alloc): negative buffer id -1");
}

TEST(TraceValidate, RejectsFreeOfUnknownBuffer) {
  Builder b;
  b.Alloc(1, 1).Free(9);
  EXPECT_EQ(Error(b), "event 1 (free): free of unknown buffer 9");
}

TEST(TraceValidate, RejectsBadAfter) {
  Builder self;
  self.Compute().Compute({1});
  EXPECT_EQ(Error(self), "event 1 (compute): after= names event 1, which is not an earlier event");
  Builder later;
  later.Compute({5}).Compute();
  EXPECT_EQ(Error(later), "event 0 (compute): after= names event 5, which is not an earlier event");
  Builder untimed;
  untimed.Alloc(1, 1).Compute({0});
  EXPECT_EQ(Error(untimed),
            "event 1 (compute): after= names event 0 (alloc), which is not a timed event");
}

TEST(TraceValidate, RejectsUndeclaredStream) {
  Builder b;
  b.Stream(0).Stream(2).Alloc(1, 1, 0).Alloc(2, 1, 1);
  EXPECT_EQ(Error(b), "event 1 (alloc): stream 1 is not declared (declared: 0, 2)");
  Builder undeclared_ok;  // no declarations: any stream is fine
  undeclared_ok.Alloc(1, 1, 7);
  EXPECT_TRUE(ValidateTrace(undeclared_ok.trace()).ok());
  Builder twice;
  twice.Stream(1).Stream(1);
  EXPECT_EQ(Error(twice), "stream 1: declared twice");
}

TEST(TraceValidate, RejectsUseOfDeadBuffers) {
  Builder before;
  before.Compute({}, {2}).Alloc(2, 1);
  EXPECT_EQ(Error(before),
            "event 0 (compute): uses buffer 2, which is not allocated before this event");
  Builder after_free;
  after_free.Alloc(2, 1).Free(2).Compute({}, {2});
  EXPECT_EQ(Error(after_free), "event 2 (compute): uses buffer 2, which was freed at event 1");
}

TEST(TraceValidate, RejectsStackFramesOutsideTheTable) {
  Builder b;
  b.Alloc(1, 10);
  Trace t = b.trace();
  t.frames = {{"f", "a.py", 3}};
  t.events[0].stack = {0};
  EXPECT_TRUE(ValidateTrace(t).ok());
  t.events[0].stack = {0, 1};
  EXPECT_EQ(ValidateTrace(t).message(),
            "event 0 (alloc): stack names frame index 1, but the trace has 1 frames");
  t.events[0].stack = {0};
  t.frames[0].line = -2;
  EXPECT_EQ(ValidateTrace(t).message(), "frame 0: negative line number -2");
}

TEST(TraceStats, PeakOnHandComputedTrace) {
  // live: 100 | +10=110 | +20=130 | -10=120 | +30=150 | -20=130 | +5=135
  Builder b;
  b.Preexisting(100).Alloc(1, 10).Alloc(2, 20).Compute().Free(1).Alloc(3, 30)
      .Free(2).Marker().Alloc(4, 5);
  TraceStats s = ComputeTraceStats(b.trace());
  EXPECT_EQ(s.events, 8);
  EXPECT_EQ(s.allocs, 4);
  EXPECT_EQ(s.frees, 2);
  EXPECT_EQ(s.timed, 1);
  EXPECT_EQ(s.peak_live, Bytes(150));
  EXPECT_EQ(s.peak_event, 4);  // Alloc(3, 30)
}

TEST(TraceStats, PeakBeforeAnyEventIsPreexisting) {
  Builder b;
  b.Preexisting(64).Free(9);
  TraceStats s = ComputeTraceStats(b.trace());
  EXPECT_EQ(s.peak_live, Bytes(64));
  EXPECT_EQ(s.peak_event, -1);
}

}  // namespace
}  // namespace gpusim::validate_test
