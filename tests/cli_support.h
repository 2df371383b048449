// Helpers for the integration tests that run the gpusim binary.
#ifndef GPUSIM_TESTS_CLI_SUPPORT_H_
#define GPUSIM_TESTS_CLI_SUPPORT_H_

#include <sys/wait.h>

#include <cstdio>
#include <fstream>
#include <string>

#include "gtest/gtest.h"

namespace gpusim {

struct Result {
  int code = -1;
  std::string out;  // stdout and stderr together
};

// `cmd` through the shell: its exit code and stdout.
inline Result RunShell(const std::string& cmd) {
  Result r;
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return r;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, n);
  const int st = pclose(p);
  r.code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

inline Result Gpusim(const std::string& args) { return RunShell(std::string(GPUSIM_BINARY) + " " + args + " 2>&1"); }

// stdout alone (stderr dropped), e.g. to parse a JSON document.
inline Result GpusimStdout(const std::string& args) {
  return RunShell(std::string(GPUSIM_BINARY) + " " + args + " 2>/dev/null");
}

inline std::string Write(const std::string& name, const std::string& text) {
  const std::string path = ::testing::TempDir() + "/" + name;
  std::ofstream(path) << text;
  return path;
}

// `option` (e.g. "--cudnn-workspace gemm") given with a run config to run,
// explain, viz and compare: each refused with `message` (a recorded step's
// option, not a config's).
inline void ExpectRefusedOnRunConfigs(const std::string& option, const std::string& message) {
  const std::string config = GPUSIM_SOURCE_DIR "/configs/llama7b.yaml";
  const std::string dir = ::testing::TempDir() + "/refused_on_config";
  for (const std::string& cmd : {"run " + config, "explain " + config, "viz " + config + " --out " + dir,
                                 "compare " + config + " --vary batch.per_device=1,2"}) {
    const Result r = Gpusim(cmd + " " + option);
    EXPECT_EQ(r.code, 1) << cmd << ": " << r.out;
    EXPECT_NE(r.out.find(message), std::string::npos) << cmd << ": " << r.out;
  }
}

}  // namespace gpusim

#endif  // GPUSIM_TESTS_CLI_SUPPORT_H_
