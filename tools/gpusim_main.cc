// gpusim command-line entry: all logic lives in tools/cli.cc.
#include "tools/cli.h"

int main(int argc, char** argv) { return gpusim::RunCli(argc, argv); }
