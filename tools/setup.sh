#!/usr/bin/env bash
# Installs the Debian packages gpusim builds with (idempotent, quiet when all
# are present), then configures and builds into build/.
#   --test  also what only the tests need: chromium, for the headless-browser
#           check of report.html (tests/browser_report_test.sh), clang 14
#           with its sanitizer/libFuzzer runtimes for the fuzz build
#           (`make test-fuzz-build`), and python3-torch, whose
#           torch.cuda._memory_viz opens the --snapshot pickles
#           (tests/memory_viz_test.sh), and nodejs with the Chrome-trace reader
#           that loads timeline.json (tools/setup_trace_reader.sh), and
#           ccache, which serves the wheel build of tests/pip_install_test.sh
#           (build-pip/) the objects of build/ instead of a second compile of
#           the library; `make test` passes it, `make run` does not.
#   --debug-info  configure build/ as RelWithDebInfo (-O2 -g, the same code
#           with debug info for gdb and perf) instead of the default Release
#           (-O2, no -g; CMakeLists.txt). Only when build/ is configured
#           first; later: cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo.
set -euo pipefail
cd "$(dirname "$0")/.."
TEST=0
BUILD_TYPE=Release
PKGS=(cmake ninja-build g++ pkg-config libabsl-dev libyaml-cpp-dev libcli11-dev
      libgtest-dev libgmock-dev libbenchmark-dev libgraphviz-dev graphviz
      libsimdjson-dev zlib1g-dev libisal-dev python3 python3-dev)
for arg in "$@"; do
  case "$arg" in
    --test) PKGS+=(chromium python3-venv clang-14 libclang-rt-14-dev python3-torch python3-torchvision nodejs ccache); TEST=1 ;;
    --debug-info) BUILD_TYPE=RelWithDebInfo ;;
    *) echo "setup: unknown option $arg (expected --test or --debug-info)" >&2; exit 1 ;;
  esac
done
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
gen=()
command -v ninja >/dev/null && gen=(-G Ninja)
if [ ! -f build/CMakeCache.txt ]; then
  cmake -S . -B build "${gen[@]}" "-DCMAKE_BUILD_TYPE=$BUILD_TYPE" >/dev/null
fi
# The Python-side tests' interpreter (a venv kept outside the checkout).
if [ "$TEST" = 1 ]; then
  py="$(tools/setup_python.sh | tail -n 1)"
  # npm: bundled with some nodejs builds, a package of its own in Debian's.
  if ! command -v npm >/dev/null; then
    SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends npm >/dev/null
  fi
  reader="$(tools/setup_trace_reader.sh | tail -n 1)"
  cmake -S . -B build "-DGPUSIM_PYTHON=$py" "-DGPUSIM_TRACE_READER=$reader" >/dev/null
fi
cmake --build build --parallel "$(nproc)"
