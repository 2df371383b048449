// Shared checks for the libFuzzer targets (*_fuzzer.cc beside the code; see
// tests/fuzz/README.md). A fuzzer fails (aborts) on a crash, a sanitizer
// report, a leak, or a broken contract checked here: every rejection of bad
// input is a Status of the expected code whose text locates the problem.
#ifndef GPUSIM_TESTS_FUZZ_FUZZ_SUPPORT_H_
#define GPUSIM_TESTS_FUZZ_FUZZ_SUPPORT_H_

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <initializer_list>
#include <set>
#include <string>
#include <string_view>

#include "absl/status/status.h"
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
  for (std::string_view l : locators) {
    if (status.message().find(l) != std::string_view::npos) return;
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

inline bool IsGzip(const uint8_t* data, size_t size) {
  return size >= 2 && data[0] == 0x1f && data[1] == 0x8b;
}

}  // namespace gpusim::fuzz

#endif  // GPUSIM_TESTS_FUZZ_FUZZ_SUPPORT_H_
