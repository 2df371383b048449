#include "tools/cli.h"

#include "CLI/CLI.hpp"

namespace gpusim {
int RunCli(int argc, char** argv) {
  CLI::App app{"gpusim"};
  CLI11_PARSE(app, argc, argv);
  return 0;
}
}  // namespace gpusim
