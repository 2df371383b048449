// gpusim command-line entry: all logic lives in tools/cli.cc.
#include "sim/base/cleanup.h"
#include "tools/cli.h"

int main(int argc, char** argv) {
  gpusim::InstallSignalCleanup();
  return gpusim::FinishStdout(gpusim::RunCli(argc, argv));
}
