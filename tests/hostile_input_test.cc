// Regression tests of issue 17 (hostile input), through the gpusim binary:
// every case ends as exit 0 with a correct result or exit 1 / 3 with a
// message naming the input; nothing crashes, hangs or is clobbered.
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/cli_support.h"

namespace gpusim::hostile_input_test {
namespace {

namespace fs = std::filesystem;

const std::string kSrc = GPUSIM_SOURCE_DIR;
const std::string kConfig = kSrc + "/configs/llama7b.yaml";

// A fresh empty directory for one test.
std::string FreshDir(const std::string& name) {
  const std::string d = ::testing::TempDir() + "/hostile_" + name + "_" + std::to_string(getpid());
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

void ExpectFails(const std::string& args, int code, const std::string& message) {
  Result r = Gpusim(args);
  EXPECT_EQ(r.code, code) << args << "\n" << r.out;
  EXPECT_NE(r.out.find(message), std::string::npos) << args << "\n" << r.out;
  EXPECT_EQ(r.out.find("internal error"), std::string::npos) << r.out;
}

TEST(HostileInput, StreamIdsOutsideTheRangeAreInputErrors) {
  const std::string d = FreshDir("streams");
  for (const char* s : {"-1", "-2", "2147483647", "32768"}) {
    const std::string t = Write("hostile_stream.trace", std::string("gpusim-trace 1\nalloc 1 100 name=a\n") +
                                                            "compute x kind=matmul flops=10 stream=" + s + "\nfree 1\n");
    ExpectFails("validate " + t, 1, "expected a stream id (0 to 32767)");
    ExpectFails("viz " + t + " --out " + d + "/v", 1, "expected a stream id (0 to 32767)");
  }
  EXPECT_FALSE(fs::exists(d + "/v"));
}

TEST(HostileInput, UncheckedMagnitudesAreRefusedByName) {
  ExpectFails("run " + kConfig + " --set model.d_model=1000000000000", 1,
              "model.d_model × model.d_model × 16 bytes = 1000000000000 × 1000000000000 × 16 exceeds 2^63 - 1");
  ExpectFails("run " + kConfig + " --set batch.seq_len=2147483648 --set model.attention=explicit", 1,
              "batch.per_device × model.n_heads × batch.seq_len × batch.seq_len × 4 bytes");
  ExpectFails("run " + kConfig + " --set model.mlp_dim=9223372036854775807", 1, "model.mlp_dim");
  ExpectFails("run " + kConfig + " --set batch.per_device=9223372036854775807", 1, "batch.per_device");
  ExpectFails("run " + kSrc + "/examples/gpt22b_korthikanti.yaml --set batch.per_device=9223372036854775807", 1,
              "exceeds 2^63 - 1");
  // llama7b scans its layers rolled: 100,000 at most (built once past
  // 1,024); unrolled 512.
  ExpectFails("run " + kConfig + " --set model.n_layers=100001", 1,
              "n_layers: expected at most 100000 as a rolled scan");
  ExpectFails("run " + kConfig + " --set model.n_layers=1000000000", 1,
              "n_layers: expected at most 100000 as a rolled scan");
  ExpectFails("run " + kConfig + " --set model.n_layers=513 --set loop.mode=unrolled", 1,
              "n_layers: expected at most 512 unrolled (100000 as a rolled scan");
}

// Note [Fragmentation]: at batch 4, 8 and 16 the step runs out of memory;
// fragmentation is taken at the OOM point and is never negative. (A JAX
// step runs in JAX's arena: ideal or bfc; runtime allocators are refused.)
TEST(HostileInput, FragmentationIsNeverNegative) {
  for (const char* alloc : {"ideal", "bfc"}) {
    for (const char* b : {"1", "4", "8", "16"}) {
      // Eager semantics: a jax step is checked against JAX's arena and
      // refuses runtime allocators other than ideal and bfc.
      Result r = Gpusim("run " + kConfig +
                        " --format json --set framework=pytorch --set model.param_scan_axis=0"
                        " --set loop.mode=unrolled --set batch.per_device=" + b + " --set allocator.impl=" + alloc);
      ASSERT_EQ(r.code, 0) << r.out;
      const size_t at = r.out.find("\"fragmentation_bytes\": ");
      ASSERT_NE(at, std::string::npos);
      EXPECT_GE(std::stoll(r.out.substr(at + 23)), 0) << alloc << " batch " << b;
    }
  }
}

TEST(HostileInput, HugeRequestInATraceIsAnOutOfMemory) {
  const std::string t = Write("hostile_huge.trace", "gpusim-trace 1\nalloc 1 9223372036854775807 name=huge\nfree 1\n");
  for (const char* a : {"pytorch_caching", "bfc", "buddy", "first_fit", "best_fit"}) {
    const std::string d = FreshDir(std::string("huge_") + a);
    Result r = Gpusim("viz " + t + " --allocator " + a + " --out " + d + "/v");
    EXPECT_EQ(r.code, 0) << a << "\n" << r.out;
  }
  // The failed request counts in the no-fragmentation bound but never in
  // reserved: "peak reserved - bound" is not a figure then, not -8 EiB.
  const std::string t2 = Write("hostile_big.trace", "gpusim-trace 1\nalloc 1 1152921504606846976 name=big\n");
  Result rep = Gpusim("replay " + t2);
  EXPECT_EQ(rep.code, 0) << rep.out;
  EXPECT_NE(rep.out.find("peak reserved - bound n/a (the replay ran out of memory)"), std::string::npos) << rep.out;
  Result cmp = Gpusim("compare " + t2);
  EXPECT_EQ(cmp.code, 0) << cmp.out;
  EXPECT_EQ(cmp.out.find("-1073741824"), std::string::npos) << cmp.out;
}

TEST(HostileInput, YamlAliasBombIsRefusedBeforeExpansion) {
  std::string yaml = "a0: &a0 [x, x, x, x, x, x, x, x, x]\n";
  for (int i = 1; i < 10; ++i) {
    yaml += "a" + std::to_string(i) + ": &a" + std::to_string(i) + " [";
    for (int k = 0; k < 9; ++k) yaml += (k ? ", *a" : "*a") + std::to_string(i - 1);
    yaml += "]\n";
  }
  const std::string f = Write("hostile_bomb.yaml", yaml + "device: h100-sxm-80gb\n");
  // Refused by its node count, before any expansion (how long it takes is
  // bench/hostile_benchmark.cc's BM_HostileCase).
  ExpectFails("run " + f, 1, "hostile_bomb.yaml:6:15: the document expands to more than 100000 YAML nodes");
}

TEST(HostileInput, Messages) {
  const std::string d = FreshDir("messages");
  ExpectFails("run " + d, 1, d + ": a directory, not a regular file");  // Note [One sniffer, one open]
  const std::string cfg = Write("hostile_remat.yaml", "device: h100-sxm-80gb\nmodel: llama2-7b\nremat:\n  policy: bogus\n");
  ExpectFails("run " + cfg, 1, "hostile_remat.yaml:4:11: remat.policy: unknown policy 'bogus'");
  // A file that is not YAML config (a password file) is described, not echoed.
  const std::string shadow =
      Write("hostile_shadow", "root:$6$secrethash:19000:0:99999:7:::\ndaemon:*:19000:0:99999:7:::\n");
  for (const std::string& args : {"run " + kConfig + " --set device=" + shadow, "viz " + kConfig + " --out " + d +
                                      "/v --set device=" + shadow}) {
    Result r = Gpusim(args);
    EXPECT_EQ(r.code, 1) << r.out;
    EXPECT_EQ(r.out.find("secrethash"), std::string::npos) << r.out;
    EXPECT_EQ(r.out.find("daemon"), std::string::npos) << r.out;
  }
  ExpectFails("explain " + kConfig + " --top 0", 1, "--top: expected an integer from 1 to 1000000, got '0'");
  ExpectFails("advise " + kConfig + " --jobs 0", 1, "--jobs: expected an integer from 1 to 100000, got '0'");
  ExpectFails("advise " + kConfig + " --budget 0", 1, "--budget: expected a positive size");
}

TEST(HostileInput, JsonThatIsNotATraceIsAnError) {
  const std::string f = Write("hostile_notatrace.json", "{\"foo\": 1}\n");
  ExpectFails("replay " + f, 1, "no \"traceEvents\" array at the top level: not a recorded trace");
}

TEST(HostileInput, PickleBombsAndHugeIntegers) {
  const std::string d = FreshDir("pickle");
  ASSERT_EQ(std::system(("python3 -c \"import pickle\nx=[1]\nfor i in range(60): x=[x,x]\n"
                         "open('" + d + "/bomb.pickle','wb').write(pickle.dumps({'segments':[],'device_traces':[x]}))\n"
                         "open('" + d + "/int.pickle','wb').write(pickle.dumps({'segments':[{'total_size':10**5000}]}))\"")
                            .c_str()),
            0);
  ExpectFails("replay " + d + "/bomb.pickle", 1, "expands to far more values than its size allows");
  Result r = Gpusim("replay " + d + "/int.pickle");
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("does not fit in 64 bits"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("Traceback"), std::string::npos) << r.out;
}

// Note [Replacing outputs]: a target that is not a regular file is refused
// with exit 3 and left as it was; a replaced file keeps its mode.
TEST(HostileInput, OutputsAreNotClobbered) {
  const std::string d = FreshDir("outputs");
  const std::string real = Write("hostile_link_target", "keep me\n");
  ASSERT_EQ(symlink(real.c_str(), (d + "/link.json").c_str()), 0);
  ASSERT_EQ(mkfifo((d + "/fifo.json").c_str(), 0600), 0);
  fs::create_directories(d + "/dir.json");
  const std::string quick = kConfig + " --set model.n_layers=2";
  for (const char* name : {"link.json", "fifo.json", "dir.json"}) {
    ExpectFails("run " + quick + " --timeline " + d + "/" + name, 3, "refusing to replace it");
  }
  EXPECT_TRUE(fs::is_symlink(d + "/link.json"));
  EXPECT_TRUE(fs::is_fifo(d + "/fifo.json"));
  EXPECT_TRUE(fs::is_directory(d + "/dir.json"));
  std::ifstream in(real);
  std::string kept;
  std::getline(in, kept);
  EXPECT_EQ(kept, "keep me");

  const std::string priv = d + "/private.json";
  Write("hostile_unused", "");
  std::ofstream(priv) << "old\n";
  ASSERT_EQ(chmod(priv.c_str(), 0600), 0);
  Result r = Gpusim("run " + quick + " --timeline " + priv);
  ASSERT_EQ(r.code, 0) << r.out;
  struct stat st;
  ASSERT_EQ(stat(priv.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_GT(st.st_size, 10);
  // Nothing else was left in the directory (no temporary files).
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(d)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"dir.json", "fifo.json", "link.json", "private.json"}));
}

// Exit codes (Note [Exit codes]): a file the process may not grow (what a
// full disk does to a write) is an environment error; a truncated or
// corrupt .gz is bad input.
TEST(HostileInput, EnvironmentAndCorruptInputExitCodes) {
  const std::string d = FreshDir("exitcodes");
  const std::string cmd = "bash -c \"ulimit -f 1; trap '' XFSZ; " + std::string(GPUSIM_BINARY) + " run " + kConfig +
                          " --set model.n_layers=2 --timeline " + d + "/t.json\" 2>&1";
  const int st = std::system((cmd + " | grep -q 'write failed'").c_str());
  EXPECT_EQ(WEXITSTATUS(st), 0) << "no 'write failed' message";
  const int rc = std::system(cmd.c_str());
  EXPECT_EQ(WEXITSTATUS(rc), 3);
  EXPECT_FALSE(fs::exists(d + "/t.json"));
  EXPECT_TRUE(fs::is_empty(d)) << "a temporary file was left";
  // The first 100 bytes of a recorded .gz trace.
  const std::string gz = kSrc + "/traces/recorded/hta_memory_timeline_raw.json.gz";
  ASSERT_EQ(std::system(("head -c 100 " + gz + " > " + d + "/cut.json.gz").c_str()), 0);
  ExpectFails("replay " + d + "/cut.json.gz", 1, "truncated");
}

// --out DIR is written beside DIR and moved into place whole: a run that
// fails leaves no DIR and no temporary directory.
TEST(HostileInput, OutDirIsWrittenWhole) {
  const std::string d = FreshDir("outdir");
  Result ok = Gpusim("run " + kConfig + " --set model.n_layers=2 --out " + d + "/out");
  ASSERT_EQ(ok.code, 0) << ok.out;
  for (const char* f : {"result.json", "trace.gpusim", "timeline.json", "report.html"}) {
    EXPECT_TRUE(fs::exists(d + "/out/" + f)) << f;
  }
  ExpectFails("run " + kConfig + " --set model.n_layers=2 --out " + d + "/out/result.json", 3,
              "exists and is not a directory");
  ASSERT_EQ(mkdir((d + "/ro").c_str(), 0555), 0);
  if (geteuid() != 0) {
    ExpectFails("run " + kConfig + " --set model.n_layers=2 --out " + d + "/ro/out", 3,
                "cannot create a temporary directory beside it");
  }
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(d)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"out", "ro"}));
  chmod((d + "/ro").c_str(), 0755);
}

// Note [Shard identity].
TEST(HostileInput, MergeRefusesMissingEmptyDuplicateAndForeignShards) {
  const std::string d = FreshDir("shards");
  const std::string grid = kConfig + " --vary remat.policy=full,minimal --vary batch.per_device=1,2 --jobs 2";
  for (int i = 0; i < 2; ++i) {
    ASSERT_EQ(std::system((std::string(GPUSIM_BINARY) + " advise " + grid + " --shard " + std::to_string(i) +
                           "/2 > " + d + "/s" + std::to_string(i) + ".jsonl")
                              .c_str()),
              0);
  }
  ASSERT_EQ(std::system((std::string(GPUSIM_BINARY) + " advise " + kConfig +
                         " --vary remat.policy=full,none --vary batch.per_device=1,2 --jobs 2 --shard 1/2 > " + d +
                         "/foreign.jsonl")
                            .c_str()),
            0);
  std::ofstream(d + "/empty.jsonl").flush();
  EXPECT_EQ(Gpusim("advise --merge " + d + "/s0.jsonl --merge " + d + "/s1.jsonl").code, 0);
  ExpectFails("advise --merge " + d + "/s0.jsonl", 1, "missing shard(s) 1 of 2");
  ExpectFails("advise --merge " + d + "/s0.jsonl --merge " + d + "/empty.jsonl", 1, "empty shard");
  ExpectFails("advise --merge " + d + "/s0.jsonl --merge " + d + "/s0.jsonl", 1, "given twice");
  ExpectFails("advise --merge " + d + "/s0.jsonl --merge " + d + "/foreign.jsonl", 1, "a shard of another grid");
}

TEST(HostileInput, AdviseWithMoreJobsThanWork) {
  Result r = Gpusim("advise " + kConfig + " --vary batch.per_device=1,2 --jobs 100000");
  EXPECT_EQ(r.code, 0) << r.out;
}

// A snapshot pickle is read in process, with no Python and no temporary
// file (sim/import/pickle.h): with no python3 to find and TMPDIR a fresh
// directory, replay of a pickle and of a gzipped one succeeds and leaves
// nothing behind.
TEST(HostileInput, PickleNeedsNoPythonNorTempFiles) {
  const std::string d = FreshDir("no_python");
  const std::string tmp = d + "/tmp";
  fs::create_directories(tmp);
  for (const std::string input : {kSrc + "/traces/recorded/cs336_gpt_training_snapshot.pickle",
                                  kSrc + "/validation/h200_2026-12-04/snapshots/bert_test.pickle.gz"}) {
    const Result r = RunShell("env -i PATH=/nonexistent TMPDIR=" + tmp + " " + GPUSIM_BINARY + " replay " + input +
                              " 2>&1");
    EXPECT_EQ(r.code, 0) << input << "\n" << r.out;
    EXPECT_NE(r.out.find("peak"), std::string::npos) << r.out;
  }
  EXPECT_TRUE(fs::is_empty(tmp));
}

}  // namespace
}  // namespace gpusim::hostile_input_test
