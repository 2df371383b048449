// The gpusim command line (CLI11): run, validate, devices, ...
// Exit codes: 0 ok, 1 bad input (message on stderr), 2 internal error.
#ifndef GPUSIM_TOOLS_CLI_H_
#define GPUSIM_TOOLS_CLI_H_

#include <string>
#include <vector>

#include "absl/status/status.h"

namespace gpusim {
int RunCli(int argc, char** argv);

// Prints `st` as gpusim's error line and returns its exit code.
int FailStatus(const absl::Status& st);

// tools/cli_replay.cc.
struct ReplayCli {
  std::string trace, allocator = "pytorch_caching", device, format = "text";
  std::string snapshot;  // --snapshot FILE.pickle
  std::vector<std::string> sets;
  int device_index = -1;
  bool check_addresses = false;
};
int CmdReplay(const ReplayCli& c);
struct CompareCli {
  std::string trace, allocators, device, format = "text";
  int device_index = -1;
};
int CmdCompare(const CompareCli& c);
}  // namespace gpusim

#endif  // GPUSIM_TOOLS_CLI_H_
