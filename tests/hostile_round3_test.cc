// Regression tests of issue 27 (hostile input, round 3), classes 1-6,
// through the gpusim binary. The inputs are files under tests/hostile/
// (tests/hostile/README.md lists them by class) or command lines here. Every
// case ends as exit 0 with a right result or exit 1 / 3 with a message naming
// the input; never a signal, never exit 2.
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "gtest/gtest.h"
#include "tests/cli_support.h"

namespace gpusim::hostile_round3_test {
namespace {

namespace fs = std::filesystem;

const std::string kSrc = GPUSIM_SOURCE_DIR;
const std::string kHostile = kSrc + "/tests/hostile/";
const std::string kConfig = kSrc + "/configs/llama7b.yaml";

std::string FreshDir(const std::string& name) {
  const std::string d = ::testing::TempDir() + "/hostile3_" + name + "_" + std::to_string(getpid());
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

// Exit `code` with every one of `messages` in the output, and no sign of a
// bug or a traceback.
void ExpectExit(const std::string& args, int code, std::initializer_list<std::string> messages) {
  const Result r = Gpusim(args);
  EXPECT_EQ(r.code, code) << args << "\n" << r.out;
  for (const std::string& m : messages) EXPECT_NE(r.out.find(m), std::string::npos) << args << "\n" << r.out;
  EXPECT_EQ(r.out.find("internal error"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("Traceback"), std::string::npos) << r.out;
}

const std::string kMegatron =
    "run --device h100-sxm-80gb --world-size 8 --megatron-args \"--num-layers 2 --hidden-size 256 "
    "--num-attention-heads 4 --seq-length 128 --tokenizer-type NullTokenizer --vocab-size 1000 --bf16 ";

// Class 1: signals and internal errors from small files.
TEST(HostileRound3, SmallFilesNeverSignal) {
  ExpectExit("validate " + kHostile + "hlo_deep_tuple.hlo", 1,
             {"hlo_deep_tuple.hlo:3:", "tuple shape nested more than 64 deep"});
  ExpectExit("validate " + kHostile + "hlo_parameter_int64_max.hlo", 1,
             {"hlo_parameter_int64_max.hlo:2:1: computation 'main' has no parameter(0) (p at 3:3 is "
              "parameter(9223372036854775807), past the 2 instructions it has)"});
  ExpectExit("validate " + kHostile + "hlo_parameter_999999999.hlo", 1,
             {"hlo_parameter_999999999.hlo:2:1: computation 'main' has no parameter(0) (p at 3:3 is "
              "parameter(999999999)"});
  ExpectExit("run " + kHostile + "device_no_links.yaml", 1,
             {"cannot run: a collective over 8 devices, and device 'h100-sxm-80gb' has no link: links.nvlink and "
              "links.pcie are 0 or absent"});
  ExpectExit(kMegatron + "--micro-batch-size 4611686018427387904\"", 1,
             {"--micro-batch-size × data-parallel size = 4611686018427387904 × 8 exceeds 2^63 - 1"});
}

// Class 2: times that wrap. Never a negative time or a rate above peak
// with exit 0: each is refused naming the event and what its time is made
// of (Note [Checked time], sim/base/units.h).
TEST(HostileRound3, TimesNeverWrap) {
  ExpectExit("run " + kHostile + "device_rate_1e-300.yaml", 1,
             {"is beyond the 2^62 ns", "FLOPs", "flops.bf16 1e-288 FLOP/s"});
  ExpectExit("run " + kHostile + "hlo_dot_1e25_flops.hlo --device h100-sxm-80gb", 1,
             {"(compute d)", "is beyond the 2^62 ns", "1.6e+25 FLOPs"});
  ExpectExit("run " + kHostile + "hlo_replicas_2pow62.hlo --device h100-sxm-80gb", 1,
             {"is beyond the 2^62 ns", "over 4611686018427387904 devices"});
  ExpectExit("validate " + kHostile + "trace_dur_int64_max.trace", 1,
             {"trace_dur_int64_max.trace:2:", "a duration in nanoseconds (at most 2^62 - 1)"});
  ExpectExit("replay " + kHostile + "trace_dur_sum_wraps.trace", 1,
             {"trace_dur_sum_wraps.trace:3: event 1 (compute b): its finish", "is beyond the 2^62 ns"});
  // A right result or a refusal naming the input; never a negative time.
  const Result r = Gpusim("run " + kConfig + " --set batch.seq_len=1000000000 --format json");
  if (r.code == 0) {
    EXPECT_EQ(r.out.find("\"step_time_s\": -"), std::string::npos) << r.out;
    EXPECT_EQ(r.out.find("\"compute_s\": -"), std::string::npos) << r.out;
  } else {
    EXPECT_EQ(r.code, 1) << r.out;
    EXPECT_NE(r.out.find("batch"), std::string::npos) << r.out;
  }
}

// Class 3: counts that wrap.
TEST(HostileRound3, TripCountsAndDeviceCountsNeverWrap) {
  ExpectExit("validate " + kHostile + "hlo_trips_from_int64_min.hlo", 1,
             {"hlo_trips_from_int64_min.hlo:", "from -9223372036854775808 to 10 (LT) by 1: more than 65536 trips"});
  ExpectExit("validate " + kHostile + "hlo_trips_to_int64_max.hlo", 1,
             {"from 0 to 9223372036854775807 (LE) by 1: more than 65536 trips"});
  ExpectExit("validate " + kHostile + "hlo_partitions_times_replicas.hlo", 1,
             {"hlo_partitions_times_replicas.hlo:1:",
              "num_partitions x replica_count = 4294967296 x 4294967296 exceeds 2^63 - 1"});
}

// Class 4: work bounded by the input.
TEST(HostileRound3, WorkIsBoundedByTheInput) {
  ExpectExit("validate " + kHostile + "hlo_nested_loops.hlo", 1,
             {"hlo_nested_loops.hlo:", "trip count 300 with 65400 iterations expanded before it",
              "at most 65536 in all"});
  ExpectExit(kMegatron + "--micro-batch-size 1 --global-batch-size 8000000000\"", 1,
             {"--global-batch-size", "1000000000 micro-batches; at most 65536 are scheduled"});
  ExpectExit("validate /dev/zero", 1, {"/dev/zero: a device, not a regular file"});
  const std::string d = FreshDir("sniff");
  const std::string big = d + "/big.json";
  { std::ofstream(big) << ""; }
  fs::resize_file(big, int64_t{1} << 30);  // sparse: 1 GB of zeros, no disk
  ExpectExit("replay " + big, 1, {"big.json"});
  ExpectExit("validate " + big, 1, {"big.json: binary data (a NUL byte at offset 0)"});
  ExpectExit("replay " + d, 1, {"a directory, not a regular file"});
  fs::remove_all(d);
}

// Class 5: lost output.
TEST(HostileRound3, OutputIsNeverLostOrMixed) {
  if (access("/dev/full", W_OK) == 0) {
    const Result r = RunShell(std::string(GPUSIM_BINARY) + " run " + kConfig +
                              " --set model.n_layers=2 > /dev/full 2>/tmp/hostile3_full_err_" +
                              std::to_string(getpid()));
    EXPECT_EQ(r.code, 3);
  }
  const std::string d = FreshDir("out");
  // A new directory gets 0777 less the umask (not mkdtemp's 0700).
  const Result made = RunShell("umask 022; " + std::string(GPUSIM_BINARY) + " run " + kConfig +
                               " --set model.n_layers=2 --out " + d + "/o 2>&1");
  ASSERT_EQ(made.code, 0) << made.out;
  struct stat st;
  ASSERT_EQ(stat((d + "/o").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0755u);
  // Onto an existing directory: replaced whole, a stale file of the old one
  // gone with it (no mixture of runs).
  { std::ofstream(d + "/o/stale.svg") << "old run"; }
  const Result again = Gpusim("run " + kConfig + " --set model.n_layers=2 --out " + d + "/o");
  ASSERT_EQ(again.code, 0) << again.out;
  EXPECT_TRUE(fs::exists(d + "/o/result.json"));
  EXPECT_FALSE(fs::exists(d + "/o/stale.svg"));
  for (const auto& e : fs::directory_iterator(d)) {
    EXPECT_EQ(e.path().filename().string(), "o") << "left behind: " << e.path();
  }
  // A directory holding something not a file is never replaced.
  fs::create_directories(d + "/o/keep");
  ExpectExit("run " + kConfig + " --set model.n_layers=2 --out " + d + "/o", 3,
             {"holds 'keep', which is not a regular file"});
  EXPECT_TRUE(fs::exists(d + "/o/keep"));
  EXPECT_TRUE(fs::exists(d + "/o/result.json"));
  ExpectExit("run " + kConfig + " --set model.n_layers=2 --out /", 1, {"--out /: names the root directory"});
  fs::remove_all(d);
}

// Class 6: messages.
TEST(HostileRound3, MessagesNameTheInput) {
  const Result p = Gpusim("replay " + kHostile + "pickle_2pow63_string.pickle");
  EXPECT_EQ(p.code, 1) << p.out;
  EXPECT_NE(p.out.find("pickle_2pow63_string.pickle: byte 2: BINUNICODE8: a string of 9223372036854775808 bytes "
                       "runs past the end of the file"),
            std::string::npos)
      << p.out;
  EXPECT_EQ(p.out.find("Traceback"), std::string::npos) << p.out;
  ExpectExit("validate " + kHostile + "yaml_second_document.yaml", 1,
             {"yaml_second_document.yaml:3:1: a second YAML document"});
  ExpectExit("validate " + kHostile + "kineto_second_trace_events.json", 1,
             {"kineto_second_trace_events.json", "a second top-level \"traceEvents\" key (the first at byte 1)"});
  ExpectExit("validate " + kHostile + "trace_free_not_live.trace", 1,
             {"trace_free_not_live.trace:4: event 2 (free)"});
  ExpectExit("validate " + kHostile + "hlo_tensor_too_large.hlo", 1,
             {"hlo_tensor_too_large.hlo:3:", "the array's bytes exceed 2^63 - 1"});
  const Result ws = Gpusim("run --device h100-sxm-80gb --world-size 0 --megatron-args \"--num-layers 2\"");
  EXPECT_EQ(ws.code, 1) << ws.out;
  EXPECT_NE(ws.out.find("expected an integer >= 1, got '0'"), std::string::npos) << ws.out;
  EXPECT_LT(ws.out.size(), 400u) << ws.out;  // no 309-digit range
  ExpectExit("run " + kConfig + " --world-size 8", 1, {"--world-size applies to --megatron-args"});
  ExpectExit("run " + kConfig + " --allocator bfc --set allocator.impl=buddy", 1,
             {"--allocator bfc and --set allocator.impl=buddy name different allocators"});
  // The same allocator both ways is no conflict.
  EXPECT_EQ(Gpusim("validate " + kConfig + " --allocator bfc --set allocator.impl=bfc").code, 0);
}

}  // namespace
}  // namespace gpusim::hostile_round3_test
