// The gpusim command line (CLI11): run, validate, devices, ...
// Exit codes: 0 ok, 1 bad input (message on stderr), 2 internal error.
#ifndef GPUSIM_TOOLS_CLI_H_
#define GPUSIM_TOOLS_CLI_H_

namespace gpusim {
int RunCli(int argc, char** argv);
}  // namespace gpusim

#endif  // GPUSIM_TOOLS_CLI_H_
