// Shared checks for the libFuzzer targets (*_fuzzer.cc beside the code; see
// tests/fuzz/README.md). A fuzzer fails (aborts) on a crash, a sanitizer
// report, a leak, or a broken contract checked here: every rejection of bad
// input is a Status of the expected code whose text locates the problem.
#ifndef GPUSIM_TESTS_FUZZ_FUZZ_SUPPORT_H_
#define GPUSIM_TESTS_FUZZ_FUZZ_SUPPORT_H_

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <cstdlib>
#include <initializer_list>
#include <set>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "sim/import/byte_source.h"
#include "sim/import/recorded_trace.h"
#include "sim/trace/validate.h"

namespace gpusim::fuzz {

[[noreturn]] inline void Fail(std::string_view what, const absl::Status& status) {
  std::fprintf(stderr, "fuzz contract broken: %.*s: %s\n", static_cast<int>(what.size()),
               what.data(), status.ToString().c_str());
  std::abort();
}

// Aborts unless `status` has one of `codes` and its message contains one of
// `locators` (such as "byte " or "event ").
inline void CheckRejection(const absl::Status& status,
                           std::initializer_list<absl::StatusCode> codes,
                           std::initializer_list<std::string_view> locators) {
  bool code_ok = false;
  for (absl::StatusCode c : codes) code_ok |= status.code() == c;
  if (!code_ok) Fail("unexpected status code", status);
  const std::string message(status.message());
  for (std::string_view l : locators) {
    if (message.find(l) != std::string::npos) return;
  }
  Fail("error text names no position", status);
}

// ToNativeTrace on every device with memory events (and with none chosen):
// each conversion that succeeds must pass ValidateTrace (recorded_trace.h).
inline void CheckConversions(const RecordedTrace& recorded) {
  std::set<int32_t> devices;
  for (const RecordedMemoryEvent& m : recorded.memory_events) devices.insert(m.device);
  for (int32_t d : devices) {
    for (auto match : {ToNativeOptions::SizeMatch::kLifo, ToNativeOptions::SizeMatch::kFifo}) {
      ToNativeOptions options;
      options.device = d;
      options.size_match = match;
      absl::StatusOr<Trace> trace = ToNativeTrace(recorded, options);
      if (!trace.ok()) Fail("ToNativeTrace on a device with events", trace.status());
      absl::Status valid = ValidateTrace(*trace);
      if (!valid.ok()) Fail("ToNativeTrace output fails ValidateTrace", valid);
      ComputeTraceStats(*trace);
    }
  }
  absl::StatusOr<Trace> any = ToNativeTrace(recorded);
  if (devices.size() <= 1 && !any.ok()) Fail("ToNativeTrace, one device", any.status());
}

// A path whose contents are `bytes`, in memory (memfd), for APIs that open a
// file: "/proc/self/fd/N". Closes the descriptor on destruction.
class MemFile {
 public:
  explicit MemFile(std::string_view bytes) {
    fd_ = memfd_create("fuzz", 0);
    if (fd_ < 0 || write(fd_, bytes.data(), bytes.size()) != static_cast<ssize_t>(bytes.size())) {
      std::perror("memfd");
      std::abort();
    }
    path_ = "/proc/self/fd/" + std::to_string(fd_);
  }
  ~MemFile() { close(fd_); }
  MemFile(const MemFile&) = delete;
  MemFile& operator=(const MemFile&) = delete;
  const std::string& path() const { return path_; }

 private:
  int fd_ = -1;
  std::string path_;
};

// Serves `data` at most `chunk` bytes per Read, so that the streaming
// scanner's refills land inside tokens, strings and escapes.
class ChunkedSource : public ByteSource {
 public:
  ChunkedSource(std::string_view data, size_t chunk) : data_(data), chunk_(chunk) {}
  absl::StatusOr<size_t> Read(char* buf, size_t n) override {
    const size_t k = std::min({n, chunk_, data_.size() - pos_});
    std::memcpy(buf, data_.data() + pos_, k);
    pos_ += k;
    return k;
  }
  bool decompressed() const override { return false; }

 private:
  std::string_view data_;
  size_t chunk_;
  size_t pos_ = 0;
};

// Aborts unless two imports of the same bytes agree (status text, events).
inline void CheckSameImport(const absl::StatusOr<RecordedTrace>& a,
                            const absl::StatusOr<RecordedTrace>& b,
                            const char* what = "whole vs chunked reads differ") {
  if (a.status() != b.status()) {
    Fail(what, absl::InternalError(a.status().ToString() + " vs " + b.status().ToString()));
  }
  if (!a.ok()) return;
  bool same = a->memory_events.size() == b->memory_events.size() && a->ops.size() == b->ops.size();
  for (size_t i = 0; same && i < a->memory_events.size(); ++i) {
    const RecordedMemoryEvent& x = a->memory_events[i];
    const RecordedMemoryEvent& y = b->memory_events[i];
    same = x.kind == y.kind && x.size == y.size && x.address == y.address && x.time == y.time &&
           x.seq == y.seq && x.device == y.device;
  }
  for (size_t i = 0; same && i < a->ops.size(); ++i) {
    same = a->ops[i].name == b->ops[i].name && a->ops[i].start == b->ops[i].start &&
           a->ops[i].duration == b->ops[i].duration;
  }
  if (!same) Fail(what, absl::InternalError("different events"));
}

inline bool IsGzip(const uint8_t* data, size_t size) {
  return size >= 2 && data[0] == 0x1f && data[1] == 0x8b;
}

}  // namespace gpusim::fuzz

#endif  // GPUSIM_TESTS_FUZZ_FUZZ_SUPPORT_H_
