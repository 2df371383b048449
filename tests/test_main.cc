// gpusim_tests' main: every test process writes its files in a directory of
// its own. ::testing::TempDir() is $TEST_TMPDIR when set (gtest reads it at
// each call), so main makes a fresh directory under $TEST_TMPDIR, $TMPDIR or
// /tmp (mkdtemp) and points TEST_TMPDIR at it: a test's fixed file names
// ("cli_megatron.yaml") never meet another process's, whether another test
// of this run (ctest --parallel runs one process per test) or another
// checkout's suite on the same machine. The directory is removed when every
// test passed and kept, its path printed, when one failed.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "gtest/gtest.h"

int main(int argc, char** argv) {
  testing::InitGoogleTest(&argc, argv);
  std::string base;
  for (const char* var : {"TEST_TMPDIR", "TMPDIR"}) {
    const char* v = std::getenv(var);
    if (v != nullptr && v[0] != '\0') {
      base = v;
      break;
    }
  }
  if (base.empty()) base = "/tmp";
  std::string dir = base + "/gpusim_tests.XXXXXX";
  if (mkdtemp(dir.data()) == nullptr) {
    std::perror(("gpusim_tests: mkdtemp " + dir).c_str());
    return 1;
  }
  setenv("TEST_TMPDIR", dir.c_str(), 1);
  const int rc = RUN_ALL_TESTS();
  if (rc == 0) {
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  } else {
    std::fprintf(stderr, "gpusim_tests: the tests' files are kept in %s\n", dir.c_str());
  }
  return rc;
}
