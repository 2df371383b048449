// Runs the gpusim binary under test (GPUSIM_BINARY) through the shell, for
// the CLI integration tests: exit code and captured stdout.
#ifndef GPUSIM_TESTS_GPUSIM_CLI_H_
#define GPUSIM_TESTS_GPUSIM_CLI_H_

#include <sys/wait.h>

#include <cstdio>
#include <string>

namespace gpusim {
namespace testing_cli {

struct CliResult {
  int code = -1;    // exit status; -1 when killed by a signal or not run
  std::string out;  // what the command wrote to stdout
};

// `args` may carry shell redirections ("... 2>&1", "... 2>/dev/null").
inline CliResult RunGpusim(const std::string& args) {
  const std::string cmd = std::string(GPUSIM_BINARY) + " " + args;
  CliResult r;
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return r;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, n);
  const int st = pclose(p);
  r.code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

}  // namespace testing_cli
}  // namespace gpusim

#endif  // GPUSIM_TESTS_GPUSIM_CLI_H_
